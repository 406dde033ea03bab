"""store stage: census results cached per export (cache.py), a cache entry's bytes (codec.py)."""

"""PyTorch profiler (Kineto) traces read by their content: stream.py (the file decompressed
beside the decoding, the top-level object read key by key, the events in bounded batches),
events.py (the fields decoded), numbers.py (exact integer ns from the decimal text; ids),
tables.py (a batch's events as int64 columns per table), reader.py (iter_batches, read_kineto,
KinetoTrace, is_kineto), links.py (a GPU event's launching call, its step), export.py (the
trace made an nsys-shaped SQLite export, which census/sources/export.py's resolve_sqlite hands
the engine). docs/kineto.md describes the format as the fixtures of several torch versions
write it."""

from census.sources.kineto.reader import KinetoTrace, is_kineto, iter_batches, read_kineto

__all__ = ["KinetoTrace", "is_kineto", "iter_batches", "read_kineto"]

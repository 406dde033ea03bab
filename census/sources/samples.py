"""The bundled real captures (eager and compiled) that make census demonstrate itself offline."""

from __future__ import annotations

import lzma
from pathlib import Path

from census.errors import UsageError
from census.paths import SAMPLES_FOLDER, cache_dir, write_atomic

SAMPLES_DIR = Path(__file__).parents[1] / "samples"
SAMPLE_NAMES = ("eager", "compiled")


def sample_path(name: str) -> Path:
    """Unpack the bundled `NAME.sqlite.xz` and its run.json once into a capture folder `NAME/`
    in the cache, and return that folder."""
    if name not in SAMPLE_NAMES:
        raise UsageError(f"unknown sample {name!r}: choose one of {', '.join(SAMPLE_NAMES)}")
    packed = SAMPLES_DIR / f"{name}.sqlite.xz"
    if not packed.is_file():
        raise UsageError(f"the bundled sample {packed} is missing from this install")
    stat = packed.stat()
    folder = cache_dir() / SAMPLES_FOLDER / f"{stat.st_size}-{stat.st_mtime_ns}" / name
    target = folder / "capture.sqlite"
    if not target.is_file():
        info = SAMPLES_DIR / f"{name}.run.json"
        if info.is_file():
            write_atomic(folder / "run.json", info.read_bytes())
        write_atomic(target, lzma.decompress(packed.read_bytes()))
    return folder

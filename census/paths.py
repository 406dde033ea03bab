"""Where census writes, and how: every output goes to a temporary name and is renamed."""

from __future__ import annotations

import contextlib
import os
import tempfile
from collections.abc import Iterator
from pathlib import Path


def cache_dir() -> Path:
    """$CENSUS_CACHE_DIR, else $XDG_CACHE_HOME/census, else ~/.cache/census."""
    if os.environ.get("CENSUS_CACHE_DIR"):
        return Path(os.environ["CENSUS_CACHE_DIR"])
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "census"


@contextlib.contextmanager
def atomic_target(target: Path) -> Iterator[Path]:
    """Yield a temporary path beside `target`; rename it onto `target` only on success."""
    target.parent.mkdir(parents=True, exist_ok=True)
    fd, name = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".part", dir=target.parent)
    os.close(fd)
    tmp = Path(name)
    tmp.unlink()
    try:
        yield tmp
        os.replace(tmp, target)
    finally:
        with contextlib.suppress(FileNotFoundError):
            tmp.unlink()


def write_atomic(target: Path, data: str | bytes) -> None:
    with atomic_target(target) as tmp:
        if isinstance(data, str):
            tmp.write_text(data, encoding="utf-8")
        else:
            tmp.write_bytes(data)

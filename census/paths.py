"""Where census writes, and how: every output goes to a temporary name and is renamed."""

from __future__ import annotations

import contextlib
import os
import tempfile
from collections.abc import Iterable, Iterator
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


def check_output(target: Path, inputs: Iterable[Path] = ()) -> None:
    """Refuse a target that is an input, a directory, a device or anything but a regular file
    (a one-line UsageError naming the target), before any work is done."""
    from census.errors import UsageError

    if target.exists() or target.is_symlink():
        if not target.is_file():
            kind = "a directory" if target.is_dir() else "not a regular file (a device, a FIFO?)"
            raise UsageError(f"{target}: is {kind}; census writes reports to regular files only")
        for source in inputs:
            with contextlib.suppress(OSError):
                if source.exists() and os.path.samefile(target, source):
                    raise UsageError(
                        f"{target}: is an input of this command; choose another output"
                    )
    parent = target.parent
    while not parent.exists() and parent != parent.parent:
        parent = parent.parent
    if not parent.is_dir() or not os.access(parent, os.W_OK | os.X_OK):
        raise UsageError(f"{target}: cannot write there ({parent} is not a writable directory)")


def write_atomic(target: Path, data: str | bytes) -> None:
    with atomic_target(target) as tmp:
        if isinstance(data, str):
            tmp.write_text(data, encoding="utf-8")
        else:
            tmp.write_bytes(data)

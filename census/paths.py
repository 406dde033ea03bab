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
    # A short temporary name: the target's own may be close to the file system's limit.
    fd, name = tempfile.mkstemp(prefix=f".{target.name[:64]}.", suffix=".part", dir=target.parent)
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

    too_long = _name_too_long(target)
    if too_long:
        raise UsageError(f"{target}: {too_long}; choose a shorter output name")
    try:
        present = target.exists() or target.is_symlink()
    except OSError as exc:
        raise UsageError(f"{target}: cannot write there ({exc.strerror or exc})") from None
    if present:
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


def _name_too_long(path: Path) -> str | None:
    """Why the file system cannot hold a file of this name, or None."""
    parent = path.parent
    while not parent.exists() and parent != parent.parent:
        parent = parent.parent
    try:
        limit = os.pathconf(parent, "PC_NAME_MAX")
    except (OSError, ValueError):
        limit = 255
    size = len(os.fsencode(path.name))
    return (
        f"file name too long ({size} bytes; this file system allows {limit})"
        if size > limit
        else None
    )


def write_atomic(target: Path, data: str | bytes) -> None:
    with atomic_target(target) as tmp:
        if isinstance(data, str):
            # A file name whose bytes are not UTF-8 is written as `\udcff`, not refused.
            tmp.write_text(data, encoding="utf-8", errors="backslashreplace")
        else:
            tmp.write_bytes(data)

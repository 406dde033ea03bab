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
    """Refuse a target that is an input, a directory, a device or anything but a regular file,
    or that cannot be written (a one-line UsageError naming the target), before any work."""
    from census.errors import UsageError

    try:
        problem = _output_problem(target, inputs)
    except OSError as exc:  # a path the system refuses (a component too long, a link loop)
        problem = f"cannot write there ({exc.strerror or exc})"
    if problem:
        raise UsageError(f"{target}: {problem}")


def _output_problem(target: Path, inputs: Iterable[Path]) -> str | None:
    parent = target.parent
    while not parent.exists() and parent != parent.parent:
        parent = parent.parent
    try:
        limit = os.pathconf(parent, "PC_NAME_MAX")
    except (OSError, ValueError):
        limit = 255
    size = len(os.fsencode(target.name))
    if size > limit:
        return (f"file name too long ({size} bytes; this file system allows {limit}); choose a "
                "shorter output name")  # fmt: skip
    if target.exists() or target.is_symlink():
        if not target.is_file():
            kind = "a directory" if target.is_dir() else "not a regular file (a device, a FIFO?)"
            return f"is {kind}; census writes reports to regular files only"
        for source in inputs:
            with contextlib.suppress(OSError):
                if source.exists() and os.path.samefile(target, source):
                    return "is an input of this command; choose another output"
    if not parent.is_dir() or not os.access(parent, os.W_OK | os.X_OK):
        return f"cannot write there ({parent} is not a writable directory)"
    return None


def write_atomic(target: Path, data: str | bytes) -> None:
    with atomic_target(target) as tmp:
        if isinstance(data, str):
            # A file name whose bytes are not UTF-8 is written as `\udcff`, not refused.
            tmp.write_text(data, encoding="utf-8", errors="backslashreplace")
        else:
            tmp.write_bytes(data)

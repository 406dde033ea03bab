"""Where census writes, and how: every output goes to a temporary name and is renamed.

Temporary names carry the process that made them, `PID-HOST` (HOST a short hash of the host
name): a file `.NAME.PID-HOST.RANDOM.part` or a folder `.NAME.partial-PID-HOST-RANDOM`. What a
process of this host left behind when it died (kill -9, a crash) is removed by a later census in
the same folder; nothing else is ever removed: not another name, not a live process's, not
another host's.

A report whose target is a symbolic link to a regular file is written through the link (the
file it names is replaced atomically, the link stays); a link to anything else is refused. A
capture or experiment folder is replaced (`--force`) only when census made it, and never through
a link.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import os
import re
import shutil
import socket
import tempfile
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Any

# mkstemp's and mkdtemp's random part: 8 of [a-z0-9_]
_PART = re.compile(r"\.(.+)\.(\d+)-([0-9a-f]{8})\.[a-z0-9_]{8}\.part")
_WORK = re.compile(r"\.(.+)\.partial-(\d+)-([0-9a-f]{8})-[a-z0-9_]{8}")
SHORT_NAME_BYTES = 64


def cache_dir() -> Path:
    """$CENSUS_CACHE_DIR, else $XDG_CACHE_HOME/census, else ~/.cache/census."""
    if os.environ.get("CENSUS_CACHE_DIR"):
        return Path(os.environ["CENSUS_CACHE_DIR"])
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "census"


SAMPLES_FOLDER = "samples"  # in the cache: the bundled captures, unpacked (sources.samples)


def shown_path(path: str) -> str:
    """A path as a person named it: a bundled capture unpacked in a cache
    (`SAMPLES_FOLDER/SIZE-MTIME/NAME/capture.sqlite`, sources.samples) as `sample:NAME`, any
    other path as it is. By its shape, not under today's cache_dir(): a census read from one
    cache is shown the same after $CENSUS_CACHE_DIR changed."""
    parts = Path(path).parts
    sample = len(parts) >= 4 and parts[-4] == SAMPLES_FOLDER and parts[-1] == "capture.sqlite"
    if sample and re.fullmatch(r"[0-9]+-[0-9]+", parts[-3]):
        return f"sample:{parts[-2]}"
    return path


@functools.lru_cache(maxsize=1)
def _host() -> str:
    return hashlib.sha256(socket.gethostname().encode("utf-8", "replace")).hexdigest()[:8]


def owner_tag() -> str:
    """`PID-HOST`: the process that owns a temporary name."""
    return f"{os.getpid()}-{_host()}"


def _short(name: str) -> str:
    """The start of `name` that fits a temporary name: the name itself may be near the limit."""
    while len(os.fsencode(name)) > SHORT_NAME_BYTES:
        name = name[:-1]
    return name


def pid_alive(pid: int) -> bool:
    """Whether process `pid` may be running: only a pid the system says is gone is False
    (another user's process, this one and a number that is no pid all count as alive, so
    that what they own is left alone)."""
    if pid <= 0 or pid == os.getpid():
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except (OSError, OverflowError):  # another user's process, or no such number: not ours
        return True
    return True


def _stale(name: str, pattern: re.Pattern[str], only: str | None) -> bool:
    """Whether `name` is census's temporary name of a dead process of this host."""
    match = pattern.fullmatch(name)
    if not match or (only is not None and match[1] != only):
        return False
    return match[3] == _host() and not pid_alive(int(match[2]))


def sweep_stale_parts(folder: Path, only: str | None = None) -> None:
    """Remove the `.part` files that dead census processes of this host left in `folder`
    (those of the target named `only`, when given)."""
    with contextlib.suppress(OSError), os.scandir(folder) as entries:
        for entry in entries:
            if _stale(entry.name, _PART, only) and entry.is_file(follow_symlinks=False):
                with contextlib.suppress(OSError):
                    os.unlink(entry.path)


def sweep_stale_work(folder: Path) -> None:
    """Remove the hidden `.NAME.partial-*` work folders that dead census processes of this host
    left in `folder`."""
    with contextlib.suppress(OSError), os.scandir(folder) as entries:
        for entry in entries:
            if _stale(entry.name, _WORK, None) and entry.is_dir(follow_symlinks=False):
                shutil.rmtree(entry.path, ignore_errors=True)


# What a work folder's disk must have room for before anything runs: the record written last
# (ab.json: ~16 KiB for 8 arms of 20 steps, 0.5 MiB for 8 arms of 1,000 steps and 3 phases;
# run.json: a few KiB), so that a full disk is said before the arms or nsys, not after them
ROOM_BYTES = 1 << 20


def make_work_folder(out_dir: Path, name: str, unrun: str = "nothing was run") -> Path:
    """A private hidden folder in `out_dir` where a capture or an experiment is assembled, once
    its disk took ROOM_BYTES there (a placeholder written, synced and removed). A full disk, a
    quota or the file size limit is the one-line OutOfSpace naming `out_dir / name` and what
    was not run (`unrun`); a folder that cannot be written, a UsageError: nothing is left (the
    folders made for it removed)."""
    made = [p for p in (out_dir, *out_dir.parents) if not os.path.lexists(p)]
    work = None
    try:
        out_dir.mkdir(parents=True, exist_ok=True)
        sweep_stale_work(out_dir)
        prefix = f".{_short(name)}.partial-{owner_tag()}-"
        work = Path(tempfile.mkdtemp(prefix=prefix, dir=out_dir))
        _take_room(work / "room.part", ROOM_BYTES)
        return work
    except OSError as exc:
        if work is not None:
            shutil.rmtree(work, ignore_errors=True)
        for folder in made:  # the deepest first
            with contextlib.suppress(OSError):
                folder.rmdir()
        raise _no_room(exc, out_dir / name, unrun) from None


def _take_room(path: Path, size: int) -> None:
    """`size` bytes written to `path` (random: a compressing file system stores them whole),
    synced (a quota or a network file system says no by then), then removed."""
    try:
        with open(path, "xb") as fh:
            for start in range(0, size, 1 << 16):
                fh.write(os.urandom(min(1 << 16, size - start)))
            fh.flush()
            os.fsync(fh.fileno())
    finally:
        with contextlib.suppress(FileNotFoundError):
            path.unlink()


def _no_room(exc: OSError, folder: Path, unrun: str) -> Exception:
    from census.errors import UsageError, ran_out
    from census.units import fmt_bytes

    resource = ran_out(exc, folder, output=True)
    if resource is None:
        return UsageError(f"{folder}: cannot write there ({exc.strerror or exc}); {unrun}")
    return type(resource)(f"{resource} (census checks for {fmt_bytes(ROOM_BYTES)} of room "
                          f"there before it runs anything: {unrun})")  # fmt: skip


def output_file(target: Path) -> Path:
    """The file a report for `target` lands in: the regular file a symbolic link names, written
    through the link; else `target`."""
    if target.is_symlink():
        real = Path(os.path.realpath(target))
        if real.is_file():
            return real
    return target


@contextlib.contextmanager
def atomic_target(target: Path) -> Iterator[Path]:
    """Yield a temporary path beside `target`; rename it onto `target` only on success."""
    target = output_file(target)
    target.parent.mkdir(parents=True, exist_ok=True)
    # A short temporary name: the target's own may be close to the file system's limit.
    short = _short(target.name)
    sweep_stale_parts(target.parent, only=short)
    prefix = f".{short}.{owner_tag()}."
    fd, name = tempfile.mkstemp(prefix=prefix, suffix=".part", dir=target.parent)
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
    (a symbolic link to one is written through), or that cannot be written (a one-line
    UsageError naming the target), before any work."""
    from census.errors import UsageError

    try:
        problem = _output_problem(target, inputs)
    except OSError as exc:  # a path the system refuses (a component too long, a link loop)
        problem = f"cannot write there ({exc.strerror or exc})"
    if problem:
        raise UsageError(f"{target}: {problem}")


def _name_max(folder: Path) -> int:
    try:
        return os.pathconf(folder, "PC_NAME_MAX")
    except (OSError, ValueError):
        return 255


def _existing_ancestor(path: Path) -> Path:
    while not os.path.lexists(path) and path != path.parent:
        path = path.parent
    return path


def _output_problem(target: Path, inputs: Iterable[Path]) -> str | None:
    parent = _existing_ancestor(target.parent)
    limit, size = _name_max(parent), len(os.fsencode(target.name))
    if size > limit:
        return (f"file name too long ({size} bytes; this file system allows {limit}); choose a "
                "shorter output name")  # fmt: skip
    if target.is_symlink():
        real = Path(os.path.realpath(target))
        if not real.is_file():
            return (f"is a symbolic link to {real}, which is not a regular file; census writes "
                    "reports to regular files only")  # fmt: skip
        target, parent = real, real.parent  # written through the link
    if target.exists():
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


def check_output_folder(folder: Path, force: bool, foreign: Callable[[Path], str | None]) -> None:
    """Before any work: refuse a capture or experiment folder that cannot be made there, that
    exists without `force`, or that `--force` must not replace: a symbolic link, or a folder
    census did not make (`foreign(folder)` says why, None when census made it). A one-line
    UsageError naming the folder."""
    from census.errors import UsageError

    try:
        problem = _folder_problem(folder, force, foreign)
    except OSError as exc:  # a path the system refuses (a component too long, a link loop)
        problem = f"{folder}: cannot write there ({exc.strerror or exc})"
    if problem:
        raise UsageError(problem)


def _folder_problem(folder: Path, force: bool, foreign: Callable[[Path], str | None]) -> str | None:
    parent = _existing_ancestor(folder.parent)
    if not parent.is_dir() or not os.access(parent, os.W_OK | os.X_OK):
        return f"{folder}: cannot write there ({parent} is not a writable directory)"
    limit, size = _name_max(parent), len(os.fsencode(folder.name))
    if size > limit:
        return (f"{folder}: name too long ({size} bytes; this file system allows {limit}); "
                "choose a shorter name")  # fmt: skip
    if folder.is_symlink():
        real = os.path.realpath(folder)
        return (f"{folder}: is a symbolic link to {real}; census never replaces a link nor "
                "what it points to: remove the link or choose another name")  # fmt: skip
    if not os.path.lexists(folder):
        return None
    if not force:
        return f"{folder} exists: choose another name or pass --force to replace it"
    reason = foreign(folder)
    if reason:
        return (f"{folder}: {reason}; --force replaces only a folder census made: move it "
                "away or choose another name")  # fmt: skip
    return None


def replace_folder(
    work: Path, folder: Path, force: bool, foreign: Callable[[Path], str | None]
) -> None:
    """Rename the finished `work` folder onto `folder`. What is there is checked again (it may
    have changed while census worked) and removed only when census made it; never a link."""
    check_output_folder(folder, force, foreign)
    if os.path.lexists(folder):
        shutil.rmtree(folder)
    os.replace(work, folder)


def write_atomic(target: Path, data: str | bytes | Iterable[bytes]) -> None:
    """`data` (text, bytes, or pieces of bytes written one after another) into `target`."""
    with atomic_target(target) as tmp:
        if isinstance(data, str):
            # A file name whose bytes are not UTF-8 is written as `\udcff`, not refused.
            tmp.write_text(data, encoding="utf-8", errors="backslashreplace")
        elif isinstance(data, bytes):
            tmp.write_bytes(data)
        else:
            with tmp.open("wb") as fh:
                for piece in data:
                    fh.write(piece)


@contextlib.contextmanager
def writing(path: str | os.PathLike) -> Iterator[None]:
    """Census writing `path`: a full disk or temporary folder, a quota or the file size limit is
    the one-line OutOfSpace naming it (a write's OSError names no file)."""
    from census.errors import ran_out

    try:
        yield
    except OSError as exc:
        raise (ran_out(exc, path) or exc) from None


def write_arrays(path: str, arrays: Iterable[Any], mode: str = "ab") -> int:
    """The bytes of each array (C-contiguous) appended to file `path` (a spill file), or in
    place of its content (`mode` "wb"); returns the offset they start at. Not ndarray.tofile:
    its short write on a full disk names no error (no errno)."""
    with writing(path), open(path, mode) as fh:
        offset = fh.tell()
        for a in arrays:
            fh.write(memoryview(a))  # no copy of it
    return offset

"""Errors census raises. Each message says what is wrong and, where it can, what to do.

The CLI turns any CensusError into one line on stderr and the exit code below. `ran_out` names
what the machine ran out of (memory, space on a disk or in the temporary folder, the file size
limit) when an exception says so: the one place such an exception becomes a message.
"""

from __future__ import annotations

import errno
import os
from pathlib import Path

try:  # now, not when memory has run out (loading a module then fails too)
    import resource
except ImportError:  # not on Windows
    resource = None  # type: ignore[assignment]

EXIT_BAD_INPUT = 1
EXIT_USAGE = 2
EXIT_TOOL_MISSING = 3
EXIT_CAPTURE_FAILED = 4
EXIT_GATE_FAILED = 5
EXIT_INTERNAL = 70  # sysexits' EX_SOFTWARE: a bug in census (never a user's mistake)
EXIT_OUT_OF_MEMORY = 71  # sysexits' EX_OSERR: the system gave census no more memory
EXIT_OUT_OF_SPACE = 73  # sysexits' EX_CANTCREAT: a file census writes could not be written
EXIT_OUTPUT_FAILED = 74  # sysexits' EX_IOERR: standard output could not be written
EXIT_INTERRUPTED = 130
EXIT_READER_GONE = 141  # 128 + SIGPIPE, as for any program whose reader stopped early


class CensusError(Exception):
    """Base class: a problem the user can act on. `exit_code` is what the CLI returns."""

    exit_code = EXIT_BAD_INPUT


class InputError(CensusError):
    """The profile given is missing, unreadable, not an nsys export, or corrupt."""

    exit_code = EXIT_BAD_INPUT


class ColumnError(ValueError):
    """Internal: a column of the export holds what census cannot read as integers. The loader
    turns it into an InputError naming the file."""


class UsageError(CensusError):
    """Arguments that cannot work together (bad regex, bad labels, ...)."""

    exit_code = EXIT_USAGE


class NoSuchName(CensusError, AttributeError):
    """A name `census` does not have (`census.load` in a fresh interpreter): an AttributeError,
    so that `hasattr` and `getattr(census, name, default)` work, whose message names the API."""

    exit_code = EXIT_USAGE

    def __init__(self, name: str, public: list[str], stage: bool) -> None:
        why = (f"census.{name} is an internal stage, not the API (import census.{name} to use it)"
               if stage else f"census has no attribute {name!r}")  # fmt: skip
        super().__init__(f"{why}; the public API is census.{', census.'.join(public)}")
        self.name = name


class OutputError(CensusError):
    """Standard output is closed or full, or failed while census wrote to it."""

    exit_code = EXIT_OUTPUT_FAILED


class ReaderGone(CensusError):
    """The program reading census's standard output stopped early (`| head`): said by the exit
    code alone, as a shell expects of a program a broken pipe stopped."""

    exit_code = EXIT_READER_GONE


class ToolMissingError(CensusError):
    """An external tool (nsys, a browser) is not installed or not on PATH."""

    exit_code = EXIT_TOOL_MISSING


class CaptureError(CensusError):
    """`nsys` or the profiled program failed; the message carries the command and its output tail."""

    exit_code = EXIT_CAPTURE_FAILED

    def __init__(self, message: str, command: list[str] | None = None, tail: str = "") -> None:
        self.command = command or []
        self.tail = tail
        super().__init__(message)


class ResourceError(CensusError):
    """The machine ran out of something census needs: neither the input's fault nor census's."""


class OutOfMemory(ResourceError):
    """Memory: a limit (ulimit -v, -d), or the system's (a worker killed by the OOM killer)."""

    exit_code = EXIT_OUT_OF_MEMORY


class OutOfSpace(ResourceError):
    """A file census writes (a spill file, a private copy) met a full disk or temporary folder,
    a quota, or the file size limit (ulimit -f)."""

    exit_code = EXIT_OUT_OF_SPACE


_SPACE = {errno.ENOSPC: "no space left", errno.EDQUOT: "the disk quota is used up"}
SQLITE_FULL, SQLITE_NOMEM = 13, 7  # SQLite's result codes


def ran_out(exc: BaseException, path: str | os.PathLike | None = None,
            output: bool = False) -> ResourceError | None:  # fmt: skip
    """The one-line error naming what ran out, and where, when `exc` says the machine ran out
    (memory, space, the file size limit) while census wrote `path` (else the file the exception
    names; `output`: one the user named, never a temporary file); None for any other
    exception."""
    if isinstance(exc, ResourceError):
        return exc
    if isinstance(exc, MemoryError):
        return out_of_memory(f"could not allocate {_allocation(exc)}")
    if isinstance(exc, RuntimeError) and "can't start new thread" in str(exc):
        return out_of_memory("could not start a thread")
    if isinstance(exc, ImportError) and "failed to map segment" in str(exc) and memory_limited():
        return out_of_memory(f"could not load {exc.name or 'a module'}")  # dlopen's mmap failed
    code = getattr(exc, "sqlite_errorcode", None)
    if code is not None and code & 0xFF == SQLITE_NOMEM:
        return out_of_memory("SQLite could not allocate memory")
    if code is not None and code & 0xFF == SQLITE_FULL:  # its temporary files (sorts, temp tables)
        return OutOfSpace(f"{_space_where(_temporary(), 'no space left', True)} for SQLite's "
                          "temporary files; free space there, or set TMPDIR to a folder with room")  # fmt: skip
    if not isinstance(exc, OSError):
        return None
    path = exc.filename if path is None else path
    if exc.errno == errno.ENOMEM:
        return out_of_memory("the system refused to map more memory")
    if exc.errno == errno.EFBIG:
        return OutOfSpace(f"the file size limit (ulimit -f: {_file_size_limit()}) stopped census "
                          f"writing {_shown(path)}: raise it (ulimit -f unlimited)")  # fmt: skip
    if exc.errno in _SPACE:
        temporary = not output and _temporary_file(path)
        return OutOfSpace(f"{_space_where(path, _SPACE[exc.errno], temporary)} (writing "
                          f"{_shown(path)}); free space there" + (", or set TMPDIR to a folder "
                          "with room for census's temporary files" if temporary else ""))  # fmt: skip
    return None


def out_of_memory(what: str) -> OutOfMemory:
    """The OutOfMemory error for `what` failed, naming the memory limit where one is set."""
    return OutOfMemory(f"out of memory{_memory_limit()}: {what}; raise the limit or free memory")


def _allocation(exc: MemoryError) -> str:
    """What a MemoryError failed to allocate, as numpy says it ("24.8 MiB"), else "memory"."""
    words = str(exc).split()
    if words[:3] == ["Unable", "to", "allocate"] and len(words) > 4:
        return f"{words[3].rstrip('.')} {words[4]}"  # numpy writes "392. KiB"
    return "memory"


def memory_limited() -> bool:
    """Whether census runs under a memory limit (ulimit -v or -d)."""
    return bool(_memory_limit())


def _memory_limit() -> str:
    """The memory limit census runs under, as a clause (" under the memory limit (ulimit -v:
    400.00 MiB)"), or "" without one."""
    if resource is None:
        return ""
    for name, flag in (("RLIMIT_AS", "-v"), ("RLIMIT_DATA", "-d")):
        soft = resource.getrlimit(getattr(resource, name))[0]
        if soft != resource.RLIM_INFINITY:
            return f" under the memory limit (ulimit {flag}: {_size(soft)})"
    return ""


def _file_size_limit() -> str:
    if resource is None:
        return "set"
    soft = resource.getrlimit(resource.RLIMIT_FSIZE)[0]
    return "unlimited" if soft == resource.RLIM_INFINITY else _size(soft)


def _space_where(path: str | os.PathLike | None, what: str, temporary: bool) -> str:
    """Where space ran out: "no space left in the temporary folder (TMPDIR at /tmp/x: 2.00 MiB,
    0 B free)" for a file in it (census's spill files and private copies go there), else "no
    space left on the disk at MOUNT (SIZE, FREE free)"."""
    if path is None:
        return f"{what} on a disk census writes to"
    disk = _mount_point(Path(os.path.abspath(path)))
    if temporary:
        folder = _temporary()
        named = f"TMPDIR at {folder}" if _named_by_tmpdir(folder) else str(folder)
        return f"{what} in the temporary folder ({named}{_room(disk, ': ')})"
    room = _room(disk, "")
    return f"{what} on the disk at {disk}" + (f" ({room})" if room else "")


def _named_by_tmpdir(folder: Path) -> bool:
    """Whether $TMPDIR names `folder` (the system's is used where it names no folder)."""
    try:
        return os.path.samefile(os.environ.get("TMPDIR") or "", folder)
    except OSError:
        return False


def _temporary_file(path: str | os.PathLike | None) -> bool:
    """Whether `path` lies in the temporary folder (spill files, private copies)."""
    if path is None:
        return False
    temporary, where = _temporary(), Path(os.path.abspath(path))
    return where == temporary or temporary in where.parents


def _temporary() -> Path:
    import tempfile

    return Path(tempfile.gettempdir())


def _room(folder: Path, lead: str) -> str:
    """The size and free space of the file system holding `folder` ("SIZE, FREE free") after
    `lead`, or "" when they cannot be told."""
    try:
        st = os.statvfs(folder)
    except (OSError, AttributeError):
        return ""
    return f"{lead}{_size(st.f_blocks * st.f_frsize)}, {_size(st.f_bavail * st.f_frsize)} free"


def _mount_point(path: Path) -> Path:
    """The mount point of the file system `path` (or its nearest existing folder) is on."""
    while not path.exists() and path != path.parent:
        path = path.parent
    try:
        device = path.stat().st_dev
        while path != path.parent and path.parent.stat().st_dev == device:
            path = path.parent
    except OSError:
        pass
    return path


def _size(n: int) -> str:
    from census.units import fmt_bytes

    return fmt_bytes(n)


def _shown(path: str | os.PathLike | None) -> str:
    if path is None:
        return "a file"
    return os.fsdecode(path) if isinstance(path, bytes) else str(path)

"""Open an nsys export read-only, or say in one line why it cannot be read (a PyTorch profiler
trace handed where an export must be opened is named for what it is: census reads traces where
a capture is named, census.sources.kineto).

Inputs are opened with `mode=ro` and never written; SQLite's own messages become one line.
Nothing is created beside an input either. An export in SQLite WAL mode would make SQLite create
its `-wal` and `-shm` files there (or fail, in a read-only folder), so it is opened `immutable`
when no log with content lies beside it: there is nothing to replay. When one does (a writer at
work, or one that did not close cleanly), the export's content is the file *and* its log: both
are copied into a private temporary folder, and the copy is read (and never cached).
"""

from __future__ import annotations

import atexit
import os
import shutil
import sqlite3
import tempfile
from pathlib import Path

from census.errors import InputError, ran_out
from census.sources.schema import read_views
from census.units import clip

SQLITE_MAGIC = b"SQLite format 3\x00"


def open_readonly(path: Path) -> sqlite3.Connection:
    """Open an export read-only, or raise InputError naming the file and the problem."""
    try:
        path.stat()
    except FileNotFoundError:
        raise InputError(f"{path}: no such file") from None
    except OSError as exc:  # a loop of links, a name too long, a folder without access
        raise InputError(f"{path}: {exc.strerror or exc}") from None
    if path.is_dir():
        raise InputError(f"{path}: is a directory, not an nsys SQLite export")
    if not path.is_file():  # a FIFO or a device would block or stream: never read one
        raise InputError(f"{path}: not a regular file (a FIFO or a device?), not an nsys export")
    if not os.access(path, os.R_OK):
        raise InputError(f"{path}: permission denied (cannot read the file)")
    with path.open("rb") as fh:
        head = fh.read(len(SQLITE_MAGIC))
    if len(head) == 0:
        raise InputError(f"{path}: empty file, not an nsys SQLite export")
    if head != SQLITE_MAGIC:
        raise _not_sqlite(path, head)
    header = _check_not_truncated(path)
    try:
        conn = sqlite3.connect(_readonly_uri(path, header), uri=True, timeout=2.0)
        conn.text_factory = _decode_text
        conn.execute("PRAGMA temp_store = FILE")
        conn.execute("PRAGMA threads = 2")
        conn.execute("PRAGMA cache_size = -8192")  # 8 MiB: scans read each page once
        conn.execute("SELECT count(*) FROM sqlite_master").fetchone()
        _note_opened(conn)
        views = read_views(conn)
    except (sqlite3.Error, UnicodeDecodeError) as exc:
        raise InputError(f"{path}: {describe_sqlite_error(exc)}") from None
    if views:
        conn.close()
        one = len(views) == 1
        what = "is a view, not a table" if one else "are views, not tables"
        raise InputError(
            f"{path}: {', '.join(views)} {what} as nsys writes {'it' if one else 'them'}: census "
            f"reads no views; export the report again, or store {'the' if one else 'each'} view "
            "as a table (CREATE TABLE ... AS SELECT)"
        )
    return conn


# the file SQLite opened for a connection -> its (device, inode): the page reader
# (census/sqlite/pages.py) reads that file or none, whatever is renamed over its path later
_identities: dict[Path, tuple[int, int]] = {}


def opened_file(conn: sqlite3.Connection) -> Path | None:
    """The file `conn` reads (its name as the file system has it, whatever its bytes)."""
    factory = conn.text_factory
    conn.text_factory = bytes
    try:
        files = [r[2] for r in conn.execute("PRAGMA database_list") if r[1] == b"main"]
    finally:
        conn.text_factory = factory
    return Path(os.fsdecode(files[0])) if files and files[0] else None


def opened_identity(path: Path) -> tuple[int, int] | None:
    """(device, inode) of the file census's connection opened at `path`, if one did."""
    return _identities.get(path.resolve())


def _note_opened(conn: sqlite3.Connection) -> None:
    """After the connection's first query, when SQLite holds the file open."""
    path = opened_file(conn)
    if path is not None:
        st = os.stat(path)
        _identities[path.resolve()] = (st.st_dev, st.st_ino)


def _readonly_uri(path: Path, header: bytes) -> str:
    """The URI to open `path` with: `mode=ro`; an export in WAL mode also `immutable=1` (no log
    to replay), or its private copy with the log."""
    in_wal_mode = header[18] == 2 and header[19] == 2  # the file format versions say WAL
    _read_with_log.pop(path.resolve(), None)
    if not in_wal_mode:
        return f"{path.resolve().as_uri()}?mode=ro"
    if not has_live_wal(path):
        return f"{path.resolve().as_uri()}?mode=ro&immutable=1"
    copy = copy_with_wal(path)
    _read_with_log[path.resolve()] = Path(f"{copy}-wal").stat().st_size
    return f"{copy.as_uri()}?mode=ro"


# export -> (its state and its log's, the copy, the process that made it). Forked workers
# inherit this and read the copy their parent made: every pass sees the same content.
_copies: dict[Path, tuple[tuple, Path, int]] = {}
_cleaning: set[int] = set()  # the processes that remove their copies at exit
_read_with_log: dict[Path, int] = {}  # export -> its log's bytes, when last opened from a copy
COPY_TRIES = 3


def copy_with_wal(path: Path) -> Path:
    """A private copy of an export in WAL mode and its log, made once per state of the two; a
    copy that no longer matches is replaced, and all are removed when census exits."""
    source = path.resolve()
    wal = Path(f"{source}-wal")
    made = _copies.get(source)
    # A forked worker reads its parent's copy; the parent copies again once either changed.
    if (
        made is not None
        and made[1].exists()
        and (made[2] != os.getpid() or made[0] == _state(source, wal))
    ):
        return made[1]
    folder = Path(tempfile.mkdtemp(prefix="census-wal-"))
    if os.getpid() not in _cleaning:
        _cleaning.add(os.getpid())
        atexit.register(_remove_copies, os.getpid())
    try:
        copy = _copy_unchanged(source, wal, folder / "export.sqlite")
    except BaseException:
        shutil.rmtree(folder, ignore_errors=True)
        raise
    if made is not None and made[2] == os.getpid():  # open connections keep their open files
        shutil.rmtree(made[1].parent, ignore_errors=True)
    _copies[source] = (_state(source, wal), copy, os.getpid())
    return copy


def wal_note(path: Path) -> str | None:
    """The warning for an export that open_readonly last opened from a private copy with its log
    (else None: never opened here, or opened as the file alone, its log since checkpointed).
    Loading adds it to the census's warnings."""
    log = _read_with_log.get(path.resolve())
    if log is None:
        return None
    return (
        f"in SQLite WAL mode with a {log:,}-byte log beside it (a writer at work, or one that "
        "did not close cleanly): read with the log, from a private copy of both"
    )


def _copy_unchanged(source: Path, wal: Path, copy: Path) -> Path:
    """Copy the log, then the file, until neither changed meanwhile (a writer at work)."""
    for _ in range(COPY_TRIES):
        before = _state(source, wal)
        try:
            shutil.copyfile(wal, f"{copy}-wal")
            shutil.copyfile(source, copy)
        except OSError as exc:
            resource = ran_out(exc, copy)  # a full temporary folder, the file size limit
            made = f"{source}: in SQLite WAL mode with a log beside it, read from a private copy"
            checkpoint = "checkpoint the log into the file (sqlite3 FILE 'PRAGMA wal_checkpoint')"
            if resource is not None:
                raise type(resource)(f"{made}: {resource}; or {checkpoint}") from None
            raise InputError(
                f"{made} that could not be made ({exc.strerror or exc}): free space in "
                f"{copy.parent.parent} (or set TMPDIR), or {checkpoint}"
            ) from None
        if _state(source, wal) == before:
            return copy
    raise InputError(
        f"{source}: in SQLite WAL mode, and it changed while census copied it {COPY_TRIES} "
        "times: a writer is still at work; try again when it has finished"
    )


def _state(*paths: Path) -> tuple:
    out = []
    for p in paths:
        try:
            st = p.stat()
        except OSError:
            out.append(None)
            continue
        out.append((st.st_ino, st.st_size, st.st_mtime_ns))
    return tuple(out)


def _remove_copies(pid: int) -> None:
    if os.getpid() != pid:  # a forked worker leaves its parent's copies alone
        return
    for _, copy, owner in _copies.values():
        if owner == pid:
            shutil.rmtree(copy.parent, ignore_errors=True)


def _not_sqlite(path: Path, head: bytes) -> InputError:
    """What a file that is no SQLite database is, as one line: a Kineto trace, other JSON (a
    Chakra execution trace), or neither."""
    start = _text_start(path, head)
    if start.startswith(b"{") and b'"traceEvents"' in start:
        return InputError(
            f"{path}: a PyTorch profiler (Kineto) trace, not an nsys export: census reads "
            "traces where a capture is named (`census summary TRACE`, a folder of per-rank "
            "traces), not where an nsys SQLite export must be opened"
        )
    if start.startswith((b"{", b"[")):
        return InputError(
            f"{path}: JSON that is neither a PyTorch profiler trace (no `traceEvents` key near "
            "its start) nor an nsys SQLite export"
        )
    return InputError(
        f"{path}: not a SQLite database nor a PyTorch profiler trace (export an nsys report with "
        "`nsys export --type sqlite`; torch.profiler writes a trace as .json or .json.gz)"
    )


def _text_start(path: Path, head: bytes) -> bytes:
    """The first 64 KiB of the file's text (gunzipped where it is gzip), leading blanks
    stripped: a Chrome-trace JSON that torch.profiler writes has `traceEvents` there."""
    import gzip
    import zlib

    try:
        if head.startswith(b"\x1f\x8b"):
            with gzip.open(path, "rb") as fh:
                return fh.read(1 << 16).lstrip()
        with path.open("rb") as fh:
            return fh.read(1 << 16).lstrip()
    except (OSError, EOFError, zlib.error):
        return b""


def _check_not_truncated(path: Path) -> bytes:
    """The header records the page size and count: a shorter file was cut while copying.
    Returns the header."""
    with path.open("rb") as fh:
        header = fh.read(100)
    if len(header) < 100:
        raise InputError(f"{path}: truncated SQLite file ({len(header)} bytes); copy it again")
    page_size = int.from_bytes(header[16:18], "big")
    page_size = 65536 if page_size == 1 else page_size
    pages = int.from_bytes(header[28:32], "big")
    size = path.stat().st_size
    # The in-header count is valid only when the change counters agree (SQLite >= 3.7.0).
    if pages and header[24:28] == header[92:96] and size < pages * page_size:
        raise InputError(
            f"{path}: truncated SQLite file ({size:,} of {pages * page_size:,} bytes); copy it again"
        )
    return header


def _decode_text(raw: bytes) -> str:
    return raw.decode("utf-8", errors="replace")


def describe_sqlite_error(exc: Exception) -> str:
    """Why SQLite could not read a file, in one line, with what to do (locked, corrupt or
    truncated)."""
    text = " ".join(str(exc).split())  # one line, however SQLite quotes a broken schema
    text = clip(text, 160)
    if "locked" in text:
        return "database is locked by another process (is nsys still writing it?)"
    if isinstance(exc, UnicodeDecodeError):
        return "corrupt SQLite file (undecodable text in its schema); export it again"
    if "malformed" in text or "not a database" in text or "disk I/O" in text:
        return f"corrupt or truncated SQLite file ({text}); export it again"
    return f"cannot read the SQLite file ({text})"


def has_live_wal(path: Path) -> bool:
    """Whether SQLite's write-ahead log beside the export holds pages: then the export's content
    is the file *and* the log, which a writer may still be changing, so it is never cached."""
    try:
        return Path(f"{path}-wal").stat().st_size > 0
    except OSError:
        return False

"""Open an nsys export read-only, or say in one line why it cannot be read.

Inputs are opened with `mode=ro` and never written; SQLite's own messages become one line.
"""

from __future__ import annotations

import os
import sqlite3
from pathlib import Path

from census.errors import InputError
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
        if _is_kineto(path, head):
            raise InputError(
                f"{path}: a PyTorch profiler (Kineto) trace, not an nsys export: census reads "
                "Nsight Systems SQLite exports (capture with `census capture`, or export a report "
                "with `nsys export --type sqlite`)"
            )
        raise InputError(
            f"{path}: not a SQLite database (export it with `nsys export --type sqlite`)"
        )
    _check_not_truncated(path)
    uri = f"{path.resolve().as_uri()}?mode=ro"
    try:
        conn = sqlite3.connect(uri, uri=True, timeout=2.0)
        conn.text_factory = _decode_text
        conn.execute("PRAGMA temp_store = FILE")
        conn.execute("PRAGMA threads = 2")
        conn.execute("PRAGMA cache_size = -8192")  # 8 MiB: scans read each page once
        conn.execute("SELECT count(*) FROM sqlite_master").fetchone()
    except (sqlite3.Error, UnicodeDecodeError) as exc:
        raise InputError(f"{path}: {describe_sqlite_error(exc)}") from None
    return conn


def _is_kineto(path: Path, head: bytes) -> bool:
    """A Chrome-trace JSON (plain or gzipped) that torch.profiler writes: `traceEvents` near
    its start."""
    import gzip

    try:
        if head.startswith(b"\x1f\x8b"):
            with gzip.open(path, "rb") as fh:
                start = fh.read(1 << 16)
        else:
            with path.open("rb") as fh:
                start = fh.read(1 << 16)
    except (OSError, EOFError):
        return False
    return start.lstrip().startswith(b"{") and b'"traceEvents"' in start


def _check_not_truncated(path: Path) -> None:
    """The header records the page size and count: a shorter file was cut while copying."""
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


def _decode_text(raw: bytes) -> str:
    return raw.decode("utf-8", errors="replace")


def describe_sqlite_error(exc: Exception) -> str:
    text = " ".join(str(exc).split())  # one line, however SQLite quotes a broken schema
    text = clip(text, 160)
    if "locked" in text:
        return "database is locked by another process (is nsys still writing it?)"
    if isinstance(exc, UnicodeDecodeError):
        return "corrupt SQLite file (undecodable text in its schema); export it again"
    if "malformed" in text or "not a database" in text or "disk I/O" in text:
        return f"corrupt or truncated SQLite file ({text}); export it again"
    return f"cannot read the SQLite file ({text})"

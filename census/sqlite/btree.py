"""SQLite's file format, the parts the page reader (census/sqlite/pages.py) needs: which tables it
reads, their b-tree's leaves, pages read with pread, cells and varints
(https://www.sqlite.org/fileformat2.html).

Every structure the reader relies on is checked as SQLite checks it, and what does not hold is
Damaged, a page SQLite rejects (its scan fails with "database disk image is malformed", or
`PRAGMA integrity_check` names the page), which the caller refuses in one line naming the file,
the table and the page: page numbers inside the file, each page visited once, a page's type, cell
counts and pointers inside their page and past the cell-pointer array, a payload inside its page
(the part of a spilled one kept there, and its first overflow page inside the file), no leaf but
a lone root without cells, each interior page's keys increasing inside the bounds its parent
gives, and the rowids of the leaves increasing inside those bounds. A rowid range read with SQL
is sound only on such a tree (SQLite seeks the range's first rowid and stops after its last), so
the SQL reader checks the leaves too (census/sqlite/pages.py, check_leaves).
"""

from __future__ import annotations

import os
import sqlite3
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from census.errors import InputError
from census.sources.readonly import has_live_wal, opened_identity

LEAF, INTERIOR = 0x0D, 0x05
CHANGE_COUNTER = 24  # where the file change counter's 4 bytes lie in the file
_LOWEST = -(1 << 63)  # the first leaf holds rowids from here, this one included
MAX_DEPTH = 40  # a b-tree of 4 GiB of 512-byte pages is 10 levels deep
_ROWID_NAMES = {"rowid", "oid", "_rowid_"}  # a column so named hides the rowid from SQL


class Unreadable(Exception):
    """Internal: this table, or this stretch of it, is not one the page reader reads exactly."""


class Damaged(Exception):
    """Internal: page `page` of a table's b-tree is one SQLite rejects, for the reason `what`."""

    def __init__(self, page: int, what: str) -> None:
        super().__init__(page, what)
        self.page, self.what = page, what


def damaged_error(path: Path, table: str, exc: Damaged) -> InputError:
    """The one-line refusal of a damaged page: the file, the table, the page and what."""
    return InputError(
        f"{path}: damaged SQLite file: {table}, page {exc.page}: {exc.what} (a page SQLite "
        "rejects: PRAGMA integrity_check names it); export it again"
    )


@dataclass(frozen=True)
class Leaves:
    """The leaf pages of a table in rowid order; leaf i holds rowids in (low[i], high[i]], the
    first one from -2^63 included."""

    page: np.ndarray
    low: np.ndarray
    high: np.ndarray


@dataclass(frozen=True)
class Layout:
    """A table the page reader reads: its file, page geometry and columns in record order."""

    path: Path
    identity: tuple[int, int]
    page_size: int
    usable: int  # bytes of a page that hold b-tree content (less the reserved bytes)
    pages: int  # pages in the file
    counter: bytes  # the file change counter (bytes 24-27) read with the layout
    columns: tuple[str, ...]
    unreadable: frozenset[str]  # columns it leaves to SQL (REAL affinity, rowid aliases)
    leaves: Leaves


def open_layout(conn: sqlite3.Connection, path: Path, table: str) -> Layout:
    """The layout of `table` in `path`, the file `conn` reads; Unreadable, saying why, where the
    page reader does not apply: not opened by census, a log or journal beside it, no rowids, a
    virtual table, hidden or generated columns, a column named as the rowid, a damaged tree."""
    identity = opened_identity(path)
    if identity is None:
        raise Unreadable("a file census did not open")
    row = conn.execute(
        "SELECT rootpage, sql FROM sqlite_master WHERE type = 'table' AND name = ?", (table,)
    ).fetchone()
    sql = " ".join((row[1] or "").upper().split()) if row else ""
    if row is None or sql.startswith("CREATE VIRTUAL") or row[0] is None or int(row[0]) < 2:
        raise Unreadable("not a table with a b-tree of its own (a virtual table?)")
    if without_rowid(conn, table):
        raise Unreadable("a table without rowids")
    info = list(conn.execute(f'PRAGMA table_xinfo("{table}")'))
    if {str(r[1]).lower() for r in info} & _ROWID_NAMES:
        raise Unreadable("a column named as the rowid")
    if any(r[6] for r in info):  # hidden: generated columns
        raise Unreadable("generated columns")
    if _has_log(path):
        raise Unreadable("a write-ahead log or hot journal beside the file")
    try:
        with open(path, "rb", buffering=0) as fh:
            st = os.fstat(fh.fileno())
            head = os.pread(fh.fileno(), 100, 0)
            page_size = int.from_bytes(head[16:18], "big")
            page_size = 65536 if page_size == 1 else page_size
            usable = page_size - head[20]
            if (st.st_dev, st.st_ino) != identity:
                raise Unreadable("not the file SQLite opened")
            if page_size < 512 or usable < 480:
                raise Unreadable(f"pages of {page_size} bytes, {usable} of them usable")
            pages = -(-st.st_size // page_size)  # SQLite counts a last partial page
            leaves = walk(fh, int(row[0]), page_size, usable, pages)
    except OSError as exc:
        raise Unreadable(f"the file could not be read ({exc.strerror or exc})") from None
    except Damaged as exc:
        raise damaged_error(path, table, exc) from None
    return Layout(path, identity, page_size, usable, pages,
                  head[CHANGE_COUNTER : CHANGE_COUNTER + 4], tuple(r[1] for r in info),
                  _left_to_sql(info), leaves)  # fmt: skip


def without_rowid(conn: sqlite3.Connection, table: str) -> bool:
    """Whether `table` is a table WITHOUT ROWID: its rows are its primary key's b-tree."""
    try:
        row = conn.execute("SELECT wr FROM pragma_table_list WHERE schema = 'main' AND name = ?",
                           (table,)).fetchone()  # fmt: skip
        return bool(row and row[0])
    except sqlite3.OperationalError:  # SQLite before 3.37: no table_list; its schema says
        row = conn.execute("SELECT sql FROM sqlite_master WHERE type = 'table' AND name = ?",
                           (table,)).fetchone()  # fmt: skip
        return bool(row) and "WITHOUT ROWID" in " ".join(str(row[0] or "").upper().split())


def _has_log(path: Path) -> bool:
    """A write-ahead log with pages, or a (hot) rollback journal, beside the file."""
    journal = Path(f"{path}-journal")
    return has_live_wal(path) or (journal.exists() and journal.stat().st_size > 0)


def _left_to_sql(info: list) -> frozenset[str]:
    """Columns whose stored integers are not what SQL reads: REAL affinity (SQLite stores 2.0 as
    2 and reads 2.0), and an INTEGER PRIMARY KEY, which may be the rowid (its value not in the
    record) or not (declared DESC)."""
    keys = [r for r in info if r[5]]
    out = {str(r[1]).lower() for r in keys if len(keys) == 1 and str(r[2]).upper() == "INTEGER"}
    for r in info:
        declared = str(r[2] or "").upper()
        if "INT" not in declared and any(w in declared for w in ("REAL", "FLOA", "DOUB")):
            out.add(str(r[1]).lower())
    return frozenset(out)


def walk(fh, root: int, page_size: int, usable: int, pages_in_file: int) -> Leaves:
    """The table's leaves in key order, from its interior pages only: a b-tree's leaves are all
    at one depth, so the walk goes down a level at a time until a level's first page is a leaf
    (every leaf's type is checked when it is read)."""
    pages, low, high = [root], [_LOWEST], [(1 << 63) - 1]
    seen: set[int] = set()
    parent = {root: root}
    for _ in range(MAX_DEPTH):
        for p in pages:
            if p < 2 or p > pages_in_file or p in seen:
                where = "outside the file" if p < 2 or p > pages_in_file else "met twice (a loop)"
                raise Damaged(parent[p], f"a child page number {p} {where}")
            seen.add(p)
        if read_pages(fh, np.array(pages[:1]), page_size)[0] == LEAF:
            return Leaves(np.array(pages, np.int64), np.array(low, np.int64),
                          np.array(high, np.int64))  # fmt: skip
        below: tuple[list[int], list[int], list[int]] = ([], [], [])
        for page, lo, hi in zip(pages, low, high, strict=True):
            buf = read_pages(fh, np.array([page]), page_size)
            try:
                children, bounds = _interior(buf, usable, lo, hi)
            except Damaged as exc:
                raise Damaged(page, exc.what) from None
            parent.update((c, page) for c in children if c not in parent)
            below[0].extend(children)
            below[1].extend([lo, *bounds])
            below[2].extend([*bounds, hi])
        pages, low, high = below
    raise Damaged(root, "a b-tree deeper than any SQLite writes (a loop?)")


def _interior(buf: np.ndarray, usable: int, lo: int, hi: int) -> tuple[list[int], list[int]]:
    """An interior page's children in key order, and the largest key of each but the last;
    Damaged (page 0: the caller names it) where its parent's bounds (lo, hi] do not hold its
    keys in increasing order."""
    if buf[0] != INTERIOR:
        raise Damaged(0, f"a page of type {int(buf[0])} where an interior table page belongs")
    count = int(be(buf, np.array([3]), 2)[0])
    if count == 0 or 12 + 2 * count > usable:
        raise Damaged(0, f"an interior page's cell count ({count})")
    pointer = be(buf, 12 + 2 * np.arange(count), 2)
    if pointer.max() + 5 > usable or pointer.min() < 12 + 2 * count:
        raise Damaged(0, "a cell pointer outside its page or inside its cell-pointer array")
    key, _ = varints(buf, pointer + 4)
    if (key[1:] <= key[:-1]).any() or (lo != _LOWEST and key[0] <= lo) or key[-1] >= hi:
        raise Damaged(0, "interior keys out of order, or outside the bounds of their parent")
    right = int(be(buf, np.array([8]), 4)[0])
    return [*be(buf, pointer, 4).tolist(), right], key.tolist()


def read_pages(fh, pages: np.ndarray, page_size: int) -> np.ndarray:
    """Pages (1-based numbers) one after another, then 16 zero bytes: runs of consecutive
    pages are read with one pread each."""
    out = np.zeros(len(pages) * page_size + 16, np.uint8)
    if len(pages) and int(pages.min()) < 1:
        raise Unreadable("a page number below 1")
    breaks = np.flatnonzero(np.diff(pages) != 1) + 1
    for a, b in zip(np.r_[0, breaks], np.r_[breaks, len(pages)], strict=True):
        want = (b - a) * page_size
        got = os.pread(fh.fileno(), want, (int(pages[a]) - 1) * page_size)
        if len(got) != want:
            raise Unreadable("a page past the end of the file")
        out[a * page_size : a * page_size + want] = np.frombuffer(got, np.uint8)
    return out


def be(buf: np.ndarray, at: np.ndarray, width: int, signed: bool = False) -> np.ndarray:
    """Big-endian integers of `width` bytes (1, 2, 4 or 8) at `at`, as int64 (unsigned ones of
    8 bytes wrap): each read through a view of `buf` that starts one at every byte."""
    kind = "i" if signed else "u"
    view = np.ndarray((len(buf) - width + 1,), np.dtype(f">{kind}{width}"), buf, 0, (1,))
    return view[at].astype(np.int64)


def cell_offsets(buf: np.ndarray, pages: np.ndarray, page_size: int, usable: int, lone: bool):
    """(where each cell of the leaf pages `pages` starts in `buf`, where its page's content
    ends, its page's index in `pages`; the cell count of each page), page after page, in key
    order; Damaged where SQLite rejects a page. `lone`: the table's only leaf, which alone may
    have no cells."""
    base = np.arange(len(pages), dtype=np.int64) * page_size
    _first_bad(pages, buf[base] != LEAF, "a page that is not a table leaf where a leaf belongs")
    count = be(buf, base + 3, 2)
    _first_bad(pages, (8 + 2 * count > usable) | ((count == 0) & (not lone)), "a leaf's cell count")
    page_of = np.repeat(np.arange(len(pages)), count)
    nth = np.arange(len(page_of)) - np.repeat(np.cumsum(count) - count, count)
    pointer = be(buf, base[page_of] + 8 + 2 * nth, 2)
    outside = (pointer + 4 > usable) | (pointer < 8 + 2 * count[page_of])
    _first_bad(pages, outside, "a cell pointer past its page or inside its pointer array", page_of)
    return base[page_of] + pointer, base[page_of] + usable, page_of, count


def check_cells(pages: np.ndarray, page_of: np.ndarray, count: np.ndarray, ends: tuple,
                rowid: np.ndarray, bounds: tuple[np.ndarray, np.ndarray]) -> None:  # fmt: skip
    """Damaged unless each cell's payload stays inside its page (`ends`: where its local part
    ends, where its page's content does) and the rowids increase, each page's first and last
    inside its leaf's (low, high] of `bounds` (the first leaf's low included: no lower rowid
    is), so all of them are."""
    _first_bad(pages, ends[0] > ends[1], "a payload past the end of its page", page_of)
    _first_bad(pages, rowid[1:] <= rowid[:-1], "rowids out of order", page_of[1:])
    held = np.flatnonzero(count)
    last = np.cumsum(count)[held] - 1
    low, high = bounds[0][held], bounds[1][held]
    outside = ((rowid[last - count[held] + 1] <= low) & (low != _LOWEST)) | (rowid[last] > high)
    _first_bad(pages[held], outside, "a rowid outside the bounds of its parent's keys")


def local_bytes(payload: np.ndarray, usable: int) -> np.ndarray:
    """The bytes of each payload kept in its cell (SQLite's rule): all of it up to usable - 35
    bytes, else a part and the number of its first overflow page."""
    most, least = usable - 35, (usable - 12) * 32 // 255 - 23
    part = least + (payload - least) % (usable - 4)
    return np.where(payload <= most, payload, np.where(part <= most, part, least))


def _first_bad(pages: np.ndarray, bad: np.ndarray, what: str, page_of: np.ndarray | None = None):
    """Damaged, naming the first page where `bad` holds, if any does (`page_of`: the page
    index of each element of `bad`, else one element a page)."""
    if bad.any():
        i = int(np.argmax(bad))
        raise Damaged(int(pages[i if page_of is None else page_of[i]]), what)


def varints(buf: np.ndarray, at: np.ndarray, values: bool = True) -> tuple[np.ndarray, np.ndarray]:
    """The varints that start at `at`: (values, their lengths in bytes); without `values`, the
    values are not decoded (an empty array). Each is read as the 8 bytes from `at`, a big-endian
    integer: its length is where the first byte without the high bit is (9 where none is), and
    up to 8 bytes its value is their low 7 bits packed, three shifts and masks."""
    x = be(buf, at, 8).view(np.uint64)
    last = ~x & _HIGH_BITS  # the high bit of each byte that ends a varint
    # the most significant of them, byte i, is at bit 63 - 8 i: frexp's exponent is 64 - 8 i
    # (exact: those bits never round up to the next power of two)
    exponent = np.frexp(last.astype(np.float64))[1].astype(np.int64)
    length = np.where(last == 0, 9, (72 - exponent) >> 3)
    if not values:
        return np.zeros(0, np.int64), length
    short = np.minimum(length, 8).astype(np.uint64)
    v = (x >> ((np.uint64(8) - short) << np.uint64(3))) & _LOW_BITS  # its bytes, low 7 bits
    v = (v & np.uint64(0x007F007F007F007F)) | ((v & np.uint64(0x7F007F007F007F00)) >> np.uint64(1))
    v = (v & np.uint64(0x00003FFF00003FFF)) | ((v & np.uint64(0x3FFF00003FFF0000)) >> np.uint64(2))
    v = (v & np.uint64(0x000000000FFFFFFF)) | ((v & np.uint64(0x0FFFFFFF00000000)) >> np.uint64(4))
    nine = np.flatnonzero(length == 9)  # the 9th byte counts all 8 bits
    if len(nine):
        v[nine] = (v[nine] << np.uint64(8)) | buf[at[nine] + 8].astype(np.uint64)
    return v.view(np.int64), length


_HIGH_BITS = np.uint64(0x8080808080808080)
_LOW_BITS = np.uint64(0x7F7F7F7F7F7F7F7F)

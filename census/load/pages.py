"""A table's integer columns read from SQLite's file format with numpy: no text, no row objects.

SQLite's own scan renders what it returns as text (`group_concat`) or as one Python object per
value; both cost more than the scan. Here the table's b-tree is walked once through its interior
pages (about 0.3% of the file) to find the leaf pages of a rowid range and the rowids each can
hold; a batch of leaves is read with `pread` and decoded with whole-array numpy operations
(https://www.sqlite.org/fileformat2.html: cell pointers, varints, record headers of serial types,
big-endian integers of 1-8 bytes and the constants 0 and 1).

Nothing is locked or written. The reader declines (returns None, or raises Unreadable before it
yields) whatever it does not read exactly -- a table without rowids, a payload that spills to
overflow pages, a serial type of more than one byte before a wanted column, a record with fewer
columns than the table, a log beside the file -- and the caller reads with SQL instead. The
file's change counter is checked after every batch: a file changed under census is an error,
never a mixed read.
"""

from __future__ import annotations

import os
import sqlite3
from collections.abc import Iterator
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path

import numpy as np

from census.errors import ColumnError, InputError
from census.load.intervals import INT_NULL

LEAF, INTERIOR = 0x0D, 0x05
# pages decoded at a time: their bytes stay in the CPU's cache (2.3 s against 3.6 s for 10^7
# kernel rows read in one go per batch of 100,000 rows)
CHUNK_BYTES = 512 * 1024
_CHANGE_COUNTER = slice(24, 28)
# bytes each serial type 0..127 takes in a record's body (10 and 11 are reserved)
_SIZES = np.array(
    [0, 1, 2, 3, 4, 6, 8, 8, 0, 0, 0, 0] + [(t - 12 - (t & 1)) // 2 for t in range(12, 128)],
    np.int64,
)


_SIZES8 = _SIZES.astype(np.uint8)
_INTEGER = np.zeros(256, bool)
_INTEGER[[0, 1, 2, 3, 4, 5, 6, 8, 9]] = True  # NULL, the integers, the constants 0 and 1
_SHIFT = np.zeros(256, np.int64)
_SHIFT[1:6] = 8 * (8 - _SIZES[1:6])  # a shift up and back extends an n-byte integer's sign
_CONSTANT_TYPE = ~_INTEGER  # types whose value is not in the body: 0, 8, 9 and non-integers
_CONSTANT_TYPE[[0, 8, 9]] = True
_CONSTANT_TYPE[[1, 2, 3, 4, 5, 6]] = False
_CONSTANT = np.zeros(256, np.int64)
_CONSTANT[[0, 9]] = INT_NULL, 1


class Unreadable(Exception):
    """Internal: this table, or this stretch of it, is not one the page reader reads exactly."""


@dataclass(frozen=True)
class Leaves:
    """The leaf pages of a table in rowid order; leaf i holds rowids in (low[i], high[i]]."""

    page: np.ndarray
    low: np.ndarray
    high: np.ndarray


@dataclass(frozen=True)
class TablePages:
    path: Path
    table: str
    page_size: int
    usable: int
    columns: tuple[str, ...]  # in record order
    rowid_alias: str | None  # an INTEGER PRIMARY KEY column: its value is the rowid
    counter: bytes  # the file change counter when opened
    leaves: Leaves

    @cached_property
    def _positions(self) -> dict[str, int]:
        return {c.lower(): i for i, c in reversed(list(enumerate(self.columns)))}

    def index(self, name: str) -> int | None:
        """The column's position in a record (SQLite's names ignore case), or None."""
        return self._positions.get(name.lower())

    def batches(
        self,
        names: list[str],
        lo: int,
        hi: int,
        batch_rows: int,
        keep: tuple[str, np.ndarray] | None = None,
    ) -> Iterator[tuple[dict[str, np.ndarray], int]]:
        """(the columns `names` of one batch, the last rowid it covers) for rows lo < rowid <= hi,
        NULL as INT_NULL; `keep` = (column, sorted values): only the rows whose column holds one
        of them (a NULL or a value that is not an integer matches none). Raises Unreadable before
        yielding the batch it cannot read; ColumnError for a value that is not an integer."""
        first = int(np.searchsorted(self.leaves.high, lo, "right"))
        last = int(np.searchsorted(self.leaves.low, hi, "left"))
        # the rowids each leaf can hold inside (lo, hi]: batches of about batch_rows rowids
        span = np.minimum(self.leaves.high[first:last], hi) - np.maximum(
            self.leaves.low[first:last], lo
        )
        ends = np.cumsum(span)
        start = first
        with open(self.path, "rb", buffering=0) as fh:
            while start < last:
                done = ends[start - first - 1] if start > first else 0
                stop = first + 1 + int(np.searchsorted(ends, done + batch_rows, "left"))
                stop = min(max(stop, start + 1), last)
                top = min(hi, int(self.leaves.high[stop - 1]))
                yield self._batch(fh, start, stop, names, lo, hi, keep), top
                start = stop

    def _batch(self, fh, start, stop, names, lo, hi, keep) -> dict[str, np.ndarray]:
        """Leaves start..stop, decoded CHUNK_BYTES at a time."""
        parts = []
        chunk = max(1, CHUNK_BYTES // self.page_size)
        for a in range(start, stop, chunk):
            b = min(stop, a + chunk)
            # rowids are decoded only where a leaf may hold rows outside (lo, hi]
            edge = self.leaves.low[a] < lo or self.leaves.high[b - 1] > hi
            bounds = (lo, hi) if edge else None
            parts.append(self._read(fh, self.leaves.page[a:b], names, bounds, keep))
        if len(parts) == 1:
            return parts[0]
        return {name: np.concatenate([p[name] for p in parts]) for name in names}

    def _read(self, fh, pages, names, bounds, keep) -> dict[str, np.ndarray]:
        buf = _read_pages(fh, pages, self.page_size)
        if os.pread(fh.fileno(), 4, _CHANGE_COUNTER.start) != self.counter:
            raise InputError(f"{self.path}: the file changed while census read it")
        cells = _cell_offsets(buf, len(pages), self.page_size, self.usable)
        size, at = varints(buf, cells)
        if len(size) and size.max() > self.usable - 35:
            raise Unreadable("a payload on overflow pages")
        wanted = [*names, *(keep[:1] if keep else ())]
        alias = self.rowid_alias is not None and self.rowid_alias.lower() in map(str.lower, wanted)
        rowid, n = varints(buf, cells + at, values=bounds is not None or alias)
        if bounds is not None:
            inside = (rowid > bounds[0]) & (rowid <= bounds[1])
            rowid, cells, at, n = rowid[inside], cells[inside], at[inside], n[inside]
        upto = max((j for c in wanted if (j := self.index(c)) is not None), default=0)
        records = Records(buf, cells + at + n, rowid, self, upto)
        if keep is not None:
            column, values = keep
            v, ok = records.column(column)
            records = records.where(ok & np.isin(v, values))
        return {name: records.integers(name) for name in names}


def _windows(buf: np.ndarray, width: int, dtype=np.uint8) -> np.ndarray:
    """Row i: the `width` bytes of `buf` from byte i (a view: no copy until indexed)."""
    if dtype is np.uint8:
        return np.lib.stride_tricks.as_strided(buf, (len(buf) - width + 1, width), (1, 1))
    return np.ndarray((len(buf) - 7,), np.dtype(">i8"), buf, 0, (1,))


class Records:
    """The records of one batch: where each starts, its rowid, and where columns 0..upto lie."""

    def __init__(self, buf, at: np.ndarray, rowid: np.ndarray, table: TablePages, upto: int):
        self.buf, self.at, self.rowid, self.table, self.upto = buf, at, rowid, table, upto
        # one byte of header size, and one byte of serial type per column up to upto
        head = _windows(buf, upto + 2)[at]
        if len(at) and (head.max() >= 0x80 or int(head[:, 0].min()) - 1 < upto + 1):
            raise Unreadable("a header or serial type of more than one byte, or few columns")
        self.types = head[:, 1:]
        # where each column ends in its record's body: after the columns before it
        self.ends = np.cumsum(_SIZES8[self.types], axis=1, dtype=np.int32)
        self.body = at + head[:, 0]

    def where(self, mask: np.ndarray) -> Records:
        rowid = self.rowid[mask] if len(self.rowid) else self.rowid  # decoded or not
        return Records(self.buf, self.at[mask], rowid, self.table, self.upto)

    def column(self, name: str) -> tuple[np.ndarray, np.ndarray]:
        """(values, integer or NULL): values INT_NULL where NULL; 0 where not an integer."""
        if name.lower() == (self.table.rowid_alias or "").lower():
            return self.rowid.copy(), np.ones(len(self.rowid), bool)
        j = self.table.index(name)
        if j is None or j > self.upto:
            raise Unreadable(f"no column {name}")
        t = self.types[:, j]
        is_int = _INTEGER[t]
        end = (self.body + self.ends[:, j - 1] if j else self.body) + _SIZES8[t]
        # the 8 bytes that end where the value does, shifted up and back: its sign extended
        raw = _windows(self.buf, 8, np.int64)[end - 8].astype(np.int64)
        shift = _SHIFT[t]
        value = (raw << shift) >> shift
        constant = np.flatnonzero(_CONSTANT_TYPE[t])
        if len(constant):  # NULL, 0, 1, and what is not an integer (0 here)
            value[constant] = _CONSTANT[t[constant]]
        return value, is_int

    def integers(self, name: str) -> np.ndarray:
        value, ok = self.column(name)
        if not ok.all():
            raise ColumnError(f"{self.table.table}.{name} holds values that are not integers")
        return value


def varints(buf: np.ndarray, at: np.ndarray, values: bool = True) -> tuple[np.ndarray, np.ndarray]:
    """The varints that start at `at`: (values, their lengths in bytes); without `values`, the
    values are not decoded (an empty array)."""
    b = _windows(buf, 9)[at]
    stops = b[:, :8] < 0x80
    length = np.where(stops.any(1), stops.argmax(1) + 1, 9)
    if not values:
        return np.zeros(0, np.int64), length
    value = np.zeros(len(at), np.uint64)
    for k in range(9):
        more = k < length
        if not more.any():
            break
        byte = b[:, k].astype(np.uint64)
        step = (
            (value << np.uint64(8)) | byte
            if k == 8
            else (value << np.uint64(7)) | (byte & np.uint64(0x7F))
        )
        value = np.where(more, step, value)
    return value.view(np.int64), length.astype(np.int64)


def _read_pages(fh, pages: np.ndarray, page_size: int) -> np.ndarray:
    """Pages (1-based numbers) one after another, then 16 zero bytes: runs of consecutive
    pages are read with one pread each."""
    out = np.zeros(len(pages) * page_size + 16, np.uint8)
    breaks = np.flatnonzero(np.diff(pages) != 1) + 1
    for a, b in zip(np.r_[0, breaks], np.r_[breaks, len(pages)], strict=True):
        want = (b - a) * page_size
        got = os.pread(fh.fileno(), want, (int(pages[a]) - 1) * page_size)
        if len(got) != want:
            raise Unreadable("a page past the end of the file")
        out[a * page_size : a * page_size + want] = np.frombuffer(got, np.uint8)
    return out


def _be(buf: np.ndarray, at: np.ndarray, width: int) -> np.ndarray:
    value = np.zeros(len(at), np.int64)
    for k in range(width):
        value = (value << 8) | buf[at + k].astype(np.int64)
    return value


def _cell_offsets(buf: np.ndarray, pages: int, page_size: int, usable: int) -> np.ndarray:
    """Where each cell of the leaf pages starts in `buf`, page after page, in key order."""
    base = np.arange(pages, dtype=np.int64) * page_size
    if pages and (buf[base] != LEAF).any():
        raise Unreadable("a leaf page that is not a table leaf")
    count = _be(buf, base + 3, 2)
    page_of = np.repeat(np.arange(pages), count)
    nth = np.arange(len(page_of)) - np.repeat(np.cumsum(count) - count, count)
    pointer = _be(buf, base[page_of] + 8 + 2 * nth, 2)
    if len(pointer) and (pointer.max() >= usable or pointer.min() < 8):
        raise Unreadable("a cell pointer outside its page")
    return base[page_of] + pointer


def database_file(conn: sqlite3.Connection) -> Path | None:
    """The file `conn` reads (its name as the file system has it, whatever its bytes)."""
    factory = conn.text_factory
    conn.text_factory = bytes
    try:
        files = [r[2] for r in conn.execute("PRAGMA database_list") if r[1] == b"main"]
    finally:
        conn.text_factory = factory
    return Path(os.fsdecode(files[0])) if files and files[0] else None


def open_table(conn: sqlite3.Connection, path: Path, table: str) -> TablePages | None:
    """The page reader of `table` in `path`, the file `conn` reads, or None where it does not
    apply."""
    row = conn.execute(
        "SELECT rootpage, sql FROM sqlite_master WHERE type = 'table' AND name = ?", (table,)
    ).fetchone()
    if row is None or "WITHOUT ROWID" in (row[1] or "").upper():
        return None
    for log in ("-wal", "-journal"):
        side = Path(f"{path}{log}")
        if side.exists() and side.stat().st_size > 0:
            return None
    with open(path, "rb") as fh:
        head = fh.read(100)
    page_size = int.from_bytes(head[16:18], "big")
    page_size = 65536 if page_size == 1 else page_size
    info = list(conn.execute(f'PRAGMA table_info("{table}")'))
    keys = [r for r in info if r[5]]
    alias = keys[0][1] if len(keys) == 1 and str(keys[0][2]).upper() == "INTEGER" else None
    try:
        with open(path, "rb", buffering=0) as fh:
            leaves = _walk(fh, int(row[0]), page_size, page_size - head[20])
    except Unreadable:
        return None
    return TablePages(path, table, page_size, page_size - head[20],
                      tuple(r[1] for r in info), alias, head[_CHANGE_COUNTER], leaves)  # fmt: skip


def _walk(fh, root: int, page_size: int, usable: int) -> Leaves:
    """The table's leaves in key order, from its interior pages only: a b-tree's leaves are all
    at one depth, so the walk goes down a level at a time until a level's first page is a leaf
    (every leaf's type is checked when it is read)."""
    pages, low, high = [root], [-(1 << 63)], [(1 << 63) - 1]
    while _read_pages(fh, np.array(pages[:1]), page_size)[0] != LEAF:
        below: tuple[list[int], list[int], list[int]] = ([], [], [])
        for page, lo, hi in zip(pages, low, high, strict=True):
            children, bounds = _interior(_read_pages(fh, np.array([page]), page_size), usable)
            if page == 1:
                raise Unreadable("not a table b-tree page")
            below[0].extend(children)
            below[1].extend([lo, *bounds])
            below[2].extend([*bounds, hi])
        pages, low, high = below
    return Leaves(np.array(pages, np.int64), np.array(low, np.int64), np.array(high, np.int64))


def _interior(buf: np.ndarray, usable: int) -> tuple[list[int], list[int]]:
    """An interior page's children in key order, and the largest key of each but the last."""
    if buf[0] != INTERIOR:
        raise Unreadable("not a table b-tree page")
    count = int(_be(buf, np.array([3]), 2)[0])
    pointer = _be(buf, 12 + 2 * np.arange(count), 2)
    if count and (pointer.max() >= usable or pointer.min() < 12):
        raise Unreadable("a cell pointer outside its page")
    key, _ = varints(buf, pointer + 4)
    right = int(_be(buf, np.array([8]), 4)[0])
    return [*_be(buf, pointer, 4).tolist(), right], key.tolist()

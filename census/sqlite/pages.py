"""A table's integer columns read from SQLite's file format with numpy: no text, no row objects.

SQLite's own scan renders what it returns as text (`group_concat`) or as one Python object per
value; both cost more than the scan. Here the table's b-tree is walked once through its interior
pages (about 0.3% of the file; census/sqlite/btree.py) to find the leaf pages of a rowid range and
the rowids each can hold; a batch of leaves is read with `pread` and decoded with whole-array
numpy operations (https://www.sqlite.org/fileformat2.html: cell pointers, varints, record headers
of serial types, big-endian integers of 1-8 bytes and the constants 0 and 1).

Nothing is locked or written. What the reader does not read exactly raises Unreadable before
the batch it is in is yielded, and the caller reads the rest with SQL: a payload that spills to
overflow pages, a serial type of more than one byte before a wanted column, a record with fewer
columns than wanted or longer than its payload, a value that is not an integer or NULL (SQL
decides what it is), a file that is not the one SQLite opened. The file's change counter is
checked after every batch: a rollback-journal file written while census reads it is an error,
never a mixed read. (A WAL-mode file keeps its counter across commits; one is read from its
pages only with no log beside it, as SQLite reads it then, `immutable`.)
"""

from __future__ import annotations

import os
import sqlite3
from collections.abc import Iterator
from dataclasses import dataclass
from functools import cached_property

import numpy as np

from census.errors import InputError
from census.sources.readonly import opened_file
from census.sqlite.btree import (
    CHANGE_COUNTER,
    Damaged,
    Layout,
    Unreadable,
    be,
    cell_offsets,
    check_cells,
    damaged_error,
    local_bytes,
    open_layout,
    read_pages,
    varints,
)

__all__ = ["Batch", "TablePages", "Unreadable", "check_leaves", "open_table"]

# pages decoded at a time: their bytes stay in the CPU's cache (2.3 s against 3.6 s for 10^7
# kernel rows read in one go per batch of 100,000 rows)
CHUNK_BYTES = 512 * 1024
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
_ONE = 9  # the serial type of the constant 1 (8 is 0, 0 is NULL)


@dataclass(frozen=True)
class Batch:
    """Integer columns of `count` rows; `nulls[name]`: where the column is NULL (its value 0)."""

    values: dict[str, np.ndarray]
    nulls: dict[str, np.ndarray]
    count: int

    @staticmethod
    def joined(parts: list[Batch]) -> Batch:
        """The batches' rows, one after another, as one batch."""
        if len(parts) == 1:
            return parts[0]
        cat = np.concatenate
        names = parts[0].values
        return Batch({n: cat([p.values[n] for p in parts]) for n in names},
                     {n: cat([p.nulls[n] for p in parts]) for n in names},
                     sum(p.count for p in parts))  # fmt: skip


@dataclass(frozen=True)
class TablePages:
    """The page reader of one table: its columns read from its leaves, a rowid range at a
    time."""

    table: str
    layout: Layout

    @cached_property
    def _positions(self) -> dict[str, int]:
        return {c.lower(): i for i, c in reversed(list(enumerate(self.layout.columns)))}

    def index(self, name: str) -> int | None:
        """A column's position in a record (SQLite's names ignore case); None: not a column,
        or one whose stored integers are not what SQL reads (btree._left_to_sql)."""
        if name.lower() in self.layout.unreadable:
            return None
        return self._positions.get(name.lower())

    def batches(
        self,
        names: list[str],
        lo: int,
        hi: int,
        batch_rows: int,
        keep: tuple[str, np.ndarray] | None = None,
    ) -> Iterator[tuple[Batch, int]]:
        """(the columns `names` of one batch, the last rowid it covers) for rows lo < rowid <= hi;
        `keep` = (column, sorted values): only the rows whose column holds one of them. Raises
        Unreadable before yielding a batch it cannot read exactly."""
        leaves = self.layout.leaves
        first = int(np.searchsorted(leaves.high, lo, "right"))
        last = int(np.searchsorted(leaves.low, hi, "left"))
        # about batch_rows rowids a batch, from the rowids each leaf can hold in (lo, hi]
        span = np.minimum(leaves.high[first:last], hi).astype(float) - np.maximum(
            leaves.low[first:last], lo
        ).astype(float)
        ends = np.cumsum(span)
        start = first
        with open(self.layout.path, "rb", buffering=0) as fh:
            st = os.fstat(fh.fileno())
            if (st.st_dev, st.st_ino) != self.layout.identity:
                raise Unreadable("not the file SQLite opened")
            while start < last:
                done = ends[start - first - 1] if start > first else 0.0
                stop = first + 1 + int(np.searchsorted(ends, done + batch_rows, "left"))
                stop = min(max(stop, start + 1), last)
                top = min(hi, int(leaves.high[stop - 1]))
                yield self._batch(fh, start, stop, names, lo, hi, keep), top
                start = stop

    def _batch(self, fh, start, stop, names, lo, hi, keep) -> Batch:
        """Leaves start..stop, decoded CHUNK_BYTES at a time."""
        leaves, parts = self.layout.leaves, []
        chunk = max(1, CHUNK_BYTES // self.layout.page_size)
        for a in range(start, stop, chunk):
            b = min(stop, a + chunk)
            # rows outside (lo, hi] are left out only where a leaf may hold them
            edge = a == 0 or leaves.low[a] < lo or leaves.high[b - 1] > hi
            parts.append(self._read(fh, a, b, names, (lo, hi) if edge else None, keep))
        return Batch.joined(parts)

    def _cells(self, fh, a: int, b: int) -> Cells:
        """The cells of leaves a..b, checked as SQLite checks them (btree.check_cells): Damaged
        where it rejects a page."""
        size, usable, leaves = self.layout.page_size, self.layout.usable, self.layout.leaves
        pages = leaves.page[a:b]
        buf = read_pages(fh, pages, size)
        if os.pread(fh.fileno(), 4, CHANGE_COUNTER) != self.layout.counter:
            raise InputError(f"{self.layout.path}: the file changed while census read it")
        lone = len(leaves.page) == 1
        cells, page_end, page_of, count = cell_offsets(buf, pages, size, usable, lone)
        payload, at = varints(buf, cells)
        rowid, n = varints(buf, cells + at)
        record = cells + at + n
        spilled = np.zeros(len(payload), bool)
        if len(payload) and (payload.max() > usable - 35 or payload.min() < 0):
            local = local_bytes(payload, usable)
            spilled = payload > local
            end = np.where(payload < 0, page_end + 1, record + local + 4 * spilled)
        else:  # (the common case: every payload in its cell)
            end = record + payload
        check_cells(pages, page_of, count, (end, page_end), rowid,
                    (leaves.low[a:b], leaves.high[a:b]))  # fmt: skip
        return Cells(buf, pages, page_of, record, payload, page_end, rowid, spilled)

    def _read(self, fh, a, b, names, bounds, keep) -> Batch:
        try:
            cells = self._cells(fh, a, b)
        except Damaged as exc:
            raise damaged_error(self.layout.path, self.table, exc) from None
        if cells.spilled.any():
            raise Unreadable("a payload on overflow pages")
        at, payload, page_end = cells.at, cells.payload, cells.page_end
        if bounds is not None:
            inside = (cells.rowid > bounds[0]) & (cells.rowid <= bounds[1])
            at, payload, page_end = (x[inside] for x in (at, payload, page_end))
        wanted = [*names, *(keep[:1] if keep else ())]
        upto = max(j for c in wanted if (j := self.index(c)) is not None) if wanted else -1
        records = Records(cells.buf, at, payload, page_end, upto)
        if keep is not None:
            value, null = records.column(self.index(keep[0]))
            records = records.where(~null & np.isin(value, keep[1]))
        got = {name: records.column(self.index(name)) for name in names}
        return Batch({k: v for k, (v, _) in got.items()}, {k: m for k, (_, m) in got.items()},
                     len(records.at))  # fmt: skip

    def check(self, lo: int, hi: int) -> None:
        """InputError, naming the page, unless the leaves that hold rows lo < rowid <= hi are
        ones SQLite reads (their overflow chains included): a rowid range read with SQL is then
        SQLite's scan of those rows."""
        leaves = self.layout.leaves
        first = int(np.searchsorted(leaves.high, lo, "right"))
        last = int(np.searchsorted(leaves.low, hi, "left"))
        chunk = max(1, CHUNK_BYTES // self.layout.page_size)
        with open(self.layout.path, "rb", buffering=0) as fh:
            try:
                for a in range(first, last, chunk):
                    cells = self._cells(fh, a, min(last, a + chunk))
                    for i in np.flatnonzero(cells.spilled):
                        self._chain(fh, cells, int(i))
            except Damaged as exc:
                raise damaged_error(self.layout.path, self.table, exc) from None

    def _chain(self, fh, cells: Cells, i: int) -> None:
        """Damaged unless cell i's overflow pages lie inside the file, each once, as many as
        its payload needs."""
        usable, size = self.layout.usable, self.layout.page_size
        payload = int(cells.payload[i])
        local = int(local_bytes(cells.payload[i : i + 1], usable)[0])
        page = int(be(cells.buf, cells.at[i : i + 1] + local, 4)[0])
        seen: set[int] = set()
        for _ in range(-(-(payload - local) // (usable - 4))):
            if page < 2 or page > self.layout.pages or page in seen:
                raise Damaged(int(cells.pages[cells.page_of[i]]), f"overflow page {page}")
            seen.add(page)
            page = int.from_bytes(os.pread(fh.fileno(), 4, (page - 1) * size), "big")


@dataclass(frozen=True)
class Cells:
    """The cells of a run of leaves, checked: where each record starts (`at`), its payload's
    size, where its page's content ends, its rowid, whether it spills to overflow pages."""

    buf: np.ndarray
    pages: np.ndarray
    page_of: np.ndarray
    at: np.ndarray
    payload: np.ndarray
    page_end: np.ndarray
    rowid: np.ndarray
    spilled: np.ndarray


def check_leaves(conn: sqlite3.Connection, table: str, lo: int, hi: int) -> None:
    """InputError, naming the table and page, where the leaves of rows lo < rowid <= hi of
    `table` are ones SQLite rejects; nothing where the page reader cannot read its pages (a
    table without rowids, a log beside the file, a last page cut short: SQLite alone reads
    them)."""
    try:
        open_table(conn, table).check(lo, hi)
    except Unreadable:  # (a last page cut short: SQLite reads it, zeros after the cut)
        return


class Records:
    """The records of one batch: where each starts, and where its columns 0..upto lie."""

    def __init__(self, buf, at: np.ndarray, payload: np.ndarray, page_end: np.ndarray, upto: int):
        self.buf, self.at, self.upto = buf, at, upto
        if upto < 0:  # no column wanted: the records are only counted
            return
        # one byte of header size, and one byte of serial type per column up to upto
        if len(at) and (at + upto + 2 > page_end).any():  # (rows older than ADD COLUMN)
            raise Unreadable("a record header that would run past its page")
        # row by row: the header size, then column j's type in row j + 1 (contiguous)
        head = np.empty((upto + 2, len(at)), np.uint8)
        for k in range(upto + 2):
            np.take(buf, at + k, out=head[k])
        if len(at) and (head.max() >= 0x80 or int(head[0].min()) < upto + 2):
            raise Unreadable("a header or serial type of more than one byte, or few columns")
        self.types = head[1:]
        # where each column ends in its record's body: after the columns before it
        sizes = _SIZES8[self.types]
        self.ends = np.empty(sizes.shape, np.int16)  # (numpy's cumsum along axis 0 is slower)
        self.ends[0] = sizes[0]
        for k in range(1, len(sizes)):
            np.add(self.ends[k - 1], sizes[k], out=self.ends[k])
        self.body = at + head[0]
        fits = (self.body + self.ends[-1] <= at + payload) & (at + payload <= page_end)
        if not fits.all():
            raise Unreadable("a record longer than its payload, or a payload past its page")

    def where(self, mask: np.ndarray) -> Records:
        """The records of `mask`, their layout sliced, not parsed again."""
        out = object.__new__(Records)
        out.buf, out.upto = self.buf, self.upto
        rows = np.flatnonzero(mask)  # (take is faster than a mask along an axis)
        out.at, out.body = self.at.take(rows), self.body.take(rows)
        out.types, out.ends = self.types.take(rows, axis=1), self.ends.take(rows, axis=1)
        return out

    def column(self, j: int | None) -> tuple[np.ndarray, np.ndarray]:
        """(values, NULL mask) of column j: integers, or Unreadable (SQL decides what a text,
        a blob or a real is)."""
        if j is None or j > self.upto:
            raise Unreadable("a column the page reader does not read")
        t = self.types[j]
        end = self.body + self.ends[j]
        # the 8 bytes that end where the value does, shifted up and back: its sign extended
        lo, hi = (int(t.min()), int(t.max())) if len(t) else (1, 1)
        if lo == hi and 1 <= lo <= 6:  # one integer width (the common case)
            shift = int(_SHIFT[lo])
            return (be(self.buf, end - 8, 8, signed=True) << shift) >> shift, np.zeros(len(t), bool)
        if not _INTEGER[t].all():
            raise Unreadable("a value that is not an integer or NULL")
        shift = _SHIFT[t]
        value = (be(self.buf, end - 8, 8, signed=True) << shift) >> shift
        constant = _SIZES8[t] == 0  # NULL, 0 and 1: nothing in the body
        if constant.any():
            value[constant] = t[constant] == _ONE
        return value, t == 0


def open_table(conn: sqlite3.Connection, table: str) -> TablePages:
    """The page reader of `table` in the file `conn` reads; Unreadable, saying why, where it
    does not apply."""
    path = opened_file(conn)
    if path is None:
        raise Unreadable("a connection census did not open")
    return TablePages(table, open_layout(conn, path, table))

"""A table's integer columns over a rowid range, in batches: read from the file's pages where the
page reader reads them exactly (census/sqlite/pages.py, plan.py), else with SQL, and each table
read with SQL noted with why (census.sqlite.notes).

With SQL, SQLite renders each batch of each column as one comma-separated string
(`group_concat`), which numpy parses in C: no Python object is made per row. Either way NULL
arrives as INT_NULL, and a value that is not an integer (a mutated or foreign file) is an error,
never a silent zero.

A table WITHOUT ROWID has no rowids: its rows are numbered 1, 2, ... in its primary key's order
(its b-tree's, each column's direction and collation), the order a plain scan of it gives (the
tests' oracle's), and read with SQL by those numbers (LIMIT and OFFSET; the page reader reads
rowid tables only).
"""

from __future__ import annotations

import itertools
import sqlite3
from collections.abc import Iterator, Mapping
from dataclasses import dataclass

import numpy as np

from census.errors import ColumnError, InputError
from census.sources.readonly import opened_file
from census.sqlite import notes
from census.sqlite.btree import without_rowid
from census.sqlite.pages import Unreadable, check_leaves
from census.sqlite.plan import ASKED, INT_NULL, page_plan

BATCH_ROWS = 100_000  # per column: ~1 MiB of text, 0.8 MiB parsed
_NULL_SQL = f"({INT_NULL + 1} - 1)"  # the literal -2^63 would parse as a real


@dataclass(frozen=True)
class RowidRange:
    """Rows lo < rowid <= hi of a table (lo is exclusive, so ranges chain); of a table without
    rowids, its rows lo < n <= hi in primary-key order."""

    lo: int
    hi: int

    @property
    def rows(self) -> int:
        """How many rowids (or numbered rows) the range spans."""
        return self.hi - self.lo


def rowid_range(conn: sqlite3.Connection, table: str) -> RowidRange | None:
    """The range of all of `table`'s rows; None for an empty table."""
    if key_order(conn, table) is not None:
        count = conn.execute(f'SELECT COUNT(*) FROM "{table}"').fetchone()[0]
        return RowidRange(0, count) if count else None
    # One aggregate per query: SQLite answers a lone MIN or MAX of rowid from the b-tree edge.
    lo = conn.execute(f'SELECT MIN(rowid) FROM "{table}"').fetchone()[0]
    if lo is None:
        return None
    hi = conn.execute(f'SELECT MAX(rowid) FROM "{table}"').fetchone()[0]
    if hi < lo:  # the b-tree's two edges disagree: rows out of order (SQLite's check says so)
        raise InputError(f"{opened_file(conn) or table}: damaged SQLite file: {table}: its first "
                         f"rowid, {lo}, is above its last, {hi} (PRAGMA integrity_check rejects "
                         "it); export it again")  # fmt: skip
    return RowidRange(lo - 1, hi)


def key_order(conn: sqlite3.Connection, table: str) -> str | None:
    """The ORDER BY of a table without rowids: its primary key as its b-tree holds it; None for
    a table with rowids."""
    if not without_rowid(conn, table):
        return None
    (index,) = [r[1] for r in conn.execute(f'PRAGMA index_list("{table}")') if r[3] == "pk"]
    return ", ".join(f'"{name}" COLLATE "{coll}"{" DESC" if desc else ""}'
                     for _, _, name, desc, coll, key in conn.execute(f'PRAGMA index_xinfo("{index}")')
                     if key)  # fmt: skip


def rows_in(conn: sqlite3.Connection, table: str, rows: RowidRange, where: str = "",
            order: str | None = None) -> tuple[str, tuple]:  # fmt: skip
    """(SQL after FROM, its arguments) for the rows of `rows` that match `where`, scanned in
    order; `order`: the table's key_order, if known."""
    order = order or key_order(conn, table)
    cond = f" AND ({where})" if where else ""
    if order is None:
        return f'"{table}" WHERE rowid > ? AND rowid <= ?{cond}', (rows.lo, rows.hi)
    numbered = f'(SELECT * FROM "{table}" ORDER BY {order} LIMIT ? OFFSET ?)'
    return f"{numbered} WHERE 1{cond}", (rows.hi - rows.lo, rows.lo)


def first_value(conn: sqlite3.Connection, table: str, expr: str, rows: RowidRange,
                where: str) -> object:  # fmt: skip
    """`expr` of the first row (in order) of `rows` that matches `where`; None without one."""
    source, args = rows_in(conn, table, rows, where)
    by_rowid = " ORDER BY rowid" if key_order(conn, table) is None else ""
    row = conn.execute(f"SELECT {expr} FROM {source}{by_rowid} LIMIT 1", args).fetchone()
    return None if row is None else row[0]


def split(whole: RowidRange, parts: int) -> list[RowidRange]:
    """`parts` consecutive rowid ranges covering `whole`."""
    size = -(-whole.rows // max(1, parts))
    cuts = [whole.lo + i * size for i in range(parts)] + [whole.hi]
    return [RowidRange(a, min(b, whole.hi)) for a, b in itertools.pairwise(cuts) if a < b]


# Intervals are read as start and duration: shorter numbers render and parse faster than ends.
TIMED = {"start": "start", "dur": '"end" - start'}


def read_batches(
    conn: sqlite3.Connection,
    table: str,
    columns: Mapping[str, str],
    rows: RowidRange,
    where: str = "",
    batch_rows: int = BATCH_ROWS,
) -> Iterator[tuple[dict[str, np.ndarray], int]]:
    """(columns of one batch, last rowid covered) for the rows of `rows` that match `where`,
    in windows of about `batch_rows` rowids. `columns` maps a name to the SQL expression for it.
    Read from the file's pages (census/sqlite/pages.py) where the expressions are ones
    census/sqlite/plan.py evaluates and the table is one the page reader reads exactly, else with
    SQL (from the batch the pages could not read on, noted with why: census.sqlite.notes; its
    leaves checked first, pages.check_leaves); the two give the same batches' rows
    (tests/test_pages.py). A page SQLite rejects is an InputError naming it, either way."""
    try:
        for batch, top in page_plan(conn, table, columns, where).batches(rows, batch_rows):
            yield batch, top
            rows = RowidRange(top, rows.hi)
        return
    except Unreadable as exc:  # the rest with SQL, from the last batch the pages gave
        if str(exc) != ASKED:
            notes.read_with_sql(table, str(exc))
    check_leaves(conn, table, rows.lo, rows.hi)  # a range read with SQL needs a sound tree
    yield from _sql_batches(conn, table, columns, rows, where, batch_rows)


def _sql_batches(
    conn: sqlite3.Connection,
    table: str,
    columns: Mapping[str, str],
    rows: RowidRange,
    where: str,
    batch_rows: int,
) -> Iterator[tuple[dict[str, np.ndarray], int]]:
    """read_batches with SQLite rendering each batch of each column as one comma-separated
    string (`group_concat`) that numpy parses."""
    select = ", ".join(f"group_concat(COALESCE({e}, {_NULL_SQL}))" for e in columns.values())
    # A column used only inside arithmetic (TIMED's end) would turn text into 0: count it.
    hidden = ['"end"'] if columns.get("dur") == TIMED["dur"] else []
    checks = "".join(f", SUM(typeof({c}) NOT IN ('integer', 'null'))" for c in hidden)
    order = key_order(conn, table)  # no rowids: numbered rows, with no gaps to skip either
    skip = f'SELECT MIN(rowid) FROM "{table}" WHERE rowid > ? AND rowid <= ?'
    if order is not None:  # numbered 1..N: none past N
        count = conn.execute(f'SELECT COUNT(*) FROM "{table}"').fetchone()[0]
        rows = RowidRange(rows.lo, min(rows.hi, max(rows.lo, count)))
    last = rows.lo
    while last < rows.hi:
        top = min(rows.hi, last + batch_rows)
        source, args = rows_in(conn, table, RowidRange(last, top), where, order)
        sql = f"SELECT COUNT(*){checks}, {select} FROM {source}"
        count, *rest = _fetch_bytes(conn, sql, args)
        bad, texts = rest[: len(hidden)], rest[len(hidden) :]
        if any(bad):
            raise ColumnError(f"{table}.end holds values that are not integers")
        if count:
            yield (
                {
                    name: parse_integers(text, count, table, columns[name].replace('"', ""))
                    for name, text in zip(columns, texts, strict=True)
                },
                top,
            )
        elif order is None:  # maybe a gap in the rowids: go on from the next row there is
            following = conn.execute(skip, (top, rows.hi)).fetchone()[0]
            top = rows.hi if following is None else max(top, following - 1)
        last = top


def _fetch_bytes(conn: sqlite3.Connection, sql: str, args: tuple) -> tuple:
    """One row, text as bytes: numpy parses bytes, and decoding them first only costs time."""
    factory = conn.text_factory
    conn.text_factory = bytes
    try:
        return conn.execute(sql, args).fetchone()
    finally:
        conn.text_factory = factory


def parse_integers(text: bytes, count: int, table: str, name: str) -> np.ndarray:
    """`count` integers from `text`, SQLite's comma-separated column; ColumnError otherwise."""
    try:
        values = np.fromstring(text, dtype=np.int64, sep=",")
    except ValueError:
        values = None
    if values is None or len(values) != count:
        raise ColumnError(f"{table}.{name} holds values that are not integers")
    return values

"""The SQL expressions census reads columns with, evaluated with numpy on the page reader's raw
columns: a column, `"end" - start`, `column >> N`, NULL, an integer, and the conditions
`nameId IN (...)` and `0`. Anything else is read with SQL (page_plan raises Unreadable, saying
why), as is every read when $CENSUS_READER is `sql`.

SQLite's integer arithmetic is reproduced exactly: NULL in, NULL out (NULL is a mask, so a
stored -2^63 stays a number); a difference that would overflow int64 (SQLite makes it a real
number) is left to SQL, which says so.
"""

from __future__ import annotations

import os
import re
import sqlite3
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass

import numpy as np

from census.sources.readonly import opened_file
from census.sqlite.pages import Batch, TablePages, Unreadable, open_table

INT_NULL = np.iinfo(np.int64).min  # what a NULL reads as, on either path
_NAME = r'"?([A-Za-z_][A-Za-z0-9_]*)"?'
Eval = Callable[[Batch], np.ndarray]
# the tables of the file read last (forked workers inherit what the parent opened); a process
# that reads many exports (a Dask worker, a rank folder in one process) keeps one file's leaves
_opened: dict[tuple, TablePages | str] = {}  # a table's pages, or why they are not read
_INT64 = range(-(1 << 63), 1 << 63)


@dataclass(frozen=True)
class PagePlan:
    """How a read_batches call is read from the pages: the raw columns, each output column's
    evaluation on them, and the condition's rows."""

    table: TablePages
    raw: tuple[str, ...]  # the table's columns to read
    evals: dict[str, Eval]  # output name -> its value from the raw columns
    keep: tuple[str, np.ndarray] | None
    none: bool  # the condition matches no row

    def batches(self, rows, batch_rows: int) -> Iterator[tuple[dict[str, np.ndarray], int]]:
        """(the output columns of one batch, the last rowid it covers) for `rows`, batches of no
        rows left out."""
        if self.none:
            return
        for batch, top in self.table.batches(list(self.raw), rows.lo, rows.hi, batch_rows,
                                             self.keep):  # fmt: skip
            if batch.count:
                yield {name: f(batch) for name, f in self.evals.items()}, top


ASKED = "$CENSUS_READER is sql"  # why every table is read with SQL when the user asks


def page_plan(
    conn: sqlite3.Connection, table: str, columns: Mapping[str, str], where: str
) -> PagePlan:
    """How to read `columns` of the rows matching `where` from the pages; Unreadable, saying
    why, where they are read with SQL."""
    if os.environ.get("CENSUS_READER", "").lower() == "sql":
        raise Unreadable(ASKED)
    raw: list[str] = []
    evals = {}
    for name, sql in columns.items():
        ev = _expression(sql.strip(), raw)
        if ev is None:
            raise Unreadable(f"an expression the page reader does not evaluate ({sql.strip()})")
        evals[name] = ev
    cond = where.strip()
    keep, none = None, cond == "0"
    if cond and not none:
        m = re.fullmatch(_NAME + r"\s+IN\s+\(([-0-9,\s]+)\)", cond, re.IGNORECASE)
        if m is None or not all(int(v) in _INT64 for v in m[2].split(",")):
            raise Unreadable(f"a condition the page reader does not evaluate ({cond})")
        keep = (m[1], np.array(sorted({int(v) for v in m[2].split(",")}), np.int64))
    pages = _open(conn, table)
    for column in sorted({*raw, *(keep[:1] if keep else ())}):
        if pages.index(column) is None:
            stored = column.lower() in pages.layout.unreadable  # read otherwise than stored
            why = "an INTEGER PRIMARY KEY or REAL column" if stored else "not one of its columns"
            raise Unreadable(f"column {column}: {why}")
    return PagePlan(pages, tuple(dict.fromkeys(raw)), evals, keep, none)


def _open(conn: sqlite3.Connection, table: str) -> TablePages:
    path = opened_file(conn)
    try:
        st = os.stat(path) if path else None
    except OSError as exc:
        raise Unreadable(f"the file could not be read ({exc.strerror or exc})") from None
    if st is None:
        raise Unreadable("a connection census did not open")
    key = (path, st.st_size, st.st_mtime_ns, st.st_ino, table)
    if key not in _opened:
        for other in [k for k in _opened if k[:4] != key[:4]]:
            del _opened[other]
        try:
            _opened[key] = open_table(conn, table)
        except Unreadable as exc:
            _opened[key] = str(exc)
    opened = _opened[key]
    if isinstance(opened, str):
        raise Unreadable(opened)
    return opened


def _expression(sql: str, raw: list[str]) -> Eval | None:
    """SQLite's value of `sql` on a batch, NULL as INT_NULL; None: not one this module knows."""
    if re.fullmatch(r"NULL", sql, re.IGNORECASE):
        return lambda b: np.full(b.count, INT_NULL, np.int64)
    if re.fullmatch(r"-?[0-9]+", sql) and int(sql) in _INT64:
        value = int(sql)
        return lambda b: np.full(b.count, value, np.int64)
    if m := re.fullmatch(_NAME, sql):
        raw.append(m[1])
        return lambda b: _nulled(b.values[m[1]], b.nulls[m[1]])
    if m := re.fullmatch(_NAME + r"\s*>>\s*([0-9]+)", sql):
        raw.append(m[1])
        col, bits = m[1], min(int(m[2]), 63)  # past 63 bits SQLite gives 0 or -1, as 63 does
        return lambda b: _nulled(b.values[col] >> bits, b.nulls[col])
    if m := re.fullmatch(_NAME + r"\s*-\s*" + _NAME, sql):
        raw += [m[1], m[2]]
        return lambda b: _difference(b, m[1], m[2])
    return None


def _nulled(values: np.ndarray, null: np.ndarray) -> np.ndarray:
    return np.where(null, INT_NULL, values) if null.any() else values


def _difference(batch: Batch, a_name: str, b_name: str) -> np.ndarray:
    """a - b; where it overflows int64 SQLite makes a real number: SQL reads the batch."""
    a, b = batch.values[a_name], batch.values[b_name]
    null = batch.nulls[a_name] | batch.nulls[b_name]
    with np.errstate(over="ignore"):
        d = a - b
    if ((((a ^ b) & (a ^ d)) < 0) & ~null).any():
        raise Unreadable("a difference beyond int64")
    return _nulled(d, null)

"""The SQL expressions census reads columns with, evaluated with numpy on the page reader's raw
columns: a column, `"end" - start`, `column >> N`, NULL, an integer, and the conditions
`nameId IN (...)` and `0`. Anything else is read with SQL (page_plan returns None), as is every
read when $CENSUS_READER is `sql`.

SQLite's integer arithmetic is reproduced exactly: NULL in, NULL out; a difference that would
overflow int64 (SQLite makes it a real number) is a value that is not an integer.
"""

from __future__ import annotations

import os
import re
import sqlite3
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass

import numpy as np

from census.errors import ColumnError
from census.load.intervals import INT_NULL
from census.load.pages import TablePages, database_file, open_table

_NAME = r'"?([A-Za-z_][A-Za-z0-9_]*)"?'
Eval = Callable[[dict[str, np.ndarray]], np.ndarray]
_opened: dict[tuple, TablePages | None] = {}  # forked workers inherit what the parent opened


@dataclass(frozen=True)
class PagePlan:
    table: TablePages
    raw: tuple[str, ...]  # the table's columns to read
    evals: dict[str, Eval]  # output name -> its value from the raw columns
    keep: tuple[str, np.ndarray] | None
    none: bool  # the condition matches no row

    def batches(self, rows, batch_rows: int) -> Iterator[tuple[dict[str, np.ndarray], int]]:
        if self.none:
            return
        for raw, top in self.table.batches(list(self.raw), rows.lo, rows.hi, batch_rows,
                                           self.keep):  # fmt: skip
            count = len(next(iter(raw.values()))) if raw else 0
            if count:
                yield {name: f(raw) for name, f in self.evals.items()}, top


def page_plan(
    conn: sqlite3.Connection, table: str, columns: Mapping[str, str], where: str
) -> PagePlan | None:
    """How to read `columns` of the rows matching `where` from the pages, or None: with SQL."""
    if os.environ.get("CENSUS_READER", "").lower() == "sql":
        return None
    raw: list[str] = []
    evals = {}
    for name, sql in columns.items():
        ev = _expression(sql.strip(), raw, f"{table}.{sql.replace(chr(34), '')}")
        if ev is None:
            return None
        evals[name] = ev
    cond = where.strip()
    keep, none = None, cond == "0"
    if cond and not none:
        m = re.fullmatch(_NAME + r"\s+IN\s+\(([-0-9,\s]+)\)", cond, re.IGNORECASE)
        if m is None:
            return None
        keep = (m[1], np.unique(np.array([int(v) for v in m[2].split(",")], np.int64)))
    pages = _open(conn, table)
    if pages is None or any(pages.index(c) is None for c in {*raw, *(keep[:1] if keep else ())}):
        return None
    if not raw:
        raw.append(pages.columns[0])  # the rows' count needs one column
    return PagePlan(pages, tuple(dict.fromkeys(raw)), evals, keep, none)


def _open(conn: sqlite3.Connection, table: str) -> TablePages | None:
    path = database_file(conn)
    try:
        st = os.stat(path) if path else None
    except OSError:
        return None
    if st is None:
        return None
    key = (path, st.st_size, st.st_mtime_ns, st.st_ino, table)
    if key not in _opened:
        _opened[key] = open_table(conn, path, table)
    return _opened[key]


def _expression(sql: str, raw: list[str], label: str) -> Eval | None:
    if re.fullmatch(r"NULL", sql, re.IGNORECASE):
        return lambda b: np.full(_rows(b), INT_NULL, np.int64)
    if re.fullmatch(r"-?[0-9]+", sql):
        value = int(sql)
        return lambda b: np.full(_rows(b), value, np.int64)
    if m := re.fullmatch(_NAME, sql):
        raw.append(m[1])
        return lambda b: b[m[1]]
    if m := re.fullmatch(_NAME + r"\s*>>\s*([0-9]+)", sql):
        raw.append(m[1])
        col, bits = m[1], min(int(m[2]), 63)
        return lambda b: np.where(b[col] == INT_NULL, INT_NULL, b[col] >> bits)
    if m := re.fullmatch(_NAME + r"\s*-\s*" + _NAME, sql):
        raw += [m[1], m[2]]
        return lambda b: _difference(b[m[1]], b[m[2]], label)
    return None


def _rows(batch: dict[str, np.ndarray]) -> int:
    return len(next(iter(batch.values())))


def _difference(a: np.ndarray, b: np.ndarray, label: str) -> np.ndarray:
    null = (a == INT_NULL) | (b == INT_NULL)
    with np.errstate(over="ignore"):
        d = a - b
    overflow = ((a ^ b) & (a ^ d)) < 0
    if (overflow & ~null).any():
        raise ColumnError(f"{label} holds values that are not integers")
    return np.where(null, INT_NULL, d)

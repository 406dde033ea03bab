"""SQLite's file format read for integer columns: the package's one door.

`read_batches(conn, table, columns, rows)` yields a table's integer columns over a rowid range
(`RowidRange`, from `rowid_range` and `split`), a batch at a time, as int64 arrays with NULL as
`INT_NULL`. It reads the file's b-tree pages with numpy where that is exact (btree.py: the file
format; pages.py: leaves and records; plan.py: the SQL expressions evaluated on them), and falls
back to SQL where it is not (columns.py), noting the table and why (`notes`: taken by the caller
and said once). `first_value` reads one value of a range's first matching row, with SQL;
`without_rowid` says whether a table has no rowids (its rows in its primary key's order).

Nothing outside this package imports its modules but this one and `census.sqlite.notes`
(tests/test_layout.py); it imports no stage after census.sources.
"""

from census.sqlite.btree import without_rowid
from census.sqlite.columns import (
    BATCH_ROWS,
    TIMED,
    RowidRange,
    first_value,
    read_batches,
    rowid_range,
    split,
)
from census.sqlite.plan import INT_NULL

__all__ = [
    "BATCH_ROWS",
    "INT_NULL",
    "TIMED",
    "RowidRange",
    "first_value",
    "read_batches",
    "rowid_range",
    "split",
    "without_rowid",
]

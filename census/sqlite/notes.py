"""What reading an export learns on the way, for census to say once: the tables read with SQL
instead of from the file's pages (census.sqlite.read_batches), each with why
(docs/performance.md).

Kept per process: load_profile takes them when it is done (census.load.profile); a forked
worker's come back with each job's result (census.load.pool), a process beside's with its value
(census.load.idle_pass).
"""

from __future__ import annotations

from collections.abc import Mapping

_read_with_sql: dict[str, str] = {}  # table -> why its rows were read with SQL (the first why)


def read_with_sql(table: str, why: str) -> None:
    """Note that `table` was read with SQL because of `why` (its first why is kept)."""
    _read_with_sql.setdefault(table, why)


def taken() -> dict[str, str]:
    """The notes made in this process since they were last taken, now forgotten here."""
    notes = dict(_read_with_sql)
    _read_with_sql.clear()
    return notes


def add(notes: Mapping[str, str]) -> None:
    """Notes another process took (a worker's, a process beside's), as if made here."""
    for table, why in notes.items():
        read_with_sql(table, why)

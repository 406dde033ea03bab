"""The launch API calls per step: count, time and graph launches per (step or NO_STEP, launch
API), as exact dense columns (census.load.figures.Sums), one row per (step + 1, API): a few
MiB where a dict entry per cell took 115 MiB at 10^7 kernels (400,000 cells with phases)."""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field

import numpy as np

from census.load.figures import LAUNCH_SUMS, Columns, Sums, fit_rows, named
from census.load.intervals import INT_NULL
from census.paths import write_arrays

COLUMNS = 3  # count, time_ns, graph launches


@dataclass
class LaunchTotals:
    """Sums row (step + 1) * len(apis) + a: the calls of API apis[a] that started in `step`
    (NO_STEP: in none); `of_code[c]`: the API of launch name code c (ApiNames.launch_code)."""

    apis: tuple[str, ...] = ()  # by name
    of_code: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))
    sums: Sums = field(default_factory=lambda: Sums(0, COLUMNS))
    rows: np.ndarray | None = None  # sparse(): the rows `sums` holds (None: every row)
    size: int = 0  # the rows of the dense totals

    @classmethod
    def of(cls, launch_api: tuple[str, ...], keys: int) -> LaunchTotals:
        """Empty totals for steps 0..keys-1; launch_api: the API of each launch name code."""
        apis = tuple(sorted(set(launch_api)))
        of_code = np.array([apis.index(a) for a in launch_api], np.int64)
        size = (keys + 1) * len(apis)
        return cls(apis, of_code, Sums(size, COLUMNS), size=size)

    def sparse(self) -> LaunchTotals:
        """The rows with calls only: what a worker's part sends back (a rowid range's calls
        touch a few of the steps)."""
        rows = np.flatnonzero(self.sums.values[:, 0])
        sums = Sums(0, COLUMNS)
        sums.values, sums.bound = self.sums.values[rows], self.sums.bound
        return LaunchTotals(self.apis, self.of_code, sums, rows, self.size)

    def add(self, step: np.ndarray, code: np.ndarray, dur: np.ndarray, graph: np.ndarray) -> None:
        """One call per element, in `step` (or NO_STEP), of launch name `code`; dur INT_NULL
        counts no time; `graph`: 1 for a graph launch."""
        if not len(code) or not self.apis:
            return
        row = (step + 1) * len(self.apis) + self.of_code[code]
        time_ns = np.where(dur == INT_NULL, 0, dur)
        self.sums.add_at(row, np.stack([np.ones(len(code), np.int64), time_ns, graph], axis=1))

    def merge(self, other: LaunchTotals) -> None:
        """Add another range's totals (a worker's sparse rows, or dense ones)."""
        if not other.apis:
            return
        if not self.apis:
            self.apis, self.of_code, self.size = other.apis, other.of_code, other.size
            self.sums = Sums(other.size, COLUMNS)
        if other.rows is None:
            self.sums.merge(other.sums)
        else:  # distinct rows
            self.sums.add_keys(other.rows, other.sums.values)

    def finish(self, keys: int) -> Columns:
        """LAUNCH_SUMS per key 0..keys-1: the count, time_ns and graph launches of its calls."""
        return named(LAUNCH_SUMS, self._table(keys)[1:].sum(axis=1))

    def total(self) -> dict[str, int]:
        """The whole capture's LAUNCH_SUMS: every key's calls and those in none."""
        return dict(zip(LAUNCH_SUMS, self.sums.values.sum(axis=0).tolist(), strict=True))

    def by_api(self, keys: int) -> dict[str, list[int]]:
        """Per API that has calls, [count, time_ns, count in keys 0..keys-1, time_ns in them]."""
        table = self._table(keys)[:, :, :2]
        calls = np.concatenate([table.sum(axis=0), table[1:].sum(axis=0)], 1).tolist()
        return {a: calls[i] for i, a in enumerate(self.apis) if calls[i][0]}

    def _table(self, keys: int) -> np.ndarray:
        """The sums as a (keys + 1, APIs, COLUMNS) table, row 0 the calls in no key. numpy's
        sums of it are exact: int64 while every sum is below the bound on all that was added
        (Sums), Python ints beyond; and they need no column per row (at 3x10^7 kernels with
        phases, 3.4 million rows: an exact path of its own took 300 MiB of temporaries)."""
        k = len(self.apis)
        values = fit_rows(self.sums.values, (keys + 1) * k)  # rows beyond the index: none
        return values.reshape(keys + 1, k, COLUMNS)


@contextmanager
def spilled_while(totals: LaunchTotals, folder: str | None) -> Iterator[None]:
    """The totals' table in a file of `folder` (a spill folder) while inside, read back after:
    not in census's memory while the kernel pass's workers run (at 3x10^7 kernels with phases,
    57 MiB). Nothing moves without a folder, or for a table of Python ints."""
    values = totals.sums.values
    if folder is None or values.dtype != np.int64 or not values.size:
        yield
        return
    path = os.path.join(folder, f"launch-{os.getpid()}.bin")
    write_arrays(path, [values], "wb")
    shape = values.shape
    totals.sums.values = values = np.zeros((0, COLUMNS), np.int64)
    try:
        yield
    finally:
        totals.sums.values = np.fromfile(path, np.int64).reshape(shape)
        os.remove(path)

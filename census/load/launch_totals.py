"""The launch API calls per step: count, time and graph launches per (step or NO_STEP, launch
API), as exact dense columns (census.load.figures.Sums), one row per (step + 1, API): a few
MiB where a dict entry per cell took 115 MiB at 10^7 kernels (400,000 cells with phases)."""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field

import numpy as np

from census.load.figures import Sums, add_rows, fit_rows
from census.load.intervals import INT_NULL, NO_STEP
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

    def summed(self, n: int) -> tuple[list[int], dict[str, list[int]], np.ndarray]:
        """(the whole capture's [count, time_ns, graph launches]; per API that has calls,
        [count, time_ns, count in steps, time_ns in steps]; per step 0..n-1 its calls as an
        (n, 3) array)."""
        k = len(self.apis)
        values = fit_rows(self.sums.values, (n + 1) * k)  # rows beyond the index: none
        if values.dtype == object:  # sums past int64's room: exact Python ints
            return self._summed_exact(values, n, k)
        # int64: every sum is below the bound on all that was added (Sums), so numpy's sums of
        # the (step + 1, API) table are exact, and need no column per row (at 3x10^7 kernels
        # with phases, 3.4 million rows: the exact path's temporaries took 300 MiB)
        table = values.reshape(n + 1, k, COLUMNS)
        whole = table.sum(axis=(0, 1)).tolist()
        calls = np.concatenate([table[:, :, :2].sum(axis=0), table[1:, :, :2].sum(axis=0)], 1)
        by_api = calls.tolist()
        return (whole, {a: by_api[i] for i, a in enumerate(self.apis) if by_api[i][0]},
                table[1:].sum(axis=1))  # fmt: skip

    def _summed_exact(self, values: np.ndarray, n: int, k: int) -> tuple:
        step = np.repeat(np.arange(-1, n), k)
        api = np.tile(np.arange(k), n + 1)
        whole = add_rows(np.zeros(len(values), np.int64), 1, values)[0].tolist()
        inside = step != NO_STEP
        calls = np.concatenate([values[:, :2], np.where(inside[:, None], values[:, :2], 0)], 1)
        by_api = add_rows(api, k, calls).tolist()
        return (whole, {a: by_api[i] for i, a in enumerate(self.apis) if by_api[i][0]},
                add_rows(step[inside], n, values[inside]))  # fmt: skip


@contextmanager
def set_aside(totals: LaunchTotals, folder: str | None) -> Iterator[None]:
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

"""Kernel unions per (scope, class, device) as columns: for each (class, device) that has
kernels, one row per scope (WHOLE, then each step or segment, then each parent scope) with the
union's length so far (exact: census.load.figures.Sums) and its running maximum end (INT_NULL:
none yet). A worker's ranges fold by adding lengths and taking the larger maximum; no Python
object per scope (a dict of tuple keys held ~200 bytes per scope and class, twice).
"""

from __future__ import annotations

import numpy as np

from census.load.figures import Sums
from census.load.intervals import INT_NULL

Column = tuple[Sums, np.ndarray]  # (lengths, running maximum ends), one row per scope + 1


class Unions:
    """Scopes -1 (WHOLE) .. scopes-1; row scope + 1."""

    def __init__(self, scopes: int) -> None:
        self.rows = scopes + 1
        self.columns: dict[tuple[int, int], Column] = {}  # (class, device) -> its column

    def _column(self, cls: int, dev: int) -> Column:
        found = self.columns.get((cls, dev))
        if found is None:
            found = (Sums(self.rows, 1), np.full(self.rows, INT_NULL, np.int64))
            self.columns[(cls, dev)] = found
        return found

    def high(self, scope: np.ndarray, cls: np.ndarray, dev: np.ndarray) -> np.ndarray:
        """The running maximum end of each (scope, class, device) so far (INT_NULL: none)."""
        out = np.full(len(scope), INT_NULL, np.int64)
        for (c, d), rows in _groups(cls, dev):
            found = self.columns.get((c, d))
            if found is not None:
                out[rows] = found[1][scope[rows] + 1]
        return out

    def add(self, scope, cls, dev, added: np.ndarray, high: np.ndarray | None = None) -> None:
        """`added` into each (scope, class, device), distinct; `high`: its new running maximum
        end."""
        for (c, d), rows in _groups(cls, dev):
            sums, ends = self._column(c, d)
            at = scope[rows] + 1
            sums.add_keys(at, added[rows, None])
            if high is not None:
                if not ends.flags.writeable:  # a worker's, mapped from its spill file
                    ends = ends.copy()
                    self.columns[(c, d)] = (sums, ends)
                ends[at] = high[rows]

    def merge(self, other: Unions) -> None:
        """Add another range's unions (lengths add, maxima take the larger)."""
        for key, (sums, ends) in other.columns.items():
            mine = self.columns.get(key)
            if mine is None:
                self.columns[key] = (sums, ends)
                continue
            mine[0].merge(sums)
            self.columns[key] = (mine[0], np.maximum(mine[1], ends))

    def reach(self) -> int:
        """The latest running maximum end of any union (INT_NULL: none)."""
        return max((int(ends.max()) for _, ends in self.columns.values()), default=INT_NULL)

    def totals(self, scopes: int) -> tuple[list[int], dict[int, np.ndarray]]:
        """(per class, WHOLE's length summed over devices; per class, scopes 0..scopes-1's
        lengths summed over devices)."""
        whole: dict[int, int] = {}
        per: dict[int, np.ndarray] = {}
        for (c, _), (sums, _) in self.columns.items():
            values = sums.values[:, 0]
            whole[c] = whole.get(c, 0) + int(values[0])
            part = values[1 : scopes + 1]
            per[c] = part if c not in per else per[c] + part
        return whole, per


def _groups(cls: np.ndarray, dev: np.ndarray):
    """((class, device), its rows) for each distinct pair."""
    if not len(cls):
        return
    if cls.min() == cls.max() and dev.min() == dev.max():  # the common case: one
        yield (int(cls[0]), int(dev[0])), np.arange(len(cls))
        return
    pairs = np.stack([cls, dev], axis=1)
    keys, inverse = np.unique(pairs, axis=0, return_inverse=True)
    for i, (c, d) in enumerate(keys.tolist()):
        yield (c, d), np.flatnonzero(inverse.ravel() == i)

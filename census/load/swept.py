"""The accumulators of swept intervals: kernel unions and GPU busy time. Their intervals can
reach across a range boundary (census.load.accumulators.Straddling), so besides add, merge and
finish each has `reach` and `take_overlap`, census.load.range_merge's boundary fix-up.

Unions per (scope, class, device) are columns: for each (class, device) that has kernels, one
row per scope (WHOLE, then each step or segment, then each parent scope) with the union's
length so far (exact: census.load.figures.Sums) and its running maximum end (INT_NULL: none
yet); no Python object per scope (a dict of tuple keys held ~200 bytes per scope and class,
twice). Busy time is per key the new coverage of the GPU work of the key's process, clipped to
the key's window, with per process the running maximum end.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from census.load.accumulators import Maxima
from census.load.figures import UNIONS, Columns, Sums, fit_rows, named
from census.load.intervals import INT_NULL, Members, StepIndex, Swept, covered_ns, sweep
from census.metrics import GPU_BUSY_NS

NON_NCCL, NCCL_CLASS, ALL_CLASS = 0, 1, 2  # the union classes, in UNIONS' order
Column = tuple[Sums, np.ndarray]  # (lengths, running maximum ends), one row per scope + 1


class Unions:
    """Kernel unions of scopes -1 (WHOLE) .. scopes-1, per class and device; row scope + 1.
    Added to a batch's members at a time (Members whose `parts` decode a code as (scope,
    class, device)); finished into UNIONS columns summed over devices."""

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

    def add(self, members: list[Members]) -> None:
        """Sweep a batch's members (census.load.kernels' union members, one Members a class
        and scope kind): each union's length grows by their new coverage, and its running
        maximum end is carried."""
        for m in members:
            assert m.parts is not None, "union members decode their codes"
            swept = sweep(m.code, m.start, m.end, lambda codes, m=m: self.high(*m.parts(codes)))
            self._lengths(*m.parts(swept.codes), swept.added_ns, swept.high)

    def _lengths(self, scope, cls, dev, added: np.ndarray, high: np.ndarray | None = None) -> None:
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

    def take_overlap(self, head: Members, before: Unions, steps: StepIndex | None = None) -> None:
        """The boundary fix-up: take away what the union members of this range's head
        (`head`, census.load.range_merge's, whose `key` decodes a code as (scope, class,
        device)) add to unions `before` (the ranges before this one) already cover (`steps`:
        the key index, which unions do not need)."""
        keys = _key_columns(head)
        clipped = clip(head, lambda codes: before.high(*keys(codes)))
        swept = sweep(clipped.code, clipped.start, clipped.end)
        self._lengths(*keys(swept.codes), -swept.added_ns)

    def finish(self, keys: int, first: int = 0) -> Columns:
        """The UNIONS columns of scopes first .. first+keys-1, each summed over devices."""
        per: dict[int, np.ndarray] = {}
        for (c, _), (sums, _) in self.columns.items():
            part = sums.values[first + 1 : first + keys + 1, 0]
            per[c] = part if c not in per else per[c] + part
        zeros = np.zeros(keys, np.int64)
        classes = (NON_NCCL, NCCL_CLASS, ALL_CLASS)
        columns = [fit_rows(per[c], keys) if c in per else zeros for c in classes]
        return named(UNIONS, np.stack(columns, axis=1))

    def total(self) -> dict[str, int]:
        """The whole capture's unions (scope WHOLE), each class's summed over devices."""
        whole = dict.fromkeys(UNIONS, 0)
        for (c, _), (sums, _) in self.columns.items():
            whole[UNIONS[c]] += int(sums.values[0, 0])
        return whole

    def exposed_by_device(self) -> dict[int, int]:
        """Per deviceId, the whole capture's |all-kernel union| − |non-NCCL union|: the NCCL
        kernel time there that no non-NCCL kernel overlaps."""

        def whole(cls: int, dev: int) -> int:
            found = self.columns.get((cls, dev))
            return 0 if found is None else int(found[0].values[0, 0])

        devices = {dev for cls, dev in self.columns if cls == ALL_CLASS}
        return {dev: whole(ALL_CLASS, dev) - whole(NON_NCCL, dev) for dev in sorted(devices)}


class BusyTime:
    """gpu_busy_ns per key: the new coverage of the GPU work of the key's process, clipped to
    the key's window; and per process the latest end its busy intervals reached. Added to a
    batch's busy Members at a time (code: a process, decoded by `key`), with the key index."""

    NAMES = (GPU_BUSY_NS,)

    def __init__(self, keys: int) -> None:
        self.sums = Sums(keys, 1)
        self.high = Maxima()

    def add(self, m: Members, steps: StepIndex) -> Swept:
        """Sweep the busy intervals `m`: each key of their process grows by their new coverage
        (clipped to it); returns the sweep (its new pieces are the idle split's input)."""
        swept = sweep(m.code, m.start, m.end, lambda codes: reached(self.high, codes, m.key))
        for code, top in zip(swept.codes.tolist(), swept.high.tolist(), strict=True):
            self.high[m.key(code)] = top
        add_busy(self.sums, steps, swept, m.key)
        return swept

    def merge(self, other: BusyTime) -> None:
        """Sums add; each process's maximum end is the larger."""
        self.sums.merge(other.sums)
        self.high.merge(other.high)

    def reach(self) -> int:
        """The latest end any process's busy intervals reached (INT_NULL: none)."""
        return self.high.reach()

    def take_overlap(self, head: Members, before: BusyTime, steps: StepIndex) -> None:
        """The boundary fix-up: take away what this range's head's busy intervals (`head`)
        add to busy time `before` (the ranges before this one) already covers."""
        clipped = clip(head, lambda codes: reached(before.high, codes, head.key))
        swept = sweep(clipped.code, clipped.start, clipped.end)
        add_busy(self.sums, steps, swept, clipped.key, sign=-1)

    def finish(self, keys: int) -> Columns:
        """gpu_busy_ns, `keys` rows."""
        return named(self.NAMES, fit_rows(self.sums.values, keys))


def add_busy(busy: Sums, steps: StepIndex, swept: Swept, proc_of, sign: int = 1) -> None:
    """Add (or, with sign -1, take away) the new coverage of swept busy intervals, clipped to
    each step of their process."""
    for seg, code in enumerate(swept.codes.tolist()):
        rows = np.flatnonzero((swept.seg == seg) & (swept.end > swept.piece_lo))
        if not len(rows):
            continue
        lo, hi = swept.piece_lo[rows], swept.end[rows]
        proc = proc_of(code)
        starts, ends, idx = steps.by_proc[proc]
        # only the steps that can overlap the pieces: ending after the first piece starts (by
        # the running maximum end) and starting before the last one ends
        a = int(np.searchsorted(steps.reach[proc], lo[0], "right"))
        b = int(np.searchsorted(starts, hi.max(), "left"))
        covered = covered_ns(lo, hi, starts[a:b], ends[a:b])
        some = np.flatnonzero(covered)  # one row per step: idx distinct
        busy.add_keys(idx[a:b][some], sign * covered[some, None])


def reached(high: dict, codes: np.ndarray, key: Callable[[int], tuple]) -> np.ndarray:
    """Each code's partition's running maximum end so far (INT_NULL: none yet)."""
    return np.array([high.get(key(c), INT_NULL) for c in codes.tolist()], np.int64)


def clip(m: Members, reach_of) -> Members:
    """Each interval cut at the running maximum end its partition reached before the range
    (`reach_of(codes)`)."""
    if not len(m.code):
        return m
    codes, inverse = np.unique(m.code, return_inverse=True)
    reach = reach_of(codes)[inverse]
    end = np.minimum(m.end, reach)
    keep = m.start < end
    return Members(m.code[keep], m.start[keep], end[keep], m.key)


def _key_columns(m: Members):
    """Decodes codes of `m` (a few, from a range's head) as (scope, class, device) columns."""

    def columns(codes: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        keys = np.array([m.key(c) for c in codes.tolist()], np.int64).reshape(-1, 3)
        return keys[:, 0], keys[:, 1], keys[:, 2]

    return columns


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

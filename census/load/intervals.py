"""Interval arithmetic on numpy columns: step lookup, unions carried across batches, clipping.

Times are int64 nanoseconds; a NULL read from SQLite is INT_NULL (int64 minimum) and takes part
in no union. Every sum is exact: int64 where no overflow is possible, Python ints otherwise.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any, Protocol

import numpy as np

from census.errors import ColumnError
from census.load.figures import Spans, Sums, add_rows
from census.sqlite import INT_NULL

INT_MAX = np.iinfo(np.int64).max
NO_STEP = -1
# Timestamps beyond ±2^61 ns (73 years) are not nsys data; refusing them keeps every
# difference and sum of differences inside int64.
TIME_LIMIT = 1 << 61
_SAFE = 1 << 62


@dataclass(frozen=True)
class StepIndex:
    """The selected step ranges per process: starts ascending (ties by index), ends, indices."""

    by_proc: dict[int, tuple[np.ndarray, np.ndarray, np.ndarray]]
    reach: dict[int, np.ndarray]  # per process, the furthest end of its ranges so far (by start)

    @classmethod
    def build(cls, steps: Iterable[tuple[int, int, int, int]]) -> StepIndex:
        """steps: (idx, proc, start_ns, end_ns)."""
        rows = list(steps)
        return cls.of_columns(*(np.array([r[k] for r in rows], np.int64) for k in range(4)))

    @classmethod
    def of_columns(cls, idx, proc, start, end) -> StepIndex:
        """The same from columns."""
        order = np.lexsort((end, idx, start, proc))  # per process by start, idx, end
        procs, first = np.unique(proc[order], return_index=True)
        by_proc = {}
        groups = np.split(order, first[1:]) if len(order) else []
        for p, rows in zip(procs.tolist(), groups, strict=True):
            by_proc[p] = (start[rows], end[rows], idx[rows])
        return cls(by_proc, {p: np.maximum.accumulate(v[1]) for p, v in by_proc.items()})

    @property
    def size(self) -> int:
        """One more than the largest idx: the rows of per-key columns (Sums, Spans)."""
        return 1 + max((int(v[2].max()) for v in self.by_proc.values() if len(v[2])), default=-1)

    def touching(self, proc: int, start: np.ndarray, end: np.ndarray) -> np.ndarray:
        """Whether each [start, end] of process `proc` touches one of its ranges (ends
        included): a cheap filter that keeps everything a measurement inside the ranges needs."""
        if proc not in self.by_proc or not len(start):
            return np.zeros(len(start), bool)
        first = min(int(start.min()), int(end.min()))
        return self._touching(proc, start, end, first, int(end.max()))

    def _touching(self, proc: int, start, end, first: int, last_end: int) -> np.ndarray:
        """touching, given the batch's earliest time and latest end."""
        starts = self.by_proc[proc][0]
        # the last range starting at or before each end lies among those from the last one
        # starting at or before the earliest time to the last one starting at or before the
        # latest end: searched among those only (a batch spans a few of many ranges)
        a = int(np.searchsorted(starts, first, side="right"))
        b = int(np.searchsorted(starts, last_end, side="right"))
        i = np.searchsorted(starts[a:b], end, side="right") + (a - 1)
        return (i >= 0) & (self.reach[proc][np.maximum(i, 0)] >= start)

    def keeping(self, proc: int, start: np.ndarray, end: np.ndarray) -> np.ndarray | None:
        """touching's filter for intervals sorted by start, none ending before it starts; None
        where it keeps them all. An interval starting inside the ranges' cover touches one; one
        starting in a hole between them touches one only if it reaches the next range's start:
        a search per hole the batch spans, none per interval."""
        if proc not in self.by_proc or not len(start):
            return np.zeros(len(start), bool)
        starts, reach = self.by_proc[proc][0], self.reach[proc]
        a = int(np.searchsorted(starts, start[0], side="right"))  # ranges starting by the first
        b = int(np.searchsorted(starts, start[-1], side="right"))  # and by the last interval
        # the holes [reach of range j, start of range j + 1) for j from a - 1 (the one before
        # the first range, from the earliest time, where a is 0) to b - 1 (the one after)
        lo = reach[a - 1 : b] if a else np.r_[INT_NULL, reach[:b]]
        hi = np.append(starts[a:b], starts[b] if b < len(starts) else INT_MAX)
        # the intervals starting in each (past its lower end: an end touches)
        first = np.searchsorted(start, lo, side="right")
        count = np.maximum(np.searchsorted(start, hi, side="left") - first, 0)
        if not count.any():
            return None
        rows = np.repeat(first - np.cumsum(count) + count, count) + np.arange(int(count.sum()))
        touch = end[rows] >= np.repeat(hi, count)
        if touch.all():
            return None
        keep = np.ones(len(start), bool)
        keep[rows] = touch
        return keep

    def step_at(self, proc: np.ndarray, t: np.ndarray) -> np.ndarray:
        """The step process `proc` was in at time `t`: the latest-starting step that began at or
        before `t`, kept only if it had not ended before `t`; NO_STEP otherwise."""
        out = np.full(len(t), NO_STEP, np.int64)
        for p, (starts, ends, idx) in self.by_proc.items():
            rows = np.flatnonzero((proc == p) & (t != INT_NULL))
            if not len(rows):
                continue
            tt = t[rows]
            i = np.searchsorted(starts, tt, side="right") - 1
            ii = np.maximum(i, 0)
            inside = (i >= 0) & (ends[ii] >= tt)
            out[rows] = np.where(inside, idx[ii], NO_STEP)
        return out


def sums_per_code(codes: np.ndarray, n: int, values: np.ndarray) -> list[int]:
    """Σ values per code in range(n), exact: int64 when it cannot overflow, else Python ints
    (census.load.figures.add_rows, for one column)."""
    return add_rows(codes, n, values).tolist()


def add_into(target: dict, items: Iterable[tuple[Any, Iterable[int]]]) -> None:
    """target[key] += values, element by element, for each (key, values)."""
    for key, values in items:
        acc = target.get(key)
        if acc is None:
            target[key] = [int(v) for v in values]
        else:
            for i, v in enumerate(values):
                acc[i] += int(v)


def add_spans(spans: Spans, scope: np.ndarray, start: np.ndarray, end: np.ndarray) -> None:
    """Widen `spans` by the given rows: those with a scope (not NO_STEP) and a start and end
    known, end >= start."""
    rows = (scope != NO_STEP) & (start != INT_NULL) & (end != INT_NULL) & (end >= start)
    if rows.any():
        spans.add(scope[rows], start[rows], end[rows])


def add_sums(sums: Sums, scope: np.ndarray, *columns: np.ndarray) -> None:
    """The columns, row by row, summed into `sums` by scope (rows with NO_STEP left out)."""
    inside = scope != NO_STEP
    if not inside.any():
        return
    keys, code = distinct(scope[inside])
    values = np.stack([c[inside] for c in columns], axis=1)
    sums.add_keys(keys, add_rows(code, len(keys), values))


def distinct(values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(sorted distinct values, each value's index among them). Small non-negative integers
    (ids, steps, devices) go through a lookup table: linear, no sort."""
    if not len(values):
        return values[:0], np.zeros(0, np.int64)
    lo, hi = int(values.min()), int(values.max())
    if lo == hi:
        return values[:1], np.zeros(len(values), np.int64)
    if hi - lo <= _LOOKUP_SPAN:
        present = np.zeros(hi - lo + 1, bool)
        present[values - lo] = True
        index = np.cumsum(present) - 1
        return np.flatnonzero(present) + lo, index[values - lo]
    return np.unique(values, return_inverse=True)


_LOOKUP_SPAN = 1 << 22


def unique(values: np.ndarray) -> np.ndarray:
    """The sorted distinct values of an integer array, flattened, in its dtype: np.unique's
    result without np.unique's masked-array check, which imports numpy.ma (~10 ms in every
    worker of every pool that meets it)."""
    flat = np.sort(np.ravel(values))
    if len(flat) < 2:
        return flat
    return flat[np.concatenate(([True], flat[1:] != flat[:-1]))]


def factorize(*columns: np.ndarray) -> tuple[list[tuple[int, ...]], np.ndarray]:
    """Distinct rows of the given equal-length columns (ascending), and each row's index."""
    uniques, inverse = group_rows(*columns)
    return list(zip(*(u.tolist() for u in uniques), strict=True)), inverse


def group_rows(*columns: np.ndarray) -> tuple[list[np.ndarray], np.ndarray]:
    """Distinct rows of the given columns, as columns (rows ascending), and each row's index."""
    if not len(columns[0]):
        return [c[:0] for c in columns], np.zeros(0, np.int64)
    parts, codes = zip(*(distinct(c) for c in columns), strict=True)
    if float(np.prod([float(len(u)) for u in parts])) >= _SAFE:
        return _group_rows_sorting(columns)
    code = codes[0]
    for u, c in zip(parts[1:], codes[1:], strict=True):
        code = code * len(u) + c  # mixed radix: < the product of the distinct counts
    combined, inverse = distinct(code)
    out = []
    for u in reversed(parts):  # decode the digits, last column first
        combined, digit = np.divmod(combined, len(u))
        out.append(u[digit])
    return out[::-1], inverse


def _group_rows_sorting(columns: tuple[np.ndarray, ...]) -> tuple[list[np.ndarray], np.ndarray]:
    n = len(columns[0])
    order = np.lexsort(columns[::-1])
    cols = [c[order] for c in columns]
    new = np.zeros(n, bool)
    new[0] = True
    for c in cols:
        new[1:] |= c[1:] != c[:-1]
    inverse = np.empty(n, np.int64)
    inverse[order] = np.cumsum(new) - 1
    firsts = np.flatnonzero(new)
    return [c[firsts] for c in cols], inverse


@dataclass
class Members:
    """Intervals to sweep: partition code, start, end; `key` decodes a code; `parts`, for
    unions, decodes codes as columns: (scope, class, device)."""

    code: np.ndarray
    start: np.ndarray
    end: np.ndarray
    key: Callable[[int], tuple]
    parts: Callable[[np.ndarray], tuple[np.ndarray, np.ndarray, np.ndarray]] | None = None

    def window(self, after_ns: int | None, before_ns: int | None) -> Members:
        """The intervals (sorted by start) starting in [after_ns, before_ns)."""
        a = 0 if after_ns is None else int(np.searchsorted(self.start, after_ns, "left"))
        b = len(self.start) if before_ns is None else int(np.searchsorted(self.start, before_ns))
        return Members(self.code[a:b], self.start[a:b], self.end[a:b], self.key)


class Windowed(Protocol):
    """Intervals sorted by start, read a window of starts at a time."""

    def window(self, after_ns: int | None, before_ns: int | None) -> Members:
        """The intervals (sorted by start) starting in [after_ns, before_ns)."""
        ...


def no_members() -> Members:
    """No intervals."""
    empty = np.zeros(0, np.int64)
    return Members(empty, empty, empty, lambda c: c)


@dataclass
class Swept:
    """One batch of intervals swept in (partition, start) order."""

    codes: np.ndarray  # partition codes present, ascending
    added_ns: np.ndarray  # what the batch adds to each partition's union
    high: np.ndarray  # each partition's running maximum end after the batch
    seg: np.ndarray  # per sorted row: index into `codes`
    piece_lo: np.ndarray  # per sorted row: where its new coverage starts (== end: none)
    end: np.ndarray  # per sorted row: its end


def sweep(
    codes: np.ndarray,
    start: np.ndarray,
    end: np.ndarray,
    seed: Callable[[np.ndarray], np.ndarray] | None = None,
) -> Swept:
    """Union of [start, end) intervals (end > start) per partition code. `seed(codes)` gives
    each partition's running maximum end from earlier batches (INT_NULL: none); the batch must
    start no earlier than those batches did. Each interval adds what lies beyond the running
    maximum end of the intervals before it, so the union is the sum of the additions."""
    order = np.lexsort((start, codes))
    c, s, e = codes[order], start[order], end[order]
    n = len(c)
    if n == 0:
        empty = np.zeros(0, np.int64)
        return Swept(empty, empty, empty, empty, empty, empty)
    firsts = np.flatnonzero(np.r_[True, c[1:] != c[:-1]])
    if len(firsts) == 1:  # one partition: a plain running maximum
        seg = np.zeros(n, np.int64)
        prev = np.empty_like(e)
        prev[0] = INT_NULL
        np.maximum.accumulate(e[:-1], out=prev[1:])
    else:
        seg = np.repeat(np.arange(len(firsts)), np.diff(np.r_[firsts, n]))
        prev = _segment_prev_max(e, firsts, seg)
    seeds = seed(c[firsts]) if seed else np.full(len(firsts), INT_NULL, np.int64)
    prev = np.maximum(prev, seeds[seg])
    lo = np.minimum(np.maximum(s, prev), e)
    added = np.add.reduceat(e - lo, firsts)
    high = np.maximum(seeds, np.maximum.reduceat(e, firsts))
    return Swept(c[firsts], added, high, seg, lo, e)


def _segment_prev_max(e: np.ndarray, firsts: np.ndarray, seg: np.ndarray) -> np.ndarray:
    """max(e[j] for earlier j in the same segment), INT_NULL at each segment's first row.
    Each segment is lifted above the ones before it so that one running maximum serves all."""
    lo = np.minimum.reduceat(e, firsts)
    span = np.maximum.reduceat(e, firsts) - lo + 1
    if float(span.sum(dtype=np.float64)) < _SAFE:
        offset = np.r_[0, np.cumsum(span)[:-1]] - lo
        run = np.maximum.accumulate(e + offset[seg]) - offset[seg]
    else:  # timestamps too far apart to lift safely: one segment at a time
        run = np.empty_like(e)
        bounds = np.r_[firsts, len(e)]
        for a, b in itertools.pairwise(bounds.tolist()):
            run[a:b] = np.maximum.accumulate(e[a:b])
    prev = np.empty_like(e)
    prev[1:] = run[:-1]
    prev[firsts] = INT_NULL
    return prev


class Covered:
    """How much of disjoint pieces [lo, hi), sorted by lo, lies before each time t."""

    def __init__(self, lo: np.ndarray, hi: np.ndarray) -> None:
        # a first piece of no length at the earliest time: every t has a piece at or before it
        earliest = np.iinfo(np.int64).min
        self.lo, self.hi = (np.concatenate(([earliest], x)) for x in (lo, hi))
        self.before = np.concatenate(([0, 0], np.cumsum(hi - lo)))

    def upto(self, t: np.ndarray, ordered: bool = False) -> np.ndarray:
        """`ordered`: the times t are sorted (then a merge finds them, not a search each)."""
        k = ordered_search(self.lo, t) if ordered else np.searchsorted(self.lo, t, side="right")
        k -= 1  # the last piece starting at or before t
        return self.before[k] + (np.minimum(t, self.hi[k]) - self.lo[k])


def ordered_search(sorted_a: np.ndarray, sorted_t: np.ndarray) -> np.ndarray:
    """np.searchsorted(sorted_a, sorted_t, "right") where both are sorted: the two merged by a
    stable sort (timsort, which merges two sorted runs in one linear pass); twice as fast as
    a binary search per t where both are long. Each t's place in the merged order is its
    index plus the a's at or before it (a stable sort puts an equal a first)."""
    if len(sorted_t) < 64 or len(sorted_a) < 64:
        return np.searchsorted(sorted_a, sorted_t, "right")
    order = np.argsort(np.concatenate((sorted_a, sorted_t)), kind="stable")
    return np.flatnonzero(order >= len(sorted_a)) - np.arange(len(sorted_t))


def covered_ns(
    lo: np.ndarray, hi: np.ndarray, win_start: np.ndarray, win_end: np.ndarray
) -> np.ndarray:
    """For disjoint pieces [lo, hi) sorted by lo: the length of them inside each window."""
    pieces = Covered(lo, hi)
    return pieces.upto(win_end) - pieces.upto(win_start)


def with_end(table: str, batch: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """Add `end` (INT_NULL where start or end is NULL) to a batch read with TIMED columns."""
    start, dur = batch["start"], batch["dur"]
    check_times(table, start=start)
    known = (start != INT_NULL) & (dur != INT_NULL)
    if known.any() and np.abs(dur[known]).max() > 2 * TIME_LIMIT:
        raise ColumnError(f"{table} holds durations beyond ±2^62 ns")
    batch["end"] = np.where(known, start + np.where(known, dur, 0), INT_NULL)
    check_times(table, end=batch["end"])
    return batch


def check_times(table: str, **columns: np.ndarray) -> None:
    """ColumnError where a column holds a time beyond ±TIME_LIMIT (NULLs aside)."""
    for name, values in columns.items():
        real = values[values != INT_NULL]
        if real.size and (real.max() > TIME_LIMIT or real.min() < -TIME_LIMIT):
            raise ColumnError(f"{table}.{name} holds timestamps beyond ±2^61 ns")

"""Per-key figures as columns: the work launched in each step (or phase segment), one row per key
(the step's or segment's idx), so that keys add up into steps, phases or the whole capture in one
numpy operation rather than one Python object per key.

Sums stay exact: int64 while no sum or difference of a few can overflow it, Python ints (object
arrays) beyond, as census.load.intervals.exact_sums does.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import NamedTuple

import numpy as np

# Per-key columns of the accumulators (census.load.accumulators: KernelSums and BusySums name
# their own): the launch calls and the unions (summed over devices) of the work launched in
# each key, in the table census.load.aggregates makes (key_table).
LAUNCH_SUMS = ("launch_api_count", "launch_api_time_ns", "graph_launch_count")
UNIONS = ("non_nccl_union_ns", "nccl_union_ns", "all_union_ns")

NO_START, NO_END = int(np.iinfo(np.int64).max), int(np.iinfo(np.int64).min)  # no GPU work
_ROOM = 1 << 60  # below this in magnitude, sums and differences of a few values fit in int64


def int64_or_objects(values: Iterable | np.ndarray) -> np.ndarray:
    """`values` (an array, or rows of ints) as int64 when every one is below 2^60 in magnitude,
    else as Python ints (an object array)."""
    try:
        out = np.asarray(values, np.int64)
    except OverflowError:
        return np.asarray(values, object)
    return out.astype(object) if magnitude(out) >= _ROOM else out


def magnitude(values: np.ndarray) -> int:
    """The largest absolute value of `values` (0 when empty), as a Python int."""
    return max(int(values.max()), -int(values.min())) if values.size else 0


SUM_ROWS = 1 << 16  # rows of values summed at a time (their sorted copy and its sums)


def add_rows(index: np.ndarray, n: int, values: np.ndarray, more: int = 0) -> np.ndarray:
    """The rows of `values` summed into n rows, row i into row index[i], exactly (`int64_or_objects`);
    `more`: columns of zeros after them. A sorted copy of SUM_ROWS rows at a time, not of all
    (at 3x10^7 kernels, 850,000 segments' figures: 130 MiB a copy)."""
    safe = values.dtype != object and magnitude(values) < _ROOM // max(len(values), 1)
    out = np.zeros((n, *values.shape[1:-1], values.shape[-1] + more) if more else
                   (n, *values.shape[1:]), np.int64 if safe else object)  # fmt: skip
    into = out[..., : values.shape[-1]] if more else out
    if not safe:
        np.add.at(into, index, values.astype(object))
        return out
    if len(index):  # runs of equal keys summed at once (faster than np.add.at)
        order = None if bool(np.all(index[1:] >= index[:-1])) else np.argsort(index, kind="stable")
        keys = index if order is None else index[order]
        for a in range(0, len(keys), SUM_ROWS):
            k = keys[a : a + SUM_ROWS]
            firsts = np.flatnonzero(np.r_[True, k[1:] != k[:-1]])
            part = values[a : a + SUM_ROWS] if order is None else values[order[a : a + SUM_ROWS]]
            into[k[firsts]] += np.add.reduceat(part.astype(np.int64, copy=False), firsts)
    return out


def rows(values: Iterable[int], width: int) -> np.ndarray:
    """Values, row after row, as a (rows, width) array (`int64_or_objects`)."""
    return int64_or_objects(list(values)).reshape(-1, width)


def fit_rows(values: np.ndarray, n: int) -> np.ndarray:
    """`values` as n rows: cut, or followed by rows of zeros (keys nothing was added to); the
    array itself where it has n rows (to be read, not written)."""
    if len(values) == n:
        return values
    out = np.zeros((n, *values.shape[1:]), values.dtype)
    k = min(n, len(values))
    out[:k] = values[:k]
    return out


class MemoryGroups(NamedTuple):
    """The memcpys of each copy kind (and the memsets) launched in each step, as columns: one
    row per (kind, step, with or without an API row) group."""

    kind: np.ndarray  # copyKind; MEMSET_KIND for memsets
    step: np.ndarray  # NO_STEP: outside every step
    sums: np.ndarray  # (groups, 3): count, bytes, time_ns (`int64_or_objects`)

    @classmethod
    def empty(cls) -> MemoryGroups:
        """No groups."""
        none = np.zeros(0, np.int64)
        return cls(none, none, np.zeros((0, 3), np.int64))


@dataclass(frozen=True)
class Figures:
    """Named columns of per-key sums (`values`, one row per key), and the GPU span of the work
    launched in each key: its earliest start and latest end (NO_START, NO_END without any)."""

    names: tuple[str, ...]
    values: np.ndarray  # (keys, len(names))
    first: np.ndarray  # int64 (keys,)
    last: np.ndarray

    def __len__(self) -> int:
        return len(self.values)

    def column(self, name: str) -> np.ndarray:
        """The column `name`, one value per key (a view)."""
        return self.values[:, self.names.index(name)]

    def summed(self, index: np.ndarray, n: int, names: Sequence[str] = (),
               values: np.ndarray | None = None) -> Figures:  # fmt: skip
        """The keys summed into n rows, key i into row index[i]; spans widened; with `names`
        (not among these), their columns `values` (n rows) after them: joined's, without a
        second table."""
        first = np.full(n, NO_START, np.int64)
        last = np.full(n, NO_END, np.int64)
        np.minimum.at(first, index, self.first)
        np.maximum.at(last, index, self.last)
        out = add_rows(index, n, self.values, len(names))
        if names and values is not None:
            if np.result_type(out, values) != out.dtype:  # sums past int64: Python ints
                out = out.astype(object)
            out[:, len(self.names) :] = values
        return Figures((*self.names, *names), out, first, last)

    def joined(self, names: Sequence[str], values: np.ndarray) -> Figures:
        """These columns with `names` replaced (or added, after them) by the columns of
        `values`."""
        every = (*self.names, *(n for n in names if n not in self.names))
        out = np.zeros((len(self), len(every)), np.result_type(self.values, values))
        out[:, : len(self.names)] = self.values
        out[:, [every.index(n) for n in names]] = values
        return Figures(every, out, self.first, self.last)

    def gpu(self) -> tuple[np.ndarray, np.ndarray]:
        """(per key its GPU start and span, 0 and 0 where it launched no GPU work; per key
        whether it launched some)."""
        launched = self.first <= self.last
        start = np.where(launched, self.first, 0)
        return np.stack([start, np.where(launched, self.last - start, 0)], axis=1), launched


def figures_of(names: Sequence[str], values: np.ndarray, spans: Spans) -> Figures:
    """Figures of dense columns and of the spans of the same keys (fewer spans than keys: the
    rest launched nothing)."""
    n = len(values)
    first = np.full(n, NO_START, np.int64)
    last = np.full(n, NO_END, np.int64)
    k = min(n, len(spans.first))
    first[:k], last[:k] = spans.first[:k], spans.last[:k]
    return Figures(tuple(names), values, first, last)


class Spans:
    """Per key (a step's or segment's idx) the earliest start and the latest end of the GPU
    work launched in it, as two int64 columns (NO_START, NO_END where none): a minimum and a
    maximum, so ranges and batches read apart fold exactly."""

    def __init__(self, n: int) -> None:
        self.first = np.full(n, NO_START, np.int64)
        self.last = np.full(n, NO_END, np.int64)

    def add(self, key: np.ndarray, start: np.ndarray, end: np.ndarray) -> None:
        """Widen each key's span by its rows' start and end (keys may repeat)."""
        np.minimum.at(self.first, key, start)
        np.maximum.at(self.last, key, end)

    def merge(self, other: Spans) -> None:
        """The earlier start and the later end of the two, key by key."""
        self.first = np.minimum(self.first, other.first)  # new arrays: a worker's are read-only
        self.last = np.maximum(self.last, other.last)


class Sums:
    """Running sums of `width` columns per key, exact: int64 while a bound on every sum (what
    was added, in magnitude) stays below 2^60, Python ints (an object array) beyond."""

    def __init__(self, n: int, width: int) -> None:
        self.values = np.zeros((n, width), np.int64)
        self.bound = 0

    def add(self, keys: np.ndarray, values: np.ndarray) -> None:
        """values[i] into the sums of key keys[i]; `keys` distinct."""
        if len(keys):
            values = int64_or_objects(values)  # a batch's sums that fit come back to int64
            self._ready(values, 1)
            self.values[keys] += values

    def add_at(self, keys: np.ndarray, values: np.ndarray) -> None:
        """values[i] into the sums of key keys[i]; keys may repeat."""
        if len(keys):
            values = int64_or_objects(values)
            self._ready(values, len(keys))
            for j in range(self.values.shape[1]):
                np.add.at(self.values[:, j], keys, values[:, j])

    def _ready(self, values: np.ndarray, repeats: int) -> None:
        """Room for `values` added up to `repeats` times into one key, in writable columns (a
        worker's are mapped read-only from its spill file)."""
        self._widen(magnitude(values) * repeats, values.dtype == object)
        if not self.values.flags.writeable:
            self.values = self.values.copy()

    def merge(self, other: Sums) -> None:
        """Add another's sums, key by key (Python ints where the bound says int64 may not
        hold them)."""
        self._widen(other.bound, other.values.dtype == object)
        self.values = self.values + other.values

    def _widen(self, more: int, as_objects: bool) -> None:
        self.bound += more
        if self.values.dtype != object and (as_objects or self.bound >= _ROOM):
            self.values = self.values.astype(object)


class IdleColumns(NamedTuple):
    """The split of the GPU idle time, IDLE_KEYS as columns: one row per step idx, and one
    per segment idx."""

    steps: np.ndarray
    segments: np.ndarray


def idle_splits(columns: np.ndarray) -> list:
    """Per row of IDLE_KEYS columns, its census.model.IdleSplit."""
    from census.model import IdleSplit

    return list(map(IdleSplit, *columns.T.tolist()))

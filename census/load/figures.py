"""Per-key figures as columns: the work launched in each step (or phase segment), one row per key
(the step's or segment's idx), so that keys add up into steps, phases or the whole capture in one
numpy operation rather than one Python object per key.

The key table is `Columns`, named columns of equal length (the same kind of table as a batch of
rows read from the export): every per-key accumulator's finished columns side by side
(census.load.accumulators.key_table), read by census.load.finish into the step table.

Sums stay exact: int64 while no sum or difference of a few can overflow it, Python ints (object
arrays) beyond, as census.load.intervals.sums_per_code does.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import NamedTuple

import numpy as np

from census.metrics import (
    GRAPH_LAUNCH_COUNT,
    LAUNCH_API_COUNT,
    LAUNCH_API_TIME_NS,
    NON_NCCL_UNION_NS,
)

# Named columns of equal length: a batch of a table's rows (census.sqlite.read_batches'), or the
# key table, one row per key (a step's or phase segment's idx).
Columns = dict[str, np.ndarray]

# Per-key columns of the accumulators (census.load.accumulators: KernelSums, and BusyTime in
# census.load.swept, name their own): the launch calls, the unions (summed over devices) and
# the GPU span (Spans) of the work launched in each key, in the table census.load.aggregates
# makes (key_table).
LAUNCH_SUMS = (LAUNCH_API_COUNT, LAUNCH_API_TIME_NS, GRAPH_LAUNCH_COUNT)
UNIONS = (NON_NCCL_UNION_NS, "nccl_union_ns", "all_union_ns")
SPAN = ("first_start_ns", "last_end_ns")  # NO_START, NO_END: no GPU work

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
    out = np.zeros((n, *values.shape[1:-1], values.shape[-1] + more) if more else
                   (n, *values.shape[1:]), np.int64 if _safe(values) else object)  # fmt: skip
    _add_into(out[..., : values.shape[-1]] if more else out, index, values, _runs(index))
    return out


def add_columns(index: np.ndarray, n: int, columns: Sequence[np.ndarray]) -> list[np.ndarray]:
    """Each column summed into n rows, row i into row index[i], exactly (as add_rows; one sort of
    `index` for all of them)."""
    runs = _runs(index)
    out = []
    for values in columns:
        out.append(np.zeros(n, np.int64 if _safe(values) else object))
        _add_into(out[-1], index, values, runs)
    return out


def _safe(values: np.ndarray) -> bool:
    """Whether int64 holds every sum of `values`' rows."""
    return values.dtype != object and magnitude(values) < _ROOM // max(len(values), 1)


def _runs(index: np.ndarray) -> tuple[np.ndarray | None, list[tuple[int, np.ndarray, np.ndarray]]]:
    """(the order that sorts `index`, None where it is sorted; per SUM_ROWS rows of it sorted,
    (their first row, the first row of each run of equal keys among them, those keys))."""
    order = None if bool(np.all(index[1:] >= index[:-1])) else np.argsort(index, kind="stable")
    keys = index if order is None else index[order]
    runs = []
    for a in range(0, len(keys), SUM_ROWS):
        k = keys[a : a + SUM_ROWS]
        firsts = np.flatnonzero(np.r_[True, k[1:] != k[:-1]])
        runs.append((a, firsts, k[firsts]))
    return order, runs


def _add_into(into: np.ndarray, index: np.ndarray, values: np.ndarray, runs) -> None:
    """values' rows added into `into`'s, row i into row index[i]: runs of equal keys summed at
    once (faster than np.add.at), or, into Python ints, one at a time."""
    if into.dtype == object:
        np.add.at(into, index, values.astype(object))
        return
    order, chunks = runs
    for a, firsts, keys in chunks:
        part = values[a : a + SUM_ROWS] if order is None else values[order[a : a + SUM_ROWS]]
        into[keys] += np.add.reduceat(part.astype(np.int64, copy=False), firsts)


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


def named(names: Sequence[str], values: np.ndarray) -> Columns:
    """The columns of a (keys, len(names)) array by name (views of it)."""
    return dict(zip(names, values.T, strict=True))


def key_count(table: Columns) -> int:
    """The keys (rows) of a key table."""
    return len(next(iter(table.values()))) if table else 0


def sum_keys(table: Columns, index: np.ndarray, n: int) -> Columns:
    """The key table's keys summed into n rows, key i into row index[i], exactly: sums add,
    SPAN's columns widen (the earliest start, the latest end); one sort for every column."""
    sums = [name for name in table if name not in SPAN]
    out = dict(zip(sums, add_columns(index, n, [table[name] for name in sums]), strict=True))
    first, last = SPAN
    if first in table:
        out[first] = np.full(n, NO_START, np.int64)
        out[last] = np.full(n, NO_END, np.int64)
        np.minimum.at(out[first], index, table[first])
        np.maximum.at(out[last], index, table[last])
    return out


def gpu_spans(table: Columns) -> tuple[np.ndarray, np.ndarray]:
    """(per key its GPU start and span, 0 and 0 where it launched no GPU work; per key whether
    it launched some), from the key table's SPAN columns."""
    first, last = (table[name] for name in SPAN)
    launched = first <= last
    start = np.where(launched, first, 0)
    return np.stack([start, np.where(launched, last - start, 0)], axis=1), launched


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

    def finish(self, keys: int) -> Columns:
        """SPAN's columns, `keys` rows (keys nothing was added to: NO_START, NO_END)."""
        first = np.full(keys, NO_START, np.int64)
        last = np.full(keys, NO_END, np.int64)
        k = min(keys, len(self.first))
        first[:k], last[:k] = self.first[:k], self.last[:k]
        return dict(zip(SPAN, (first, last), strict=True))


class Sums:
    """Running sums of `width` columns per key, exact: int64 while a bound on every sum (what
    was added, in magnitude) stays below 2^60, Python ints (an object array) beyond."""

    def __init__(self, n: int, width: int) -> None:
        self.values = np.zeros((n, width), np.int64)
        self.bound = 0

    def add_keys(self, keys: np.ndarray, values: np.ndarray) -> None:
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
    """Per row of IDLE_KEYS columns, its census.model.step.IdleSplit."""
    from census.model.step import IdleSplit

    return list(map(IdleSplit, *columns.T.tolist()))

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

# What census.load.aggregates keeps per key: the kernels, launch calls, unions (summed over
# devices) and GPU busy time of the work launched in it.
KERNEL_SUMS = ("kernel_count", "kernel_time_ns", "nccl_kernel_count", "nccl_kernel_time_ns")
LAUNCH_SUMS = ("launch_api_count", "launch_api_time_ns", "graph_launch_count")
UNIONS = ("non_nccl_union_ns", "nccl_union_ns", "all_union_ns")
FIGURES = (*KERNEL_SUMS, *LAUNCH_SUMS, *UNIONS, "gpu_busy_ns")

NO_START, NO_END = int(np.iinfo(np.int64).max), int(np.iinfo(np.int64).min)  # no GPU work
_ROOM = 1 << 60  # below this in magnitude, sums and differences of a few values fit in int64


def exact(values: Iterable | np.ndarray) -> np.ndarray:
    """`values` (an array, or rows of ints) as int64 when every one is below 2^60 in magnitude,
    else as Python ints (an object array)."""
    try:
        out = np.asarray(values, np.int64)
    except OverflowError:
        return np.asarray(values, object)
    return out.astype(object) if _magnitude(out) >= _ROOM else out


def _magnitude(values: np.ndarray) -> int:
    return max(int(values.max()), -int(values.min())) if values.size else 0


def add_rows(index: np.ndarray, n: int, values: np.ndarray) -> np.ndarray:
    """The rows of `values` summed into n rows, row i into row index[i], exactly (`exact`)."""
    safe = values.dtype != object and _magnitude(values) < _ROOM // max(len(values), 1)
    out = np.zeros((n, *values.shape[1:]), np.int64 if safe else object)
    np.add.at(out, index, values if safe else values.astype(object))
    return out


def rows(values: Iterable[int], width: int) -> np.ndarray:
    """Values, row after row, as a (rows, width) array (`exact`)."""
    return exact(list(values)).reshape(-1, width)


def dense(keys: Iterable[int], values: Iterable[int], n: int, width: int) -> np.ndarray:
    """Rows given by key (each key in range(n) once; `values` row after row) as an (n, width)
    array (`exact`), zeros elsewhere."""
    given = rows(values, width)
    out = np.zeros((n, width), given.dtype)
    out[np.fromiter(keys, np.int64, len(given))] = given
    return out


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
        return self.values[:, self.names.index(name)]

    def summed(self, index: np.ndarray, n: int) -> Figures:
        """The keys summed into n rows, key i into row index[i]; spans widened."""
        first = np.full(n, NO_START, np.int64)
        last = np.full(n, NO_END, np.int64)
        np.minimum.at(first, index, self.first)
        np.maximum.at(last, index, self.last)
        return Figures(self.names, add_rows(index, n, self.values), first, last)

    def joined(self, names: Sequence[str], values: np.ndarray) -> Figures:
        """These columns with `names` replaced (or added, after them) by the columns of
        `values`."""
        every = (*self.names, *(n for n in names if n not in self.names))
        out = np.zeros((len(self), len(every)), np.result_type(self.values, values))
        out[:, : len(self.names)] = self.values
        out[:, [every.index(n) for n in names]] = values
        return Figures(every, out, self.first, self.last)

    def spans(self) -> tuple[list[int | None], list[int | None]]:
        """(per key its GPU start, per key its GPU span): None where it launched no GPU work."""
        none = self.first > self.last
        first = np.where(none, None, self.first.astype(object))
        return first.tolist(), np.where(none, None, self.last - np.where(none, 0, first)).tolist()


def figures_of(names: Sequence[str], values: np.ndarray, spans: dict[int, list[int]]) -> Figures:
    """Figures of dense columns, and of the spans by key (census.load.intervals.Spans)."""
    first = np.full(len(values), NO_START, np.int64)
    last = np.full(len(values), NO_END, np.int64)
    if spans:
        keys = np.fromiter(spans.keys(), np.int64, len(spans))
        first[keys], last[keys] = np.array(list(spans.values()), np.int64).T
    return Figures(tuple(names), values, first, last)


class IdleColumns(NamedTuple):
    """The split of the GPU idle time, IDLE_KEYS as columns: one row per step idx, and one
    per segment idx."""

    steps: np.ndarray
    segments: np.ndarray


def idle_splits(columns: np.ndarray) -> list:
    """Per row of IDLE_KEYS columns, its census.model.IdleSplit."""
    from census.model import IdleSplit

    return list(map(IdleSplit, *columns.T.tolist()))

"""The steps of a census as columns (one array per key, steps' and phases' apart): a sequence
of Step objects that makes each only when it is looked at, and whose sums, means and medians are
taken over the columns. Tens of thousands of steps with their phases took 4.7 KB of objects each
(0.9 GB at 3x10^7 kernels); as columns they take a few hundred bytes.

A step's phases are its rows of the phase columns, bounds[i]:bounds[i + 1], in the order its
Step.phases lists them. Every column is int64, or object (exact Python ints) where a value does
not fit. numpy is imported inside the functions (the CLI's --help imports the model).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from census.metrics import (
    DURATION_NS,
    GPU_BUSY_NS,
    GPU_IDLE_NS,
    GPU_SPAN_NS,
    GPU_START_NS,
    HOST_LEAD_NS,
    IDLE_KEYS,
    METRIC_KEYS,
)
from census.model.record import Column, as_given, listed
from census.model.step import METRIC_VALUES, IdleSplit, Metrics, Phase, Step

# the int columns of a step, and of a phase (the optional GPU span and idle split apart)
STEP_INTS = ("start_ns", "end_ns", GPU_BUSY_NS, "nccl_overlap_ns", *METRIC_KEYS)
PHASE_INTS = (*METRIC_KEYS, DURATION_NS, GPU_BUSY_NS)
_ROW_ARRAYS = ("gpu", "launched", "idle", "split")  # Rows' other arrays, in its record's order
_CHUNK = 4096  # steps made into objects at a time while iterating
_INT64 = 2**63


def int_array(values: Any) -> Any:
    """Ints as an int64 array, or an object array of Python ints where one does not fit."""
    import numpy as np

    try:
        found = np.asarray(values)
    except (OverflowError, ValueError):
        return np.asarray(values, object)
    if found.dtype.kind == "i" or found.size == 0:
        return found.astype(np.int64, copy=False)
    if found.dtype.kind == "u" and int(found.max()) < _INT64:
        return found.astype(np.int64)
    return np.asarray(values, object)  # floats, or ints past int64: exactly as given


def int_sum(column: Any) -> int:
    """The exact sum of a column of ints (int64 sums only when they cannot wrap)."""
    import numpy as np

    if column.dtype != object and len(column):
        top = max(abs(int(column.max())), abs(int(column.min())))
        if top < _INT64 // len(column):
            return int(np.sum(column, dtype=np.int64))
    return sum(column.tolist())


@dataclass(frozen=True, eq=False)
class Rows:
    """Rows of one kind (steps, or phases): a name each, the kind's int columns by key (the
    key table's own arrays where the engine made them: not copied), the GPU span (start, span;
    0 where `launched` is False) and the idle split (IDLE_KEYS; 0 where `split` is False: not
    computed)."""

    names: list[str]
    columns: dict[str, Any]  # the kind's ints (STEP_INTS or PHASE_INTS), each (n,), in order
    gpu: Any  # (n, 2)
    launched: Any  # (n,) bool
    idle: Any  # (n, len(IDLE_KEYS))
    split: Any  # (n,) bool

    def __len__(self) -> int:
        return len(self.names)

    def to_record(self, column: Column = listed) -> dict[str, Any]:
        """Its names, each int column by key and each other array as `column` writes it."""
        return {"names": self.names, "columns": {k: column(v) for k, v in self.columns.items()},
                **{k: column(getattr(self, k)) for k in _ROW_ARRAYS}}  # fmt: skip

    @classmethod
    def from_record(cls, data: dict[str, Any], column: Column = as_given) -> Rows:
        """The Rows to_record wrote `data` of (each array read back by `column`)."""
        import numpy as np

        columns = {k: int_array(column(v)) for k, v in data["columns"].items()}  # in the order
        n, arrays = len(data["names"]), {k: column(data[k]) for k in _ROW_ARRAYS}  # written
        return cls(data["names"], columns, int_array(arrays["gpu"]).reshape(n, 2), np.array(arrays["launched"], bool),
                   int_array(arrays["idle"]).reshape(n, len(IDLE_KEYS)),
                   np.array(arrays["split"], bool))  # fmt: skip

    def _each(self, pick: Any) -> Rows:
        """The rows `pick` (an index or a slice) of every column."""
        return Rows(self.names[pick] if isinstance(pick, slice)
                    else [self.names[i] for i in pick.tolist()],
                    {k: v[pick] for k, v in self.columns.items()}, self.gpu[pick],
                    self.launched[pick], self.idle[pick], self.split[pick])  # fmt: skip

    def take(self, index: Any) -> Rows:
        """The rows at `index` (an int64 array), in its order."""
        return self._each(index)

    def groups(self, rows: Any = None) -> dict[str, Any]:
        """Per name, its rows (all, or those of the int array `rows`), names by first
        appearance."""
        import numpy as np

        out: dict[str, list[int]] = {}
        for i in range(len(self)) if rows is None else rows.tolist():
            out.setdefault(self.names[i], []).append(i)
        return {name: np.array(found, np.int64) for name, found in out.items()}

    def part(self, lo: int, hi: int) -> Rows:
        """Rows lo:hi (views of the columns)."""
        return self._each(slice(lo, hi))

    def renamed(self, prefix: str) -> Rows:
        """The same rows, each name prefixed with `prefix`."""
        return Rows([prefix + n for n in self.names], self.columns, self.gpu, self.launched,
                    self.idle, self.split)  # fmt: skip

    def equals(self, other: Rows) -> bool:
        """Whether `other` has the same names and the same values in every column."""
        import numpy as np

        return (self.names == other.names and list(self.columns) == list(other.columns)
                and all(np.array_equal(v, other.columns[k]) for k, v in self.columns.items())
                and all(np.array_equal(getattr(self, k), getattr(other, k)) for k in _ROW_ARRAYS))  # fmt: skip

    def stacked(self, keys: Sequence[str]) -> Any:
        """The columns `keys`, side by side: an (n, len(keys)) array (object where one is)."""
        import numpy as np

        parts = [self.columns[k] for k in keys]
        if any(p.dtype == object for p in parts):
            parts = [p.astype(object) for p in parts]
        return np.stack(parts, axis=1) if parts else np.zeros((len(self), 0), np.int64)

    def values(self, lo: int, hi: int) -> Iterator[tuple]:
        """Rows lo:hi as (name, ints, gpu start or None, gpu span or None, IdleSplit or None)."""
        for name, ints, start, span, idle in self.plain(lo, hi):
            yield (name, ints, start, span,
                   None if idle is None else _frozen(IdleSplit, zip(IDLE_KEYS, idle, strict=True)))  # fmt: skip

    def plain(self, lo: int, hi: int) -> Iterator[tuple]:
        """Rows lo:hi as (name, ints in the columns' order, gpu start or None, gpu span or
        None, idle values or None): lists, tuples and ints, no object."""
        gpu, launched = self.gpu[lo:hi].tolist(), self.launched[lo:hi].tolist()
        idle, split = self.idle[lo:hi].tolist(), self.split[lo:hi].tolist()
        ints = zip(*(v[lo:hi].tolist() for v in self.columns.values()), strict=True)
        for name, row, (start, span), has_gpu, parts, has_idle in zip(
            self.names[lo:hi], ints, gpu, launched, idle, split, strict=True
        ):
            yield (name, row, start if has_gpu else None, span if has_gpu else None,
                   parts if has_idle else None)  # fmt: skip


@dataclass(frozen=True, eq=False)
class StepTable(Sequence):
    """The steps as columns; a Sequence of Step (made on each look, not kept)."""

    steps: Rows
    phases: Rows
    bounds: Any  # (len(steps) + 1,) int64: step i's phases are rows bounds[i]:bounds[i + 1]

    def to_record(self, column: Column = listed) -> dict[str, Any]:
        """The steps' and phases' rows (Rows.to_record) and the bounds, as `column` writes them:
        tens of thousands of steps load several times faster as columns than as objects."""
        return {"steps": self.steps.to_record(column), "phases": self.phases.to_record(column),
                "bounds": column(self.bounds)}  # fmt: skip

    @classmethod
    def from_record(cls, data: dict[str, Any], column: Column = as_given) -> StepTable:
        """The StepTable to_record wrote `data` of."""
        import numpy as np

        steps, phases = (Rows.from_record(data[side], column) for side in ("steps", "phases"))
        return cls(steps, phases, np.array(column(data["bounds"]), np.int64))

    # -- the sequence ------------------------------------------------------------------------
    def __len__(self) -> int:
        return len(self.steps)

    def __getitem__(self, index: Any) -> Any:
        import numpy as np

        if isinstance(index, slice):
            return self.take(np.arange(len(self))[index])
        i = range(len(self))[index]  # negative indexes, and IndexError past the end
        return self._made(i, i + 1)[0]

    def __iter__(self) -> Iterator[Step]:
        for lo, hi in self.chunks():
            yield from self._made(lo, hi)

    def chunks(self) -> Iterator[tuple[int, int]]:
        """(lo, hi): the steps a few thousand at a time."""
        for lo in range(0, len(self), _CHUNK):
            yield lo, min(lo + _CHUNK, len(self))

    def __eq__(self, other: object) -> bool:
        if isinstance(other, StepTable):
            return (self.steps.equals(other.steps) and self.phases.equals(other.phases)
                    and self.bounds.tolist() == other.bounds.tolist())  # fmt: skip
        if isinstance(other, tuple | list):
            return tuple(self) == tuple(other)
        return NotImplemented

    def __hash__(self) -> int:
        return hash(tuple(self))

    def __repr__(self) -> str:
        return f"StepTable({len(self)} steps, {len(self.phases)} phases)"

    def _made(self, lo: int, hi: int) -> list[Step]:
        """Steps lo:hi as objects."""
        bounds = self.bounds[lo : hi + 1].tolist()
        made = [_phase(*row) for row in self.phases.values(bounds[0], bounds[-1])]
        first = bounds[0]
        out = []
        for k, (name, ints, start, span, idle) in enumerate(self.steps.values(lo, hi)):
            metrics = _frozen(Metrics, zip(METRIC_KEYS, ints[4:], strict=True))
            phases = tuple(made[bounds[k] - first : bounds[k + 1] - first])
            out.append(_frozen(Step, zip(_STEP_FIELDS, (name, ints[0], ints[1], metrics, ints[2],
                                                        ints[3], phases, idle, start, span),
                                         strict=True)))  # fmt: skip
        return out

    # -- building ----------------------------------------------------------------------------
    def take(self, index: Any) -> StepTable:
        """The steps at these positions (an int array), with their phases."""
        import numpy as np

        index = np.asarray(index, np.int64)
        lo, hi = self.bounds[:-1][index], self.bounds[1:][index]
        sizes = hi - lo
        bounds = np.concatenate([[0], np.cumsum(sizes)]).astype(np.int64)
        cells = np.repeat(lo - bounds[:-1], sizes) + np.arange(int(bounds[-1]))
        return StepTable(self.steps.take(index), self.phases.take(cells), bounds)

    # -- columns -----------------------------------------------------------------------------
    def column(self, key: str) -> Any:
        """A step key's column: STEP_INTS, duration_ns, gpu_idle_ns, IDLE_KEYS (0 where not
        split), gpu_start_ns, gpu_span_ns, host_lead_ns (0 where not launched)."""
        return _column(self.steps, STEP_INTS, key)

    def phase_column(self, key: str) -> Any:
        """A phase key's column, one row per phase of every step (as `column`)."""
        return _column(self.phases, PHASE_INTS, key)

    def phase_step(self) -> Any:
        """Per phase row, its step's position."""
        import numpy as np

        return np.repeat(np.arange(len(self)), np.diff(self.bounds))

    @property
    def names(self) -> list[str]:
        """Each step's name, in the table's order."""
        return self.steps.names

    @property
    def launched(self) -> Any:
        """Per step, whether it launched GPU work (a bool array)."""
        return self.steps.launched

    @property
    def split(self) -> bool:
        """Whether every step has its idle split."""
        return bool(self.steps.split.all())


_STEP_FIELDS = ("name", "start_ns", "end_ns", "metrics", GPU_BUSY_NS, "nccl_overlap_ns",
                "phases", "idle", GPU_START_NS, GPU_SPAN_NS)  # fmt: skip
_PHASE_FIELDS = ("name", DURATION_NS, "metrics", GPU_BUSY_NS, "idle", GPU_START_NS,
                 GPU_SPAN_NS)  # fmt: skip
_N_METRICS = len(METRIC_KEYS)


def _phase(name: str, ints: list[int], start: int | None, span: int | None,
           idle: IdleSplit | None) -> Phase:  # fmt: skip
    metrics = _frozen(Metrics, zip(METRIC_KEYS, ints[:_N_METRICS], strict=True))
    return _frozen(Phase, zip(_PHASE_FIELDS, (name, ints[_N_METRICS], metrics,
                                              ints[_N_METRICS + 1], idle, start, span),
                              strict=True))  # fmt: skip


def _column(rows: Rows, ints: tuple[str, ...], key: str) -> Any:
    if key in rows.columns:
        return rows.columns[key]
    if key in IDLE_KEYS:
        return rows.idle[:, IDLE_KEYS.index(key)]
    if key == GPU_START_NS:
        return rows.gpu[:, 0]
    if key == GPU_SPAN_NS:
        return rows.gpu[:, 1]
    if ints is STEP_INTS:
        start, end = rows.columns["start_ns"], rows.columns["end_ns"]
        if key == DURATION_NS:
            return end - start
        if key == GPU_IDLE_NS:
            return end - start - rows.columns[GPU_BUSY_NS]
        if key == HOST_LEAD_NS:
            return rows.gpu[:, 0] + rows.gpu[:, 1] - end
    raise KeyError(key)


def _frozen(cls: type, items: Any) -> Any:
    """A frozen dataclass instance without its __init__ (one setattr per field): tens of
    thousands of steps are made in a fraction of the time. Fields in their declared order."""
    obj = object.__new__(cls)
    obj.__dict__.update(items)
    return obj


def from_steps(steps: Sequence[Step]) -> StepTable:
    """Step objects as a StepTable (a census built by hand, or read some other way)."""
    import numpy as np

    if isinstance(steps, StepTable):
        return steps
    phases = [p for s in steps for p in s.phases]
    step_ints = [(s.start_ns, s.end_ns, s.gpu_busy_ns, s.nccl_overlap_ns,
                  *METRIC_VALUES(s.metrics)) for s in steps]  # fmt: skip
    phase_ints = [(*METRIC_VALUES(p.metrics), p.duration_ns, p.gpu_busy_ns) for p in phases]
    bounds = np.concatenate([[0], np.cumsum([len(s.phases) for s in steps])]).astype(np.int64)
    return StepTable(_rows(steps, step_ints, STEP_INTS), _rows(phases, phase_ints, PHASE_INTS),
                     bounds)  # fmt: skip


def _rows(
    items: Sequence[Step] | Sequence[Phase], ints: list[tuple], keys: tuple[str, ...]
) -> Rows:
    import numpy as np

    n = len(items)
    idle = [(0,) * len(IDLE_KEYS) if x.idle is None else tuple(x.idle.__dict__.values())
            for x in items]  # fmt: skip
    gpu = [(x.gpu_start_ns or 0, x.gpu_span_ns or 0) for x in items]
    columns = zip(*ints, strict=True) if n else ([] for _ in keys)
    return Rows([x.name for x in items],
                {k: int_array(list(c)) for k, c in zip(keys, columns, strict=True)},
                int_array(gpu).reshape(n, 2),
                np.fromiter((x.gpu_start_ns is not None for x in items), bool, n),
                int_array(idle).reshape(n, len(IDLE_KEYS)),
                np.fromiter((x.idle is not None for x in items), bool, n))  # fmt: skip


def concat(tables: Sequence[StepTable], prefixes: Sequence[str]) -> StepTable:
    """The tables one after another, each step's name after its table's prefix."""
    import numpy as np

    def joined(parts: list[Rows]) -> Rows:
        return Rows([n for p in parts for n in p.names],
                    {k: _stacked([p.columns[k] for p in parts]) for k in parts[0].columns},
                    *(_stacked([getattr(p, k) for p in parts]) for k in _ROW_ARRAYS))  # fmt: skip

    offsets = np.cumsum([0] + [len(t.phases) for t in tables])
    bounds = np.concatenate(
        [[0]] + [t.bounds[1:] + o for t, o in zip(tables, offsets, strict=False)]
    )
    return StepTable(
        joined([t.steps.renamed(p) for t, p in zip(tables, prefixes, strict=True)]),
        joined([t.phases for t in tables]),
        bounds.astype(np.int64),
    )


def _stacked(parts: list[Any]) -> Any:
    import numpy as np

    if any(p.dtype == object for p in parts):
        parts = [p.astype(object) for p in parts]
    return np.concatenate(parts)

"""The cache's codec: `to_record`/`from_record` round-trip a whole Census exactly."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, fields, replace
from typing import Any

from census.model import (
    METRIC_KEYS,
    ApiStat,
    Census,
    ClassStat,
    CollectiveStat,
    Gpu,
    IdleSplit,
    KernelStat,
    MemoryStat,
    Metrics,
    Phase,
    RangeIdle,
    Source,
    Step,
)
from census.rows import idle_row, phase_row

STEP_COLUMNS = ("name", "start_ns", "end_ns", "gpu_busy_ns", "nccl_overlap_ns", "gpu_start_ns",
                "gpu_span_ns")  # fmt: skip
# a phase row: [name, *census keys, duration_ns, gpu_busy_ns, *idle keys, gpu_start_ns,
# gpu_span_ns]; its idle keys start at PHASE_VALUES after the name
PHASE_VALUES = len(METRIC_KEYS) + 2


def to_record(census: Census) -> dict[str, Any]:
    """Everything, for the cache; `from_record` inverts it exactly. Steps are stored as columns:
    tens of thousands of them load several times faster that way."""
    rec = asdict(replace(census, steps=()))
    steps = census.steps
    rec["steps"] = {c: [getattr(s, c) for s in steps] for c in STEP_COLUMNS}
    rec["steps"].update({k: [getattr(s.metrics, k) for s in steps] for k in METRIC_KEYS})
    rec["steps"]["phases"] = [[[p.name, *phase_row(p)] for p in s.phases] for s in steps]
    rec["steps"]["idle"] = [None if s.idle is None else list(idle_row(s.idle)) for s in steps]
    rec["means"] = {"per_step": census.per_step(), "per_step_timing": census.per_step_timing(),
                    "per_phase": census.per_phase(),
                    "host_ran_ahead": census.host_ran_ahead()}  # fmt: skip
    return rec


def from_record(rec: dict[str, Any]) -> Census:
    def build(cls: type, data: dict[str, Any]) -> Any:
        return cls(**{f.name: data[f.name] for f in fields(cls)})

    src = rec["source"]
    census = Census(
        source=Source(
            src["path"],
            src["nsys_version"],
            src["schema_version"],
            tuple(build(Gpu, g) for g in src["gpus"]),
        ),
        totals=build(Metrics, rec["totals"]),
        steps=StepColumns(rec["steps"]),
        classes=tuple(build(ClassStat, c) for c in rec["classes"]),
        kernels=tuple(build(KernelStat, k) for k in rec["kernels"]),
        memory=tuple(build(MemoryStat, m) for m in rec["memory"]),
        launch_apis=tuple(build(ApiStat, a) for a in rec["launch_apis"]),
        warnings=tuple(rec["warnings"]),
        graph_trace_mode=rec["graph_trace_mode"],
        sliced=rec["sliced"],
        collectives=tuple(build(CollectiveStat, c) for c in rec["collectives"]),
        nccl_overlap_ns=rec["nccl_overlap_ns"],
        idle_by_range=None
        if rec["idle_by_range"] is None
        else tuple(build(RangeIdle, r) for r in rec["idle_by_range"]),
    )
    census.__dict__["_memo_values"] = dict(rec["means"])
    return census


class StepColumns(Sequence):
    """The steps of a census read back from the cache, kept as columns and made into Step
    objects only when first looked at: counting them, or their means (cached beside them), needs
    none, and tens of thousands of steps take a while to build."""

    def __init__(self, columns: dict[str, list]) -> None:
        self._columns = columns
        self._steps: tuple[Step, ...] | None = None

    def _all(self) -> tuple[Step, ...]:
        if self._steps is None:
            cols = self._columns
            metrics = [
                _frozen(Metrics, zip(METRIC_KEYS, row, strict=True))
                for row in zip(*(cols[k] for k in METRIC_KEYS), strict=True)
            ]
            phases = [tuple(_phase(p) for p in row) for row in cols["phases"]]
            idle = [None if row is None else IdleSplit(*row) for row in cols["idle"]]
            keys = (*STEP_COLUMNS, "metrics", "phases", "idle")
            self._steps = tuple(
                _frozen(Step, zip(keys, row, strict=True))
                for row in zip(*(cols[c] for c in STEP_COLUMNS), metrics, phases, idle, strict=True)
            )
        return self._steps

    def __len__(self) -> int:
        return len(self._columns["name"])

    def __getitem__(self, index):  # type: ignore[override]
        return self._all()[index]

    def __iter__(self):
        return iter(self._all())

    def __eq__(self, other: object) -> bool:
        if isinstance(other, StepColumns | tuple):
            return self._all() == tuple(other)
        return NotImplemented

    def __hash__(self) -> int:
        return hash(self._all())

    def __repr__(self) -> str:
        return repr(self._all())


def _frozen(cls: type, items: Any) -> Any:
    """A frozen dataclass instance without its __init__ (one setattr per field): tens of
    thousands of steps come back from the cache in a fraction of the time."""
    obj = object.__new__(cls)
    obj.__dict__.update(items)
    return obj


def _phase(row: list) -> Phase:
    """[name, *census keys, duration_ns, gpu_busy_ns, *idle keys, gpu_start_ns, gpu_span_ns]
    -> Phase."""
    name, *values, gpu_start_ns, gpu_span_ns = row
    n = len(METRIC_KEYS)
    metrics = _frozen(Metrics, zip(METRIC_KEYS, values[:n], strict=True))
    idle = values[PHASE_VALUES:]
    return Phase(name, values[n], metrics, values[n + 1],
                 None if idle[0] is None else IdleSplit(*idle), gpu_start_ns,
                 gpu_span_ns)  # fmt: skip

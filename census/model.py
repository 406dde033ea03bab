"""The census data model: frozen dataclasses of integer nanoseconds and bytes.

`summary_json` is the public contract (`census summary --json`); `to_record`/`from_record`
round-trip the whole model for the cache.
"""

from __future__ import annotations

import operator
from collections.abc import Sequence
from dataclasses import asdict, dataclass, fields, replace
from typing import Any

from census import CENSUS_VERSION

METRIC_KEYS: tuple[str, ...] = (
    "kernel_count",
    "kernel_time_ns",
    "nccl_kernel_count",
    "nccl_kernel_time_ns",
    "non_nccl_kernel_count",
    "non_nccl_kernel_time_ns",
    "non_nccl_union_ns",
    "launch_api_count",
    "launch_api_time_ns",
    "graph_launch_count",
    "d2d_count",
    "d2d_bytes",
)
TIMING_KEYS: tuple[str, ...] = ("step_time_ns", "gpu_busy_ns", "gpu_idle_ns")


@dataclass(frozen=True)
class Metrics:
    kernel_count: int = 0
    kernel_time_ns: int = 0
    nccl_kernel_count: int = 0
    nccl_kernel_time_ns: int = 0
    non_nccl_kernel_count: int = 0
    non_nccl_kernel_time_ns: int = 0
    non_nccl_union_ns: int = 0
    launch_api_count: int = 0
    launch_api_time_ns: int = 0
    graph_launch_count: int = 0
    d2d_count: int = 0
    d2d_bytes: int = 0

    def as_dict(self) -> dict[str, int]:
        return {k: getattr(self, k) for k in METRIC_KEYS}


@dataclass(frozen=True)
class Step:
    name: str
    start_ns: int
    end_ns: int
    metrics: Metrics
    gpu_busy_ns: int
    nccl_overlap_ns: int = 0  # NCCL kernel union ∩ non-NCCL kernel union, per device, summed

    @property
    def duration_ns(self) -> int:
        return self.end_ns - self.start_ns

    @property
    def gpu_idle_ns(self) -> int:
        return self.duration_ns - self.gpu_busy_ns


@dataclass(frozen=True)
class KernelStat:
    """One kernel name: totals over the capture, and sums over the selected steps."""

    name: str
    cls: str
    count: int
    time_ns: int
    step_count: int
    step_time_ns: int


@dataclass(frozen=True)
class ClassStat:
    cls: str
    count: int
    time_ns: int
    step_count: int
    step_time_ns: int


@dataclass(frozen=True)
class MemoryStat:
    """Memory copies of one kind (`Device-to-Device`, ...) or memsets (`memset`)."""

    kind: str
    count: int
    bytes: int
    time_ns: int
    step_count: int
    step_bytes: int


@dataclass(frozen=True)
class CollectiveStat:
    """NCCL kernels of one collective (AllReduce, SendRecv, ...)."""

    collective: str
    count: int
    time_ns: int
    step_count: int
    step_time_ns: int


@dataclass(frozen=True)
class ApiStat:
    api: str
    count: int
    time_ns: int
    step_count: int = 0
    step_time_ns: int = 0


@dataclass(frozen=True)
class Gpu:
    id: int
    name: str | None


@dataclass(frozen=True)
class Source:
    path: str
    nsys_version: str | None
    schema_version: str | None
    gpus: tuple[Gpu, ...]


@dataclass(frozen=True)
class Census:
    source: Source
    totals: Metrics
    steps: tuple[Step, ...]
    classes: tuple[ClassStat, ...]
    kernels: tuple[KernelStat, ...]  # every kernel name, by total time, descending
    memory: tuple[MemoryStat, ...]
    launch_apis: tuple[ApiStat, ...]
    warnings: tuple[str, ...]
    graph_trace_mode: bool = False
    sliced: bool = False
    collectives: tuple[CollectiveStat, ...] = ()
    nccl_overlap_ns: int = 0

    @property
    def step_count(self) -> int:
        return len(self.steps)

    def per_step(self) -> dict[str, float] | None:
        """Mean of each metric over the selected steps; None without steps."""
        return self._memo("per_step", self._per_step)

    def per_step_timing(self) -> dict[str, float] | None:
        return self._memo("per_step_timing", self._per_step_timing)

    def _memo(self, name: str, compute: Any) -> Any:
        """Means over tens of thousands of steps, computed once (the fields never change)."""
        memo = self.__dict__.setdefault("_memo_values", {})
        if name not in memo:
            memo[name] = compute()
        value = memo[name]
        return None if value is None else dict(value)

    def _per_step(self) -> dict[str, float] | None:
        if not self.steps:
            return None
        n = len(self.steps)
        sums = map(sum, zip(*map(_METRIC_VALUES, (s.metrics for s in self.steps)), strict=True))
        return {k: total / n for k, total in zip(METRIC_KEYS, sums, strict=True)}

    def _per_step_timing(self) -> dict[str, float] | None:
        if not self.steps:
            return None
        n = len(self.steps)
        duration = sum(s.end_ns for s in self.steps) - sum(s.start_ns for s in self.steps)
        busy = sum(s.gpu_busy_ns for s in self.steps)
        return {
            "step_time_ns": duration / n,
            "gpu_busy_ns": busy / n,
            "gpu_idle_ns": (duration - busy) / n,
        }


_METRIC_VALUES = operator.attrgetter(*METRIC_KEYS)


def summary_json(census: Census, top: int = 20) -> dict[str, Any]:
    """The `census summary --json` contract."""
    n = census.step_count

    def mean(x: int) -> float | None:
        return x / n if n else None

    return {
        "census_version": CENSUS_VERSION,
        "source": {
            "path": census.source.path,
            "nsys_version": census.source.nsys_version,
            "schema_version": census.source.schema_version,
            "gpus": [{"id": g.id, "name": g.name} for g in census.source.gpus],
        },
        "totals": census.totals.as_dict(),
        "steps": [
            {
                "name": s.name,
                "start_ns": s.start_ns,
                "end_ns": s.end_ns,
                **dict(zip(METRIC_KEYS, _METRIC_VALUES(s.metrics), strict=True)),
            }
            for s in census.steps
        ],
        "per_step": census.per_step(),
        "timing": {
            "steps": [
                {
                    "name": s.name,
                    "step_time_ns": s.duration_ns,
                    "gpu_busy_ns": s.gpu_busy_ns,
                    "gpu_idle_ns": s.gpu_idle_ns,
                }
                for s in census.steps
            ],
            "per_step": census.per_step_timing(),
        },
        "classes": [
            {
                "class": c.cls,
                "count": c.count,
                "time_ns": c.time_ns,
                "per_step_count": mean(c.step_count),
                "per_step_time_ns": mean(c.step_time_ns),
            }
            for c in census.classes
        ],
        "top_kernels": [
            {
                "name": k.name,
                "class": k.cls,
                "count": k.count,
                "time_ns": k.time_ns,
                "per_step_count": mean(k.step_count),
                "per_step_time_ns": mean(k.step_time_ns),
            }
            for k in census.kernels[:top]
        ],
        "memory": [
            {
                "kind": m.kind,
                "count": m.count,
                "bytes": m.bytes,
                "time_ns": m.time_ns,
                "per_step_count": mean(m.step_count),
                "per_step_bytes": mean(m.step_bytes),
            }
            for m in census.memory
        ],
        "launch_apis": [
            {
                "api": a.api,
                "count": a.count,
                "time_ns": a.time_ns,
                "per_step_count": mean(a.step_count),
                "per_step_time_ns": mean(a.step_time_ns),
            }
            for a in census.launch_apis
        ],
        "nccl": {
            "collectives": [
                {
                    "collective": c.collective,
                    "count": c.count,
                    "time_ns": c.time_ns,
                    "per_step_count": mean(c.step_count),
                    "per_step_time_ns": mean(c.step_time_ns),
                }
                for c in census.collectives
            ],
            "overlap_ns": census.nccl_overlap_ns,
            "per_step_overlap_ns": mean(sum(s.nccl_overlap_ns for s in census.steps)),
        },
        "warnings": list(census.warnings),
    }


STEP_COLUMNS = ("name", "start_ns", "end_ns", "gpu_busy_ns", "nccl_overlap_ns")


def to_record(census: Census) -> dict[str, Any]:
    """Everything, for the cache; `from_record` inverts it exactly. Steps are stored as columns:
    tens of thousands of them load several times faster that way."""
    rec = asdict(replace(census, steps=()))
    steps = census.steps
    rec["steps"] = {c: [getattr(s, c) for s in steps] for c in STEP_COLUMNS}
    rec["steps"].update({k: [getattr(s.metrics, k) for s in steps] for k in METRIC_KEYS})
    rec["means"] = {"per_step": census.per_step(), "per_step_timing": census.per_step_timing()}
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
            keys = (*STEP_COLUMNS, "metrics")
            self._steps = tuple(
                _frozen(Step, zip(keys, row, strict=True))
                for row in zip(*(cols[c] for c in STEP_COLUMNS), metrics, strict=True)
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

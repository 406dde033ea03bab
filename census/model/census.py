"""The census data model: frozen dataclasses of integer nanoseconds and bytes.

Each class writes and reads its own record (census.model.record.Record: generic over its
fields); the cache's file format is census.store.codec's, the JSON contracts
census.render.json_docs's.
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass, replace
from typing import Any

from census.definitions import HOST_AHEAD_SHARE, OUTSIDE_PHASES
from census.metrics import (
    DURATION_NS,
    GPU_BUSY_NS,
    GPU_IDLE_NS,
    GPU_SPAN_NS,
    GPU_START_NS,
    HOST_LEAD_NS,
    IDLE_KEYS,
    METRIC_KEYS,
    PHASE_KEYS,
    STEP_TIME_NS,
)
from census.model.ops import OpRows
from census.model.ranks import NcclRecord
from census.model.record import Column, Record, as_given, listed
from census.model.shown import shown
from census.model.step import (
    Metrics,
    per_step_mean,
)
from census.model.step_table import StepTable, from_steps, int_sum


@dataclass(frozen=True)
class KernelStat(Record):
    """One kernel name: totals over the capture, and sums over the selected steps."""

    name: str
    cls: str
    count: int
    time_ns: int
    step_count: int
    step_time_ns: int


@dataclass(frozen=True)
class ClassStat(Record):
    """One kernel class (definitions.CLASS_ORDER): count and time over the capture, and sums over
    the selected steps."""

    cls: str
    count: int
    time_ns: int
    step_count: int
    step_time_ns: int


@dataclass(frozen=True)
class MemoryStat(Record):
    """Memory copies of one kind (`Device-to-Device`, ...) or memsets (`memset`)."""

    kind: str
    count: int
    bytes: int
    time_ns: int
    step_count: int
    step_bytes: int


@dataclass(frozen=True)
class CollectiveStat(Record):
    """NCCL kernels of one collective (AllReduce, SendRecv, ...)."""

    collective: str
    count: int
    time_ns: int
    step_count: int
    step_time_ns: int


@dataclass(frozen=True)
class ApiStat(Record):
    """One launch API (definitions.normalise_api_name's): its launch calls' count and time over the
    capture, and sums over the selected steps."""

    api: str
    count: int
    time_ns: int
    step_count: int = 0
    step_time_ns: int = 0


@dataclass(frozen=True)
class Gpu(Record):
    """A GPU of the capture: its device id and name (None where the export has none)."""

    id: int
    name: str | None


@dataclass(frozen=True)
class RangeIdle(Record):
    """GPU idle time inside one host NVTX range (definitions.IDLE_BY_RANGE_RULE)."""

    range: str
    idle_ns: int  # summed over the selected steps


@dataclass(frozen=True)
class Source(Record):
    """The export a census was read from: its path, nsys and schema versions, GPUs and tracer."""

    path: str
    nsys_version: str | None
    schema_version: str | None
    gpus: tuple[Gpu, ...]
    # (table, why) of each table read with SQL, not from the file's pages: slower, said once
    read_with_sql: tuple[tuple[str, str], ...] = ()
    # the tracer a trace's export names (`torch.profiler (Kineto)`); None for an nsys export
    tracer: str | None = None

    @property
    def traced_by(self) -> str:
        """Who traced it, as every output names it: `nsys 2025.3.2` or the trace's tracer."""
        return self.tracer or f"nsys {self.nsys_version or '?'}"

    @property
    def profiler(self) -> str:
        """The profiler that made it, as sentences name it: `nsys` or `torch.profiler`."""
        return (self.tracer or "nsys").split(" (")[0]


@dataclass(frozen=True, repr=False)
class Census(Record):
    """One capture's census: whole-capture totals, the selected steps (with phases), the kernels by
    name, class and collective, memory copies, launch APIs and warnings."""

    source: Source
    totals: Metrics
    steps: StepTable  # any sequence of Step given is kept as a StepTable
    classes: tuple[ClassStat, ...]
    kernels: tuple[KernelStat, ...]  # every kernel name, by total time, descending
    memory: tuple[MemoryStat, ...]
    launch_apis: tuple[ApiStat, ...]
    warnings: tuple[str, ...]
    graph_trace_mode: bool = False
    sliced: bool = False
    collectives: tuple[CollectiveStat, ...] = ()
    nccl_overlap_ns: int = 0
    # GPU idle time by host range, by time descending; None: not computed (--no-idle)
    idle_by_range: tuple[RangeIdle, ...] | None = None
    # its ranks (processes that launched kernels) and their NCCL kernels, for the wait split
    # (census.findings.nccl_ranks); None without NCCL kernels and with at most one rank
    nccl: NcclRecord | None = None
    # its kernels by operation (#56): None where the export has no op ranges
    ops: OpRows | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.steps, StepTable):
            object.__setattr__(self, "steps", from_steps(self.steps))

    def to_record(self, column: Column = listed) -> dict[str, Any]:
        """Its fields' records (Record.to_record; the steps as columns, census.model.step_table)
        and its means over the steps ("means"), which from_record keeps instead of computing
        them again."""
        return {**super().to_record(column),
                "means": {"per_step": self.per_step(), "per_step_timing": self.per_step_timing(),
                          "per_phase": self.per_phase(),
                          "host_ran_ahead": self.host_ran_ahead()}}  # fmt: skip

    @classmethod
    def from_record(cls, data: dict[str, Any], column: Column = as_given) -> Census:
        """The Census to_record wrote `data` of, exactly, with its means."""
        census = super().from_record(data, column)
        census.__dict__["_memo_values"] = dict(data["means"])
        return census

    def read_through(self, path: str) -> Census:
        """This census as read through `path` (its source's path): the cache keys an export by
        its resolved path, so a census read through a symlink serves the file's other names."""
        if path == self.source.path:
            return self
        census = replace(self, source=replace(self.source, path=path))
        census.__dict__["_memo_values"] = dict(self.__dict__.get("_memo_values", {}))
        return census

    @property
    def step_count(self) -> int:
        """The number of selected steps."""
        return len(self.steps)

    def __repr__(self) -> str:
        return shown("census_repr", self)

    def _repr_html_(self) -> str:
        return shown("census_html", self)

    def mean(self, total: float) -> float | None:
        """per_step_mean over the selected steps; None without steps."""
        return per_step_mean(total, len(self.steps))

    def per_step(self) -> dict[str, float] | None:
        """Mean of each metric over the selected steps; None without steps."""
        return self._memo("per_step", self._per_step)

    def per_step_timing(self) -> dict[str, float] | None:
        """Per-step means of step_time_ns, gpu_busy_ns, gpu_idle_ns and the idle keys (None each
        when idle was not split), and gpu_span_ns and host_lead_ns over the steps that launched GPU
        work (None if none did); None without steps."""
        return self._memo("per_step_timing", self._per_step_timing)

    def per_phase(self) -> dict[str, dict[str, float]]:
        """Per phase name, the mean of each phase key over the selected steps (a phase absent
        from a step counts zero there), and gpu_span_ns: its mean over the steps where the phase
        launched GPU work (None if none did); empty without phases."""
        return self._memo("per_phase", self._per_phase)

    def host_ran_ahead(self) -> bool | None:
        """Whether the host ran ahead of the GPU (definitions.HOST_AHEAD_RULE): the median
        host_lead_ns over the steps with GPU work is more than HOST_AHEAD_SHARE of the median
        step time. None without steps, or when no step launched GPU work."""
        return self._memo("host_ran_ahead", self._host_ran_ahead)

    def idle_ranges(self) -> list[dict[str, Any]] | None:
        """[{"range", "idle_ns_per_step", "share"}] by time: each range's GPU idle time per step
        and its share of the steps' GPU idle time; None when not computed or without steps."""
        if self.idle_by_range is None or not self.steps:
            return None
        idle = int_sum(self.steps.column(GPU_IDLE_NS))
        return [{"range": r.range, "idle_ns_per_step": self.mean(r.idle_ns),
                 "share": r.idle_ns / idle if idle else None}
                for r in self.idle_by_range]  # fmt: skip

    def _memo(self, name: str, compute: Any) -> Any:
        """Means over tens of thousands of steps, computed once (the fields never change)."""
        memo = self.__dict__.setdefault("_memo_values", {})
        if name not in memo:
            memo[name] = compute()
        value = memo[name]
        return dict(value) if isinstance(value, dict) else value

    def _per_step(self) -> dict[str, float] | None:
        if not self.steps:
            return None
        return {k: self.mean(int_sum(self.steps.column(k))) for k in METRIC_KEYS}

    def _per_phase(self) -> dict[str, dict[str, float]]:
        table = self.steps
        order = table.phases.groups()
        split, launched = table.phases.split, table.phases.launched
        out = {}
        for name in sorted(order, key=lambda name: name == OUTSIDE_PHASES):  # the remainder last
            rows = order[name]
            sums = [int_sum(table.phase_column(k)[rows]) for k in PHASE_KEYS[: -len(IDLE_KEYS)]]
            idle = [int_sum(table.phase_column(k)[rows]) if split[rows].all() else None
                    for k in IDLE_KEYS]  # fmt: skip
            spans = table.phase_column(GPU_SPAN_NS)[rows][launched[rows]]
            out[name] = {**dict(zip(PHASE_KEYS, (None if v is None else self.mean(v)
                                                 for v in sums + idle), strict=True)),
                         GPU_SPAN_NS: per_step_mean(int_sum(spans), len(spans)) if len(spans)
                         else None}  # fmt: skip
        return out

    def _host_ran_ahead(self) -> bool | None:
        launched = self.steps.launched
        if not launched.any():
            return None
        leads = self.steps.column(HOST_LEAD_NS)[launched].tolist()
        step_time = statistics.median(self.steps.column(DURATION_NS).tolist())
        return statistics.median(leads) > HOST_AHEAD_SHARE * step_time

    def _per_step_timing(self) -> dict[str, float] | None:
        steps = self.steps
        if not steps:
            return None
        duration = int_sum(steps.column("end_ns")) - int_sum(steps.column("start_ns"))
        busy = int_sum(steps.column(GPU_BUSY_NS))
        idle = [self.mean(int_sum(steps.column(k))) if steps.split else None for k in IDLE_KEYS]
        launched = steps.launched
        spans = int_sum(steps.column(GPU_SPAN_NS)[launched])
        ends = int_sum(steps.column(GPU_START_NS)[launched]) + spans
        leads = ends - int_sum(steps.column("end_ns")[launched])
        count = int(launched.sum())
        return {
            STEP_TIME_NS: self.mean(duration),
            GPU_BUSY_NS: self.mean(busy),
            GPU_IDLE_NS: self.mean(duration - busy),
            # over the steps that launched GPU work: one without has no span, not a span of 0
            GPU_SPAN_NS: per_step_mean(spans, count),
            HOST_LEAD_NS: per_step_mean(leads, count),
            **dict(zip(IDLE_KEYS, idle, strict=True)),
        }

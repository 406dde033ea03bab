"""The census data model: frozen dataclasses of integer nanoseconds and bytes.

The JSON contracts live in census.render.json_docs; the cache's codec in census.store.codec.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from census.definitions import HOST_AHEAD_SHARE, OUTSIDE_PHASES
from census.metrics import IDLE_KEYS, METRIC_KEYS, PHASE_KEYS
from census.rank_model import NcclRecord
from census.step_model import (  # noqa: F401  (the model's objects, named here too)
    METRIC_VALUES,
    IdleSplit,
    Metrics,
    Phase,
    Step,
    idle_values,
    per_step_mean,
)
from census.step_table import StepTable, from_steps, int_sum


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
    """One kernel class (definitions.CLASS_ORDER): count and time over the capture, and sums over
    the selected steps."""

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
    """One launch API (definitions.normalise_api_name's): its launch calls' count and time over the
    capture, and sums over the selected steps."""

    api: str
    count: int
    time_ns: int
    step_count: int = 0
    step_time_ns: int = 0


@dataclass(frozen=True)
class Gpu:
    """A GPU of the capture: its device id and name (None where the export has none)."""

    id: int
    name: str | None


@dataclass(frozen=True)
class RangeIdle:
    """GPU idle time inside one host NVTX range (definitions.IDLE_BY_RANGE_RULE)."""

    range: str
    idle_ns: int  # summed over the selected steps


@dataclass(frozen=True)
class Source:
    """The export a census was read from: its path, nsys and schema versions and GPUs."""

    path: str
    nsys_version: str | None
    schema_version: str | None
    gpus: tuple[Gpu, ...]
    # (table, why) of each table read with SQL, not from the file's pages: slower, said once
    read_with_sql: tuple[tuple[str, str], ...] = ()


@dataclass(frozen=True, repr=False)
class Census:
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
    # (census.nccl_ranks); None without NCCL kernels and with at most one rank
    nccl: NcclRecord | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.steps, StepTable):
            object.__setattr__(self, "steps", from_steps(self.steps))

    @property
    def step_count(self) -> int:
        """The number of selected steps."""
        return len(self.steps)

    def __repr__(self) -> str:
        from census.notebook import census_repr

        return census_repr(self)

    def _repr_html_(self) -> str:
        from census.notebook import census_html

        return census_html(self)

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
        idle = int_sum(self.steps.column("gpu_idle_ns"))
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
            spans = table.phase_column("gpu_span_ns")[rows][launched[rows]]
            out[name] = {**dict(zip(PHASE_KEYS, (None if v is None else self.mean(v)
                                                 for v in sums + idle), strict=True)),
                         "gpu_span_ns": per_step_mean(int_sum(spans), len(spans)) if len(spans)
                         else None}  # fmt: skip
        return out

    def _host_ran_ahead(self) -> bool | None:
        launched = self.steps.launched
        if not launched.any():
            return None
        leads = self.steps.column("host_lead_ns")[launched].tolist()
        step_time = statistics.median(self.steps.column("duration_ns").tolist())
        return statistics.median(leads) > HOST_AHEAD_SHARE * step_time

    def _per_step_timing(self) -> dict[str, float] | None:
        steps = self.steps
        if not steps:
            return None
        duration = int_sum(steps.column("end_ns")) - int_sum(steps.column("start_ns"))
        busy = int_sum(steps.column("gpu_busy_ns"))
        idle = [self.mean(int_sum(steps.column(k))) if steps.split else None for k in IDLE_KEYS]
        launched = steps.launched
        spans = int_sum(steps.column("gpu_span_ns")[launched])
        ends = int_sum(steps.column("gpu_start_ns")[launched]) + spans
        leads = ends - int_sum(steps.column("end_ns")[launched])
        count = int(launched.sum())
        return {
            "step_time_ns": self.mean(duration),
            "gpu_busy_ns": self.mean(busy),
            "gpu_idle_ns": self.mean(duration - busy),
            # over the steps that launched GPU work: one without has no span, not a span of 0
            "gpu_span_ns": per_step_mean(spans, count),
            "host_lead_ns": per_step_mean(leads, count),
            **dict(zip(IDLE_KEYS, idle, strict=True)),
        }


# -- A/B experiments ----------------------------------------------------------------------
def percentile(values: Sequence[int | float], q: float) -> float:
    """The q-th percentile by linear interpolation between closest ranks (numpy's default):
    position (n − 1)·q/100 in the sorted values."""
    xs = sorted(values)
    if not xs:
        raise ValueError("percentile of no values")
    pos = (len(xs) - 1) * q / 100
    lo = math.floor(pos)
    hi = min(lo + 1, len(xs) - 1)
    return float(xs[lo] + (xs[hi] - xs[lo]) * (pos - lo))


@dataclass(frozen=True)
class ArmEnv:
    """What an arm's measured window ran beside, read when the window opens and closes (outside
    the timed steps). None where this machine does not expose it."""

    cpu_share: float | None  # this process's CPU time (all threads, user + system) / wall time
    other_cpu_cores: float | None  # busy CPU time outside the arm's process group / wall time
    load1: float | None  # the 1-minute load average when the window closed
    gpu_sm_clock_mhz: int | None = None  # the lower of the SM clock's reads at open and close
    gpu_throttle: tuple[str, ...] = ()  # NVML's clock-throttle reasons seen at open or close


@dataclass(frozen=True)
class RankRecord:
    """One rank's own figures in an arm of several ranks (the arm's step time per step is the
    slowest rank's), and its place in the job as its launcher said (census.capture.launcher):
    None where the record did not say (one written before census kept it)."""

    rank: int
    median_ns: float  # this rank's median step time
    recompiles: int | None
    graph_breaks: int | None
    peak_allocated_bytes: int | None
    peak_reserved_bytes: int | None
    env: ArmEnv | None = None
    host: str | None = None
    local_rank: int | None = None
    node: int | None = None  # the node's index, where the launcher says it
    pid: int | None = None
    gpu_index: int | None = None  # torch's index of its GPU, among the GPUs it saw
    gpu_uuid: str | None = None
    launcher: str | None = None  # census.capture.launcher.PRECEDENCE's name
    launcher_note: str | None = None  # another launcher's variables disagreed


@dataclass(frozen=True)
class Arm:
    """One arm of a `census ab` experiment: one run of side a or b, its measured steps' times on
    `clock` ('cuda_events' or 'host'), and what it recorded beside them; `discarded`: a warm-up arm,
    left out of the statistics."""

    side: str  # "a" or "b"
    index: int  # position in run order, the warm arm 0
    discarded: bool
    step_time_ns: tuple[int, ...]
    peak_allocated_bytes: int | None = None
    peak_reserved_bytes: int | None = None
    recompiles: int | None = None  # frames Dynamo compiled inside the measured window
    graph_breaks: int | None = None
    clock: str = "host"
    # per census.phase name, its time in each measured step (as step_time_ns: one per step, on
    # the same clock); empty when the arm recorded no phases
    phase_time_ns: dict[str, tuple[int, ...]] = field(default_factory=dict)
    # census.record(name, value) per measured step (None where the step recorded none; the last
    # value a step recorded); with several ranks, rank 0's
    values: dict[str, tuple[float | None, ...]] = field(default_factory=dict)
    # census.count(name) inside the measured window, per rank (rank order; one entry per rank)
    counts: dict[str, tuple[int, ...]] = field(default_factory=dict)
    env: ArmEnv | None = None  # what the arm ran beside (None: not recorded)
    ranks: tuple[RankRecord, ...] = ()  # with several ranks, each rank's own; () for one
    wall_ns: int | None = None  # the arm's process, start to end (None: not kept)
    census_ns: int | None = None  # census's own time on the arm: its records read and merged

    @property
    def median_ns(self) -> float:
        """The median of its step times (ns)."""
        return percentile(self.step_time_ns, 50)

    @property
    def p95_ns(self) -> float:
        """The 95th percentile of its step times (ns)."""
        return percentile(self.step_time_ns, 95)


@dataclass(frozen=True)
class AutoArms:
    """What `--arms auto` was asked and how its runner ended, as ab.json keeps it: enough to
    take every look again from the arms (census.compare.auto_arms.looks_of)."""

    max_arms: int
    min_effect_ns: float  # resolved at the first look (a percentage is of A's step there)
    min_effect: str | None  # as given ('1%', '0.5ms'); None: the default, 1% of A's step
    budget_s: float | None
    budget_stop: bool  # the runner ran no more arms because the next look would not fit

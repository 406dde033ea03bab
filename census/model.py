"""The census data model: frozen dataclasses of integer nanoseconds and bytes.

The JSON contracts live in census.render.json_docs; the cache's codec in census.store.codec.
"""

from __future__ import annotations

import math
import operator
import statistics
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from census.definitions import (
    HOST_AHEAD_SHARE,
    IDLE_KEYS,
    METRIC_KEYS,
    OUTSIDE_PHASES,
    PHASE_KEYS,
)


def per_step_mean(total: float, steps: int) -> float | None:
    """The mean of a figure over `steps` steps, from its total over them: the one definition of
    a per-step figure (a float: only rendering rounds it). None without steps."""
    return total / steps if steps else None


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
        return self.__dict__.copy()  # the fields, declared in METRIC_KEYS order


@dataclass(frozen=True)
class IdleSplit:
    """Where GPU idle time went (census.load.idle): the parts add up to the idle time."""

    sync_count: int = 0
    sync_time_ns: int = 0
    idle_after_sync_ns: int = 0
    idle_launch_ns: int = 0
    idle_other_ns: int = 0

    def as_dict(self) -> dict[str, int]:
        return self.__dict__.copy()  # the fields, declared in IDLE_KEYS order


def idle_values(idle: IdleSplit | None) -> dict[str, int | None]:
    """The idle keys, None each when the split was not computed."""
    return idle.as_dict() if idle is not None else dict.fromkeys(IDLE_KEYS)


@dataclass(frozen=True)
class Phase:
    """One phase of one step (all its ranges in the step together), or the step's remainder."""

    name: str
    duration_ns: int
    metrics: Metrics
    gpu_busy_ns: int
    idle: IdleSplit | None = None  # None: not computed (census --idle)
    # the GPU work launched in the phase's segments of the step: its earliest start, and latest
    # end − that; None when it launched none (not in as_dict: spans do not add up over phases)
    gpu_start_ns: int | None = None
    gpu_span_ns: int | None = None

    def as_dict(self) -> dict[str, int | None]:
        return {**self.metrics.as_dict(), "duration_ns": self.duration_ns,
                "gpu_busy_ns": self.gpu_busy_ns, **idle_values(self.idle)}  # fmt: skip


@dataclass(frozen=True)
class Step:
    name: str
    start_ns: int
    end_ns: int
    metrics: Metrics
    gpu_busy_ns: int
    nccl_overlap_ns: int = 0  # NCCL kernel union ∩ non-NCCL kernel union, per device, summed
    phases: tuple[Phase, ...] = ()  # named phases by first start, then the remainder
    idle: IdleSplit | None = None  # None: not computed (census --idle)
    # the GPU work launched in the step, as the GPU ran it: its earliest start, and latest end −
    # that; None when the step launched none
    gpu_start_ns: int | None = None
    gpu_span_ns: int | None = None

    @property
    def duration_ns(self) -> int:
        return self.end_ns - self.start_ns

    @property
    def gpu_idle_ns(self) -> int:
        return self.duration_ns - self.gpu_busy_ns

    @property
    def gpu_end_ns(self) -> int | None:
        return None if self.gpu_start_ns is None else self.gpu_start_ns + self.gpu_span_ns

    @property
    def host_lead_ns(self) -> int | None:
        """How long after the step's range ended its GPU work ended (negative: before)."""
        end = self.gpu_end_ns
        return None if end is None else end - self.end_ns


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
class RangeIdle:
    """GPU idle time inside one host NVTX range (definitions.IDLE_BY_RANGE_RULE)."""

    range: str
    idle_ns: int  # summed over the selected steps


@dataclass(frozen=True)
class Source:
    path: str
    nsys_version: str | None
    schema_version: str | None
    gpus: tuple[Gpu, ...]


@dataclass(frozen=True, repr=False)
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
    # GPU idle time by host range, by time descending; None: not computed (--no-idle)
    idle_by_range: tuple[RangeIdle, ...] | None = None

    @property
    def step_count(self) -> int:
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
        idle = sum(s.gpu_idle_ns for s in self.steps)
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
        metrics = [s.metrics for s in self.steps]
        return {k: self.mean(sum(map(operator.attrgetter(k), metrics))) for k in METRIC_KEYS}

    def _per_phase(self) -> dict[str, dict[str, float]]:
        by_name: dict[str, list[Phase]] = {}
        for s in self.steps:
            for ph in s.phases:
                by_name.setdefault(ph.name, []).append(ph)
        spans = _mean_spans((ph.name, ph.gpu_span_ns) for s in self.steps for ph in s.phases)
        order = sorted(by_name, key=lambda name: name == OUTSIDE_PHASES)  # the remainder last
        return {name: {**dict(zip(PHASE_KEYS, (None if v is None else self.mean(v)
                                               for v in _phase_sums(by_name[name])), strict=True)),
                       "gpu_span_ns": spans.get(name)}
                for name in order}  # fmt: skip

    def _host_ran_ahead(self) -> bool | None:
        leads = [s.host_lead_ns for s in self.steps if s.gpu_start_ns is not None]
        if not leads:
            return None
        step_time = statistics.median(s.duration_ns for s in self.steps)
        return statistics.median(leads) > HOST_AHEAD_SHARE * step_time

    def _per_step_timing(self) -> dict[str, float] | None:
        if not self.steps:
            return None
        duration = sum(s.end_ns for s in self.steps) - sum(s.start_ns for s in self.steps)
        busy = sum(s.gpu_busy_ns for s in self.steps)
        split = all(s.idle is not None for s in self.steps)
        idle = [self.mean(sum(getattr(s.idle, k) for s in self.steps)) if split else None
                for k in IDLE_KEYS]  # fmt: skip
        launched = [s for s in self.steps if s.gpu_start_ns is not None]
        spans = sum(s.gpu_span_ns for s in launched)
        leads = sum(s.host_lead_ns for s in launched)
        return {
            "step_time_ns": self.mean(duration),
            "gpu_busy_ns": self.mean(busy),
            "gpu_idle_ns": self.mean(duration - busy),
            # over the steps that launched GPU work: one without has no span, not a span of 0
            "gpu_span_ns": per_step_mean(spans, len(launched)),
            "host_lead_ns": per_step_mean(leads, len(launched)),
            **dict(zip(IDLE_KEYS, idle, strict=True)),
        }


def _phase_sums(phases: list[Phase]) -> list[int | None]:
    """The PHASE_KEYS summed over phases; the idle keys None when any phase has no split."""
    metrics, idle = [p.metrics for p in phases], [p.idle for p in phases]
    sums = [sum(map(operator.attrgetter(k), metrics)) for k in METRIC_KEYS]
    sums += [sum(p.duration_ns for p in phases), sum(p.gpu_busy_ns for p in phases)]
    split = not any(i is None for i in idle)
    return sums + [sum(map(operator.attrgetter(k), idle)) if split else None for k in IDLE_KEYS]


def _mean_spans(values: Iterable[tuple[str, int | None]]) -> dict[str, float | None]:
    """Per name, the mean over the steps with a span (names with none are left out)."""
    sums: dict[str, list[int]] = {}
    for name, span in values:
        if span is not None:
            acc = sums.setdefault(name, [0, 0])
            acc[0] += span
            acc[1] += 1
    return {name: per_step_mean(total, steps) for name, (total, steps) in sums.items()}


METRIC_VALUES = operator.attrgetter(*METRIC_KEYS)  # Metrics -> its values in METRIC_KEYS order


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
    """One rank's own figures in an arm run under torchrun (the arm's step time per step is the
    slowest rank's)."""

    rank: int
    median_ns: float  # this rank's median step time
    recompiles: int | None
    graph_breaks: int | None
    peak_allocated_bytes: int | None
    peak_reserved_bytes: int | None
    env: ArmEnv | None = None


@dataclass(frozen=True)
class Arm:
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
    ranks: tuple[RankRecord, ...] = ()  # under torchrun, each rank's own figures; () for one

    @property
    def median_ns(self) -> float:
        return percentile(self.step_time_ns, 50)

    @property
    def p95_ns(self) -> float:
        return percentile(self.step_time_ns, 95)


@dataclass(frozen=True)
class AutoArms:
    """What `--arms auto` was asked and how its runner ended, as ab.json keeps it: enough to
    take every look again from the arms (census.compare.sequential.looks_of)."""

    max_arms: int
    min_effect_ns: float  # resolved at the first look (a percentage is of A's step there)
    min_effect: str | None  # as given ('1%', '0.5ms'); None: the default, 1% of A's step
    budget_s: float | None
    budget_stop: bool  # the runner ran no more arms because the next look would not fit

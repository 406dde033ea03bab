"""The records of a `census ab` experiment: its arms (one run of side a or b each), what each
arm ran beside (ArmEnv), each rank's own figures (RankRecord), and how `--arms auto` ended
(AutoArms); integer ns and bytes. census.capture writes them, census.sources.experiment reads
them back, census.compare.ab computes on them."""

from __future__ import annotations

from dataclasses import dataclass, field

from census.model.step import percentile


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
    take every look again from the arms (census.compare.ab.auto_arms.looks_of)."""

    max_arms: int
    min_effect_ns: float  # resolved at the first look (a percentage is of A's step there)
    min_effect: str | None  # as given ('1%', '0.5ms'); None: the default, 1% of A's step
    budget_s: float | None
    budget_stop: bool  # the runner ran no more arms because the next look would not fit

"""Census x Census -> CensusDiff: an outer join by name, then buckets, all per step.

Per-step means are compared when both captures have steps; otherwise whole captures. What makes
the sides not comparable is checked once (census.compare.comparable) and carried on the diff.
Field names are fixed (`a`, `b`, `delta`, `pct`); user labels live in `labels`.
"""

from __future__ import annotations

import math
import statistics
from dataclasses import dataclass, field

from census.compare.comparable import Comparability, check_comparable, step_clock
from census.compare.op_diff import OpsDiff, census_ops
from census.compare.quantiles import t_975
from census.definitions import CLASS_ORDER, OUTSIDE_PHASES
from census.metrics import (
    DURATION_NS,
    GPU_SPAN_NS,
    IDLE_KEYS,
    METRIC_KEYS,
    PHASE_KEYS,
    STEP_TIME_NS,
    TIMING_KEYS,
)
from census.model.census import Census
from census.model.shown import shown
from census.model.step import per_step_mean

# A kernel whose per-step count is unchanged and whose time moved by at most this share of the
# larger side is "unchanged": GPU kernel times jitter by a few nanoseconds between runs.
UNCHANGED_TOLERANCE = 0.01
BUCKETS = ("added", "removed", "increased", "decreased", "unchanged")


@dataclass(frozen=True)
class Delta:
    """One figure of both sides, `a` and `b` (None: a side lacks it), and B − A."""

    a: float | None
    b: float | None

    @property
    def delta(self) -> float | None:
        """b − a; None when a side lacks it."""
        return None if self.a is None or self.b is None else self.b - self.a

    @property
    def pct(self) -> float | None:
        """delta as a percentage of a; None when a side lacks it or a is 0."""
        d = self.delta
        return None if d is None or not self.a else 100.0 * d / self.a

    def as_dict(self) -> dict[str, float | None]:
        """a, b, delta and pct by name, as the JSON writes a delta."""
        return {"a": self.a, "b": self.b, "delta": self.delta, "pct": self.pct}


@dataclass(frozen=True)
class ClassDelta:
    """One kernel class's count and time on either side (per-step means, or whole captures')."""

    cls: str
    count: Delta
    time_ns: Delta


@dataclass(frozen=True)
class KernelDelta:
    """One kernel name's count and time on either side, and its bucket (BUCKETS)."""

    name: str
    cls: str
    count: Delta
    time_ns: Delta
    bucket: str


@dataclass(frozen=True)
class StepSpread:
    """One side's step times: how many, their mean and sample standard deviation."""

    steps: int
    mean_ns: float
    sd_ns: float | None  # None with fewer than two steps


@dataclass(frozen=True, repr=False)
class CensusDiff:
    """B against A (diff_census): the census keys, kernel classes, kernels, phases and GPU idle by
    host range as Deltas, per-step means where both sides have steps, else whole captures, with what
    makes them not comparable."""

    a: Census
    b: Census
    labels: tuple[str, str]
    per_step: bool  # False: whole captures are compared
    metrics: dict[str, Delta]
    classes: tuple[ClassDelta, ...]
    kernels: tuple[KernelDelta, ...]  # every name, by |delta time| descending
    spread: tuple[StepSpread | None, StepSpread | None] = (None, None)
    # phase name -> key -> per-step means of either side (absent: 0), the remainder last
    phases: dict[str, dict[str, Delta]] = field(default_factory=dict)
    # mean step time of each side's calibration run without nsys (run.json), when it has one:
    # on the host's clock, or the GPU's (CUDA events) when the step clock is "gpu"
    uncaptured_ns: tuple[float | None, float | None] = (None, None)
    comparability: Comparability = field(default_factory=Comparability)
    # "gpu" when either side's host ran ahead of its GPU: steps and phases are compared by their
    # GPU spans (step_key gpu_span_ns), their NVTX ranges timing only the host's enqueueing
    clock: str = "host"
    # host range -> its GPU idle ns per step on either side (absent: 0), by |delta| descending;
    # empty unless both sides have steps and the idle split
    idle_by_range: dict[str, Delta] = field(default_factory=dict)
    # the Operations table (census.compare.op_diff), or why there is none; None: not asked
    ops: OpsDiff | None = None

    @property
    def step_key(self) -> str:
        """The metric the steps are timed by: step_time_ns (NVTX ranges) or gpu_span_ns."""
        return GPU_SPAN_NS if self.clock == "gpu" else STEP_TIME_NS

    def __repr__(self) -> str:
        return shown("diff_repr", self)

    def _repr_html_(self) -> str:
        return shown("diff_html", self)

    @property
    def warnings(self) -> tuple[str, ...]:
        """What makes the sides not comparable, then what merely differs."""
        return (*self.comparability.problems, *self.comparability.notes)

    @property
    def noise_ns(self) -> float | None:
        """Half-width of the 95% interval of the difference of the step-time means, treating
        the steps of each capture as independent (Welch): within one run they are not, so
        this is the least spread a difference must clear, not a verdict."""
        sa, sb = self.spread
        if sa is None or sb is None or sa.sd_ns is None or sb.sd_ns is None:
            return None
        se = math.sqrt(sa.sd_ns**2 / sa.steps + sb.sd_ns**2 / sb.steps)
        return t_975(min(sa.steps, sb.steps) - 1) * se

    @property
    def within_noise(self) -> bool | None:
        """Whether the step-time delta is within noise_ns; None when either is unknown."""
        step, noise = self.metrics[self.step_key].delta, self.noise_ns
        return None if step is None or noise is None else abs(step) <= noise

    def bucket(self, name: str) -> list[KernelDelta]:
        """The kernels of bucket `name` (one of BUCKETS), by |delta time| descending."""
        return [k for k in self.kernels if k.bucket == name]


def compared_value(c: Census, per_step: bool, step_total: int, total: int) -> float:
    """What a diff compares of a figure: its mean over the selected steps (from `step_total`, its
    sum over them), or the whole capture's `total` when whole captures are compared."""
    if per_step:
        return c.mean(step_total)  # type: ignore[return-value]  # per_step: both have steps
    return float(total)


def step_spread(c: Census, clock: str = "host") -> StepSpread | None:
    """The spread of the steps' NVTX durations, or of their GPU spans (clock "gpu")."""
    steps = c.steps
    times = (
        steps.column(GPU_SPAN_NS)[steps.launched].tolist()
        if clock == "gpu"
        else steps.column(DURATION_NS).tolist()
    )
    if not times:
        return None
    mean = per_step_mean(sum(times), len(times))
    sd = statistics.stdev(times) if len(times) > 1 else None
    return StepSpread(len(times), mean, sd)


def diff_census(
    a: Census,
    b: Census,
    labels: tuple[str, str] = ("A", "B"),
    uncaptured_ns: tuple[float | None, float | None] = (None, None),
) -> CensusDiff:
    """B against A. `uncaptured_ns`: each side's calibration mean on the host's clock, or on the
    GPU's when either side's host ran ahead (see step_clock)."""
    per_step = bool(a.steps and b.steps)
    comparable = check_comparable(a, b, labels, uncaptured_ns)
    clock = step_clock(a, b)
    return CensusDiff(
        a=a,
        b=b,
        labels=labels,
        per_step=per_step,
        metrics=_metric_deltas(a, b, per_step),
        classes=_class_deltas(a, b, per_step),
        kernels=_kernel_deltas(a, b, per_step),
        comparability=comparable,
        spread=(step_spread(a, clock), step_spread(b, clock)),
        uncaptured_ns=uncaptured_ns,
        phases=_phase_deltas(a, b) if per_step else {},
        clock=clock,
        idle_by_range=idle_range_deltas(a, b),
        ops=census_ops(a, b, labels, per_step),
    )


def idle_range_deltas(a: Census, b: Census) -> dict[str, Delta]:
    """Per host range of either side, its GPU idle ns per step (a range one side lacks is 0
    there), by |delta| descending, then name; empty unless both sides have the split."""
    ra, rb = a.idle_ranges(), b.idle_ranges()
    if ra is None or rb is None:
        return {}
    va = {r["range"]: r["idle_ns_per_step"] for r in ra}
    vb = {r["range"]: r["idle_ns_per_step"] for r in rb}
    rows = {n: Delta(va.get(n, 0.0), vb.get(n, 0.0)) for n in va.keys() | vb.keys()}
    return dict(sorted(rows.items(), key=lambda kv: (-abs(kv[1].delta or 0.0), kv[0])))


def _phase_deltas(a: Census, b: Census) -> dict[str, dict[str, Delta]]:
    """Per phase name of either side, per key, the per-step means (a phase one side lacks is 0
    there); empty unless both sides have phases."""
    pa, pb = a.per_phase(), b.per_phase()
    if not pa or not pb:
        return {}
    names = [*pa, *(n for n in pb if n not in pa)]
    names.sort(key=lambda n: n == OUTSIDE_PHASES)
    keys = (*PHASE_KEYS, GPU_SPAN_NS)  # a span is no sum: an absent phase has none, not 0
    zero = {**dict.fromkeys(PHASE_KEYS, 0.0), GPU_SPAN_NS: None}
    return {n: {k: Delta(pa.get(n, zero)[k], pb.get(n, zero)[k]) for k in keys} for n in names}


def _metric_deltas(a: Census, b: Census, per_step: bool) -> dict[str, Delta]:
    def values(c: Census) -> dict[str, float | None]:
        if per_step:
            return {**(c.per_step() or {}), **(c.per_step_timing() or {})}
        return {**c.totals.as_dict(), **dict.fromkeys((*TIMING_KEYS, *IDLE_KEYS))}

    va, vb = values(a), values(b)
    return {k: Delta(va[k], vb[k]) for k in (*TIMING_KEYS, *IDLE_KEYS, *METRIC_KEYS)}


def _class_deltas(a: Census, b: Census, per_step: bool) -> tuple[ClassDelta, ...]:
    def table(c: Census) -> dict[str, tuple[float, float]]:
        return {
            s.cls: (
                compared_value(c, per_step, s.step_count, s.count),
                compared_value(c, per_step, s.step_time_ns, s.time_ns),
            )
            for s in c.classes
        }

    ta, tb = table(a), table(b)
    return tuple(
        ClassDelta(
            cls,
            Delta(ta.get(cls, (0.0, 0.0))[0], tb.get(cls, (0.0, 0.0))[0]),
            Delta(ta.get(cls, (0.0, 0.0))[1], tb.get(cls, (0.0, 0.0))[1]),
        )
        for cls in CLASS_ORDER
        if cls in ta or cls in tb
    )


def _kernel_deltas(a: Census, b: Census, per_step: bool) -> tuple[KernelDelta, ...]:
    def table(c: Census) -> dict[str, tuple[str, float, float]]:
        out = {}
        for k in c.kernels:
            count = compared_value(c, per_step, k.step_count, k.count)
            if count:
                out[k.name] = (k.cls, count, compared_value(c, per_step, k.step_time_ns, k.time_ns))
        return out

    ta, tb = table(a), table(b)
    rows = []
    for name in ta.keys() | tb.keys():
        cls = (ta.get(name) or tb[name])[0]
        ca, xa = ta[name][1:] if name in ta else (0.0, 0.0)
        cb, xb = tb[name][1:] if name in tb else (0.0, 0.0)
        rows.append(
            KernelDelta(
                name,
                cls,
                Delta(ca, cb),
                Delta(xa, xb),
                _bucket(name in ta, name in tb, ca, cb, xa, xb),
            )
        )
    rows.sort(key=lambda k: (-abs(k.time_ns.delta or 0.0), k.name))
    return tuple(rows)


def _bucket(in_a: bool, in_b: bool, ca: float, cb: float, xa: float, xb: float) -> str:
    if not in_a:
        return "added"
    if not in_b:
        return "removed"
    if ca == cb and abs(xb - xa) <= UNCHANGED_TOLERANCE * max(abs(xa), abs(xb)):
        return "unchanged"
    return "increased" if (xb, cb) > (xa, ca) else "decreased"  # time first, then count

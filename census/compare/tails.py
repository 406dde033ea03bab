"""Tail steps of one capture: the step-time distribution and the steps far above its median,
each set against the median step (which phase grew, kernels, launches, GPU busy and idle).

A step is an outlier when it is slower than median + 3 × 1.4826 × MAD (the robust 3-sigma band:
MAD is the median absolute deviation of step times, 1.4826 × MAD the standard deviation it
implies for normal data) or slower than 1.5 × the median; with a MAD of 0 only the second test
applies. A changed kernel count in one step points at recompilation or a data-dependent path.
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass

from census.model import Census, Step, percentile

MAD_SIGMA = 1.4826
TAIL_SIGMAS = 3
TAIL_RATIO = 1.5


@dataclass(frozen=True)
class Outlier:
    index: int  # position among the selected steps
    name: str
    step_time_ns: int
    excess_ns: float  # over the median step time
    phase: str | None  # the phase that grew most against its median, if the step has phases
    phase_delta_ns: float | None
    kernel_count_delta: float
    launch_count_delta: float
    gpu_busy_delta_ns: float
    gpu_idle_delta_ns: float


@dataclass(frozen=True)
class Tail:
    steps: int
    median_ns: float
    p95_ns: float
    max_ns: int
    mad_ns: float
    threshold_ns: float
    outliers: tuple[Outlier, ...]


def tail_steps(c: Census) -> Tail | None:
    if not c.steps:
        return None
    times = [s.duration_ns for s in c.steps]
    median = statistics.median(times)
    mad = statistics.median(abs(t - median) for t in times)
    ratio = TAIL_RATIO * median
    threshold = min(median + TAIL_SIGMAS * MAD_SIGMA * mad, ratio) if mad else ratio
    typical = _median_step(c.steps)
    outliers = tuple(
        _outlier(i, s, median, typical) for i, s in enumerate(c.steps) if s.duration_ns > threshold
    )
    return Tail(len(times), median, percentile(times, 95), max(times), mad, threshold, outliers)


def _median_step(steps) -> dict[str, float]:
    """Per key, the median over the steps (a phase absent from a step counts 0)."""
    names = {p.name for s in steps for p in s.phases}
    out = {
        "kernel_count": statistics.median(s.metrics.kernel_count for s in steps),
        "launch_api_count": statistics.median(s.metrics.launch_api_count for s in steps),
        "gpu_busy_ns": statistics.median(s.gpu_busy_ns for s in steps),
        "gpu_idle_ns": statistics.median(s.gpu_idle_ns for s in steps),
    }
    for name in names:
        out[f"phase:{name}"] = statistics.median(_phase_time(s, name) for s in steps)
    return out


def _phase_time(s: Step, name: str) -> int:
    return sum(p.duration_ns for p in s.phases if p.name == name)


def _outlier(i: int, s: Step, median: float, typical: dict[str, float]) -> Outlier:
    grew = sorted(
        ((_phase_time(s, p.name) - typical[f"phase:{p.name}"], p.name) for p in s.phases),
        reverse=True,
    )
    phase_delta, phase = grew[0] if grew else (None, None)
    return Outlier(
        index=i,
        name=s.name,
        step_time_ns=s.duration_ns,
        excess_ns=s.duration_ns - median,
        phase=phase,
        phase_delta_ns=phase_delta,
        kernel_count_delta=s.metrics.kernel_count - typical["kernel_count"],
        launch_count_delta=s.metrics.launch_api_count - typical["launch_api_count"],
        gpu_busy_delta_ns=s.gpu_busy_ns - typical["gpu_busy_ns"],
        gpu_idle_delta_ns=s.gpu_idle_ns - typical["gpu_idle_ns"],
    )

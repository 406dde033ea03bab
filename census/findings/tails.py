"""Tail steps of one capture: the step-time distribution and the steps far above its median,
each set against the median step (which phase grew, kernels, launches, GPU busy and idle).

A step is an outlier when it is slower than median + 3 × 1.4826 × MAD (the robust 3-sigma band:
MAD is the median absolute deviation of step times, 1.4826 × MAD the standard deviation it
implies for normal data) or slower than 1.5 × the median; with a MAD of 0 only the second test
applies. A changed kernel count in one step points at recompilation or a data-dependent path.

The clock: the step's NVTX range ("host range"), unless the host ran ahead of the GPU
(Census.host_ran_ahead), when the ranges time the host's enqueueing: then each step's GPU span
("gpu span"), and the phase that grew by its GPU span; steps without GPU work are left out.
"""

from __future__ import annotations

import statistics
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from census.metrics import (
    DURATION_NS,
    GPU_BUSY_NS,
    GPU_IDLE_NS,
    GPU_SPAN_NS,
    KERNEL_COUNT,
    LAUNCH_API_COUNT,
)
from census.model.census import Census
from census.model.step import Step, percentile
from census.model.step_table import StepTable

MAD_SIGMA = 1.4826
TAIL_SIGMAS = 3
TAIL_RATIO = 1.5
HOST_RANGE, GPU_SPAN = "host range", "gpu span"  # Tail.clock


@dataclass(frozen=True)
class Outlier:
    """One tail step (module docstring) against the median step: its time, excess on the tail's
    clock, the phase that grew most, and its kernel, launch, GPU busy and idle deltas."""

    index: int  # position among the selected steps
    name: str
    step_time_ns: int  # its NVTX range
    excess_ns: float  # over the median, on the tail's clock
    phase: str | None  # the phase that grew most against its median, if the step has phases
    phase_delta_ns: float | None
    kernel_count_delta: float
    launch_count_delta: float
    gpu_busy_delta_ns: float
    gpu_idle_delta_ns: float
    gpu_span_ns: int | None = None  # its GPU span (None: it launched no GPU work)


@dataclass(frozen=True)
class Tail:
    """One capture's step times on `clock`: median, p95, max, MAD, the outlier threshold (module
    docstring) and the steps above it."""

    steps: int  # the steps counted: with the "gpu span" clock, those that launched GPU work
    median_ns: float
    p95_ns: float
    max_ns: int
    mad_ns: float
    threshold_ns: float
    outliers: tuple[Outlier, ...]
    clock: str = HOST_RANGE  # HOST_RANGE or GPU_SPAN: which time of a step these are


def median_mad(values) -> tuple[float, float]:
    """The median of `values` and their median absolute deviation from it (unscaled)."""
    xs = list(values)
    mid = statistics.median(xs)
    return mid, statistics.median(abs(x - mid) for x in xs)


def tail_threshold(median_ns: float, mad_ns: float) -> float:
    """The step time above which a step is an outlier (the rule of the module's docstring):
    the lower of median + 3 × 1.4826 × MAD and 1.5 × median; with a MAD of 0, the second."""
    ratio = TAIL_RATIO * median_ns
    return min(median_ns + TAIL_SIGMAS * MAD_SIGMA * mad_ns, ratio) if mad_ns else ratio


def tail_steps(c: Census) -> Tail | None:
    """The tail of the steps' times, on the GPU spans when the host ran ahead, else on the NVTX
    ranges; None without steps."""
    import numpy as np

    if not c.steps:
        return None
    table = c.steps
    clock = GPU_SPAN if c.host_ran_ahead() else HOST_RANGE
    on_gpu = clock == GPU_SPAN
    counted = np.flatnonzero(table.launched) if on_gpu else np.arange(len(table))
    times = table.column(GPU_SPAN_NS if on_gpu else DURATION_NS)[counted].tolist()
    median, mad = median_mad(times)
    threshold = tail_threshold(median, mad)
    typical = _median_step(table, counted, on_gpu)
    phase_time = CLOCKS[clock][1]
    outliers = tuple(
        _outlier(i, table[i], t - median, typical, phase_time)
        for i, t in zip(counted.tolist(), times, strict=True)
        if t > threshold
    )
    return Tail(len(times), median, percentile(times, 95), max(times), mad, threshold, outliers,
                clock)  # fmt: skip


def _median_step(table: StepTable, counted: Any, on_gpu: bool) -> dict[str, float]:
    """Per key, the median over the counted steps (a phase absent from a step counts 0 on the
    host's clock; on the GPU's, a phase's median is over the steps where it launched GPU
    work)."""
    import numpy as np

    out = {k: statistics.median(table.column(k)[counted].tolist())
           for k in (KERNEL_COUNT, LAUNCH_API_COUNT, GPU_BUSY_NS, GPU_IDLE_NS)}  # fmt: skip
    in_counted = np.zeros(len(table), bool)
    in_counted[counted] = True
    step_of = table.phase_step()
    for name, rows in table.phases.groups(np.flatnonzero(in_counted[step_of])).items():
        if on_gpu:
            times = table.phase_column(GPU_SPAN_NS)[rows][table.phases.launched[rows]].tolist()
        else:
            per_step = np.zeros(len(table), table.phase_column(DURATION_NS).dtype)
            np.add.at(per_step, step_of[rows], table.phase_column(DURATION_NS)[rows])
            times = per_step[counted].tolist()
        if times:
            out[f"phase:{name}"] = statistics.median(times)
    return out


def _phase_duration(s: Step, name: str) -> int:
    return sum(p.duration_ns for p in s.phases if p.name == name)


def _phase_span(s: Step, name: str) -> int | None:
    return next((p.gpu_span_ns for p in s.phases if p.name == name), None)


def _step_duration(s: Step) -> int:
    return s.duration_ns


def _step_span(s: Step) -> int | None:
    return s.gpu_span_ns


# clock -> (a step's time, a phase's time in a step; None: not on that clock)
CLOCKS: dict[str, tuple[Callable[[Step], int | None], Callable[[Step, str], int | None]]] = {
    HOST_RANGE: (_step_duration, _phase_duration),
    GPU_SPAN: (_step_span, _phase_span),
}


def _grew(s: Step, typical: dict[str, float], phase_time: Callable) -> list[tuple[float, str]]:
    """(growth against the median step, phase), largest first, for the phases of `s` with a
    time on the clock (a step counted on the clock gives each such phase a median)."""
    times = ((phase_time(s, p.name), p.name) for p in s.phases)
    return sorted(((t - typical[f"phase:{n}"], n) for t, n in times if t is not None), reverse=True)


def _outlier(
    i: int, s: Step, excess: float, typical: dict[str, float], phase_time: Callable
) -> Outlier:
    grew = _grew(s, typical, phase_time)
    phase_delta, phase = grew[0] if grew else (None, None)
    return Outlier(
        index=i,
        name=s.name,
        step_time_ns=s.duration_ns,
        excess_ns=excess,
        phase=phase,
        phase_delta_ns=phase_delta,
        kernel_count_delta=s.metrics.kernel_count - typical[KERNEL_COUNT],
        launch_count_delta=s.metrics.launch_api_count - typical[LAUNCH_API_COUNT],
        gpu_busy_delta_ns=s.gpu_busy_ns - typical[GPU_BUSY_NS],
        gpu_idle_delta_ns=s.gpu_idle_ns - typical[GPU_IDLE_NS],
        gpu_span_ns=s.gpu_span_ns,
    )

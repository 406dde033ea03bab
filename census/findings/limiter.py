"""What limits one capture's step: the GPU, or the host (launching, syncing, or other work).

The rule is census.definitions.LIMITER_RULE: from the per-step means of the step windows, "gpu"
when the GPU is busy most of the step, else the largest class of the GPU's idle time. When the
host ran ahead of the GPU (Census.host_ran_ahead), the summary says so first: its step and phase
times are then the GPU's spans, the NVTX ranges timing only the host's enqueueing.

A leaf beside the model, as census.render.notebook is: it reads a Census by its fields (`census` below
is one) and imports nothing of census.model, so that a Census's repr and card can say it.
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass
from typing import Any

from census.definitions import GPU_BOUND_SHARE, LIMITER_IDLE_CLASSES
from census.metrics import GPU_BUSY_NS, GPU_SPAN_NS, HOST_LEAD_NS, STEP_TIME_NS
from census.units import clip, fmt_ns, one_line


@dataclass(frozen=True)
class Limiter:
    """What limits the step (find_limiter): its kind, the GPU's busy share of the step, and the idle
    class that decided, per step in ns and in words."""

    kind: str  # "gpu", "sync", "host (launch)", "host (other)" or "host" (idle not split)
    busy_share: float  # GPU busy / step time, per-step means
    cause_ns: float | None  # per step: the idle class that decided, None for "gpu" and "host"
    cause: str | None  # its words: "after host syncs", "inside launch calls", ...


def find_limiter(census: Any) -> Limiter | None:
    """The limiter of the capture's steps; None without steps (or with steps of zero length)."""
    timing = census.per_step_timing()
    if not timing or timing[STEP_TIME_NS] <= 0:
        return None
    share = timing[GPU_BUSY_NS] / timing[STEP_TIME_NS]
    if share >= GPU_BOUND_SHARE:
        return Limiter("gpu", share, None, None)
    if any(timing[key] is None for key, _, _ in LIMITER_IDLE_CLASSES):
        return Limiter("host", share, None, None)
    key, kind, words = max(LIMITER_IDLE_CLASSES, key=lambda c: timing[c[0]])
    return Limiter(kind, share, timing[key], words)


def limiter_sentence(limiter: Limiter, ranges: list[dict] | None = None) -> str:
    """The summary's first line: `host-bound: GPU idle 58% of the step, mostly in other host
    work (4.12 ms/step), most inside backward (52% of the idle)`; `ranges`: the census's
    idle_ranges(), whose first names where the host was."""
    idle = f"GPU idle {100 * (1 - limiter.busy_share):.0f}% of the step"
    if limiter.kind == "gpu":
        return f"GPU-bound: GPU busy {100 * limiter.busy_share:.0f}% of the step"
    if limiter.kind == "host":
        return f"host-bound: {idle} (the idle split was off: --no-idle)"
    bound = "sync-bound" if limiter.kind == "sync" else "host-bound"
    where = range_clause(ranges)
    return f"{bound}: {idle}, mostly {limiter.cause} ({fmt_ns(limiter.cause_ns)}/step){where}"


def range_clause(ranges: list[dict] | None) -> str:
    """`, most inside backward (52% of the idle)`: the host range holding the most GPU idle
    time; "" when no range holds any."""
    if not ranges or not ranges[0]["share"]:
        return ""
    top = ranges[0]
    return (
        f", most inside {one_line(clip(top['range'], 60))} ({100 * top['share']:.0f}% of the idle)"
    )


def steps_ahead(census: Any) -> int:
    """How many steps the host ran ahead of the GPU: the median host lead over the median GPU
    span (both over the steps that launched GPU work), rounded, at least 1."""
    steps = census.steps
    span = statistics.median(steps.column(GPU_SPAN_NS)[steps.launched].tolist())
    lead = statistics.median(steps.column(HOST_LEAD_NS)[steps.launched].tolist())
    return max(1, round(lead / span)) if span > 0 else 1


def ahead_sentence(census: Any) -> str:
    """`the host ran ahead of the GPU by ~6 steps: ...`, for a census whose host ran ahead."""
    n = steps_ahead(census)
    return (
        f"the host ran ahead of the GPU by ~{n} step{'s' if n > 1 else ''}: step and phase times "
        "below are the GPU's (GPU span: first to last GPU op launched in the range)"
    )


def summary_lead(census: Any) -> str:
    """The first line of a summary in every format: that the host ran ahead of the GPU, if it
    did, then what limits the step, joined by "; " ("" without steps)."""
    limiter = find_limiter(census)
    if limiter is None:
        return ""
    sentence = limiter_sentence(limiter, census.idle_ranges())
    if census.host_ran_ahead():
        return f"{ahead_sentence(census)}; {sentence}"
    return sentence

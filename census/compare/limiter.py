"""What limits one capture's step: the GPU, or the host (launching, syncing, or other work).

The rule is census.definitions.LIMITER_RULE: from the per-step means of the step windows, "gpu"
when the GPU is busy most of the step, else the largest class of the GPU's idle time.
"""

from __future__ import annotations

from dataclasses import dataclass

from census.definitions import GPU_BOUND_SHARE, LIMITER_IDLE_CLASSES
from census.model import Census
from census.units import fmt_ns


@dataclass(frozen=True)
class Limiter:
    kind: str  # "gpu", "sync", "host (launch)", "host (other)" or "host" (idle not split)
    busy_share: float  # GPU busy / step time, per-step means
    cause_ns: float | None  # per step: the idle class that decided, None for "gpu" and "host"
    cause: str | None  # its words: "after host syncs", "inside launch calls", ...


def find_limiter(census: Census) -> Limiter | None:
    """The limiter of the capture's steps; None without steps (or with steps of zero length)."""
    timing = census.per_step_timing()
    if not timing or timing["step_time_ns"] <= 0:
        return None
    share = timing["gpu_busy_ns"] / timing["step_time_ns"]
    if share >= GPU_BOUND_SHARE:
        return Limiter("gpu", share, None, None)
    if any(timing[key] is None for key, _, _ in LIMITER_IDLE_CLASSES):
        return Limiter("host", share, None, None)
    key, kind, words = max(LIMITER_IDLE_CLASSES, key=lambda c: timing[c[0]])
    return Limiter(kind, share, timing[key], words)


def limiter_sentence(limiter: Limiter) -> str:
    """The summary's first line: `host-bound: GPU idle 58% of the step, mostly in other host
    work (4.12 ms/step)`."""
    idle = f"GPU idle {100 * (1 - limiter.busy_share):.0f}% of the step"
    if limiter.kind == "gpu":
        return f"GPU-bound: GPU busy {100 * limiter.busy_share:.0f}% of the step"
    if limiter.kind == "host":
        return f"host-bound: {idle} (--idle says whether in launches, syncs or other host work)"
    bound = "sync-bound" if limiter.kind == "sync" else "host-bound"
    return f"{bound}: {idle}, mostly {limiter.cause} ({fmt_ns(limiter.cause_ns)}/step)"


def summary_lead(census: Census) -> str:
    """The first line of a summary in every format: what limits the step ("" without steps)."""
    limiter = find_limiter(census)
    return "" if limiter is None else limiter_sentence(limiter)

"""A diff's first sentence, its headline: what the CLI, the dashboards and a notebook's repr and
card all lead with. Apart from explain.py so that a CensusDiff can say it in its repr: this
module reads the diff's fields and imports nothing of census.compare.diff."""

from __future__ import annotations

from typing import Any

from census.metrics import (
    GPU_BUSY_NS,
    GPU_IDLE_NS,
    GPU_SPAN_NS,
    IDLE_AFTER_SYNC_NS,
    IDLE_LAUNCH_NS,
    IDLE_OTHER_NS,
    LABELS,
    STEP_TIME_NS,
    short_label,
)
from census.units import fmt_ns, fmt_pct


def change_text(delta: Any, fmt: Any, unit: str) -> str:
    """`-1.76 ms/step (-11.5%)`: a Delta's change and its share."""
    return f"{fmt(delta.delta, signed=True)}{unit} ({fmt_pct(delta.pct)})"


def headline(d: Any) -> str | None:
    """The diff's first sentence (after what makes the sides not comparable): the verdict on
    the captures' step times, where the change came from, against their spread; on the GPU's
    clock when either side's host ran ahead. None without step times on both sides."""
    unit = "/step" if d.per_step else ""
    if d.clock == "gpu":
        return gpu_headline(d, unit)
    step, busy, idle = (d.metrics[k] for k in (STEP_TIME_NS, GPU_BUSY_NS, GPU_IDLE_NS))
    if step.delta is None or busy.delta is None or idle.delta is None:
        return None
    la, lb = d.labels
    if "gpu" in d.comparability.hidden:  # one side's GPU work is unknown: no split to name
        return _step_only(d, step, unit)
    split = (
        f"GPU busy {fmt_ns(busy.delta, signed=True)} + GPU idle {fmt_ns(idle.delta, signed=True)}"
    )
    noise = d.noise_ns
    if d.within_noise:
        sa, sb = d.spread
        return (
            f"{lb} and {la} are within noise: step time {change_text(step, fmt_ns, unit)} is inside "
            f"±{fmt_ns(noise)}, the 95% spread of the difference of their step means "
            f"({sa.steps} and {sb.steps} steps, one capture each; {split}); "  # type: ignore[union-attr]
            "`census ab` settles it with repeated uncaptured runs"
        )
    verdict = "faster" if step.delta < 0 else "slower"
    # The larger term of Δ step = Δ busy + Δ idle names where the change came from; a change
    # of the idle time is named by the part of the idle split that moved most.
    if abs(idle.delta) > abs(busy.delta):
        share = f"{'fewer' if idle.delta < 0 else 'more'} GPU gaps{idle_cause(d)}"
    else:
        share = "less GPU work" if busy.delta < 0 else "more GPU work"
    basis = (
        f"beyond the ±{fmt_ns(noise)} spread of one capture each"
        if noise is not None
        else "one capture per side, no spread to judge by"
    )
    if "verdict" in d.comparability.hidden:  # nsys distorted the step times: no verdict
        shorter = "shorter" if step.delta < 0 else "longer"
        return (
            f"under nsys only, {lb}'s steps are {shorter} than {la}'s: step time "
            f"{change_text(step, fmt_ns, unit)} = {split}; mostly {share}; not a verdict on speed, "
            "since nsys distorted the step times (see above): `census ab` decides"
        )
    return (
        f"{lb} is {verdict} than {la}: step time {change_text(step, fmt_ns, unit)} = {split}; "
        f"mostly {share} ({basis}; `census ab` gives a verdict that repeated runs back)"
    )


def _step_only(d: Any, step: Any, unit: str) -> str:
    """The headline on step times alone, where one side recorded no GPU work to split them by."""
    la, lb = d.labels
    change = change_text(step, fmt_ns, unit)
    if d.within_noise:
        return (f"{lb} and {la} are within noise: step time {change} is inside "
                f"±{fmt_ns(d.noise_ns)}; the GPU's share is unknown (see above)")  # fmt: skip
    verdict = "faster" if step.delta < 0 else "slower"
    return (f"{lb} is {verdict} than {la}: step time {change}; where the change came from is "
            "unknown without CUDA trace on both sides (see above)")  # fmt: skip


HOST_AHEAD = "the host ran ahead of the GPU, so the NVTX ranges time its enqueueing"


def gpu_headline(d: Any, unit: str) -> str | None:
    """The headline when either side's host ran ahead: the steps as the GPU ran them."""
    span, step = d.metrics[GPU_SPAN_NS], d.metrics[STEP_TIME_NS]
    if span.delta is None:
        return None
    la, lb = d.labels
    gpu_span = f"{short_label(GPU_SPAN_NS)} {change_text(span, fmt_ns, unit)}"
    host = f"{HOST_AHEAD} ({LABELS[STEP_TIME_NS]} {change_text(step, fmt_ns, unit)} there)"
    noise = d.noise_ns
    if d.within_noise:
        return (
            f"on the GPU, {lb} and {la} are within noise: {gpu_span} "
            f"is inside ±{fmt_ns(noise)}, the 95% spread of the difference of their mean spans; "
            f"{host}; `census ab` settles it with repeated uncaptured runs"
        )
    if "verdict" in d.comparability.hidden:
        shorter = "shorter" if span.delta < 0 else "longer"
        return (
            f"under nsys only, {lb}'s steps are {shorter} on the GPU than {la}'s: {gpu_span}; "
            f"{host}; not a verdict on speed, since nsys "
            "distorted the step times (see above): `census ab` decides"
        )
    verdict = "faster" if span.delta < 0 else "slower"
    basis = (
        f"beyond the ±{fmt_ns(noise)} spread of one capture each"
        if noise is not None
        else "one capture per side, no spread to judge by"
    )
    return (
        f"{lb} is {verdict} than {la} on the GPU: {gpu_span} "
        f"({basis}); {host}; `census ab` gives a verdict that repeated runs back"
    )


IDLE_CAUSES = {
    IDLE_AFTER_SYNC_NS: "after host syncs",
    IDLE_LAUNCH_NS: "while the host launched",
    IDLE_OTHER_NS: "in other host work",
}


def idle_cause(d: Any, lead: str = " ") -> str:
    """` in other host work`: the idle part whose change was largest, after `lead`; "" without
    the split."""
    parts = {k: d.metrics[k].delta for k in IDLE_CAUSES if d.metrics[k].delta is not None}
    if not parts:
        return ""
    key = max(parts, key=lambda k: abs(parts[k] or 0))
    return f"{lead}{IDLE_CAUSES[key]}"

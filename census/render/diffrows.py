"""The diff's tables as rows of display strings, shared by the terminal and markdown renderers."""

from __future__ import annotations

from census.compare.diff import CensusDiff
from census.metrics import (
    D2D_BYTES,
    DURATION_NS,
    GPU_BUSY_NS,
    GPU_IDLE_NS,
    GPU_SPAN_NS,
    HIDDEN_WHEN_ZERO,
    HOST_LEAD_NS,
    IDLE_AFTER_SYNC_NS,
    IDLE_LAUNCH_NS,
    IDLE_OTHER_NS,
    KERNEL_COUNT,
    LABELS,
    LAUNCH_API_COUNT,
    PHASE_LABELS,
    STEP_TIME_NS,
    SYNC_COUNT,
    SYNC_TIME_NS,
    VIEW_DIFF,
    WINDOW_TITLE,
    launched_title,
    shown_in,
)
from census.units import fmt_count, fmt_metric, fmt_ns, fmt_pct, one_line

# The step-window keys and the launched-work keys, each group in a table of its own (see
# census.metrics: LAUNCHED_TITLE, WINDOW_TITLE).
WINDOW_KEYS = (STEP_TIME_NS, GPU_BUSY_NS, GPU_IDLE_NS, IDLE_AFTER_SYNC_NS,
               IDLE_LAUNCH_NS, IDLE_OTHER_NS, SYNC_COUNT, SYNC_TIME_NS)  # fmt: skip
LAUNCHED_KEYS = (GPU_SPAN_NS, *(m.name for m in shown_in(VIEW_DIFF)))


def headline_groups(d: CensusDiff) -> list[tuple[str, list[list[str]]]]:
    """(title, rows) of the step-window metrics, then of the launched-work metrics."""
    launched = (*LAUNCHED_KEYS[:1], HOST_LEAD_NS, *LAUNCHED_KEYS[1:]) if d.clock == "gpu" \
        else LAUNCHED_KEYS  # fmt: skip
    groups = [(WINDOW_TITLE, _metric_rows(d, WINDOW_KEYS)),
              (launched_title(d.per_step), _metric_rows(d, launched))]  # fmt: skip
    return [(title, rows) for title, rows in groups if rows]


def _metric_rows(d: CensusDiff, keys: tuple[str, ...]) -> list[list[str]]:
    rows = []
    for key in keys:
        m = d.metrics[key]
        if (m.a is None and m.b is None) or (key in HIDDEN_WHEN_ZERO and not m.a and not m.b):
            continue
        delta = "unchanged" if m.delta == 0 else fmt_metric(key, m.delta, signed=True)
        pct = "" if m.delta == 0 else fmt_pct(m.pct)
        rows.append([LABELS[key], fmt_metric(key, m.a), fmt_metric(key, m.b), delta, pct])
    return rows


def accounting_rows(d: CensusDiff) -> list[list[str]]:
    """Δ step time = Δ GPU busy + Δ GPU idle, shown term by term."""
    step, busy, idle = (d.metrics[k] for k in (STEP_TIME_NS, GPU_BUSY_NS, GPU_IDLE_NS))
    if step.delta is None:
        return []
    return [
        [f"Δ {LABELS[GPU_BUSY_NS]}", fmt_ns(busy.delta, signed=True)],
        [f"Δ {LABELS[GPU_IDLE_NS]}", fmt_ns(idle.delta, signed=True)],
        [f"= Δ {LABELS[STEP_TIME_NS]}", fmt_ns(step.delta, signed=True)],
    ]


# The changes a phase row shows beside its time, in its columns' order.
PHASE_DELTAS = (GPU_SPAN_NS, GPU_BUSY_NS, KERNEL_COUNT, LAUNCH_API_COUNT, D2D_BYTES)


def phase_rows(d: CensusDiff) -> list[list[str]]:
    """Per phase (the remainder last): its time per step on each side and the changes in it."""
    rows = []
    for name, m in d.phases.items():
        dur = m[DURATION_NS]
        rows.append([
            name, fmt_ns(dur.a), fmt_ns(dur.b), fmt_ns(dur.delta, signed=True),
            *(fmt_metric(k, m[k].delta, signed=True) for k in PHASE_DELTAS),
        ])  # fmt: skip
    return rows


IDLE_RANGES_TITLE = (
    "GPU idle by host range (per step; the innermost NVTX range on the step's thread)"
)


def idle_range_rows(d: CensusDiff, top: int = 8) -> list[list[str]]:
    """The host ranges whose GPU idle time per step changed most."""
    return [[one_line(name), fmt_ns(v.a), fmt_ns(v.b), fmt_ns(v.delta, signed=True)]
            for name, v in list(d.idle_by_range.items())[:top]]  # fmt: skip


def class_rows(d: CensusDiff) -> list[list[str]]:
    """One row a kernel class: count and time on each side and their deltas."""
    return [
        [
            c.cls,
            fmt_count(c.count.a),
            fmt_count(c.count.b),
            fmt_count(c.count.delta, signed=True),
            fmt_ns(c.time_ns.a),
            fmt_ns(c.time_ns.b),
            fmt_ns(c.time_ns.delta, signed=True),
        ]
        for c in d.classes
    ]


def kernel_rows(d: CensusDiff, top: int) -> list[list[str]]:
    """The `top` changed kernels, full names (the terminal shortens them to fit)."""
    rows = []
    for k in [k for k in d.kernels if k.bucket != "unchanged"][:top]:
        rows.append(
            [
                k.name,
                k.bucket,
                k.cls,
                fmt_count(k.count.a),
                fmt_count(k.count.b),
                fmt_ns(k.time_ns.a),
                fmt_ns(k.time_ns.b),
                fmt_ns(k.time_ns.delta, signed=True),
            ]
        )
    return rows


def headers(d: CensusDiff, short: bool = False) -> dict[str, list[str]]:
    """Column heads; `short`: the two sides as A and B (a narrow terminal, long labels)."""
    la, lb = ("A", "B") if short else d.labels
    time = PHASE_LABELS[DURATION_NS]
    return {
        "headline": ["Metric", la, lb, "Delta", "Delta %"],
        "accounting": ["Step accounting", "per step"],
        "phases": ["Phase", f"{la} {time}", f"{lb} {time}", f"Δ {time}",
                   *(f"Δ {PHASE_LABELS[k]}" for k in PHASE_DELTAS)],
        "idle_ranges": ["Host range", f"{la} GPU idle", f"{lb} GPU idle", "Δ"],
        "classes": ["Class", f"{la} count", f"{lb} count", "Δ count", f"{la} time", f"{lb} time",
                    "Δ time"],
        "ops": [f"{la} ops", f"{lb} ops", f"{la} kernels", f"{lb} kernels", f"{la} time",
                f"{lb} time", "Δ time"],
        "ops_terminal": [f"Operations: {la} → {lb}", "Kernels", f"{la} time", f"{lb} time", "Δ time"],
        "kernels": ["Kernel", "Change", "Class", f"{la} count", f"{lb} count", f"{la} time",
                    f"{lb} time", "Δ time"],
    }  # fmt: skip


def basis_line(d: CensusDiff) -> str:
    """What the diff compares: per-step means over how many steps a side (and the GPU spans' clock),
    or whole captures."""
    la, lb = d.labels
    if d.per_step:
        clock = (" The host ran ahead of the GPU: steps are compared by their GPU spans; their "
                 "NVTX ranges (step time) time the host.") if d.clock == "gpu" else ""  # fmt: skip
        return (
            f"Per step: mean over {d.a.step_count} step(s) of {la} and "
            f"{d.b.step_count} step(s) of {lb}.{clock}"
        )
    return "Whole captures (at least one side has no step ranges)."


def ops_sections(d: CensusDiff, top: int | None = None) -> list[tuple[str, list[list[str]]]]:
    """(title, rows) of the Operations table: per phase where both sides have phases, else over
    the compared steps (or whole captures); each row A's operations, B's, kernels and kernel
    time on each side and the change, the `top` groups by |Δ time| (all when None), the rest
    summed, the unattributed last."""
    return [(title, [row[:2] + row[3:] for row in rows]) for title, rows in _ops_rows(d, top)]


def _ops_rows(d: CensusDiff, top: int | None) -> list[tuple[str, list[list[str]]]]:
    """ops_sections' rows with B's operations said shortly too (third column)."""
    from census.compare.op_diff import table_rows
    from census.compare.op_match import group_label

    ops = d.ops
    if ops is None or not ops.rows:
        return []
    unit = "per step" if d.per_step else "whole capture"
    out = []
    for phase, matches in list(ops.phases.items()) or [("", ops.rows)]:
        rows = []
        for a_ops, b_ops, m in table_rows(matches, top):
            (ca, cb, _), (ta, tb, dt) = m.per_step("count"), m.per_step("time_ns")
            short = group_label(m.b_keys) if m.b_keys else b_ops
            rows.append([a_ops, b_ops, short, fmt_count(ca), fmt_count(cb), fmt_ns(ta),
                         fmt_ns(tb), fmt_ns(dt, signed=True)])  # fmt: skip
        where = f": {phase}" if phase else ""
        out.append((f"Operations{where} ({unit}, by |Δ time|)", rows))
    return out


def ops_missing(d: CensusDiff) -> str | None:
    """The line said instead of the Operations table: why there is none."""
    return None if d.ops is None else d.ops.missing


def ops_terminal(d: CensusDiff, top: int) -> list[tuple[str, list[list[str]]]]:
    """The Operations tables in fewer columns: A's operations, kernels `A → B`, the times; B's
    operations, where they differ, on a line of their own under them (`→ B's`, said shortly)."""
    out = []
    for title, rows in _ops_rows(d, top):
        lines = []
        for a, b, short, ca, cb, *times in rows:
            lines.append([a, f"{ca} → {cb}", *times])
            if b != a:
                lines.append([f"→ {short}", *[""] * (1 + len(times))])
        out.append((title, lines))
    return out

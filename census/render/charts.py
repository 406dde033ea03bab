"""The dashboards' charts: plotly figures of a summary and of a diff.

Each is a Chart with its title (drawn by the page above the figure, where plotly's toolbar cannot
cover it) and, when there is nothing to draw, the sentence the panel shows instead of empty axes.
"""

from __future__ import annotations

import html
from dataclasses import dataclass
from typing import Any

from census.compare.diff import CensusDiff
from census.metrics import (
    COUNTED_COPIES,
    GPU_BUSY_NS,
    GPU_IDLE_NS,
    GPU_SPAN_NS,
    LABELS,
    MEMCPY_KINDS,
    NCCL_KERNEL_TIME_NS,
    NON_NCCL_KERNEL_TIME_NS,
    NON_NCCL_UNION_NS,
    STEP_TIME_NS,
)
from census.model.census import Census
from census.render.fit import short_names
from census.render.views import SummaryView
from census.units import fmt_count, fmt_ns, keep_units, one_line

TOP_CHART = 20
NAME_CHARS = 60  # kernel names on a chart axis
# The kernel-change colours, named in the chart's legend.
CHANGE_COLORS = {
    "added": "#2a9d8f",
    "removed": "#e76f51",
    "increased": "#f4a261",
    "decreased": "#457b9d",
}


@dataclass(frozen=True)
class Chart:
    """One panel of the HTML page: its title and figure, or what it says instead."""

    title: str
    figure: Any | None  # a plotly Figure; None when there is nothing to draw
    empty: str = ""  # what the panel says instead


def esc(text: Any) -> str:
    """Text for a page, markup escaped, a number and its unit kept on one line."""
    return html.escape(keep_units(str(text)), quote=True)


def _axis_names(names: list[str]) -> list[str]:
    """Kernel names on a chart axis, numbered from the top, shortened as the terminal does:
    in the middle of templates, keeping the part where they differ, never two alike."""
    shown = short_names(names, NAME_CHARS)
    return [f"{len(names) - i}. " + esc(one_line(text)) for i, text in enumerate(shown)]


def summary_charts(census: Census) -> list[Chart]:
    """Kernel classes, top kernels, the steps (with steps), launch APIs, NCCL against the rest."""
    charts = [_class_chart(census), _top_chart(census)]
    if census.steps:
        charts += _step_charts(census)
    return [*charts, *_capture_charts(census)]


NO_KERNELS = "no kernels in this capture"


def _class_chart(census: Census) -> Chart:
    import plotly.graph_objects as go

    n = census.step_count
    basis = "per step" if n else "whole capture"
    scale = float(n) if n else 1.0
    classes = census.classes
    title = f"Kernel classes: time ({basis}, ms)"
    if not classes:
        return Chart(title, None, NO_KERNELS)
    return Chart(title, go.Figure(go.Bar(
        x=[esc(c.cls) for c in classes],
        y=[(c.step_time_ns if n else c.time_ns) / scale / 1e6 for c in classes],
        text=[f"{fmt_count((c.step_count if n else c.count) / scale)} kernels" for c in classes],
    )), NO_KERNELS)  # fmt: skip


def _top_chart(census: Census) -> Chart:
    import plotly.graph_objects as go

    top = list(census.kernels[:TOP_CHART])[::-1]
    top_fig = go.Figure(
        go.Bar(
            orientation="h",
            y=_axis_names([k.name for k in top]),
            x=[k.time_ns / 1e6 for k in top],
            hovertext=[esc(k.name) for k in top],
            hoverinfo="text+x",
        )
    )
    top_fig.update_layout(height=560)
    return Chart(f"Top {len(top)} kernels by total time (ms)", top_fig if top else None,
                 NO_KERNELS)  # fmt: skip


def _capture_charts(census: Census) -> list[Chart]:
    """Over the whole capture: launch API time by API, NCCL against non-NCCL kernel time."""
    import plotly.graph_objects as go

    apis = census.launch_apis
    api_fig = go.Figure(
        go.Bar(
            x=[esc(a.api) for a in apis],
            y=[a.time_ns / 1e6 for a in apis],
            text=[f"{a.count:,} calls" for a in apis],
        )
    )
    t = census.totals
    keys = (NCCL_KERNEL_TIME_NS, NON_NCCL_KERNEL_TIME_NS, NON_NCCL_UNION_NS)
    nccl_fig = go.Figure(go.Bar(x=[LABELS[k] for k in keys], y=[getattr(t, k) / 1e6 for k in keys]))
    return [
        Chart("Launch API time by API (ms, whole capture)", api_fig if apis else None,
              "no launch API calls in this capture"),
        Chart("NCCL vs non-NCCL kernel time (ms, whole capture)",
              nccl_fig if t.kernel_count else None, NO_KERNELS),
    ]  # fmt: skip


def _step_charts(census: Census) -> list[Chart]:
    import plotly.graph_objects as go

    steps = census.steps
    names = [esc(name) for name in steps.names]

    def column(key: str, unit: float) -> list[float]:
        return [v / unit for v in steps.column(key).tolist()]

    step_fig = go.Figure(
        [
            go.Bar(name=LABELS[GPU_BUSY_NS], x=names, y=column(GPU_BUSY_NS, 1e6)),
            go.Bar(name=LABELS[GPU_IDLE_NS], x=names, y=column(GPU_IDLE_NS, 1e6)),
        ]
    )
    step_fig.update_layout(barmode="stack", legend={"orientation": "h", "y": -0.15})
    charts = [Chart("Step time = GPU busy + GPU idle, in each step's window (ms)", step_fig)]
    if census.host_ran_ahead():  # the windows time the host: the steps as the GPU ran them
        span_fig = go.Figure(go.Bar(x=names, y=column(GPU_SPAN_NS, 1e6)))  # 0: launched none
        charts = [
            Chart("GPU span of each step: its work as the GPU ran it (ms)", span_fig),
            Chart("Host windows: GPU busy + GPU idle in each step's NVTX range (ms)", step_fig),
        ]
    for copy in COUNTED_COPIES:  # each counted copy kind's bytes per step
        key, kind = f"{copy.key}_bytes", MEMCPY_KINDS[copy.kind].lower()
        any_bytes = bool(steps.column(key).any())
        if any_bytes or not copy.hidden_when_zero:
            fig = go.Figure(go.Bar(x=names, y=column(key, 2**20))) if any_bytes else None
            charts.append(Chart(f"{kind.capitalize()} traffic per step (MiB)", fig,
                                f"no {kind} copies in the steps"))  # fmt: skip
    return charts


# The step-time waterfall's steps between the two sides' step times.
_WATERFALL_STEPS = tuple(f"Δ {LABELS[k]}" for k in (GPU_BUSY_NS, GPU_IDLE_NS))


def diff_charts(d: CensusDiff) -> list[Chart]:
    """The diff's panels: class time and count, kernel changes, step accounting."""
    import plotly.graph_objects as go

    la, lb = d.labels
    unit = "per step" if d.per_step else "whole capture"
    cls = d.classes
    x = [esc(c.cls) for c in cls]
    no_kernels = "no kernels on either side"
    cls_fig = go.Figure(
        [
            go.Bar(name=esc(la), x=x, y=[(c.time_ns.a or 0) / 1e6 for c in cls]),
            go.Bar(name=esc(lb), x=x, y=[(c.time_ns.b or 0) / 1e6 for c in cls]),
        ]
    )
    cls_fig.update_layout(barmode="group")
    cnt_fig = go.Figure(
        [
            go.Bar(name=esc(la), x=x, y=[c.count.a or 0 for c in cls]),
            go.Bar(name=esc(lb), x=x, y=[c.count.b or 0 for c in cls]),
        ]
    )
    cnt_fig.update_layout(barmode="group")
    charts = [
        Chart(f"Kernel class time, {unit} (ms)", cls_fig if cls else None, no_kernels),
        Chart(f"Kernel class count, {unit}", cnt_fig if cls else None, no_kernels),
        Chart(
            f"Largest kernel changes, Δ time {unit} (ms)", _change_figure(d), "no kernel changed"
        ),
    ]
    step, busy, idle = (d.metrics[k] for k in (STEP_TIME_NS, GPU_BUSY_NS, GPU_IDLE_NS))
    if step.delta is not None:
        wf = go.Figure(
            go.Waterfall(
                x=[f"{esc(la)} step", *_WATERFALL_STEPS, f"{esc(lb)} step"],
                measure=["absolute", "relative", "relative", "total"],
                y=[step.a / 1e6, busy.delta / 1e6, idle.delta / 1e6, 0],
                text=[
                    fmt_ns(step.a),
                    fmt_ns(busy.delta, signed=True),
                    fmt_ns(idle.delta, signed=True),
                    fmt_ns(step.b),
                ],
                textposition="outside",
                cliponaxis=False,
            )
        )
        charts.append(Chart("Step accounting: Δ step = Δ busy + Δ idle, in the step window (ms)",
                            wf))  # fmt: skip
    return charts + ops_waterfall(d)


def ops_waterfall(d: CensusDiff) -> list[Chart]:
    """Δ kernel time by operation group (census.compare.op_diff.waterfall_bars: the bars add up
    to the total exactly, in integer ns until here), then the total; none without an
    Operations table."""
    import plotly.graph_objects as go

    from census.compare.op_diff import total_scaled_ns, waterfall_bars

    ops = d.ops
    if ops is None or not ops.rows:
        return []
    bars, scale = waterfall_bars(ops), ops.scale
    total = total_scaled_ns(ops)
    labels = [*_axis_names([b.label for b in bars][::-1])[::-1], "Δ kernel time"]
    fig = go.Figure(go.Waterfall(
        x=labels, measure=["relative"] * len(bars) + ["total"],
        y=[b.scaled_ns / scale / 1e6 for b in bars] + [0],
        text=[fmt_ns(b.scaled_ns / scale, signed=True) for b in bars]
        + [fmt_ns(total / scale, signed=True)],
        hovertext=[esc(b.label) for b in bars] + ["the total"], hoverinfo="text+y",
        textposition="outside", cliponaxis=False,
    ))  # fmt: skip
    fig.update_layout(height=520, xaxis={"tickangle": -30})
    unit = "per step" if d.per_step else "whole capture"
    return [Chart(f"Δ kernel time by operation group, {unit} (ms)", fig)]


def _change_figure(d: CensusDiff) -> Any | None:
    """One bar per changed kernel, one trace (and legend entry) per kind of change."""
    import plotly.graph_objects as go

    changed = [k for k in d.kernels if k.bucket != "unchanged"][:TOP_CHART][::-1]
    if not changed:
        return None
    la, lb = d.labels
    names = {
        "added": f"added (only in {lb})",
        "removed": f"removed (only in {la})",
        "increased": f"more time in {lb}",
        "decreased": f"less time in {lb}",
    }
    rows = _axis_names([k.name for k in changed])
    fig = go.Figure()
    for bucket, color in CHANGE_COLORS.items():
        picked = [(row, k) for row, k in zip(rows, changed, strict=True) if k.bucket == bucket]
        if not picked:
            continue
        fig.add_trace(
            go.Bar(
                orientation="h",
                name=esc(names[bucket]),
                y=[row for row, _ in picked],
                x=[(k.time_ns.delta or 0) / 1e6 for _, k in picked],
                marker_color=color,
                hovertext=[f"{bucket}: {esc(k.name)}" for _, k in picked],
                hoverinfo="text+x",
            )
        )
    fig.update_layout(
        height=600,
        barmode="relative",
        yaxis={"categoryorder": "array", "categoryarray": rows},
        legend={"orientation": "h", "y": -0.12},
    )
    return fig


def rank_chart(view: SummaryView) -> list[Chart]:
    """With several ranks: per rank, its compute (non-NCCL kernel time), NCCL transfer and NCCL
    wait (and unmatched NCCL time), stacked; per step (means over its steps) with steps."""
    import plotly.graph_objects as go

    ranks = view.ranks
    if ranks is None:
        return []
    per_step = bool(view.census.steps)
    compute = view.census.steps.column(NON_NCCL_KERNEL_TIME_NS)
    parts: dict[str, list[float]] = {"compute": [], "NCCL transfer": [], "NCCL wait": [],
                                     "NCCL unmatched": []}  # fmt: skip
    for r, row in enumerate(ranks.ranks):
        means = ranks.rank_means(r) if per_step else None
        if means is None:
            figures = (row.kernel_time_ns - row.nccl_time_ns, row.transfer_ns or 0,
                       row.wait_ns or 0, row.unmatched_ns)  # fmt: skip
        else:
            rows = row.step_rows
            wait, transfer = means["wait_ns"], means["transfer_ns"]
            figures = (sum(compute[rows].tolist()) / len(rows), transfer, wait,
                       means["nccl_time_ns"] - wait - transfer)  # fmt: skip
        for name, value in zip(parts, figures, strict=True):
            parts[name].append(value / 1e6)
    labels = [esc(r.label) for r in ranks.ranks]
    fig = go.Figure([go.Bar(name=name, x=labels, y=values) for name, values in parts.items()
                     if any(values)])  # fmt: skip
    fig.update_layout(barmode="stack")
    basis = "per step" if per_step else "whole capture"
    return [Chart(f"Ranks: compute, NCCL transfer and NCCL wait ({basis}, ms)", fig)]

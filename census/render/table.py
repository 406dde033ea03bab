"""Terminal tables (rich) for a summary."""

from __future__ import annotations

from rich.console import Console
from rich.markup import escape
from rich.table import Table

from census.definitions import METRIC_KEYS
from census.model import Census
from census.render.text import rich_text
from census.units import fmt_bytes, fmt_count, fmt_metric, fmt_ns

LABELS: dict[str, str] = {
    "step_time_ns": "step time",
    "gpu_busy_ns": "GPU busy (union of all GPU work)",
    "gpu_idle_ns": "GPU idle inside the step",
    "sync_count": "host syncs",
    "sync_time_ns": "host blocked in syncs",
    "idle_after_sync_ns": "  idle after a sync",
    "idle_launch_ns": "  idle while launching",
    "idle_other_ns": "  idle in other host work",
    "kernel_count": "GPU kernels",
    "kernel_time_ns": "kernel time",
    "nccl_kernel_count": "NCCL kernels",
    "nccl_kernel_time_ns": "NCCL kernel time",
    "non_nccl_kernel_count": "non-NCCL kernels",
    "non_nccl_kernel_time_ns": "non-NCCL kernel time",
    "non_nccl_union_ns": "non-NCCL kernel union",
    "launch_api_count": "launch API calls",
    "launch_api_time_ns": "launch API time",
    "graph_launch_count": "graph launches",
    "d2d_count": "D2D copies",
    "d2d_bytes": "D2D bytes",
}


def render_summary(
    census: Census,
    top: int = 15,
    width: int | None = None,
    color: bool = False,
    all_steps: bool = False,
) -> str:
    """The terminal summary of one capture: census table, steps (with more than SHOWN_STEPS
    steps: the first and last few and the tail steps, unless `all_steps`), tail steps, phases,
    classes, kernels, memory."""
    return rich_text(lambda console: _draw_summary(census, console, top, all_steps), width, color)


SHOWN_STEPS = 12  # above this, the steps table shows the first and last EDGE_STEPS and outliers
EDGE_STEPS = 3


def _draw_steps(census: Census, console: Console, all_steps: bool) -> None:
    from census.compare.tails import tail_steps

    tail = tail_steps(census)
    assert tail is not None
    n = len(census.steps)
    outliers = {o.index for o in tail.outliers}
    shown = range(n) if all_steps or n <= SHOWN_STEPS else sorted(
        {*range(EDGE_STEPS), *range(n - EDGE_STEPS, n), *outliers})  # fmt: skip
    st = Table(title="Steps", title_justify="left")
    for col in ("step", "duration", "GPU busy", "GPU idle", "kernels", "union", "launch API"):
        st.add_column(col, justify="left" if col == "step" else "right")
    last = -1
    for i in shown:
        if i > last + 1:
            st.add_row(f"… {i - last - 1} more", *[""] * 6)
        s = census.steps[i]
        st.add_row(escape(s.name) + (" (tail)" if i in outliers else ""), fmt_ns(s.duration_ns),
                   fmt_ns(s.gpu_busy_ns), fmt_ns(s.gpu_idle_ns), fmt_count(s.metrics.kernel_count),
                   fmt_ns(s.metrics.non_nccl_union_ns), fmt_ns(s.metrics.launch_api_time_ns))  # fmt: skip
        last = i
    line = (
        f"step time: median {fmt_ns(tail.median_ns)}, p95 {fmt_ns(tail.p95_ns)}, max "
        f"{fmt_ns(tail.max_ns)}; tail above {fmt_ns(tail.threshold_ns)}: "
        f"{len(tail.outliers)} of {n} step(s)"
        + ("" if all_steps or n <= SHOWN_STEPS else "; --all-steps lists every step")
    )
    console.print(st)
    console.print(line)
    if tail.outliers:
        console.print(_tail_table(tail))


def _tail_table(tail) -> Table:
    t = Table(title="Tail steps against the median step", title_justify="left")
    for col in ("step", "time", "over median", "phase that grew", "Δ kernels", "Δ launches",
                "Δ GPU busy", "Δ GPU idle"):  # fmt: skip
        t.add_column(col, justify="left" if col in ("step", "phase that grew") else "right")
    for o in tail.outliers:
        grew = "" if o.phase is None else f"{o.phase} {fmt_ns(o.phase_delta_ns, signed=True)}"
        t.add_row(escape(o.name), fmt_ns(o.step_time_ns), fmt_ns(o.excess_ns, signed=True),
                  escape(grew), fmt_count(o.kernel_count_delta, signed=True),
                  fmt_count(o.launch_count_delta, signed=True),
                  fmt_ns(o.gpu_busy_delta_ns, signed=True), fmt_ns(o.gpu_idle_delta_ns, signed=True))  # fmt: skip
    return t


def _draw_summary(census: Census, console: Console, top: int, all_steps: bool) -> None:
    src = census.source
    gpus = ", ".join(f"{g.id}: {g.name or 'unknown'}" for g in src.gpus) or "none"
    console.print(
        f"[bold]{escape(src.path)}[/bold]  nsys {src.nsys_version or '?'} · schema "
        f"{src.schema_version or '?'} · GPUs {gpus} · {census.step_count} step(s)"
    )
    per_step = census.per_step()
    timing = census.per_step_timing()
    t = Table(title="Kernel census", title_justify="left")
    t.add_column("metric")
    t.add_column("total", justify="right")
    t.add_column("per step (mean)", justify="right")
    if timing:
        for key in ("step_time_ns", "gpu_busy_ns", "gpu_idle_ns", "idle_after_sync_ns",
                    "idle_launch_ns", "idle_other_ns", "sync_count", "sync_time_ns"):  # fmt: skip
            if timing[key] is not None:  # the idle split only with --idle
                t.add_row(LABELS[key], "", fmt_metric(key, timing[key]))
    for key in METRIC_KEYS:
        t.add_row(
            LABELS[key],
            fmt_metric(key, getattr(census.totals, key)),
            fmt_metric(key, per_step[key]) if per_step else "",
        )
    console.print(t)
    if census.steps:
        _draw_steps(census, console, all_steps)
    per_phase = census.per_phase()
    if per_phase:
        pt = Table(title="Phases (per step, mean)", title_justify="left")
        for col in ("phase", "time", "GPU busy", "kernels", "launch calls", "launch API", "D2D"):
            pt.add_column(col, justify="left" if col == "phase" else "right")
        for name, m in per_phase.items():
            pt.add_row(escape(name), fmt_ns(m["duration_ns"]), fmt_ns(m["gpu_busy_ns"]),
                       fmt_count(m["kernel_count"]), fmt_count(m["launch_api_count"]),
                       fmt_ns(m["launch_api_time_ns"]), fmt_bytes(m["d2d_bytes"]))  # fmt: skip
        console.print(pt)
    ct = Table(title="Kernel classes", title_justify="left")
    for col in ("class", "count", "time", "per step count", "per step time"):
        ct.add_column(col, justify="left" if col == "class" else "right")
    n = census.step_count
    for c in census.classes:
        ct.add_row(
            c.cls,
            fmt_count(c.count),
            fmt_ns(c.time_ns),
            fmt_count(c.step_count / n) if n else "",
            fmt_ns(c.step_time_ns / n) if n else "",
        )
    console.print(ct)
    kt = Table(title=f"Top {top} kernels by time", title_justify="left")
    for col in ("kernel", "class", "count", "time"):
        kt.add_column(col, justify="left" if col in ("kernel", "class") else "right")
    for k in census.kernels[:top]:
        kt.add_row(_short(k.name), k.cls, fmt_count(k.count), fmt_ns(k.time_ns))
    console.print(kt)
    if census.collectives:
        nt = Table(title="NCCL collectives", title_justify="left")
        for col in ("collective", "count", "time", "per step time"):
            nt.add_column(col, justify="left" if col == "collective" else "right")
        for c in census.collectives:
            nt.add_row(
                c.collective,
                fmt_count(c.count),
                fmt_ns(c.time_ns),
                fmt_ns(c.step_time_ns / n) if n else "",
            )
        nt.caption = f"NCCL overlapped with non-NCCL kernels: {fmt_ns(census.nccl_overlap_ns)}"
        console.print(nt)
    if census.memory or census.launch_apis:
        mt = Table(title="Memory operations and launch APIs", title_justify="left")
        for col in ("what", "count", "bytes", "time"):
            mt.add_column(col, justify="left" if col == "what" else "right")
        for m in census.memory:
            mt.add_row(m.kind, fmt_count(m.count), fmt_bytes(m.bytes), fmt_ns(m.time_ns))
        for a in census.launch_apis:
            mt.add_row(a.api, fmt_count(a.count), "", fmt_ns(a.time_ns))
        console.print(mt)


def render_overhead(overhead: dict) -> str:
    """One line: a capture's step time inside nsys against its calibration run without."""
    return (
        f"capture overhead: {fmt_ns(overhead['captured_mean_step_time_ns'])}/step inside nsys vs "
        f"{fmt_ns(overhead['uncaptured_mean_step_time_ns'])}/step uncaptured "
        f"(x{overhead['overhead_ratio']:.2f}): nsys narrows or widens the gaps you compare"
    )


def _short(name: str, width: int = 90) -> str:
    return escape(name if len(name) <= width else name[: width - 1] + "…")


def render_spread(
    labels: list[str], ranks: list, spread: dict, width: int | None = None, color: bool = False
) -> str:
    """One row per rank, then min / median / max over ranks (a straggler stands out)."""
    return rich_text(lambda console: _draw_spread(labels, ranks, spread, console), width, color)


def _draw_spread(labels: list[str], ranks: list, spread: dict, console: Console) -> None:
    t = Table(title="Ranks (per step)", title_justify="left")
    for col in ("rank", "steps", "step time", "GPU busy", "NCCL time", "non-NCCL union"):
        t.add_column(col, justify="left" if col == "rank" else "right")
    for label, c in zip(labels, ranks, strict=True):
        per = {**(c.per_step() or c.totals.as_dict()), **(c.per_step_timing() or {})}
        t.add_row(
            escape(label),
            str(c.step_count),
            fmt_ns(per.get("step_time_ns")),
            fmt_ns(per.get("gpu_busy_ns")),
            fmt_ns(per["nccl_kernel_time_ns"]),
            fmt_ns(per["non_nccl_union_ns"]),
        )
    console.print(t)
    s = Table(title="Spread over ranks", title_justify="left")
    for col in ("metric", "min", "median", "max", "slowest rank"):
        s.add_column(col, justify="left" if col in ("metric", "slowest rank") else "right")
    for key, v in spread.items():
        s.add_row(LABELS[key], fmt_ns(v.min), fmt_ns(v.median), fmt_ns(v.max), escape(v.max_rank))
    console.print(s)

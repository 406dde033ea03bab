"""Terminal tables (rich) for a summary."""

from __future__ import annotations

from rich.console import Console
from rich.markup import escape

from census.definitions import LABELS, LAUNCHED_TITLE, METRIC_KEYS, WINDOW_TITLE
from census.model import Census
from census.render.fit import print_fit
from census.render.text import rich_text
from census.units import fmt_bytes, fmt_count, fmt_metric, fmt_ns, one_line


def render_summary(
    census: Census,
    top: int = 15,
    width: int | None = None,
    color: bool = False,
    all_steps: bool = False,
    source: str | None = None,
) -> str:
    """The terminal summary of one capture: census table, steps (with more than SHOWN_STEPS
    steps: the first and last few and the tail steps, unless `all_steps`), tail steps, phases,
    classes, kernels, memory. `source`: what the user named it (else the export's path)."""
    return rich_text(lambda console: _draw_summary(census, console, top, all_steps, source),
                     width, color)  # fmt: skip


SHOWN_STEPS = 12  # above this, the steps table shows the first and last EDGE_STEPS and outliers
EDGE_STEPS = 3


def _draw_steps(census: Census, console: Console, all_steps: bool) -> None:
    from census.compare.tails import GPU_SPAN, tail_steps

    tail = tail_steps(census)
    assert tail is not None
    ahead = bool(census.host_ran_ahead())
    n = len(census.steps)
    outliers = {o.index for o in tail.outliers}
    shown = range(n) if all_steps or n <= SHOWN_STEPS else sorted(
        {*range(EDGE_STEPS), *range(n - EDGE_STEPS, n), *outliers})  # fmt: skip
    launched_head = ["step", "kernels", "non-NCCL union", "launch API time", "GPU span",
                     *(["host lead"] if ahead else [])]  # fmt: skip
    window, launched = [], []
    last = -1
    for i in shown:
        if i > last + 1:
            window.append([f"… {i - last - 1} more", "", "", ""])
            launched.append([f"… {i - last - 1} more", *[""] * (len(launched_head) - 1)])
        s = census.steps[i]
        name = s.name + (" (tail)" if i in outliers else "")
        window.append([name, fmt_ns(s.duration_ns), fmt_ns(s.gpu_busy_ns), fmt_ns(s.gpu_idle_ns)])
        launched.append([name, fmt_count(s.metrics.kernel_count),
                         fmt_ns(s.metrics.non_nccl_union_ns), fmt_ns(s.metrics.launch_api_time_ns),
                         fmt_ns(s.gpu_span_ns),
                         *([fmt_ns(s.host_lead_ns, signed=True)] if ahead else [])])  # fmt: skip
        last = i
    print_fit(console, "Steps: their windows (NVTX range; GPU time clipped to it)",
          ["step", _step_time_label(ahead), "GPU busy", "GPU idle"], window)  # fmt: skip
    print_fit(console, "Steps: the work launched in each (GPU time not clipped to the step)",
          launched_head, launched)  # fmt: skip
    left_out = n - tail.steps  # with the GPU's clock, the steps that launched no GPU work
    console.print(
        f"{'GPU span' if tail.clock == GPU_SPAN else 'step time'}: median "
        f"{fmt_ns(tail.median_ns)}, p95 {fmt_ns(tail.p95_ns)}, max {fmt_ns(tail.max_ns)}; tail "
        f"above {fmt_ns(tail.threshold_ns)}: {len(tail.outliers)} of {tail.steps} step(s)"
        + (f" ({left_out} without GPU work left out)" if left_out else "")
        + ("" if all_steps or n <= SHOWN_STEPS else "; --all-steps lists every step"),
        highlight=False,
    )
    if tail.outliers:
        head, rows = _tail_table(tail, tail.clock == GPU_SPAN)
        print_fit(console, "Tail steps against the median step", head, rows)


def _step_time_label(ahead: bool) -> str:
    """The NVTX range's time: the host's enqueueing, when the host ran ahead of the GPU."""
    return "step time (host)" if ahead else "step time"


TAIL_HEAD = ["step", "time", "over median", "phase that grew", "Δ kernels", "Δ launches",
             "Δ GPU busy", "Δ GPU idle"]  # fmt: skip
# On the GPU's clock the step windows time the host's enqueueing: their Δ GPU busy and idle are
# left out (the JSON keeps them).
TAIL_HEAD_GPU = ["step", "GPU span", "over median", "phase that grew (GPU span)", "Δ kernels",
                 "Δ launches"]  # fmt: skip


def _tail_table(tail, gpu: bool) -> tuple[list[str], list[list[str]]]:
    """The tail steps' rows, on the GPU's clock (`gpu`) or the host's."""
    rows = [
        [o.name, fmt_ns(o.gpu_span_ns if gpu else o.step_time_ns), fmt_ns(o.excess_ns, signed=True),
         "" if o.phase is None else f"{o.phase} {fmt_ns(o.phase_delta_ns, signed=True)}",
         fmt_count(o.kernel_count_delta, signed=True), fmt_count(o.launch_count_delta, signed=True),
         *([] if gpu else [fmt_ns(o.gpu_busy_delta_ns, signed=True),
                           fmt_ns(o.gpu_idle_delta_ns, signed=True)])]
        for o in tail.outliers
    ]  # fmt: skip
    return (TAIL_HEAD_GPU if gpu else TAIL_HEAD), rows


def _phase_rows(census: Census, ahead: bool) -> tuple[list[str], list[list[str]]]:
    """The phase table: per phase, per step (mean); its GPU span first when the host ran ahead
    (the phase's time is then the host's)."""
    head = ["phase", "time", "GPU busy", "kernels", "launch calls", "launch API time", "D2D"]
    rows = [[name, fmt_ns(m["duration_ns"]), fmt_ns(m["gpu_busy_ns"]),
             fmt_count(m["kernel_count"]), fmt_count(m["launch_api_count"]),
             fmt_ns(m["launch_api_time_ns"]), fmt_bytes(m["d2d_bytes"])]
            for name, m in census.per_phase().items()]  # fmt: skip
    spans = [fmt_ns(m["gpu_span_ns"]) for m in census.per_phase().values()]
    if ahead:
        head = ["phase", "GPU span", "host time", *head[2:]]
        return head, [[r[0], span, *r[1:]] for r, span in zip(rows, spans, strict=True)]
    return [*head, "GPU span"], [[*r, span] for r, span in zip(rows, spans, strict=True)]


WINDOW_ROWS = ("step_time_ns", "gpu_busy_ns", "gpu_idle_ns", "idle_after_sync_ns",
               "idle_launch_ns", "idle_other_ns", "sync_count", "sync_time_ns")  # fmt: skip
SPAN_ROW = "GPU span (first to last GPU op)"
LEAD_ROW = "host lead (GPU end − step end)"


def _census_rows(census: Census) -> list[list[str]]:
    """The census keys, total and per step; then the work launched in the step as the GPU ran
    it, per step only (a span does not add up over steps)."""
    per_step = census.per_step()
    if not per_step:  # no steps: the totals alone, no empty per-step column
        return [[LABELS[k], fmt_metric(k, getattr(census.totals, k))] for k in METRIC_KEYS]
    rows = [[LABELS[k], fmt_metric(k, getattr(census.totals, k)), fmt_metric(k, per_step[k])]
            for k in METRIC_KEYS]  # fmt: skip
    timing = census.per_step_timing()
    if timing:
        rows += [[SPAN_ROW, "", fmt_ns(timing["gpu_span_ns"])],
                 [LEAD_ROW, "", fmt_ns(timing["host_lead_ns"], signed=True)]]  # fmt: skip
    return rows


def _draw_summary(
    census: Census, console: Console, top: int, all_steps: bool, source: str | None = None
) -> None:
    from census.compare.limiter import summary_lead

    lead = summary_lead(census)
    if lead:  # what limits the step, first
        console.print(f"[bold]{escape(lead)}[/bold]", highlight=False)
    src = census.source
    gpus = ", ".join(f"{g.id}: {g.name or 'unknown'}" for g in src.gpus) or "none"
    about = (
        f"nsys {src.nsys_version or '?'} · schema {src.schema_version or '?'} · GPUs {gpus} · "
        f"{census.step_count} step(s)"
    )  # from the export, as the path is from the user: shown as text
    console.print(f"[bold]{escape(one_line(source or src.path))}[/bold]  {escape(one_line(about))}")
    timing = census.per_step_timing()
    ahead = bool(census.host_ran_ahead())
    if timing:  # the idle split only with --idle
        labels = {**LABELS, "step_time_ns": _step_time_label(ahead)}
        rows = [[labels[k], fmt_metric(k, timing[k])] for k in WINDOW_ROWS if timing[k] is not None]
        print_fit(console, WINDOW_TITLE, ["metric", "per step (mean)"], rows)
    head = ["metric", "total", "per step (mean)"][: 3 if census.steps else 2]
    print_fit(console, f"Kernel census: {LAUNCHED_TITLE}", head, _census_rows(census))
    if census.steps:
        _draw_steps(census, console, all_steps)
    if census.per_phase():
        head, rows = _phase_rows(census, ahead)
        print_fit(console, "Phases (per step, mean; GPU busy: in the phase's window; GPU span: "
                  "unclipped)", head, rows)  # fmt: skip
    n = census.step_count
    rows = [[c.cls, fmt_count(c.count), fmt_ns(c.time_ns),
             *((fmt_count(c.step_count / n), fmt_ns(c.step_time_ns / n)) if n else ())]
            for c in census.classes]  # fmt: skip
    head = ["class", "count", "time", *(("per step count", "per step time") if n else ())]
    print_fit(console, "Kernel classes", head, rows)
    rows = [[k.name, k.cls, fmt_count(k.count), fmt_ns(k.time_ns)] for k in census.kernels[:top]]
    print_fit(
        console, f"Top {top} kernels by time", ["kernel", "class", "count", "time"], rows, left=2
    )
    if census.collectives:
        rows = [[c.collective, fmt_count(c.count), fmt_ns(c.time_ns),
                 *((fmt_ns(c.step_time_ns / n),) if n else ())] for c in census.collectives]  # fmt: skip
        print_fit(console, "NCCL collectives", ["collective", "count", "time", "per step time"][: 4 if n else 3],
                  rows)  # fmt: skip
        console.print(f"NCCL overlapped with non-NCCL kernels: {fmt_ns(census.nccl_overlap_ns)}",
                      highlight=False)  # fmt: skip
    if census.memory or census.launch_apis:
        rows = [[m.kind, fmt_count(m.count), fmt_bytes(m.bytes), fmt_ns(m.time_ns)]
                for m in census.memory]  # fmt: skip
        rows += [[a.api, fmt_count(a.count), "", fmt_ns(a.time_ns)] for a in census.launch_apis]
        print_fit(
            console, "Memory operations and launch APIs", ["what", "count", "bytes", "time"], rows
        )


def render_overhead(overhead: dict) -> str:
    """One line: a capture's step time inside nsys against its calibration run without."""
    captured = fmt_ns(overhead["captured_mean_step_time_ns"])
    uncaptured = fmt_ns(overhead["uncaptured_mean_step_time_ns"])
    ratio = f"(x{overhead['overhead_ratio']:.2f})"
    if overhead.get("clock") == "gpu":
        return (
            f"capture overhead on the GPU: GPU span {captured}/step inside nsys vs {uncaptured}"
            f"/step uncaptured (CUDA events) {ratio}: nsys narrows or widens the gaps you compare"
        )
    return (
        f"capture overhead: {captured}/step inside nsys vs {uncaptured}/step uncaptured "
        f"{ratio}: nsys narrows or widens the gaps you compare"
    )


def render_spread(
    labels: list[str], ranks: list, spread: dict, width: int | None = None, color: bool = False
) -> str:
    """One row per rank, then min / median / max over ranks (a straggler stands out)."""
    return rich_text(lambda console: _draw_spread(labels, ranks, spread, console), width, color)


def _draw_spread(labels: list[str], ranks: list, spread: dict, console: Console) -> None:
    rows = []
    for label, c in zip(labels, ranks, strict=True):
        per = {**(c.per_step() or c.totals.as_dict()), **(c.per_step_timing() or {})}
        rows.append([label, str(c.step_count), fmt_ns(per.get("step_time_ns")),
                     fmt_ns(per.get("gpu_busy_ns")), fmt_ns(per["nccl_kernel_time_ns"]),
                     fmt_ns(per["non_nccl_union_ns"])])  # fmt: skip
    print_fit(console, "Ranks (per step)", ["rank", "steps", "step time", "GPU busy in step window",
          "NCCL kernel time", "non-NCCL union (unclipped)"], rows)  # fmt: skip
    rows = [[LABELS[key], fmt_ns(v.min), fmt_ns(v.median), fmt_ns(v.max), v.max_rank]
            for key, v in spread.items()]  # fmt: skip
    print_fit(
        console, "Spread over ranks", ["metric", "min", "median", "max", "slowest rank"], rows
    )

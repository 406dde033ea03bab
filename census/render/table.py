"""Terminal tables (rich) for a summary and for a rank folder's spread."""

from __future__ import annotations

from rich.console import Console
from rich.markup import escape

from census.metrics import (
    GPU_BUSY_NS,
    GPU_IDLE_NS,
    GPU_SPAN_NS,
    HOST_LEAD_NS,
    KERNEL_COUNT,
    LABELS,
    LAUNCH_API_TIME_NS,
    NON_NCCL_UNION_NS,
    STEP_TIME_NS,
    WINDOW_TITLE,
    launched_title,
)
from census.render.fit import print_fit
from census.render.summaryrows import (
    IDLE_RANGES_TITLE,
    OPS_NONE,
    about_line,
    census_rows,
    class_rows,
    collective_rows,
    hosts_line,
    idle_range_rows,
    kernel_rows,
    memory_rows,
    nccl_rank_section,
    op_rows,
    ops_title,
    phase_rows,
    rank_rows,
    spread_rows,
    tail_line,
    tail_rows,
    window_rows,
)
from census.render.text import rich_text
from census.render.views import RanksView, SummaryView
from census.units import fmt_count, fmt_ns, one_line


def render_summary(
    view: SummaryView,
    top: int = 15,
    width: int | None = None,
    color: bool = False,
    all_steps: bool = False,
    overhead: bool = True,
    ops: bool = False,
) -> str:
    """The terminal summary of one capture: what limits its step, census table, steps (with
    more than SHOWN_STEPS steps: the first and last few and the tail steps, unless
    `all_steps`), tail steps, phases, classes, kernels, with `ops` the top operations, memory;
    then, with `overhead`, the capture-overhead line of a capture folder with a calibration
    run."""
    text = rich_text(lambda console: _draw_summary(view, console, top, all_steps, ops), width,
                     color)  # fmt: skip
    note = overhead_note(view.overhead, width) if overhead else None
    return text if note is None else f"{text}{note}\n"


def overhead_note(overhead: dict | None, width: int | None = None) -> str | None:
    """The capture-overhead sentence, wrapped to `width` (80 by default); None without one."""
    import textwrap

    return None if overhead is None else textwrap.fill(render_overhead(overhead), width or 80)


SHOWN_STEPS = 12  # above this, the steps table shows the first and last EDGE_STEPS and outliers
EDGE_STEPS = 3


def _draw_summary(view: SummaryView, console: Console, top: int, all_steps: bool,
                  ops: bool = False) -> None:  # fmt: skip
    census = view.census
    if view.lead:  # what limits the step, first
        console.print(f"[bold]{escape(view.lead)}[/bold]", highlight=False)
    # from the export, as the path is from the user: shown as text
    shown, about = one_line(view.shown or census.source.path), one_line(about_line(census))
    console.print(f"[bold]{escape(shown)}[/bold]  {escape(about)}")
    window = window_rows(census)
    if window:
        print_fit(console, WINDOW_TITLE, *window)
    ranges = idle_range_rows(census)
    if ranges:
        print_fit(console, IDLE_RANGES_TITLE, *ranges, left=1)
    print_fit(console, f"Kernel census: {launched_title(bool(census.steps))}", *census_rows(census))
    if census.steps:
        _draw_steps(view, console, all_steps)
    if census.per_phase():
        print_fit(console, "Phases (per step, mean; GPU busy: in the phase's window; GPU span: "
                  "unclipped)", *phase_rows(census))  # fmt: skip
    print_fit(console, "Kernel classes", *class_rows(census))
    print_fit(console, f"Top {top} kernels by time", *kernel_rows(census, top), left=2)
    if ops and census.ops is None:
        console.print(escape(OPS_NONE), highlight=False)
    elif ops:
        print_fit(console, ops_title(census, top), *op_rows(census, top))
    if census.collectives:
        print_fit(console, "NCCL collectives", *collective_rows(census))
        console.print(f"NCCL overlapped with non-NCCL kernels: {fmt_ns(census.nccl_overlap_ns)}",
                      highlight=False)  # fmt: skip
    section = nccl_rank_section(view)
    if section is not None:
        print_fit(console, section[0], *section[1], left=1)
        for line in section[2]:
            console.print(escape(one_line(line)), highlight=False)
    if census.memory or census.launch_apis:
        print_fit(console, "Memory operations and launch APIs", *memory_rows(census))


def _draw_steps(view: SummaryView, console: Console, all_steps: bool) -> None:
    census, tail = view.census, view.tail
    assert tail is not None  # a census with steps has a tail
    n = len(census.steps)
    window, launched = _step_tables(view, all_steps)
    print_fit(console, "Steps: their windows (NVTX range; GPU time clipped to it)", *window)
    print_fit(console, "Steps: the work launched in each (GPU time not clipped to the step)",
              *launched)  # fmt: skip
    more = "" if all_steps or n <= SHOWN_STEPS else "; --all-steps lists every step"
    console.print(tail_line(tail, n) + more, highlight=False)
    if tail.outliers:
        print_fit(console, "Tail steps against the median step", *tail_rows(tail))


def _step_tables(view: SummaryView, all_steps: bool) -> tuple[tuple, tuple]:
    """The steps' windows and the work launched in each: every step, or with more than
    SHOWN_STEPS the first and last EDGE_STEPS and the tail steps, a gap shown as `… N more`."""
    census, tail = view.census, view.tail
    ahead = bool(census.host_ran_ahead())
    n = len(census.steps)
    outliers = {o.index for o in tail.outliers} if tail else set()  # tail: None without steps
    shown = range(n) if all_steps or n <= SHOWN_STEPS else sorted(
        {*range(EDGE_STEPS), *range(n - EDGE_STEPS, n), *outliers})  # fmt: skip
    keys = (KERNEL_COUNT, NON_NCCL_UNION_NS, LAUNCH_API_TIME_NS, GPU_SPAN_NS,
            *((HOST_LEAD_NS,) if ahead else ()))  # fmt: skip
    launched_head = ["step", *(LABELS[k] for k in keys)]
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
    window_head = ["step", *(LABELS[k] for k in (STEP_TIME_NS, GPU_BUSY_NS, GPU_IDLE_NS))]
    return (window_head, window), (launched_head, launched)


def render_overhead(overhead: dict) -> str:
    """One line: a capture's step time inside its profiler (nsys, torch.profiler) against its
    calibration run without."""
    captured = fmt_ns(overhead["captured_mean_step_time_ns"])
    uncaptured = fmt_ns(overhead["uncaptured_mean_step_time_ns"])
    ratio = f"(x{overhead['overhead_ratio']:.2f})"
    tracer = overhead.get("tracer") or "nsys"
    inside = f"inside {tracer}" + (" with op ranges" if overhead.get("op_ranges") else "")
    if overhead.get("clock") == "gpu":
        return (
            f"capture overhead on the GPU: GPU span {captured}/step {inside} vs "
            f"{uncaptured}/step uncaptured (CUDA events) {ratio}: {tracer} narrows or widens the "
            "gaps you compare"
        )
    return (
        f"capture overhead: {captured}/step {inside} vs {uncaptured}/step uncaptured "
        f"{ratio}: {tracer} narrows or widens the gaps you compare"
    )


def render_ranks(
    view: RanksView,
    top: int = 15,
    width: int | None = None,
    color: bool = False,
    all_steps: bool = False,
    ops: bool = False,
) -> str:
    """A rank folder: the merged summary (with `ops` its operations), then one row per rank and
    min / median / max over ranks (a straggler stands out)."""
    return render_summary(view.merged, top, width, color, all_steps, ops=ops) + rich_text(
        lambda console: _draw_spread(view, console), width, color
    )


def _draw_spread(view: RanksView, console: Console) -> None:
    print_fit(console, "Ranks (per step)", *rank_rows(view), left=1 + (view.host_count > 1))
    line = hosts_line(view)
    if line:
        console.print(escape(one_line(line)))
    print_fit(console, "Spread over ranks", *spread_rows(view))

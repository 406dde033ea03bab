"""A summary's tables as (head, rows) of display strings, shared by the terminal and markdown
renderers (as census.render.diffrows is for a diff)."""

from __future__ import annotations

from census.definitions import P95_MIN_VALUES
from census.findings.tails import GPU_SPAN, Tail
from census.metrics import (
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
    METRIC_KEYS,
    NCCL_KERNEL_TIME_NS,
    NON_NCCL_UNION_NS,
    PHASE_LABELS,
    STEP_TIME_NS,
    SYNC_COUNT,
    SYNC_TIME_NS,
    VIEW_PHASES,
    Metric,
    shown_in,
)
from census.model.census import Census
from census.render.views import RanksView, SummaryView
from census.units import fmt_bytes, fmt_count, fmt_metric, fmt_ns, one_line

Table = tuple[list[str], list[list[str]]]

WINDOW_ROWS = (STEP_TIME_NS, GPU_BUSY_NS, GPU_IDLE_NS, IDLE_AFTER_SYNC_NS,
               IDLE_LAUNCH_NS, IDLE_OTHER_NS, SYNC_COUNT, SYNC_TIME_NS)  # fmt: skip


def about_line(census: Census) -> str:
    """What the export says of itself: its tracer (nsys and schema versions; a trace's tracer,
    whose export's schema is census's own, not said), GPUs, steps."""
    src = census.source
    gpus = ", ".join(f"{g.id}: {g.name or 'unknown'}" for g in src.gpus) or "none"
    schema = "" if src.tracer else f" · schema {src.schema_version or '?'}"
    return f"{src.traced_by}{schema} · GPUs {gpus} · {census.step_count} step(s)"


def window_rows(census: Census) -> Table | None:
    """The step window, per step (mean); the idle split only with --idle; None without steps."""
    timing = census.per_step_timing()
    if not timing:
        return None
    rows = [[LABELS[k], fmt_metric(k, timing[k])] for k in WINDOW_ROWS if timing[k] is not None]
    return ["metric", "per step (mean)"], rows


IDLE_RANGES_TITLE = (
    "GPU idle by host range (per step, mean: the innermost NVTX range open on the step's "
    "thread while the GPU idled)"
)
NO_RANGE = "(no range open)"


def idle_range_rows(census: Census, top: int = 10) -> Table | None:
    """The host ranges holding the most GPU idle time, then the idle time with no range open;
    None without the split or without idle time in any range."""
    ranges = census.idle_ranges()
    timing = census.per_step_timing()
    if not ranges or not timing:
        return None
    idle = timing[GPU_IDLE_NS]
    rows = [[one_line(r["range"]), fmt_ns(r["idle_ns_per_step"]), _share(r["share"])]
            for r in ranges[:top]]  # fmt: skip
    if len(ranges) > top:
        rest = sum(r["idle_ns_per_step"] for r in ranges[top:])
        rows.append([f"({len(ranges) - top} more ranges)", fmt_ns(rest), _share(rest / idle)])
    none = idle - sum(r["idle_ns_per_step"] for r in ranges)
    rows.append([NO_RANGE, fmt_ns(none), _share(none / idle if idle else None)])
    return ["host range", "GPU idle", "of idle"], rows


def _share(x: float | None) -> str:
    return "" if x is None else f"{100 * x:.1f}%"


def census_rows(census: Census) -> Table:
    """The census keys, total and per step; then the work launched in the step as the GPU ran
    it, per step only (a span does not add up over steps)."""
    per_step = census.per_step()
    if not per_step:  # no steps: the totals alone, no empty per-step column
        rows = [[LABELS[k], fmt_metric(k, getattr(census.totals, k))] for k in METRIC_KEYS]
        return ["metric", "total"], rows
    rows = [[LABELS[k], fmt_metric(k, getattr(census.totals, k)), fmt_metric(k, per_step[k])]
            for k in METRIC_KEYS]  # fmt: skip
    timing = census.per_step_timing()
    if timing:
        rows += [[LABELS[GPU_SPAN_NS], "", fmt_ns(timing[GPU_SPAN_NS])],
                 [LABELS[HOST_LEAD_NS], "", fmt_ns(timing[HOST_LEAD_NS], signed=True)]]  # fmt: skip
    return ["metric", "total", "per step (mean)"], rows


def tail_line(tail: Tail, steps: int) -> str:
    """The step-time distribution and how many steps are in its tail, of `steps` selected."""
    left_out = steps - tail.steps  # with the GPU's clock, the steps that launched no GPU work
    few = (f" (of {tail.steps} steps, fewer than {P95_MIN_VALUES}: between the two largest)"
           if tail.steps < P95_MIN_VALUES else "")  # fmt: skip
    return (
        f"{'GPU span' if tail.clock == GPU_SPAN else 'step time'}: median "
        f"{fmt_ns(tail.median_ns)}, p95 {fmt_ns(tail.p95_ns)}{few}, max {fmt_ns(tail.max_ns)}; tail "
        f"above {fmt_ns(tail.threshold_ns)}: {len(tail.outliers)} of {tail.steps} step(s)"
        + (f" ({left_out} without GPU work left out)" if left_out else "")
    )


_TAIL_DELTAS = [f"Δ {LABELS[k]}" for k in (KERNEL_COUNT, LAUNCH_API_COUNT)]
TAIL_HEAD = ["step", LABELS[STEP_TIME_NS], "over median", "phase that grew", *_TAIL_DELTAS,
             f"Δ {LABELS[GPU_BUSY_NS]}", f"Δ {LABELS[GPU_IDLE_NS]}"]  # fmt: skip
# On the GPU's clock the step windows time the host's enqueueing: their Δ GPU busy and idle are
# left out (the JSON keeps them).
TAIL_HEAD_GPU = ["step", LABELS[GPU_SPAN_NS], "over median", "phase that grew (GPU span)",
                 *_TAIL_DELTAS]  # fmt: skip


def tail_rows(tail: Tail) -> Table:
    """The tail steps against the median step, on the tail's clock."""
    gpu = tail.clock == GPU_SPAN
    rows = [
        [o.name, fmt_ns(o.gpu_span_ns if gpu else o.step_time_ns), fmt_ns(o.excess_ns, signed=True),
         "" if o.phase is None else f"{o.phase} {fmt_ns(o.phase_delta_ns, signed=True)}",
         fmt_count(o.kernel_count_delta, signed=True), fmt_count(o.launch_count_delta, signed=True),
         *([] if gpu else [fmt_ns(o.gpu_busy_delta_ns, signed=True),
                           fmt_ns(o.gpu_idle_delta_ns, signed=True)])]
        for o in tail.outliers
    ]  # fmt: skip
    return (TAIL_HEAD_GPU if gpu else TAIL_HEAD), rows


def phase_keys(census: Census) -> tuple[Metric, ...]:
    """The census keys a phase table shows (census.metrics.VIEW_PHASES), those hidden when
    0 left out when every phase's is."""
    per = census.per_phase().values()
    return tuple(k for k in shown_in(VIEW_PHASES)
                 if k.name not in HIDDEN_WHEN_ZERO or any(m[k.name] for m in per))  # fmt: skip


def phase_rows(census: Census) -> Table:
    """The phase table: per phase, per step (mean); its GPU span first when the host ran ahead
    (the phase's time is then the host's)."""
    keys = phase_keys(census)
    time, busy, span = (PHASE_LABELS[k] for k in (DURATION_NS, GPU_BUSY_NS, GPU_SPAN_NS))
    head = ["phase", time, busy, *(m.label for m in keys)]
    rows = [[name, fmt_ns(m[DURATION_NS]), fmt_ns(m[GPU_BUSY_NS]),
             *(fmt_metric(k.name, m[k.name]) for k in keys)]
            for name, m in census.per_phase().items()]  # fmt: skip
    spans = [fmt_ns(m[GPU_SPAN_NS]) for m in census.per_phase().values()]
    if census.host_ran_ahead():
        head = ["phase", span, *head[1:]]
        return head, [[r[0], s, *r[1:]] for r, s in zip(rows, spans, strict=True)]
    return [*head, span], [[*r, s] for r, s in zip(rows, spans, strict=True)]


def class_rows(census: Census) -> Table:
    """The kernel class table: count and time over the capture, per-step means with steps."""
    n = census.step_count
    rows = [[c.cls, fmt_count(c.count), fmt_ns(c.time_ns),
             *((fmt_count(c.step_count / n), fmt_ns(c.step_time_ns / n)) if n else ())]
            for c in census.classes]  # fmt: skip
    return ["class", "count", "time", *(("per step count", "per step time") if n else ())], rows


def kernel_rows(census: Census, top: int) -> Table:
    """The `top` kernels by time: name, class, count and time over the capture."""
    rows = [[k.name, k.cls, fmt_count(k.count), fmt_ns(k.time_ns)] for k in census.kernels[:top]]
    return ["kernel", "class", "count", "time"], rows


OPS_NONE = (
    "no operation ranges in this profile: Kineto traces carry them; an nsys capture "
    "needs torch.autograd.profiler.emit_nvtx or nsys --pytorch=autograd-nvtx"
)


def ops_title(census: Census, top: int) -> str:
    """The operations table's title."""
    per = "per step, mean" if census.step_count else "whole capture"
    return f"Top {top} operations by kernel time ({per})"


def op_rows(census: Census, top: int) -> Table:
    """The `top` operations by kernel time (docs/definitions.md, Operations), then the
    unattributed: kernels, launch calls and kernel time per step (the whole capture's without
    steps), and the share of the kernel time."""
    ops, n = census.ops, census.step_count
    assert ops is not None
    if n:
        cols = [ops.kernel_count.sum(axis=1), ops.launch_count.sum(axis=1),
                ops.kernel_time_ns.sum(axis=1)]  # fmt: skip
    else:
        cols = [ops.total_kernel_count, ops.total_launch_count, ops.total_kernel_time_ns]
    count, launches, time = (c.tolist() for c in cols)
    whole = sum(time)
    order = ops.order(time)
    shown = [*[r for r in order if ops.op[r] is not None][:top], order[-1]]
    rows = [[ops.label(r), fmt_count(count[r] / (n or 1)), fmt_count(launches[r] / (n or 1)),
             fmt_ns(time[r] / (n or 1)), f"{100 * time[r] / whole:.1f}%" if whole else "-"]
            for r in shown if count[r] or ops.op[r] is None]  # fmt: skip
    return ["operation", "kernels", "launches", "kernel time", "share"], rows


def collective_rows(census: Census) -> Table:
    """The NCCL collective table: count and time over the capture, per-step time with steps."""
    n = census.step_count
    rows = [[c.collective, fmt_count(c.count), fmt_ns(c.time_ns),
             *((fmt_ns(c.step_time_ns / n),) if n else ())] for c in census.collectives]  # fmt: skip
    return ["collective", "count", "time", "per step time"][: 4 if n else 3], rows


def memory_rows(census: Census) -> Table:
    """Memory operations, then launch APIs (no bytes)."""
    rows = [[m.kind, fmt_count(m.count), fmt_bytes(m.bytes), fmt_ns(m.time_ns)]
            for m in census.memory]  # fmt: skip
    rows += [[a.api, fmt_count(a.count), "", fmt_ns(a.time_ns)] for a in census.launch_apis]
    return ["what", "count", "bytes", "time"], rows


def rank_rows(view: RanksView) -> Table:
    """One row per rank, per step (whole capture without steps); with ranks on several hosts, a
    host column and the rows grouped by host (in the order of each host's first rank)."""
    rows = []
    for label, rank in zip(view.labels, view.ranks, strict=True):
        c = rank.census
        per = {**(c.per_step() or c.totals.as_dict()), **(c.per_step_timing() or {})}
        rows.append([label, str(c.step_count), fmt_ns(per.get(STEP_TIME_NS)),
                     fmt_ns(per.get(GPU_BUSY_NS)), fmt_ns(per[NCCL_KERNEL_TIME_NS]),
                     fmt_ns(per[NON_NCCL_UNION_NS])])  # fmt: skip
    head = ["rank", "steps", "step time", "GPU busy in step window", "NCCL kernel time",
            "non-NCCL union (unclipped)"]  # fmt: skip
    if view.host_count < 2:
        return head, rows
    hosts = [h or "" for h in view.hosts]
    first = {h: i for i, h in reversed(list(enumerate(hosts)))}
    order = sorted(range(len(rows)), key=lambda i: (first[hosts[i]], i))
    return ["host", *head], [[hosts[i], *rows[i]] for i in order]


def hosts_line(view: RanksView) -> str | None:
    """With ranks on several hosts: how many, and that their times are their own hosts'."""
    if view.host_count < 2:
        return None
    return (f"ranks on {view.host_count} hosts: each export's times are on its own host's clock; "
            "census compares durations, never one host's absolute times with another's")  # fmt: skip


def spread_rows(view: RanksView) -> Table:
    """Min / median / max over ranks, and the slowest rank (a straggler stands out)."""
    rows = [[LABELS[key], fmt_ns(v.min), fmt_ns(v.median), fmt_ns(v.max), v.max_rank]
            for key, v in view.spread.items()]  # fmt: skip
    return ["metric", "min", "median", "max", "slowest rank"], rows


def nccl_rank_section(view: SummaryView) -> tuple[str, Table, list[str]] | None:
    """With several ranks: the title and table of their NCCL time split into wait and
    transfer (census.findings.nccl_ranks), and the lines under it (not matched, the straggler)."""
    from census.findings.nccl_ranks import LEGEND, rank_table, straggler_line, unmatched_line

    ranks = view.ranks
    if ranks is None:
        return None
    per_step = bool(view.census.steps)
    title = f"Ranks: NCCL time = wait + transfer ({'per step' if per_step else 'whole capture'})"
    lines = [line for line in (LEGEND, unmatched_line(ranks), straggler_line(ranks)) if line]
    return title, rank_table(ranks, per_step), lines

"""CensusDiff -> a ranked list of plain sentences. Every number comes from the diff's tables."""

from __future__ import annotations

from census.compare.diff import CensusDiff, Delta, compared_value
from census.compare.headline import IDLE_CAUSES, change_text, headline, idle_cause
from census.compare.op_diff import explain_ops
from census.definitions import NON_GAIN_MIN_SHARE
from census.definitions.triton_names import decode_triton
from census.findings.limiter import find_limiter, limiter_sentence
from census.metrics import (
    COUNTED_COPIES,
    DURATION_NS,
    GPU_BUSY_NS,
    GPU_IDLE_NS,
    GPU_SPAN_NS,
    KERNEL_COUNT,
    KERNEL_TIME_NS,
    LAUNCH_API_COUNT,
    LAUNCH_API_TIME_NS,
    MEMCPY_KINDS,
    NCCL_KERNEL_COUNT,
    NCCL_KERNEL_TIME_NS,
    NON_NCCL_UNION_NS,
    PHASE_LABELS,
    STEP_TIME_NS,
    SYNC_COUNT,
    SYNC_TIME_NS,
    short_label,
)
from census.model.step_table import int_sum
from census.units import clip, fmt_bytes, fmt_count, fmt_ns, fmt_pct, one_line

TOP_FUSED = 3
HOST_BOUND = "host-bound:"  # how the non-gain sentence starts


def explain_diff(d: CensusDiff) -> list[str]:
    """What makes the two sides not comparable first, then the headline, then the other
    sentences by the size of their time contribution; sentences that a difference in tracing
    makes meaningless are withheld."""
    unit = "/step" if d.per_step else ""
    problems, hidden = d.comparability.problems, d.comparability.hidden
    ranked: list[tuple[float, str]] = []
    for name, make in (
        ("kernels", _kernels),
        ("idle", _idle),
        ("idle", _idle_ranges),
        ("kernels", _union),
        ("launch", _launch),
        ("copies", _copies),
        ("nccl", _nccl),
        ("kernels", _fusion),
    ):
        said = None if name in hidden else make(d, unit)
        ranked.extend(said if isinstance(said, list) else [said] if said else [])
    if "kernels" not in hidden:
        ranked.extend(explain_ops(d.ops, d.labels, unit))
    ranked.sort(key=lambda ws: -abs(ws[0]))
    gpu = "gpu" not in hidden  # else one side's GPU work is unknown (comparable.py)
    head = [line for line in (headline(d), gpu and non_gain(d, unit), _uncaptured(d),
                              gpu and _phases(d)) if line]  # fmt: skip
    first = [f"not directly comparable: {'; '.join(problems)}"] if problems else []
    return first + head + [text for _, text in ranked]


def _phases(d: CensusDiff) -> str | None:
    """The phase that holds most of the step-time change, and what changed in it: by its time
    in the step, or by its GPU span when the steps are compared on the GPU's clock; each figure
    named by its label (PHASE_LABELS, short_label's form), as the phase tables name it."""
    gpu = d.clock == "gpu"
    key = GPU_SPAN_NS if gpu else DURATION_NS
    phases = {n: m for n, m in d.phases.items() if m[key].delta is not None or not gpu}
    if not phases:
        return None
    ranked = sorted(phases.items(), key=lambda kv: -abs(kv[1][key].delta or 0))
    name, top = ranked[0]
    change, busy = top[key], top[GPU_BUSY_NS]
    kernels, launches = top[KERNEL_COUNT].delta or 0, top[LAUNCH_API_COUNT].delta or 0
    others = ", ".join(f"{n} {fmt_ns(v[key].delta, signed=True)}" for n, v in ranked[1:])
    delta = f"{short_label(key, PHASE_LABELS)} {fmt_ns(change.delta, signed=True)}/step ({fmt_pct(change.pct)})"
    counts = (f"{PHASE_LABELS[KERNEL_COUNT]} {fmt_count(kernels, signed=True)}, "
              f"{PHASE_LABELS[LAUNCH_API_COUNT]} {fmt_count(launches, signed=True)}")  # fmt: skip
    busy_text = f"{PHASE_LABELS[GPU_BUSY_NS]} {fmt_ns(busy.delta, signed=True)}"
    if gpu:
        text = (
            f"by phase on the GPU: most of the change is in {name}: {delta}, {counts}, {busy_text}"
        )
    else:
        text = (
            f"by phase: most of the step-time change is in {name}: {delta}, {busy_text}, {counts}"
        )
    return text + (f"; {others}" if others else "")


def non_gain(
    d: CensusDiff, unit: str, arms: Delta | None = None, unsettled: str = ""
) -> str | None:
    """NON_GAIN_RULE: the GPU work fell and the step did not follow. The step times are the
    uncaptured arms' (`arms`: an experiment's medians of arm medians) when given, else the
    captures' calibration runs' when both have one (nsys distorts the captured ones), else the
    captured ones; `unsettled` (the arms' interval, when they did not show B faster): the step
    did not fall measurably, whatever its point estimate. Says that B is host-bound, how much
    GPU work went, where the freed time went when the captured idle time grew (the idle split,
    the host ranges that gained it), and B's limiter."""
    step, busy, idle = (d.metrics[k] for k in (STEP_TIME_NS, GPU_BUSY_NS, GPU_IDLE_NS))
    if d.clock == "gpu" or None in (step.delta, busy.delta, idle.delta) or not step.a:
        return None
    ua, ub = d.uncaptured_ns
    uncaptured = ua is not None and ub is not None and ua > 0
    moved = arms or (Delta(ua, ub) if uncaptured else step)
    followed = (moved.delta or 0) <= busy.delta / 2 and not unsettled
    if busy.delta > -NON_GAIN_MIN_SHARE * (busy.a or 0) or followed:
        return None
    lb = d.labels[1]
    where = ("uncaptured arms: step time" if arms else
             "without nsys: step time" if uncaptured else "step time")  # fmt: skip
    text = (
        f"{HOST_BOUND} {lb} removed GPU work (GPU busy {change_text(busy, fmt_ns, unit)}, "
        f"{fmt_count(d.metrics[KERNEL_COUNT].delta, signed=True)} kernels{unit}) but its step "
        f"did not follow ({where} {change_text(moved, fmt_ns, unit)}{unsettled})"
    )
    if idle.delta > 0:
        grew = [(n, v.delta) for n, v in d.idle_by_range.items() if (v.delta or 0) > 0][:3]
        ranges = ", ".join(f"{one_line(clip(n, 60))} ({fmt_ns(x, signed=True)}{unit})"
                           for n, x in grew)  # fmt: skip
        text += f": GPU idle {fmt_ns(idle.delta, signed=True)}{unit}{idle_cause(d, ', mostly ')}"
        text += f"; the idle grew most inside {ranges}" if ranges else ""
    limiter = find_limiter(d.b)
    return text + (f"; {lb} is {limiter_sentence(limiter, d.b.idle_ranges())}" if limiter else "")


def _idle_ranges(d: CensusDiff, unit: str) -> tuple[float, str] | None:
    """The host ranges whose GPU idle time changed most."""
    moved = [(n, v.delta) for n, v in d.idle_by_range.items() if v.delta][:4]
    if not moved:
        return None
    parts = ", ".join(f"{one_line(clip(n, 60))} {fmt_ns(x, signed=True)}" for n, x in moved)
    per = ", per step" if unit else ""
    return moved[0][1] or 0.0, f"GPU idle by host range{per}: {parts}"


def _idle(d: CensusDiff, unit: str) -> tuple[float, str] | None:
    """The part of the GPU idle time that changed most, and the syncs behind it."""
    idle = d.metrics[GPU_IDLE_NS]
    parts = {k: d.metrics[k].delta for k in IDLE_CAUSES if d.metrics[k].delta is not None}
    if not parts or not idle.delta:
        return None
    key = max(parts, key=lambda k: abs(parts[k] or 0))
    text = (
        f"GPU idle {change_text(idle, fmt_ns, unit)}: mostly {IDLE_CAUSES[key]} "
        f"{fmt_ns(parts[key], signed=True)}{unit}"
    )
    syncs = d.metrics[SYNC_COUNT].delta
    if syncs:
        where = ""
        if d.phases:
            name, m = max(d.phases.items(), key=lambda kv: abs(kv[1][SYNC_COUNT].delta or 0))
            where = f" in {name}" if m[SYNC_COUNT].delta else ""
        blocked = fmt_ns(d.metrics[SYNC_TIME_NS].delta, signed=True)
        text += f" ({fmt_count(syncs, signed=True)} syncs{unit}{where}, host blocked {blocked})"
    return parts[key] or 0.0, text


def _uncaptured(d: CensusDiff) -> str | None:
    """Both captures' calibration runs (without nsys) side by side with the captured delta, on
    the clock the steps are compared by."""
    ua, ub = d.uncaptured_ns
    step = d.metrics[d.step_key]
    if ua is None or ub is None or step.delta is None:
        return None
    gpu = d.clock == "gpu"
    clock = ", timed on the GPU" if gpu else ""
    captured = "GPU span under nsys" if gpu else "under nsys"
    return (
        f"without nsys (the captures' calibration runs{clock}): {d.labels[1]} − {d.labels[0]} = "
        f"{fmt_ns(ub - ua, signed=True)}/step ({fmt_pct(100 * (ub - ua) / ua if ua else None)}) "
        f"against {fmt_ns(step.delta, signed=True)}/step {captured}"
    )


def _kernels(d: CensusDiff, unit: str) -> tuple[float, str] | None:
    count = d.metrics[KERNEL_COUNT]
    if not count.delta:
        return None
    parts = sorted((c for c in d.classes if c.count.delta), key=lambda c: -abs(c.count.delta or 0))
    detail = ", ".join(f"{c.cls} {fmt_count(c.count.delta, signed=True)}" for c in parts[:4])
    triton = next((c for c in parts if c.cls == "Triton" and (c.count.delta or 0) > 0), None)
    if triton:
        detail = detail.replace(
            f"Triton {fmt_count(triton.count.delta, signed=True)}",
            f"Triton {fmt_count(triton.count.delta, signed=True)} (fused)",
        )
    time = d.metrics[KERNEL_TIME_NS]
    return (
        time.delta or 0.0,
        f"{fmt_count(count.delta, signed=True)} kernels{unit} ({fmt_pct(count.pct)}): {detail}; "
        f"kernel time {change_text(time, fmt_ns, unit)}",
    )


def _union(d: CensusDiff, unit: str) -> tuple[float, str] | None:
    u = d.metrics[NON_NCCL_UNION_NS]
    if not u.delta:
        return None
    what = "non-NCCL kernel union of the work launched in the step (unclipped)"
    return u.delta, f"{what} {change_text(u, fmt_ns, unit)}"


def _launch(d: CensusDiff, unit: str) -> tuple[float, str] | None:
    t = d.metrics[LAUNCH_API_TIME_NS]
    if not t.delta:
        return None
    apis = _api_counts(d)
    parts = [
        f"{api} {fmt_count(cb - ca, signed=True)}{unit}"
        + (" (Triton)" if api == "cuLaunchKernel" else "")
        for api, (ca, cb) in sorted(apis.items(), key=lambda kv: -abs(kv[1][1] - kv[1][0]))
        if cb != ca
    ]
    calls = d.metrics[LAUNCH_API_COUNT]
    if not calls.delta:  # the same calls, each slower or faster on the host
        return t.delta, (
            f"launch API time {change_text(t, fmt_ns, unit)} with the same "
            f"{fmt_count(calls.a)} calls{unit}: each launch took longer or shorter on the host"
        )
    return (
        t.delta,
        f"launch API time {change_text(t, fmt_ns, unit)} over "
        f"{fmt_count(calls.delta, signed=True)} calls{unit}"
        + (f": {', '.join(parts)}" if parts else ""),
    )


def _api_counts(d: CensusDiff) -> dict[str, tuple[float, float]]:
    def table(c) -> dict[str, float]:
        return {a.api: compared_value(c, d.per_step, a.step_count, a.count) for a in c.launch_apis}

    ta, tb = table(d.a), table(d.b)
    return {k: (ta.get(k, 0.0), tb.get(k, 0.0)) for k in ta.keys() | tb.keys()}


def _copies(d: CensusDiff, unit: str) -> list[tuple[float, str]]:
    """One sentence per counted copy kind (census.metrics.COUNTED_COPIES) whose bytes
    changed, weighted by the change of its copy time."""
    out = []
    for copy in COUNTED_COPIES:
        b = d.metrics[f"{copy.key}_bytes"]
        if not b.delta:
            continue
        count = d.metrics[f"{copy.key}_count"]
        kind = MEMCPY_KINDS[copy.kind]
        weight = _copy_time(d.b, d.per_step, kind) - _copy_time(d.a, d.per_step, kind)
        out.append((weight, f"{copy.short} {fmt_bytes(b.delta, signed=True)}{unit} "
                            f"({fmt_pct(b.pct)}) in {fmt_count(count.delta, signed=True)} "
                            f"copies{unit}"))  # fmt: skip
    return out


def _copy_time(c, per_step: bool, kind: str) -> float:
    # Copy time is kept per capture; spread evenly over the steps for ranking only.
    total = sum(m.time_ns for m in c.memory if m.kind == kind)
    return compared_value(c, per_step and bool(c.steps), total, total)


def _nccl(d: CensusDiff, unit: str) -> list[tuple[float, str]] | None:
    """The NCCL change, then each rank's split into wait and transfer (census.compare.rank_nccl)."""
    from census.compare.rank_nccl import rank_nccl_sentences

    t = d.metrics[NCCL_KERNEL_TIME_NS]
    n = d.metrics[NCCL_KERNEL_COUNT]
    if not t.delta and not n.delta:
        return None
    overlap = [_overlap(c, d.per_step) for c in (d.a, d.b)]
    by_collective = _collective_changes(d)
    return [(
        t.delta or 0.0,
        f"NCCL {fmt_count(n.delta, signed=True)} kernels{unit}, time {change_text(t, fmt_ns, unit)}"
        + (f" ({by_collective})" if by_collective else "")
        + f"; overlapped with compute {fmt_ns(overlap[0])} -> {fmt_ns(overlap[1])}{unit}",
    ), *rank_nccl_sentences(d, unit)]  # fmt: skip


def _overlap(c, per_step: bool) -> float:
    if per_step and c.steps:
        return c.mean(int_sum(c.steps.column("nccl_overlap_ns")))
    return float(c.nccl_overlap_ns)


def _collective_changes(d: CensusDiff) -> str:
    def table(c) -> dict[str, float]:
        return {
            x.collective: compared_value(c, d.per_step, x.step_time_ns, x.time_ns)
            for x in c.collectives
        }

    ta, tb = table(d.a), table(d.b)
    parts = [
        f"{k} {fmt_ns(tb.get(k, 0.0) - ta.get(k, 0.0), signed=True)}"
        for k in sorted(ta.keys() | tb.keys())
        if tb.get(k, 0.0) != ta.get(k, 0.0)
    ]
    return ", ".join(parts)


def _fusion(d: CensusDiff, unit: str) -> tuple[float, str] | None:
    added = [k for k in d.bucket("added") if k.cls == "Triton" and (k.time_ns.b or 0) > 0]
    if not added:
        return None
    count = sum(k.count.b or 0 for k in added)
    time = sum(k.time_ns.b or 0 for k in added)
    described = []
    for k in sorted(added, key=lambda k: -(k.time_ns.b or 0))[:TOP_FUSED]:
        decoded = decode_triton(k.name)
        ops = " + ".join(decoded[1]) if decoded else "?"
        kind = decoded[0] if decoded else "Triton"
        described.append(f"{k.name} ({kind}: {ops}; {fmt_ns(k.time_ns.b)}{unit})")
    replaced = [
        c
        for c in d.classes
        if c.cls in ("elementwise", "reduction", "copy/memset") and (c.count.delta or 0) < 0
    ]
    gone = sum(-(c.count.delta or 0) for c in replaced)
    gone_text = (
        f", replacing {fmt_count(gone)} eager "
        + "/".join(c.cls for c in replaced)
        + f" kernels{unit}"
        if replaced
        else ""
    )
    return (
        time,
        f"{fmt_count(count)} Inductor-generated Triton kernels{unit} ({fmt_ns(time)}{unit}) fuse "
        f"eager operations{gone_text}; largest: " + "; ".join(described),
    )

"""Aggregates -> Census, and the ranks of one run -> one Census. Pure: no I/O, no plotting.

The definitions the arithmetic follows (what a kernel class, NCCL, D2D, a launch API is) are
named in census.definitions; the arithmetic that turns aggregates into those numbers is here.
"""

from __future__ import annotations

import statistics
from collections import defaultdict
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field, fields, replace
from pathlib import Path
from typing import Any

from census.definitions import (
    CLASS_ORDER,
    COPY_KIND_D2D,
    IDLE_KEYS,
    NCCL,
    OUTSIDE_PHASES,
    classify_kernel,
    kernel_name,
    memory_kind_name,
    nccl_collective,
)
from census.load.aggregates import (
    Aggregates,
    GpuSpan,
    KernelSums,
    LaunchSums,
    MemoryGroup,
    Profile,
    wider_span,
)
from census.model import (
    METRIC_VALUES,
    ApiStat,
    Census,
    ClassStat,
    CollectiveStat,
    Gpu,
    IdleSplit,
    KernelStat,
    MemoryStat,
    Metrics,
    Phase,
    RangeIdle,
    Source,
    Step,
)

# What the spread over ranks is shown for (per-step means per rank).
SPREAD_KEYS = ("step_time_ns", "gpu_busy_ns", "nccl_kernel_time_ns", "non_nccl_union_ns")


def compute_census(profile: Profile) -> Census:
    agg = profile.aggregates
    kernels = _kernel_stats(agg)
    overlap = nccl_overlap_ns(agg)
    return Census(
        source=Source(
            path=str(profile.path),
            nsys_version=profile.schema.nsys_version,
            schema_version=profile.schema.schema_version,
            gpus=tuple(Gpu(i, n) for i, n in profile.gpus),
        ),
        totals=_totals(agg, kernels),
        steps=_steps(profile, overlap),
        classes=_class_stats(kernels),
        kernels=kernels,
        memory=_memory_stats(agg.memory_groups, {s.idx for s in profile.steps}),
        launch_apis=_api_stats(agg),
        warnings=tuple(profile.warnings),
        graph_trace_mode=agg.graph_executions > 0,
        sliced=agg.orphan_kernels > 0,
        collectives=_collective_stats(kernels),
        nccl_overlap_ns=overlap.get(None, 0),
        idle_by_range=_range_idle(profile.idle_by_range),
    )


def _range_idle(by_range: dict[str, int] | None) -> tuple[RangeIdle, ...] | None:
    """The ranges by idle time, descending (ties by name); ranges without idle time left out."""
    if by_range is None:
        return None
    rows = sorted(((-ns, name) for name, ns in by_range.items() if ns > 0))
    return tuple(RangeIdle(name, -ns) for ns, name in rows)


def _totals(agg: Aggregates, kernels: tuple[KernelStat, ...]) -> Metrics:
    nccl = [k for k in kernels if k.cls == NCCL]
    sums = KernelSums(
        count=sum(k.count for k in kernels),
        time_ns=sum(k.time_ns for k in kernels),
        nccl_count=sum(k.count for k in nccl),
        nccl_time_ns=sum(k.time_ns for k in nccl),
    )
    return _metrics(sums, agg.memory_groups, agg.launch.get(None),
                    agg.non_nccl_union_ns.get(None, 0))  # fmt: skip


def _steps(profile: Profile, overlap: dict[int | None, int]) -> tuple[Step, ...]:
    agg = profile.aggregates
    metrics_of = _metrics_by_key(agg)
    phases = _phases(profile, metrics_of)
    return tuple(
        Step(
            name=s.name,
            start_ns=s.start_ns,
            end_ns=s.end_ns,
            metrics=metrics_of(s.idx),
            gpu_busy_ns=agg.busy_ns.get(s.idx, 0),
            nccl_overlap_ns=overlap.get(s.idx, 0),
            phases=phases.get(s.idx, ()),
            idle=profile.step_idle[s.idx] if profile.step_idle else None,
            **_span(agg.gpu_span.get(s.idx)),
        )
        for s in profile.steps
    )


def _api_stats(agg: Aggregates) -> tuple[ApiStat, ...]:
    """One row per launch API, by time, descending."""
    by_time = sorted(agg.launch_by_api.items(), key=lambda kv: (-kv[1].time_ns, kv[0]))
    return tuple(
        ApiStat(api, v.count, v.time_ns, v.step_count, v.step_time_ns) for api, v in by_time
    )


def _metrics_by_key(agg: Aggregates) -> Callable[[int], Metrics]:
    """key (a step's or a segment's index) -> the Metrics of the work launched in it."""
    memory: dict[int | None, list[MemoryGroup]] = defaultdict(list)
    for m in agg.memory_groups:
        memory[m.step].append(m)

    def metrics(key: int) -> Metrics:
        return _metrics(agg.step_kernels.get(key, KernelSums()), memory[key],
                        agg.launch.get(key), agg.non_nccl_union_ns.get(key, 0))  # fmt: skip

    return metrics


@dataclass
class _PhaseSums:
    """The segments of one phase in one step, summed."""

    duration_ns: int = 0
    gpu_busy_ns: int = 0
    metrics: Metrics = field(default_factory=Metrics)
    idle: IdleSplit = field(default_factory=IdleSplit)
    span: GpuSpan | None = None

    def phase(self, name: str, split: bool) -> Phase:
        return Phase(name, self.duration_ns, self.metrics, self.gpu_busy_ns,
                     self.idle if split else None, **_span(self.span))  # fmt: skip


def _phases(
    profile: Profile, step_metrics: Callable[[int], Metrics]
) -> dict[int, tuple[Phase, ...]]:
    """Per step, its phases by first start and then OUTSIDE_PHASES: each the sum of its
    segments. The remainder's non-NCCL union is the step's less its phases' (a union does not
    add up; every other key is summed from the remainder's own segments). A phase's GPU span
    runs from the earliest start to the latest end over its segments' GPU work."""
    agg = profile.segment_aggregates
    if agg is None:
        return {}
    seg_metrics = _metrics_by_key(agg)
    acc: dict[int, dict[str, _PhaseSums]] = {}
    for seg in profile.segments:
        row = acc.setdefault(seg.step, {}).setdefault(seg.name, _PhaseSums())
        row.span = wider_span(row.span, agg.gpu_span.get(seg.idx))
        row.duration_ns += seg.end_ns - seg.start_ns
        row.gpu_busy_ns += agg.busy_ns.get(seg.idx, 0)
        row.metrics = add_metrics(row.metrics, seg_metrics(seg.idx))
        row.idle = add_idle(row.idle, profile.segment_idle.get(seg.idx, IdleSplit()))
    split = bool(profile.segment_idle)
    out = {}
    for step, by_name in acc.items():
        named = [r.phase(n, split) for n, r in by_name.items() if n != OUTSIDE_PHASES]
        rest = by_name.get(OUTSIDE_PHASES, _PhaseSums())
        union = step_metrics(step).non_nccl_union_ns - sum(
            p.metrics.non_nccl_union_ns for p in named
        )
        rest.metrics = replace(rest.metrics, non_nccl_union_ns=union)
        out[step] = (*named, rest.phase(OUTSIDE_PHASES, split))
    return out


def _span(span: GpuSpan | None) -> dict[str, int | None]:
    """The GPU work launched in a range -> gpu_start_ns and gpu_span_ns, None both when it
    launched none."""
    if span is None:
        return {"gpu_start_ns": None, "gpu_span_ns": None}
    return {"gpu_start_ns": span.start_ns, "gpu_span_ns": span.end_ns - span.start_ns}


def add_metrics(a: Metrics, b: Metrics) -> Metrics:
    return Metrics(*(x + y for x, y in zip(METRIC_VALUES(a), METRIC_VALUES(b), strict=True)))


def add_idle(a: IdleSplit, b: IdleSplit) -> IdleSplit:
    return IdleSplit(**{k: getattr(a, k) + getattr(b, k) for k in IDLE_KEYS})


def nccl_overlap_ns(agg: Aggregates) -> dict[int | None, int]:
    """Per step (None: the whole capture), the time NCCL kernels ran while non-NCCL kernels ran
    on the same device, summed over devices: |N ∩ M| = |N| + |M| − |N ∪ M| of the unions."""
    if not agg.all_union_ns:
        return {}
    nccl, every = agg.nccl_union_ns, agg.all_union_ns
    return {k: nccl.get(k, 0) + v - every.get(k, 0) for k, v in agg.non_nccl_union_ns.items()}


def _metrics(
    kernels: KernelSums,
    memory: Iterable[MemoryGroup],
    launch: LaunchSums | None,
    union_ns: int,
) -> Metrics:
    d2d = [m for m in memory if m.kind == COPY_KIND_D2D]
    launch = launch or LaunchSums()
    return Metrics(
        kernel_count=kernels.count,
        kernel_time_ns=kernels.time_ns,
        nccl_kernel_count=kernels.nccl_count,
        nccl_kernel_time_ns=kernels.nccl_time_ns,
        non_nccl_kernel_count=kernels.count - kernels.nccl_count,
        non_nccl_kernel_time_ns=kernels.time_ns - kernels.nccl_time_ns,
        non_nccl_union_ns=union_ns,
        launch_api_count=launch.count,
        launch_api_time_ns=launch.time_ns,
        graph_launch_count=launch.graph_count,
        d2d_count=sum(m.count for m in d2d),
        d2d_bytes=sum(m.bytes for m in d2d),
    )


# The sums a kernel group, a KernelStat, a ClassStat and a CollectiveStat all carry.
STAT_SUMS = ("count", "time_ns", "step_count", "step_time_ns")


def _sums_by(items: Iterable, key_of: Callable[[Any], str | None]) -> dict[str, list[int]]:
    """key -> the STAT_SUMS of its items, keys by first appearance; items keyed None are left
    out."""
    acc: dict[str, list[int]] = {}
    for it in items:
        key = key_of(it)
        if key is None:
            continue
        a = acc.setdefault(key, [0] * len(STAT_SUMS))
        for i, name in enumerate(STAT_SUMS):
            a[i] += getattr(it, name)
    return acc


def _kernel_stats(agg: Aggregates) -> tuple[KernelStat, ...]:
    """One row per resolved name (groups with and without an API row merge here)."""
    acc = _sums_by(agg.kernel_groups,
                   lambda g: kernel_name(agg.names, g.demangled_id, g.short_id))  # fmt: skip
    stats = [KernelStat(n, classify_kernel(n), *v) for n, v in acc.items()]
    return tuple(sorted(stats, key=lambda k: (-k.time_ns, k.name)))


def _class_stats(kernels: Iterable[KernelStat]) -> tuple[ClassStat, ...]:
    acc = _sums_by(kernels, lambda k: k.cls)
    return tuple(ClassStat(c, *acc[c]) for c in CLASS_ORDER if c in acc)


def _collective_stats(kernels: Iterable[KernelStat]) -> tuple[CollectiveStat, ...]:
    acc = _sums_by(kernels, lambda k: nccl_collective(k.name))
    stats = [CollectiveStat(c, *v) for c, v in acc.items()]
    return tuple(sorted(stats, key=lambda c: (-c.time_ns, c.collective)))


def _memory_stats(groups: list[MemoryGroup], step_ids: set[int]) -> tuple[MemoryStat, ...]:
    acc: dict[int, list[int]] = defaultdict(lambda: [0, 0, 0, 0, 0])
    for m in groups:
        a = acc[m.kind]
        a[0] += m.count
        a[1] += m.bytes
        a[2] += m.time_ns
        if m.step in step_ids:
            a[3] += m.count
            a[4] += m.bytes
    return tuple(
        MemoryStat(memory_kind_name(k), *v) for k, v in sorted(acc.items(), key=lambda kv: kv[0])
    )


# -- ranks ------------------------------------------------------------------------------------
def _sum(items: list, cls: type, key: str) -> tuple:
    acc: dict[str, list[int]] = {}
    numeric = [f.name for f in fields(cls) if f.name != key and f.type in ("int", int)]
    extra: dict[str, dict] = {}
    for it in items:
        k = getattr(it, key)
        row = acc.setdefault(k, [0] * len(numeric))
        for i, name in enumerate(numeric):
            row[i] += getattr(it, name)
        extra.setdefault(
            k, {f.name: getattr(it, f.name) for f in fields(cls) if f.name not in numeric}
        )
    return tuple(cls(**extra[k], **dict(zip(numeric, v, strict=True))) for k, v in acc.items())


def merge_census(labels: list[str], ranks: list[Census], folder: Path) -> Census:
    """The ranks of one run as one Census, exactly as a single report holding every rank would
    read: totals summed, each rank's steps kept (named `rank: step`), kernels joined by name."""
    totals = Metrics(
        **{f.name: sum(getattr(c.totals, f.name) for c in ranks) for f in fields(Metrics)}
    )
    steps = tuple(
        replace(s, name=f"{label}: {s.name}")
        for label, c in zip(labels, ranks, strict=True)
        for s in c.steps
    )
    kernels = sorted(_sum([k for c in ranks for k in c.kernels], KernelStat, "name"),
                     key=lambda k: (-k.time_ns, k.name))  # fmt: skip
    gpus = tuple(g for c in ranks for g in c.source.gpus)
    versions = {c.source.nsys_version for c in ranks}
    return Census(
        source=Source(
            str(folder),
            ", ".join(sorted(v or "?" for v in versions)),
            ranks[0].source.schema_version,
            gpus,
        ),
        totals=totals,
        steps=steps,
        classes=_sum([x for c in ranks for x in c.classes], ClassStat, "cls"),
        kernels=tuple(kernels),
        memory=_sum([x for c in ranks for x in c.memory], MemoryStat, "kind"),
        launch_apis=_sum([x for c in ranks for x in c.launch_apis], ApiStat, "api"),
        warnings=tuple(
            f"{label}: {w}" for label, c in zip(labels, ranks, strict=True) for w in c.warnings
        ),
        graph_trace_mode=any(c.graph_trace_mode for c in ranks),
        sliced=any(c.sliced for c in ranks),
        collectives=_sum([x for c in ranks for x in c.collectives], CollectiveStat, "collective"),
        nccl_overlap_ns=sum(c.nccl_overlap_ns for c in ranks),
        idle_by_range=_merged_range_idle(ranks),
    )


def _merged_range_idle(ranks: list[Census]) -> tuple[RangeIdle, ...] | None:
    if any(c.idle_by_range is None for c in ranks):
        return None
    total: dict[str, int] = {}
    for c in ranks:
        for r in c.idle_by_range or ():
            total[r.range] = total.get(r.range, 0) + r.idle_ns
    return _range_idle(total)


@dataclass(frozen=True)
class Spread:
    min: float
    median: float
    max: float
    min_rank: str
    max_rank: str


def rank_spread(labels: list[str], ranks: list[Census]) -> dict[str, Spread]:
    """Per-step means per rank (whole capture without steps): min / median / max over ranks."""
    out: dict[str, Spread] = {}
    for key in SPREAD_KEYS:
        values = []
        for label, c in zip(labels, ranks, strict=True):
            per = {**(c.per_step() or c.totals.as_dict()), **(c.per_step_timing() or {})}
            if key in per and per[key] is not None:
                values.append((float(per[key]), label))
        if values:
            lo, hi = min(values), max(values)
            out[key] = Spread(lo[0], statistics.median(v for v, _ in values), hi[0], lo[1], hi[1])
    return out

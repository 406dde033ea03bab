"""Aggregates -> Census, and the ranks of one run -> one Census. Pure: no I/O, no plotting.

The passes' per-key accumulators (census.load.aggregates.Aggregates.per_key) finish here, once,
straight into the step table's named columns (census.load.accumulators.finish_declared: each
column an accumulator's own sums, not copied) and the whole capture's totals.

The definitions the arithmetic follows (what a kernel class, NCCL, D2D, a launch API is) are
named in census.definitions; the arithmetic that turns aggregates into those numbers is here.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any

from census.definitions import (
    CLASS_ORDER,
    classify_kernel,
    kernel_name,
    memory_kind_name,
    nccl_collective,
)
from census.findings.op_ranges import ATEN
from census.heap import collector_paused
from census.load.accumulators import finish_declared
from census.load.aggregates import Aggregates
from census.load.figures import Columns, add_rows, gpu_spans, rows, sum_keys
from census.load.intervals import unique
from census.load.phases import Segments
from census.load.profile import Profile
from census.metrics import (
    DURATION_NS,
    GPU_BUSY_NS,
    IDLE_KEYS,
    KERNEL_COUNT,
    KERNEL_TIME_NS,
    METRIC_KEYS,
    NCCL_KERNEL_COUNT,
    NCCL_KERNEL_TIME_NS,
    NON_NCCL_KERNEL_COUNT,
    NON_NCCL_KERNEL_TIME_NS,
    NON_NCCL_UNION_NS,
    STEP_TIME_NS,
)
from census.model.census import (
    ApiStat,
    Census,
    ClassStat,
    CollectiveStat,
    Gpu,
    KernelStat,
    MemoryStat,
    RangeIdle,
    Source,
)
from census.model.ops import OpRows, merge_ops
from census.model.ranks import merge_records
from census.model.step import Metrics
from census.model.step_table import PHASE_INTS, Rows, StepTable, concat, int_array


def compute_census(profile: Profile) -> Census:
    """The Census of one capture's aggregates, with the garbage collector paused."""
    with collector_paused():
        return _census(profile)


def _census(profile: Profile) -> Census:
    from census.load.rank_finish import nccl_record

    agg = profile.aggregates
    kernels = _kernel_stats(agg)
    by_key, totals = finish_declared(agg.per_key, agg.keys)
    by_step, by_segment = by_key, None
    if agg.parents is not None:  # the keys are phase segments: a step's figures their sums
        by_step, by_segment = sum_keys(by_key, agg.parents, len(profile.steps)), by_key
        by_step |= agg.step_unions
    steps = _steps(profile, by_step, by_segment)
    return Census(
        source=Source(
            path=str(profile.path),
            nsys_version=profile.schema.nsys_version,
            schema_version=profile.schema.schema_version,
            gpus=tuple(Gpu(i, n) for i, n in profile.gpus),
            read_with_sql=profile.read_with_sql,
            tracer=profile.schema.tracer,
        ),
        totals=_totals(totals),
        steps=steps,
        classes=_class_stats(kernels),
        kernels=kernels,
        memory=_memory_stats(agg.memory),
        launch_apis=_api_stats(agg),
        warnings=tuple(profile.warnings),
        graph_trace_mode=agg.graph_executions > 0,
        sliced=agg.orphan_kernels > 0,
        collectives=_collective_stats(kernels),
        nccl_overlap_ns=nccl_overlap_ns(
            agg, *(totals[k] for k in ("nccl_union_ns", NON_NCCL_UNION_NS, "all_union_ns"))
        ),
        idle_by_range=_range_idle(profile.idle_by_range),
        nccl=nccl_record(profile, steps, by_step, by_segment),
        ops=_ops(profile),
    )


def _ops(profile: Profile) -> OpRows | None:
    """The profile's OpTable (over its steps, or its segments) as the Census's rows: per step
    and per phase row, in the order of the census's steps (as _steps orders them)."""
    import numpy as np

    table = profile.ops
    if table is None:
        return None
    n = len(profile.steps)
    cols = (table.kernel_count, table.kernel_time_ns, table.launch_count)
    phase = [np.zeros((len(table.keys), 0), np.int64)] * 3
    bounds = np.zeros(n + 1, np.int64)
    if profile.aggregates.parents is not None:  # phases
        cells = _cells(profile.segments)
        size = len(cells.name)
        phase = [add_rows(cells.of_segment, size, c.T).T for c in cols]
        cols = tuple(add_rows(profile.segments.step, n, c.T).T for c in cols)
        bounds = np.concatenate([[0], np.cumsum(np.bincount(cells.step, minlength=n))])
    order = np.fromiter((s.idx for s in profile.steps), np.int64, n)
    if not np.array_equal(order, np.arange(n)):  # as StepTable.take
        sizes = bounds[1:][order] - bounds[:-1][order]
        starts = np.concatenate([[0], np.cumsum(sizes)])[:-1]
        at = np.repeat(bounds[:-1][order] - starts, sizes) + np.arange(int(sizes.sum()))
        cols, phase = tuple(c[:, order] for c in cols), [c[:, at] for c in phase]
    keys = table.keys
    return OpRows(
        op=tuple(None if k is None else k.name if k.fused else ATEN + k.name for k in keys),
        fused=tuple(k is not None and k.fused for k in keys),
        backward=tuple(k is not None and k.backward for k in keys),
        forward=table.forward, lists=tuple(tuple(sorted(x)) for x in table.lists),
        kernel_count=cols[0], kernel_time_ns=cols[1], launch_count=cols[2],
        phase_kernel_count=phase[0], phase_kernel_time_ns=phase[1], phase_launch_count=phase[2],
        total_kernel_count=table.total_count, total_kernel_time_ns=table.total_time_ns,
        total_launch_count=table.total_launches,
    )  # fmt: skip


def _range_idle(by_range: dict[str, int] | None) -> tuple[RangeIdle, ...] | None:
    """The ranges by idle time, descending (ties by name); ranges without idle time left out."""
    if by_range is None:
        return None
    rows = sorted(((-ns, name) for name, ns in by_range.items() if ns > 0))
    return tuple(RangeIdle(name, -ns) for ns, name in rows)


def _totals(totals: dict[str, int]) -> Metrics:
    """The whole capture's census keys: the accumulators' totals (the same sums as every
    step's: kernels, launch calls, unions, copies, memsets)."""
    return Metrics(**{k: v for k, v in _derived(totals).items() if k in METRIC_KEYS})


def _derived(col: dict[str, Any]) -> dict[str, Any]:
    """The keys made of others (numbers or columns alike): the non-NCCL kernels' count and
    time."""
    col[NON_NCCL_KERNEL_COUNT] = col[KERNEL_COUNT] - col[NCCL_KERNEL_COUNT]
    col[NON_NCCL_KERNEL_TIME_NS] = col[KERNEL_TIME_NS] - col[NCCL_KERNEL_TIME_NS]
    return col


def _steps(profile: Profile, by_step: Columns, by_segment: Columns | None) -> StepTable:
    """The steps as columns: the steps' key table's own columns (row s.idx of each step s), not
    copied, beside the steps' bounds and NCCL overlap; the phases from the segments' key table
    (None: no phases)."""
    import numpy as np

    agg = profile.aggregates
    col = _derived(dict(by_step))
    by_idx = sorted(profile.steps, key=lambda s: s.idx)
    gpu, launched = gpu_spans(col)
    idle = None if profile.idle is None else profile.idle.steps
    columns = {"start_ns": int_array([s.start_ns for s in by_idx]),
               "end_ns": int_array([s.end_ns for s in by_idx]),
               GPU_BUSY_NS: col[GPU_BUSY_NS],
               "nccl_overlap_ns": nccl_overlap_ns(agg, col["nccl_union_ns"],
                                                  col[NON_NCCL_UNION_NS], col["all_union_ns"]),
               **{k: col[k] for k in METRIC_KEYS}}  # fmt: skip
    steps = _rows([s.name for s in by_idx], columns, gpu, launched, idle)
    phases, bounds = _phases(profile, by_segment, col[NON_NCCL_UNION_NS])
    table = StepTable(steps, phases, bounds)
    order = np.fromiter((s.idx for s in profile.steps), np.int64, len(profile.steps))
    return table if np.array_equal(order, np.arange(len(by_idx))) else table.take(order)


def _rows(names: list[str], columns: dict[str, Any], gpu: Any, launched: Any,
          idle: Any | None) -> Rows:  # fmt: skip
    """Rows of the key table's columns (gpu_spans gives the GPU's two; idle None: not
    computed)."""
    import numpy as np

    n = len(names)
    return Rows(names, columns, gpu, launched,
                np.zeros((n, len(IDLE_KEYS)), np.int64) if idle is None else idle,
                np.full(n, idle is not None))  # fmt: skip


def _api_stats(agg: Aggregates) -> tuple[ApiStat, ...]:
    """One row per launch API, by time, descending."""
    by_time = sorted(agg.launch_by_api.items(), key=lambda kv: (-kv[1].time_ns, kv[0]))
    return tuple(
        ApiStat(api, v.count, v.time_ns, v.step_count, v.step_time_ns) for api, v in by_time
    )


@dataclass(frozen=True)
class _Cells:
    """The (step, phase name) cells of the segments in output order: per step, its named
    phases by first start, then OUTSIDE_PHASES (every step with segments has one)."""

    step: Any  # per cell, its step idx (ascending)
    name: list[str]
    outside: Any  # per cell, whether it is OUTSIDE_PHASES
    of_segment: Any  # per segment, its cell


def _cells(segments: Segments) -> _Cells:
    import numpy as np

    n = len(segments)
    step, code, names = segments.step, segments.code, segments.names
    k = len(names)
    cell = np.concatenate([step * k + code, unique(step) * k])
    ids, first, inverse = np.unique(cell, return_index=True, return_inverse=True)
    cell_step, cell_code = np.divmod(ids, k)
    order = np.lexsort((first, cell_code == 0, cell_step))
    rank = np.empty(len(order), np.int64)
    rank[order] = np.arange(len(order))
    return _Cells(cell_step[order], [names[c] for c in cell_code[order].tolist()],
                  cell_code[order] == 0, rank[inverse[:n]])  # fmt: skip


def _phases(profile: Profile, by_segment: Columns | None, steps_union: Any) -> tuple[Rows, Any]:
    """Per step idx, its phases by first start and then OUTSIDE_PHASES: each the sum of its
    segments, as rows and the steps' bounds in them (StepTable). The remainder's non-NCCL union
    is the step's less its phases' (a union does not add up; every other key is summed from the
    remainder's own segments). A phase's GPU span runs from the earliest start to the latest end
    over its segments' GPU work."""
    import numpy as np

    n = len(profile.steps)
    if by_segment is None:
        none = np.zeros(0, np.int64)
        empty = _rows([], dict.fromkeys(PHASE_INTS, none), np.zeros((0, 2), np.int64),
                        np.zeros(0, bool), None)  # fmt: skip
        return empty, np.zeros(n + 1, np.int64)
    segments = profile.segments
    cells = _cells(segments)
    size = len(cells.name)
    col = sum_keys(by_segment, cells.of_segment, size)
    union = col[NON_NCCL_UNION_NS]
    named = ~cells.outside
    phases_union = add_rows(cells.step[named], n, union[named, None])[:, 0]
    rest = steps_union - phases_union
    col[NON_NCCL_UNION_NS] = np.where(cells.outside, rest[cells.step], union)
    duration = add_rows(cells.of_segment, size, rows(segments.duration_ns(), 1))[:, 0]
    gpu, launched = gpu_spans(col)
    idle = None if profile.idle is None else add_rows(cells.of_segment, size,
                                                      profile.idle.segments)  # fmt: skip
    col = _derived(col)
    columns = {
        **{k: col[k] for k in METRIC_KEYS},
        DURATION_NS: duration,
        GPU_BUSY_NS: col[GPU_BUSY_NS],
    }  # the order of PHASE_INTS
    phases = _rows(cells.name, columns, gpu, launched, idle)
    bounds = np.concatenate([[0], np.cumsum(np.bincount(cells.step, minlength=n))])
    return phases, bounds.astype(np.int64)


def _memory_stats(memory: dict[int, list[int]]) -> tuple[MemoryStat, ...]:
    """Per copy kind (ascending; memsets first), all its rows, and those launched in a step."""
    return tuple(MemoryStat(memory_kind_name(k), *memory[k]) for k in sorted(memory))


def nccl_overlap_ns(agg: Aggregates, nccl: Any, non_nccl: Any, every: Any) -> Any:
    """The time NCCL kernels ran while non-NCCL kernels ran on the same device, summed over
    devices, |N ∩ M| = |N| + |M| − |N ∪ M| of the unions (ints, or columns of them); 0 when no
    kernel name can be NCCL."""
    return nccl + non_nccl - every if agg.any_nccl else 0 * non_nccl


# The sums a kernel group, a KernelStat, a ClassStat and a CollectiveStat all carry.
STAT_SUMS = ("count", "time_ns", "step_count", STEP_TIME_NS)


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


def merge_census(labels: list[str], ranks: list[Census], folder: Path,
                 hosts: list[str | None] | None = None,
                 clocks: list[int | None] | None = None) -> Census:  # fmt: skip
    """The ranks of one run as one Census, exactly as a single report holding every rank would
    read: totals summed, each rank's steps kept (named `rank: step`), kernels joined by name;
    `hosts`: each rank's, where known (its NCCL kernels are matched only on one host); `clocks`:
    each export's clock origin (census.sources.ranks.rank_places; None: unknown)."""
    totals = Metrics(
        **{f.name: sum(getattr(c.totals, f.name) for c in ranks) for f in fields(Metrics)}
    )
    steps = concat([c.steps for c in ranks], [f"{label}: " for label in labels])
    kernels = sorted(_sum([k for c in ranks for k in c.kernels], KernelStat, "name"),
                     key=lambda k: (-k.time_ns, k.name))  # fmt: skip
    gpus = tuple(g for c in ranks for g in c.source.gpus)
    versions = {c.source.nsys_version for c in ranks}
    traced = {c.source.traced_by for c in ranks}  # a trace's tracer, named where any rank has one
    tracer = ", ".join(sorted(traced)) if any(c.source.tracer for c in ranks) else None
    return Census(
        source=Source(
            str(folder),
            ", ".join(sorted(v or "?" for v in versions)) if any(versions) else None,
            ranks[0].source.schema_version,
            gpus,
            tuple(sorted(dict(t for c in reversed(ranks) for t in c.source.read_with_sql).items())),
            tracer,
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
        ops=merge_ops([c.ops for c in ranks]),
        nccl=merge_records(
            [c.nccl for c in ranks],
            [len(c.steps) for c in ranks],
            [len(c.steps.phases) for c in ranks],
            labels,
            hosts or [None] * len(ranks),
            clocks or [None] * len(ranks),
        ),
    )


def _merged_range_idle(ranks: list[Census]) -> tuple[RangeIdle, ...] | None:
    if any(c.idle_by_range is None for c in ranks):
        return None
    total: dict[str, int] = {}
    for c in ranks:
        for r in c.idle_by_range or ():
            total[r.range] = total.get(r.range, 0) + r.idle_ns
    return _range_idle(total)

"""SQLite export -> aggregates: the schema, the NVTX steps, then the passes of census.engine.

The big tables are read as integer columns (census.columns) and aggregated with numpy; what
reaches the Census is one row per kernel name, copy kind and step. Inputs are opened
read-only and never written.
"""

from __future__ import annotations

import sqlite3
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, NamedTuple

import numpy as np

from census.errors import ColumnError, InputError
from census.load.steps import StepRange, read_steps
from census.sources import schema as sc
from census.sources.export import Progress
from census.sources.readonly import describe_sqlite_error, open_readonly, wal_note

if TYPE_CHECKING:
    from census.load.api_calls import LaunchTotals
    from census.load.passes import Passes
    from census.load.phases import Segment
    from census.model import IdleSplit


class KernelGroup(NamedTuple):
    """The kernels of one (demangled name, short name) pair, with or without a launching API
    row: over the whole capture, and those launched in the selected steps."""

    demangled_id: int | None  # StringIds ids; None: no such column, or NULL
    short_id: int | None
    has_api: bool
    count: int
    time_ns: int
    step_count: int
    step_time_ns: int


class KernelSums(NamedTuple):
    """The kernels launched in a step (or the whole capture), and the NCCL ones among them."""

    count: int = 0
    time_ns: int = 0
    nccl_count: int = 0
    nccl_time_ns: int = 0


class LaunchSums(NamedTuple):
    """The launch API calls made in a step (or the whole capture)."""

    count: int = 0
    time_ns: int = 0
    graph_count: int = 0  # of them graph launches


class ApiSums(NamedTuple):
    """The calls of one launch API: over the whole capture, and those made in the steps."""

    count: int = 0
    time_ns: int = 0
    step_count: int = 0
    step_time_ns: int = 0


class MemoryGroup(NamedTuple):
    """The memcpys of one copy kind (or the memsets) launched in one step, with or without an
    API row."""

    kind: int  # copyKind; MEMSET_KIND for memsets
    step: int | None  # None: outside every step
    has_api: bool
    count: int
    bytes: int
    time_ns: int


class GpuSpan(NamedTuple):
    """The GPU work launched in a step: its earliest start and latest end."""

    start_ns: int
    end_ns: int


def add_sums(a: tuple, b: tuple) -> tuple:
    """Two sums of the same kind (KernelSums, LaunchSums, ApiSums) added field by field."""
    return type(a)(*(x + y for x, y in zip(a, b, strict=True)))


def wider_span(a: GpuSpan | None, b: GpuSpan | None) -> GpuSpan | None:
    """The span of the GPU work of both (None: no work)."""
    if a is None or b is None:
        return a or b
    return GpuSpan(min(a.start_ns, b.start_ns), max(a.end_ns, b.end_ns))


@dataclass
class Aggregates:
    """What the census is computed from: aggregates keyed by step (None: outside every step)."""

    kernel_groups: list[KernelGroup]
    names: dict[int, str]
    # step -> non-NCCL union summed over devices; key None holds the whole capture
    non_nccl_union_ns: dict[int | None, int]
    launch: dict[int | None, LaunchSums]  # key None holds the whole capture
    launch_by_api: dict[str, ApiSums]
    memory_groups: list[MemoryGroup]
    busy_ns: dict[int, int]
    orphan_kernels: int = 0  # kernels without a launching API row (sliced exports)
    step_kernels: dict[int, KernelSums] = field(default_factory=dict)
    # step -> the union of NCCL kernels, and of all kernels, per device, summed (key None: the
    # whole capture); empty when no kernel name can be NCCL
    nccl_union_ns: dict[int | None, int] = field(default_factory=dict)
    all_union_ns: dict[int | None, int] = field(default_factory=dict)
    graph_executions: int = 0  # CUDA graphs traced whole (--cuda-graph-trace=graph)
    # a step without kernels, memcpys or memsets has no key
    gpu_span: dict[int, GpuSpan] = field(default_factory=dict)


@dataclass(frozen=True)
class Profile:
    path: Path
    schema: sc.Schema
    gpus: tuple[tuple[int, str | None], ...]
    steps: tuple[StepRange, ...]
    aggregates: Aggregates
    warnings: tuple[str, ...]
    # the steps cut into phase segments (census.load.phases), read like steps; empty without
    # phase ranges
    segments: tuple[Segment, ...] = ()
    segment_aggregates: Aggregates | None = None
    # per step idx and per segment idx: the split of the GPU idle time (census.load.idle)
    step_idle: dict[int, IdleSplit] = field(default_factory=dict)
    segment_idle: dict[int, IdleSplit] = field(default_factory=dict)
    # range text -> GPU idle ns inside it over the steps (census.load.idle_ranges); None: not
    # computed
    idle_by_range: dict[str, int] | None = None


def load_profile(
    path: Path,
    steps_regex: str,
    skip_first: int,
    progress: Progress | None = None,
    workers: int | None = None,
    batch_rows: int | None = None,
    phases_regex: str | None = None,
    idle: bool = True,
) -> Profile:
    """Read the aggregates of one export. `workers`: processes to read it with (default: one
    per core, up to 8, for large exports; $CENSUS_WORKERS overrides); `batch_rows`: rows per
    batch (tests make it small to exercise what carries from batch to batch); `phases_regex`:
    the NVTX ranges inside steps that are phases (None: no phases); `idle`: split the GPU idle
    time by cause and by host range (census.load.idle, census.load.idle_ranges), from the
    intervals the passes gather on the way."""
    conn = open_readonly(path)
    note = wal_note(path)  # read with its log, from a private copy: said first
    try:
        run = (progress or _silent, workers, batch_rows)
        profile = _load(conn, path, steps_regex, skip_first, phases_regex, idle, *run)
        return replace(profile, warnings=(note, *profile.warnings)) if note else profile
    except (sqlite3.Error, UnicodeDecodeError, OverflowError) as exc:
        raise InputError(f"{path}: {describe_sqlite_error(exc)}") from None
    except ColumnError as exc:
        raise InputError(f"{path}: {exc}: not a valid nsys export") from None
    finally:
        conn.close()


def _silent(*_args) -> None:
    pass


def _load(
    conn: sqlite3.Connection,
    path: Path,
    steps_regex: str,
    skip_first: int,
    phases_regex: str | None,
    idle: bool,
    progress: Progress,
    workers: int | None,
    batch_rows: int | None,
) -> Profile:
    from census.load.intervals import StepIndex
    from census.load.passes import run_passes
    from census.load.phases import read_segments

    schema = _read_schema(conn, path)
    warnings = _schema_warnings(schema)
    progress("reading NVTX step ranges")
    steps, step_warnings = read_steps(conn, schema, steps_regex, skip_first)
    warnings += step_warnings
    segments: list = []
    if phases_regex and steps:
        progress("reading NVTX phase ranges")
        segments, phase_warnings = read_segments(conn, schema, phases_regex, steps)
        warnings += phase_warnings
    # With phases the work is attributed to segments (each inside one step) in one pass; the
    # steps' figures are their segments' sums, and their unions are swept on their own.
    ranges = segments or steps
    index = StepIndex.build((s.idx, s.proc, s.start_ns, s.end_ns) for s in ranges)
    parents = np.array([g.step for g in segments], np.int64) if segments else None
    timeline = idle and bool(steps)
    passes = run_passes(conn, path, schema, index, progress, workers, batch_rows, parents,
                        timeline)  # fmt: skip
    try:
        return _profile(conn, path, schema, steps, segments, parents, passes, warnings, progress)
    finally:
        if passes.timeline is not None:
            passes.timeline.close()  # its spill folder, if it has one


def _profile(conn, path, schema, steps, segments, parents, passes, warnings, progress) -> Profile:
    # the idle split runs in the workers while this process sums the aggregates
    idle = _start_idle(conn, schema, steps, segments, passes, path, progress)
    try:
        agg = seg_agg = _aggregates(conn, schema, passes)
        if segments:
            agg, seg_agg = _split_aggregates(seg_agg, parents)
        if schema.has(sc.GRAPH_TRACE):
            count = f'SELECT COUNT(*) FROM "{sc.GRAPH_TRACE}"'
            agg.graph_executions = conn.execute(count).fetchone()[0]
        warnings += _data_warnings(schema, agg, passes.gpu.bad_kernels)
        gpus = sc.read_gpus(conn, schema, passes.gpu.devices)
        profile = Profile(path, schema, gpus, tuple(steps), agg, tuple(warnings),
                          tuple(segments), seg_agg if segments else None)  # fmt: skip
        if idle is None:
            return profile
        step_idle, segment_idle, by_range = idle.result()
    finally:
        if idle is not None:
            idle.close()
    return replace(profile, step_idle=step_idle, segment_idle=segment_idle,
                   idle_by_range=by_range)  # fmt: skip


def _start_idle(conn, schema, steps, segments, passes, path, progress):
    """The GPU idle time's split by cause, per step and segment, and by host range, started
    (census.load.idle_pass); None without a gathered timeline."""
    if passes.timeline is None:
        return None
    from census.load.idle import gathered_timelines
    from census.load.idle_pass import IdlePass
    from census.load.pool import Runner

    timelines = gathered_timelines(conn, schema, passes.timeline, {s.proc for s in steps})
    runner = Runner(conn, path, passes.workers, progress)
    return IdlePass(conn, schema, list(steps), list(segments), timelines, runner)


def _read_schema(conn: sqlite3.Connection, path: Path) -> sc.Schema:
    """The export's schema, refused when it is not nsys's or lacks a column census reads."""
    schema = sc.read_schema(conn)
    if not sc.looks_like_nsys(schema):
        raise InputError(
            f"{path}: a SQLite database but not an nsys export "
            "(no META_DATA_EXPORT/EXPORT_META_DATA or StringIds table)"
        )
    for table in sc.REQUIRED_COLUMNS:
        missing = schema.missing_columns(table) if schema.has(table) else []
        if missing:
            raise InputError(
                f"{path}: table {table} lacks column(s) {', '.join(missing)}: "
                "unsupported nsys schema"
            )
    return schema


def _split_aggregates(seg: Aggregates, parents: np.ndarray) -> tuple[Aggregates, Aggregates]:
    """(the steps' aggregates, the segments') from one pass over segments: the steps' are their
    segments' sums, and their own unions, swept under parent_scope keys."""
    from census.load.kernels import parent_scope

    n = len(parents)
    step = parents.tolist()

    def by_step(values: dict, add) -> dict:
        out: dict = {}
        for key, v in values.items():
            k = key if key is None else step[key]
            out[k] = v if k not in out else add(out[k], v)
        return out

    def steps_of(union: dict) -> dict:
        first = parent_scope(0, n)
        return {
            (k if k is None else k - first): v for k, v in union.items() if k is None or k >= first
        }

    def segments_of(union: dict) -> dict:
        return {k: v for k, v in union.items() if k is None or k < n}

    unions = ("non_nccl_union_ns", "nccl_union_ns", "all_union_ns")
    steps = replace(
        seg,
        launch=by_step(seg.launch, add_sums),
        memory_groups=[m._replace(step=None if m.step is None else step[m.step])
                       for m in seg.memory_groups],
        busy_ns=by_step(seg.busy_ns, int.__add__),
        step_kernels=by_step(seg.step_kernels, add_sums),
        gpu_span=by_step(seg.gpu_span, wider_span),
        **{u: steps_of(getattr(seg, u)) for u in unions},
    )  # fmt: skip
    return steps, replace(seg, **{u: segments_of(getattr(seg, u)) for u in unions})


def _aggregates(conn: sqlite3.Connection, schema: sc.Schema, passes: Passes) -> Aggregates:
    from census.load.columns import read_strings
    from census.load.intervals import NO_STEP
    from census.load.kernels import ALL_CLASS, NCCL_CLASS, NON_NCCL, WHOLE

    gpu = passes.gpu
    groups = [KernelGroup(*key, *v) for key, v in gpu.groups.items()]
    ids = {i for g in groups for i in (g.demangled_id, g.short_id) if i is not None}
    names = read_strings(conn, ids) if schema.has(sc.STRINGS) else {}
    unions: dict[int, dict[int | None, int]] = {
        c: {None: 0} for c in (NON_NCCL, NCCL_CLASS, ALL_CLASS)
    }
    for (scope, cls, _dev), ns in gpu.union_ns.items():
        key = None if scope == WHOLE else scope
        unions[cls][key] = unions[cls].get(key, 0) + ns
    non, nccl, every = unions[NON_NCCL], unions[NCCL_CLASS], unions[ALL_CLASS]
    launch, by_api = _launch(passes.launch)
    memory = [
        MemoryGroup(kind, None if st == NO_STEP else st, has, *v)
        for (kind, st, has), v in gpu.memory.items()
    ]
    agg = Aggregates(groups, names, non, launch, by_api, memory, dict(gpu.busy_ns))
    if passes.any_nccl:
        agg.nccl_union_ns, agg.all_union_ns = nccl, every
    agg.orphan_kernels = sum(g.count for g in groups if not g.has_api)
    agg.step_kernels = {k: KernelSums(*v) for k, v in gpu.step_kernels.items()}
    agg.gpu_span = {k: GpuSpan(first, last) for k, (first, last) in gpu.span.items()}
    return agg


def _launch(totals: LaunchTotals) -> tuple[dict[int | None, LaunchSums], dict[str, ApiSums]]:
    """(step or None: the whole capture -> its launch calls, api -> its calls)."""
    from census.load.intervals import NO_STEP

    launch: dict[int | None, LaunchSums] = {None: LaunchSums()}
    by_api: dict[str, ApiSums] = {}
    for (st, api), (count, time_ns, graph) in totals.cells.items():
        for key in {None, None if st == NO_STEP else st}:
            launch[key] = add_sums(launch.get(key, LaunchSums()),
                                   LaunchSums(count, time_ns, graph))  # fmt: skip
        inside = st != NO_STEP
        calls = ApiSums(count, time_ns, count * inside, time_ns * inside)
        by_api[api] = add_sums(by_api.get(api, ApiSums()), calls)
    return launch, by_api


def _schema_warnings(schema: sc.Schema) -> list[str]:
    out = []
    major = schema.major_version
    if major is not None and major not in sc.KNOWN_MAJOR_VERSIONS:
        out.append(
            f"export schema {schema.schema_version} is newer than census knows "
            f"(2.x, 3.x): figures may be incomplete"
        )
    for table in (sc.KERNEL, sc.RUNTIME, sc.MEMCPY, sc.MEMSET, sc.NVTX, sc.STRINGS):
        if not schema.has(table):
            out.append(f"no {table} table: {sc.MISSING_TABLE_HINTS[table]}")
    return out


def _data_warnings(schema: sc.Schema, agg: Aggregates, bad: int) -> list[str]:
    out = []
    kernels = sum(g.count for g in agg.kernel_groups)
    orphan = agg.orphan_kernels
    if orphan and schema.has(sc.RUNTIME):
        out.append(
            f"{orphan} of {kernels} kernels have no launching CUDA API row (a sliced export?): "
            "they count in the totals but in no step"
        )
    if bad:
        out.append(f"{bad} kernel(s) have a missing or negative duration")
    if agg.graph_executions:
        out.append(
            f"{agg.graph_executions} CUDA graph execution(s) were traced as whole graphs "
            "(--cuda-graph-trace=graph): their kernels are not in the kernel table; "
            "capture again with --cuda-graph-trace=node"
        )
    return out

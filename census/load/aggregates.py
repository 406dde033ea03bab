"""SQLite export -> aggregates: the schema, the NVTX steps, then the passes (census.load.passes).

The big tables are read as integer columns (census.sqlite.read_batches) and aggregated with
numpy; what reaches the Census is one row per kernel name and copy kind, and one table of
columns with one row per step or phase segment: the key table, the accumulators' per-key
columns (census.load.accumulators.key_table). Inputs are read-only.
"""

from __future__ import annotations

import sqlite3
from dataclasses import dataclass, field, replace
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, NamedTuple

import numpy as np

from census.errors import ColumnError, InputError, ran_out
from census.load.accumulators import key_table
from census.load.figures import (
    Columns,
    IdleColumns,
    MemoryGroups,
    idle_splits,
    sum_keys,
)
from census.load.phases import NO_SEGMENTS, Segments
from census.load.steps import StepRange, read_steps
from census.sources import schema as sc
from census.sources.export import Progress
from census.sources.readonly import describe_sqlite_error, open_readonly, wal_note
from census.sqlite import notes

if TYPE_CHECKING:
    from census.load.passes import Passes
    from census.load.rank_kernels import RankColumns
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


class ApiSums(NamedTuple):
    """The calls of one launch API: over the whole capture, and those made in the steps."""

    count: int = 0
    time_ns: int = 0
    step_count: int = 0
    step_time_ns: int = 0


@dataclass
class Aggregates:
    """What the census is computed from: the whole capture's figures, and per key (a step's or
    a phase segment's idx) the figures of the work launched in it, as columns."""

    kernel_groups: list[KernelGroup]
    names: dict[int, str]
    launch_by_api: dict[str, ApiSums]
    memory: MemoryGroups
    by_key: Columns  # the key table: the accumulators' per-key columns (accumulators.key_table)
    any_nccl: bool = False  # some kernel name can be NCCL
    orphan_kernels: int = 0  # kernels without a launching API row (sliced exports)
    # the whole capture's sums of the kernels and launch calls and its unions per device summed
    # (the last two unions, like by_key's, only meaningful when any_nccl), by name: the same
    # accumulators' as by_key's (KernelSums.total, LaunchTotals.total, Unions.total)
    totals: dict[str, int] = field(default_factory=dict)
    graph_executions: int = 0  # CUDA graphs traced whole (--cuda-graph-trace=graph)
    # per process its kernels, and its NCCL kernels (census.load.rank_kernels); per deviceId
    # the whole capture's NCCL kernel time not overlapped by non-NCCL kernels there (when
    # any_nccl): |all-kernel union| − |non-NCCL union|
    ranks: RankColumns | None = None
    exposed_by_device: dict[int, int] = field(default_factory=dict)

    @property
    def busy_ns(self) -> dict[int, int]:
        """key -> the GPU busy time in it."""
        return dict(enumerate(self.by_key["gpu_busy_ns"].tolist()))


@dataclass(frozen=True)
class Profile:
    """One export as read: schema, GPUs, steps, aggregates, idle split, what was said."""

    path: Path
    schema: sc.Schema
    gpus: tuple[tuple[int, str | None], ...]
    steps: tuple[StepRange, ...]
    aggregates: Aggregates
    warnings: tuple[str, ...]
    # the steps cut into phase segments (census.load.phases), read like steps; empty without
    # phase ranges
    segments: Segments = NO_SEGMENTS
    segment_aggregates: Aggregates | None = None
    # per step idx and per segment idx: the split of the GPU idle time (census.load.idle);
    # None: not computed
    idle: IdleColumns | None = None
    # range text -> GPU idle ns inside it over the steps (census.load.idle_ranges); None: not
    # computed
    idle_by_range: dict[str, int] | None = None
    # (table, why) of each table read with SQL, not from the file's pages (census.sqlite.notes)
    read_with_sql: tuple[tuple[str, str], ...] = ()

    @property
    def step_idle(self) -> dict[int, IdleSplit]:
        """step idx -> the split of its GPU idle time ({} when not computed)."""
        return _splits(None if self.idle is None else self.idle.steps)

    @property
    def segment_idle(self) -> dict[int, IdleSplit]:
        """segment idx -> the split of its GPU idle time ({} when not computed)."""
        return _splits(None if self.idle is None else self.idle.segments)


def _splits(columns: np.ndarray | None) -> dict[int, IdleSplit]:
    return {} if columns is None else dict(enumerate(idle_splits(columns)))


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
    notes.taken()  # another read's: not this one's
    try:
        run = (progress or _silent, workers, batch_rows)
        profile = _load(conn, path, steps_regex, skip_first, phases_regex, idle, *run)
        sql = tuple(sorted(notes.taken().items()))
        said = tuple(w for w in (note, sql_note(sql)) if w)
        return replace(profile, warnings=(*said, *profile.warnings), read_with_sql=sql)
    except (sqlite3.Error, UnicodeDecodeError, OverflowError) as exc:
        raise ran_out(exc) or InputError(f"{path}: {describe_sqlite_error(exc)}") from None
    except ColumnError as exc:
        raise InputError(f"{path}: {exc}: not a valid nsys export") from None
    finally:
        conn.close()


def sql_note(read_with_sql: tuple[tuple[str, str], ...]) -> str | None:
    """The warning for the tables read with SQL, not from the file's pages, and why."""
    if not read_with_sql:
        return None
    tables = "; ".join(f"{table} ({why})" for table, why in read_with_sql)
    return (f"read with SQL, not from the file's pages (slower; docs/performance.md): "
            f"{tables}")  # fmt: skip


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
    from census.load.idle_pass import threads_early

    schema = _read_schema(conn, path)
    warnings = _schema_warnings(schema)
    progress("reading NVTX step ranges")
    steps, step_warnings = read_steps(conn, schema, steps_regex, skip_first)
    warnings += step_warnings
    # the step threads' NVTX ranges the idle split needs: read beside from now, on a large table
    early = threads_early(conn, path, schema, steps) if idle and steps else None
    try:
        return _load_steps(conn, path, schema, steps, warnings, phases_regex, idle, progress,
                           workers, batch_rows, early)  # fmt: skip
    finally:
        if early is not None:
            early.stop()


def _load_steps(conn, path, schema, steps, warnings, phases_regex, idle, progress, workers,
                batch_rows, early) -> Profile:  # fmt: skip
    """The profile once the steps are known: phases, the passes, the aggregates, the idle
    split (the step threads' ranges from `early`, threads_early's, where it read them)."""
    from census.load.idle_pass import early_threads, idle_inputs
    from census.load.intervals import StepIndex
    from census.load.passes import run_passes
    from census.load.phases import read_segments

    segments = NO_SEGMENTS
    if phases_regex and steps:
        progress("reading NVTX phase ranges")
        segments, phase_warnings = read_segments(conn, schema, phases_regex, steps)
        warnings += phase_warnings
    # With phases the work is attributed to segments (each inside one step) in one pass; the
    # steps' figures are their segments' sums, and their unions are swept on their own.
    if segments:
        index = StepIndex.of_columns(segments.idx, segments.proc, segments.start_ns,
                                     segments.end_ns)  # fmt: skip
    else:
        index = StepIndex.build((s.idx, s.proc, s.start_ns, s.end_ns) for s in steps)
    parents = segments.step if segments else None
    timeline = idle and bool(steps)
    # the step threads' ranges read beside, taken before the passes: the process that holds
    # them ends (at 3x10^7 kernels it held 160 MiB through the runtime pass)
    threads = early_threads(early)
    # the idle split's windows (and the threads' ranges where not read beside): made while the
    # workers read the kernels
    side_work = partial(idle_inputs, conn, schema, steps, segments, threads) if timeline else None
    passes = run_passes(conn, path, schema, index, progress, workers, batch_rows, parents,
                        timeline, side_work)  # fmt: skip
    try:
        return _profile(conn, path, schema, steps, segments, parents, passes, warnings, progress)
    finally:
        if passes.timeline is not None:
            passes.timeline.close()  # its spill folder, if it has one


def _profile(conn, path, schema, steps, segments, parents, passes, warnings, progress) -> Profile:
    # the idle split runs in the workers while this process sums the aggregates
    idle = _start_idle(conn, schema, steps, passes, path, progress)
    try:
        agg, seg_agg = _aggregates(conn, schema, passes, len(steps), parents)
        passes.release()  # what the aggregates hold now (at 3x10^7 kernels: ~110 MiB)
        if schema.has(sc.GRAPH_TRACE):
            count = f'SELECT COUNT(*) FROM "{sc.GRAPH_TRACE}"'
            agg.graph_executions = conn.execute(count).fetchone()[0]
        warnings += _data_warnings(schema, agg, passes.gpu.bad_kernels.n)
        gpus = sc.read_gpus(conn, schema, passes.gpu.devices)
        profile = Profile(path, schema, gpus, tuple(steps), agg, tuple(warnings),
                          segments, seg_agg)  # fmt: skip
        if idle is None:
            return profile
        columns, by_range = idle.result(len(steps), len(segments))
    finally:
        if idle is not None:
            idle.close()
    return replace(profile, idle=columns, idle_by_range=by_range)


def _start_idle(conn, schema, steps, passes, path, progress):
    """The GPU idle time's split by cause, per step and segment, and by host range, started
    (census.load.idle_pass); None without a gathered timeline."""
    if passes.timeline is None:
        return None
    from census.load.idle import gathered_timelines
    from census.load.idle_pass import IdlePass
    from census.load.pool import Runner

    timelines = gathered_timelines(conn, schema, passes.timeline, {s.proc for s in steps})
    runner = Runner(conn, path, passes.workers, progress)
    return IdlePass(passes.side_result, timelines, runner)


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


def _aggregates(
    conn: sqlite3.Connection,
    schema: sc.Schema,
    passes: Passes,
    steps: int,
    parents: np.ndarray | None,
) -> tuple[Aggregates, Aggregates | None]:
    """(the steps' aggregates, the segments' or None without phases). With phases the passes
    attributed the work to segments (segment i inside step parents[i]): the steps' figures are
    their segments' sums, and their unions their own, swept under parent_scope keys."""
    from census.load.api_names import read_strings
    from census.load.kernels import parent_scope

    gpu = passes.gpu
    groups = [KernelGroup(*key, *v) for key, v in gpu.groups.items()]
    ids = {i for g in groups for i in (g.demangled_id, g.short_id) if i is not None}
    names = read_strings(conn, ids) if schema.has(sc.STRINGS) else {}
    keys = steps if parents is None else len(parents)
    launch = passes.launch
    by_api = {a: ApiSums(*v) for a, v in launch.by_api(keys).items()}
    # the key table: every accumulator's columns, one row per key
    table = key_table([gpu.step_kernels.finish(keys), launch.finish(keys),
                       gpu.unions.finish(keys), gpu.busy.finish(keys), gpu.span.finish(keys)])  # fmt: skip
    totals = gpu.step_kernels.total() | launch.total() | gpu.unions.total()
    agg = Aggregates(groups, names, by_api, passes.memory, table, any_nccl=passes.any_nccl,
                     totals=totals)  # fmt: skip
    agg.orphan_kernels = sum(g.count for g in groups if not g.has_api)
    agg.ranks = gpu.ranks.finish()
    agg.exposed_by_device = gpu.unions.exposed_by_device() if passes.any_nccl else {}
    if parents is None:
        return agg, None
    # with phases, the steps' own unions are under parent_scope(step) keys, after the segments'
    own = gpu.unions.finish(steps, first=parent_scope(0, keys))
    return _steps_of(agg, parents, steps, own), agg


def _steps_of(seg: Aggregates, parents: np.ndarray, steps: int, unions: Columns) -> Aggregates:
    """The steps' aggregates from their segments': sums, and the steps' own unions."""
    from census.load.intervals import NO_STEP

    m = seg.memory
    step = np.where(m.step == NO_STEP, NO_STEP, parents[np.maximum(m.step, 0)])
    by_key = sum_keys(seg.by_key, parents, steps) | unions
    return replace(seg, memory=m._replace(step=step), by_key=by_key)


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

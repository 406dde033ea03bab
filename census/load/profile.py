"""SQLite export -> Profile: the schema, the NVTX steps and phases, then the passes
(census.load.passes: the big tables read as integer columns and reduced into the aggregates,
census.load.aggregates) with the idle split beside them (census.load.idle_pass), and what is
said about the data. Inputs are read-only.
"""

from __future__ import annotations

import sqlite3
from dataclasses import dataclass, replace
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from census.errors import ColumnError, InputError, ran_out
from census.load.aggregates import Aggregates
from census.load.figures import IdleColumns, idle_splits
from census.load.phases import NO_SEGMENTS, Segments
from census.load.steps import StepRange, read_steps
from census.sources import schema as sc
from census.sources.export import Progress
from census.sources.readonly import describe_sqlite_error, open_readonly, wal_note
from census.sqlite import notes

if TYPE_CHECKING:
    from census.findings.ops import OpTable
    from census.model.step import IdleSplit


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
    # per step idx and per segment idx: the split of the GPU idle time (census.load.idle);
    # None: not computed
    idle: IdleColumns | None = None
    # range text -> GPU idle ns inside it over the steps (census.load.idle_ranges); None: not
    # computed
    idle_by_range: dict[str, int] | None = None
    # (table, why) of each table read with SQL, not from the file's pages (census.sqlite.notes)
    read_with_sql: tuple[tuple[str, str], ...] = ()
    # the kernels by operation over the steps (or the segments, with phases): None without op
    # ranges (census.load.ops)
    ops: OpTable | None = None

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
    map_from: Path | None = None,
) -> Profile:
    """Read the aggregates of one export. `workers`: processes to read it with (default: one
    per core, up to 8, for large exports; $CENSUS_WORKERS overrides); `batch_rows`: rows per
    batch (tests make it small to exercise what carries from batch to batch); `phases_regex`:
    the NVTX ranges inside steps that are phases (None: no phases); `idle`: split the GPU idle
    time by cause and by host range (census.load.idle, census.load.idle_ranges), from the
    intervals the passes gather on the way; `map_from`: what the user named, where Inductor's
    map is looked for (census.sources.inductor_map: in that capture folder, or beside that
    trace, whose export lies in the cache folder), by default beside the export."""
    from census.sources.inductor_map import inductor_map

    kept = inductor_map(Path(map_from or path))  # a bad map: said before the export is read
    conn = open_readonly(path)
    note = wal_note(path)  # read with its log, from a private copy: said first
    notes.taken()  # another read's: not this one's
    try:
        run = (progress or _silent, workers, batch_rows)
        profile = _load(conn, path, steps_regex, skip_first, phases_regex, idle, *run, kept)
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
    kept: dict[str, tuple[str, ...]] | None = None,
) -> Profile:
    from census.load.idle_pass import threads_early

    schema = sc.checked_schema(conn, path)
    warnings = sc.schema_warnings(schema)
    progress("reading NVTX step ranges")
    steps, step_warnings = read_steps(conn, schema, steps_regex, skip_first)
    warnings += step_warnings
    # the step threads' NVTX ranges the idle split needs: read beside from now, on a large table
    early = threads_early(conn, path, schema, steps) if idle and steps else None
    try:
        return _load_steps(conn, path, schema, steps, warnings, phases_regex, idle, progress,
                           workers, batch_rows, early, kept)  # fmt: skip
    finally:
        if early is not None:
            early.stop()


def _load_steps(conn, path, schema, steps, warnings, phases_regex, idle, progress, workers,
                batch_rows, early, kept) -> Profile:  # fmt: skip
    """The profile once the steps are known: phases, the passes and their aggregates, the idle
    split (the step threads' ranges from `early`, threads_early's, where it read them); `kept`:
    Inductor's map, or None."""
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
    side_work = then = None
    if idle and steps:
        # the step threads' ranges read beside, taken before the passes: the process that
        # holds them ends (at 3x10^7 kernels it held 160 MiB through the runtime pass)
        threads = early_threads(early)
        # the idle split's windows (and the threads' ranges where not read beside): made while
        # the workers read the kernels; the split itself runs while the aggregates finish
        side_work = partial(idle_inputs, conn, schema, steps, segments, threads)
        then = partial(_start_idle, conn, schema, {s.proc for s in steps}, path, progress)
    agg, split = run_passes(conn, path, schema, index, progress, workers, batch_rows,
                                     parents, len(steps), side_work, then)  # fmt: skip
    try:
        warnings += _data_warnings(schema, agg)
        gpus = sc.read_gpus(conn, schema, agg.devices)
        ops, said = _ops(conn, schema, index, agg, progress, kept)
        profile = Profile(path, schema, gpus, tuple(steps), agg, (*warnings, *said), segments,
                          ops=ops)  # fmt: skip
        if split is None:
            return profile
        columns, by_range = split.result(len(steps), len(segments))
    finally:
        if split is not None:
            split.close()  # its jobs, and the gathered intervals' spill folder
    return replace(profile, idle=columns, idle_by_range=by_range)


def _ops(conn, schema, index, agg: Aggregates, progress: Progress,
         kept: dict[str, tuple[str, ...]] | None) -> tuple[OpTable | None, tuple[str, ...]]:  # fmt: skip
    """The kernels by operation (census.load.ops) where the export has op ranges (with `kept`,
    the Inductor map its capture kept, census.sources.inductor_map), checked to
    add up to every key's (a step's, or with phases a segment's) and the capture's kernel count
    and time (the kernels' accumulator, KernelSums, read: else left out, said)."""
    from census.load.accumulators import KernelSums
    from census.load.ops import read_ops
    from census.metrics import KERNEL_COUNT, KERNEL_TIME_NS

    progress("reading operation ranges")
    keys = agg.keys
    ops = read_ops(conn, schema, index, keys, kept)
    if ops is None:
        return None, ()
    kernels = next(acc for acc in agg.per_key if isinstance(acc, KernelSums))
    by_key, total = kernels.finish(keys), kernels.total()
    sums = ((ops.kernel_count, by_key[KERNEL_COUNT]), (ops.kernel_time_ns, by_key[KERNEL_TIME_NS]))
    same = all(np.array_equal(a.sum(axis=0), np.asarray(b)[:keys]) for a, b in sums)
    totals = (int(ops.total_count.sum()), int(ops.total_time_ns.sum()))
    if same and totals == (total[KERNEL_COUNT], total[KERNEL_TIME_NS]):
        return ops, ()
    return None, ("operations left out: their kernels do not add up to the steps' kernel "
                  "count and time (please report this export)",)  # fmt: skip


def _start_idle(conn, schema, procs: set[int], path, progress, gathered, inputs, workers):
    """The GPU idle time's split by cause, per step and segment, and by host range, started in
    `workers` processes (census.load.idle_pass) on the intervals the passes `gathered`, which
    it owns from now on; `inputs`: idle_inputs' windows."""
    from census.load.idle import gathered_timelines
    from census.load.idle_pass import IdlePass
    from census.load.pool import Runner

    try:
        timelines = gathered_timelines(conn, schema, gathered, procs)
        return IdlePass(inputs, timelines, Runner(conn, path, workers, progress))
    except BaseException:
        gathered.close()
        raise


def _unlaunched_line(agg: Aggregates, kernels: int) -> str:
    """A trace's GPU events whose launching call is not in it, counted in one line."""
    copies = sum(sums[0] for sums in agg.memory.values())
    orphan = agg.orphan_kernels + agg.orphan_copies
    return (f"{orphan:,} of {kernels + copies:,} GPU events ({agg.orphan_kernels:,} kernels, "
            f"{agg.orphan_copies:,} copies and memsets) were launched before the profiler "
            "started (their launching call is not in the trace): they count in the totals and "
            "in no step")  # fmt: skip


def _data_warnings(schema: sc.Schema, agg: Aggregates) -> list[str]:
    out = list(schema.notes)  # a trace's events set aside or changed (Kineto)
    kernels = sum(g.count for g in agg.kernel_groups)
    orphan = agg.orphan_kernels
    if schema.tracer and (orphan or agg.orphan_copies):
        out.append(_unlaunched_line(agg, kernels))
    elif orphan and schema.has(sc.RUNTIME):
        out.append(
            f"{orphan} of {kernels} kernels have no launching CUDA API row (a sliced export?): "
            "they count in the totals but in no step"
        )
    if agg.bad_kernels:
        out.append(f"{agg.bad_kernels} kernel(s) have a missing or negative duration")
    if agg.graph_executions:
        out.append(
            f"{agg.graph_executions} CUDA graph execution(s) were traced as whole graphs "
            "(--cuda-graph-trace=graph): they count in GPU busy, idle, spans and the limiter, "
            "but their kernels are not in the export: kernel counts, kernel time and classes "
            "leave them out (unknown, not zero); capture again with --cuda-graph-trace=node"
        )
    return out

"""The map-reduce over an export: plan and run the passes (CUDA API calls, then memcpys and
memsets, then kernels: each needs the API map the first builds; kernels need the busy intervals
of the second), merge each pass's ranges into the aggregates (census.load.aggregates), whose per-key
accumulators census.load.finish finishes into the step table.

Each pass splits its tables into consecutive rowid ranges, two per worker process
(census.load.pool runs them); small exports run in this process.
"""

from __future__ import annotations

import shutil
import sqlite3
from collections.abc import Callable
from dataclasses import replace
from functools import partial
from pathlib import Path
from typing import Any

import numpy as np

from census.definitions import NCCL_SQL_LIKE
from census.load.accumulators import merge_fields
from census.load.aggregates import Aggregates, finish_aggregates
from census.load.api_calls import (
    ApiMap,
    RuntimePart,
    merge_runtime,
    read_other_calls,
    read_runtime_grouped,
    read_runtime_part,
)
from census.load.api_names import ApiNames, read_api_names
from census.load.intervals import StepIndex, unique
from census.load.kernels import GpuContext, OutOfOrder, Part, PartResult, read_part
from census.load.launch_totals import spilled_while
from census.load.memory import memory_jobs, merge_memory, read_memory_part
from census.load.pool import Runner, default_workers, make_spill_folder
from census.load.range_merge import merge_ranges
from census.load.timeline import TimelineParts, spill_folder, spilling
from census.sources import schema as sc
from census.sources.export import Progress
from census.sqlite import BATCH_ROWS, RowidRange, first_value, rowid_range, split

PARALLEL_MIN_ROWS = 400_000  # below this, starting worker processes costs more than it saves


def run_passes(
    conn: sqlite3.Connection,
    path: Path,
    schema: sc.Schema,
    steps: StepIndex,
    progress: Progress,
    workers: int | None = None,
    batch_rows: int | None = None,
    parents: np.ndarray | None = None,
    step_count: int | None = None,
    side_work: Callable[[], Any] | None = None,
    then: Callable[[TimelineParts, Any, int], Any] | None = None,
) -> tuple[Aggregates, Any]:
    """The passes, reduced: (the aggregates, what `then` returned or None). `steps` indexes
    what the work is attributed to: the steps, or their phase segments with `parents[segment]`
    the step of each, of `step_count` steps (then the steps' unions are kept too, and the
    steps' figures are their segments' sums); `side_work`: work for this process while the
    workers read the kernels; `then`: with it, the passes gather on the way the intervals the
    idle split needs (census.load.timeline), and then(those intervals, side_work's result, the
    worker processes) is started before the aggregates are made (it runs beside them and
    census.load.finish: census.load.idle_pass) and owns the intervals from then on."""
    batch_rows = batch_rows or BATCH_ROWS
    timeline = then is not None
    names = read_api_names(conn, schema, syncs=timeline)
    rows = sum(r.rows for t in (sc.KERNEL, sc.RUNTIME) if schema.has(t)
               for r in [rowid_range(conn, t) or RowidRange(0, 0)])  # fmt: skip
    size = workers or (default_workers() if rows >= PARALLEL_MIN_ROWS else 1)
    runner = Runner(conn, path, size, progress, side_work)
    read = partial(_passes, runner, conn, schema, names, steps, batch_rows, parents, timeline)
    in_memory = size <= 1 and (not timeline or rows < PARALLEL_MIN_ROWS)
    gpu, memory, runtime, any_nccl = read() if in_memory else _spilling(read, timeline)
    started = None
    try:
        if then is not None:
            started = then(gpu.timeline, runner.side_result(), runner.size)
        keys = steps.size if step_count is None else step_count
        agg = finish_aggregates(conn, schema, (gpu, memory, runtime), any_nccl, keys, parents)
        return agg, started
    except BaseException:
        (gpu.timeline if started is None else started).close()  # the gathered intervals' folder
        raise


def _spilling(read: Callable[[], tuple], timeline: bool) -> tuple:
    """read() with the memory pass's busy intervals, the gathered timeline, the launch totals
    and the API map's bitmaps in files of a spill folder (census.load.memory, timeline,
    launch_totals, call_map); the folder kept for the timeline (removed by whoever splits the
    idle time: close()), else removed."""
    folder = make_spill_folder()
    try:
        with spilling(folder):
            done = read()
    except BaseException:
        shutil.rmtree(folder, ignore_errors=True)
        raise
    if timeline:
        done[0].timeline.folder = folder
    else:
        shutil.rmtree(folder, ignore_errors=True)
    return done


def _passes(runner, conn, schema, names, steps, batch_rows, parents, timeline):
    """(the GPU work's result, the memcpys' and memsets', the runtime pass's, whether any
    kernel name can be NCCL); with `timeline`, the runtime pass's launch and sync calls joined
    to the GPU result's gathered intervals."""
    api, runtime, calls = _runtime_pass(runner, schema, names, steps, batch_rows)
    folder = spill_folder()
    if folder is not None:  # the calls' bitmaps read from files by the GPU passes
        api = api.spilled(folder)
    ctx = GpuContext(steps, api, _any_nccl(conn, schema),
                     schema.has_column(sc.KERNEL, "demangledName"), schema.tables,
                     parents=parents, timeline=timeline)  # fmt: skip
    with spilled_while(runtime.launch, folder):  # read back once the workers are done
        gpu, memory = _gpu_passes(runner, ctx, batch_rows)
        if gpu.missing and schema.has(sc.RUNTIME):
            missing = {p: unique(np.concatenate(c)) for p, c in gpu.missing.items()}
            more = read_other_calls(conn, names, steps, missing)
            if more:  # GPU work issued by calls that are not launches, memcpys or memsets
                ctx = replace(ctx, api=api.extended(more))
                gpu, memory = _gpu_passes(runner, ctx, batch_rows)
    if timeline:
        gpu.timeline.launch, gpu.timeline.sync = calls.launch, calls.sync
    return gpu, memory, runtime, ctx.any_nccl


# What the memory pass's result adds to the kernel pass's (taken out of it: the rest is its own)
SHARED_WITH_KERNELS = ("timeline", "span", "missing")


def _gpu_passes(runner: Runner, ctx: GpuContext, batch_rows: int):
    """Memcpys and memsets (in any order), then kernels (in start order) with them: (the GPU
    work's result, the memcpys' and memsets' own)."""
    jobs = memory_jobs(runner.conn, ctx, runner.jobs, batch_rows)
    total = sum(job[2].rows for job in jobs)
    parts = runner.map(read_memory_part, ctx, jobs, total, "reading memcpys and memsets")
    memory, busy = merge_memory(parts, ctx)
    del parts  # merged: not held through the kernel pass (at 3x10^7, ~230 MiB)
    gpu = _gpu_pass(runner, replace(ctx, memory_busy=busy), batch_rows)
    merge_fields(gpu, memory, SHARED_WITH_KERNELS)
    empty = type(memory)()
    return gpu, replace(memory, **{name: getattr(empty, name) for name in SHARED_WITH_KERNELS})


def _any_nccl(conn: sqlite3.Connection, schema: sc.Schema) -> bool:
    if not schema.has(sc.STRINGS):
        return False
    q = f"""SELECT 1 FROM "{sc.STRINGS}" WHERE value LIKE ? LIMIT 1"""
    return conn.execute(q, (NCCL_SQL_LIKE,)).fetchone() is not None


def _runtime_pass(runner: Runner, schema: sc.Schema, names: ApiNames, steps, batch_rows):
    whole = rowid_range(runner.conn, sc.RUNTIME) if schema.has(sc.RUNTIME) else None
    if whole is None:
        return ApiMap(), RuntimePart(), TimelineParts()
    jobs = [(r, batch_rows) for r in split(whole, runner.jobs)]
    parts = runner.map(_runtime_job, (names, steps), jobs, whole.rows, "reading CUDA API calls")
    api, runtime, duplicated, calls = merge_runtime(parts)
    if duplicated:  # legacy exports record some calls twice: regroup, in this process
        runner.progress("regrouping CUDA API calls recorded twice")
        api, launch = read_runtime_grouped(runner.conn, names, steps)
        runtime = RuntimePart(launch=launch)
        calls = TimelineParts(launch=None, sync=None)  # the idle split reads them itself
    return api, runtime, calls


def _runtime_job(conn, shared, job, tick):
    names, steps = shared
    rows, batch_rows = job
    return read_runtime_part(conn, names, steps, rows, batch_rows, tick)


def _gpu_pass(runner: Runner, ctx: GpuContext, batch_rows: int) -> PartResult:
    """Kernels, in rowid ranges bounded by start times, folded into one result."""
    conn = runner.conn
    whole = rowid_range(conn, sc.KERNEL) if sc.KERNEL in ctx.tables else None
    parts = _gpu_parts(conn, whole, runner.jobs, batch_rows)
    try:
        total = whole.rows if whole else 0
        started = runner.start(read_part, ctx, parts, total, "reading GPU activity")
        try:
            runner.side_result()
        except BaseException:
            started.close()
            raise
        return merge_ranges(conn, ctx, parts, started.result())
    except OutOfOrder:  # not written in start order (not by nsys): one batch, in memory
        runner.progress("kernels are not in start order: reading them in one batch")
        return read_part(conn, ctx, Part(whole, None, None, max(1, whole.rows if whole else 1)))


def _gpu_parts(conn, whole: RowidRange | None, n: int, batch_rows: int) -> list[Part]:
    """Consecutive rowid ranges, each bounded by the start of the first kernel after it."""
    if whole is None:
        return [Part(None)]
    ranges = split(whole, n)
    bounds: list[int] = []
    merged = [ranges[0]]
    for r in ranges[1:]:
        first = first_value(conn, sc.KERNEL, "start", r, 'start IS NOT NULL AND "end" > start')
        if not isinstance(first, int) or (bounds and first < bounds[-1]):
            merged[-1] = RowidRange(merged[-1].lo, r.hi)  # no usable boundary: one range
            continue
        bounds.append(first)
        merged.append(r)
    cuts = [None, *bounds, None]
    return [Part(r, cuts[i], cuts[i + 1], batch_rows) for i, r in enumerate(merged)]

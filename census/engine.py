"""Plan and run the passes over an export: CUDA API calls, then memcpys and memsets, then
kernels (each needs the API map the first builds; kernels need the busy intervals of the second).

Each pass splits its tables into consecutive rowid ranges, two per worker process; small
exports run in this process. Workers are forked, so they inherit what a pass shares (the step
index, the API map) instead of receiving copies; each opens its own read-only connection and
reports the rows it has read through a shared counter.
"""

from __future__ import annotations

import multiprocessing
import os
import shutil
import sqlite3
import tempfile
import warnings
from collections.abc import Callable
from concurrent.futures import FIRST_EXCEPTION, ProcessPoolExecutor, wait
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np

from census import schema as sc
from census.activity import GpuContext, OutOfOrder, Part, PartResult, read_part
from census.columns import BATCH_ROWS, RowidRange, rowid_range, split
from census.intervals import StepIndex
from census.linking import (
    ApiMap,
    ApiNames,
    LaunchTotals,
    merge_runtime,
    read_api_names,
    read_other_calls,
    read_runtime_grouped,
    read_runtime_part,
)
from census.memory import memory_jobs, merge_memory, read_memory_part
from census.merge import fold

PARALLEL_MIN_ROWS = 400_000  # below this, starting worker processes costs more than it saves
MAX_WORKERS = 8
Progress = Callable[..., None]


@dataclass
class Passes:
    gpu: PartResult
    launch: LaunchTotals
    any_nccl: bool


def default_workers() -> int:
    env = os.environ.get("CENSUS_WORKERS", "")
    if env.isdigit() and int(env) > 0:
        return int(env)
    return max(1, min(MAX_WORKERS, os.cpu_count() or 1))


def run_passes(
    conn: sqlite3.Connection,
    path: Path,
    schema: sc.Schema,
    steps: StepIndex,
    progress: Progress,
    workers: int | None = None,
    batch_rows: int | None = None,
) -> Passes:
    batch_rows = batch_rows or BATCH_ROWS
    names = read_api_names(conn, schema)
    rows = sum(r.rows for t in (sc.KERNEL, sc.RUNTIME) if schema.has(t)
               for r in [rowid_range(conn, t) or RowidRange(0, 0)])  # fmt: skip
    size = workers or (default_workers() if rows >= PARALLEL_MIN_ROWS else 1)
    runner = Runner(conn, path, size, progress)
    api, launch = _runtime_pass(runner, schema, names, steps, batch_rows)
    ctx = GpuContext(steps, api, _any_nccl(conn, schema),
                     schema.has_column(sc.KERNEL, "demangledName"), schema.tables)  # fmt: skip
    gpu = _gpu_passes(runner, ctx, batch_rows)
    if gpu.missing and schema.has(sc.RUNTIME):
        missing = {p: np.unique(np.concatenate(c)) for p, c in gpu.missing.items()}
        more = read_other_calls(conn, names, steps, missing)
        if more:  # GPU work issued by calls that are not launches, memcpys or memsets
            ctx = replace(ctx, api=api.extended(more))
            gpu = _gpu_passes(runner, ctx, batch_rows)
    return Passes(gpu, launch, ctx.any_nccl)


def _gpu_passes(runner: Runner, ctx: GpuContext, batch_rows: int) -> PartResult:
    """Memcpys and memsets (in any order), then kernels (in start order) with them."""
    jobs = memory_jobs(runner.conn, ctx, runner.jobs, batch_rows)
    total = sum(job[2].rows for job in jobs)
    parts = runner.map(read_memory_part, ctx, jobs, total, "reading memcpys and memsets")
    memory, busy = merge_memory(parts, ctx)
    gpu = _gpu_pass(runner, replace(ctx, memory_busy=busy), batch_rows)
    gpu.memory = memory.memory
    for p, corrs in memory.missing.items():
        gpu.missing.setdefault(p, []).extend(corrs)
    return gpu


def _any_nccl(conn: sqlite3.Connection, schema: sc.Schema) -> bool:
    if not schema.has(sc.STRINGS):
        return False
    q = f"""SELECT 1 FROM "{sc.STRINGS}" WHERE value LIKE '%nccl%' LIMIT 1"""
    return conn.execute(q).fetchone() is not None


def _runtime_pass(runner: Runner, schema: sc.Schema, names: ApiNames, steps, batch_rows):
    whole = rowid_range(runner.conn, sc.RUNTIME) if schema.has(sc.RUNTIME) else None
    if whole is None:
        return ApiMap(), LaunchTotals()
    jobs = [(r, batch_rows) for r in split(whole, runner.jobs)]
    parts = runner.map(_runtime_job, (names, steps), jobs, whole.rows, "reading CUDA API calls")
    api, launch, duplicated = merge_runtime(parts)
    if duplicated:  # legacy exports record some calls twice: regroup, in this process
        runner.progress("regrouping CUDA API calls recorded twice")
        api, launch = read_runtime_grouped(runner.conn, names, steps)
    return api, launch


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
        results = runner.map(read_part, ctx, parts, total, "reading GPU activity")
        return fold(conn, ctx, parts, results)
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
        first = conn.execute(
            f"""SELECT start FROM "{sc.KERNEL}" WHERE rowid > ? AND rowid <= ?
                AND start IS NOT NULL AND "end" > start ORDER BY rowid LIMIT 1""",
            (r.lo, r.hi),
        ).fetchone()
        if first is None or not isinstance(first[0], int) or (bounds and first[0] < bounds[-1]):
            merged[-1] = RowidRange(merged[-1].lo, r.hi)  # no usable boundary: one range
            continue
        bounds.append(first[0])
        merged.append(r)
    cuts = [None, *bounds, None]
    return [Part(r, cuts[i], cuts[i + 1], batch_rows) for i, r in enumerate(merged)]


# -- running jobs ------------------------------------------------------------------------------
_inherited: dict = {}  # what forked workers find: the export's path, the pass's shared data


class Runner:
    """Runs fn(conn, shared, job, tick) for each job: inline, or in forked worker processes."""

    def __init__(self, conn: sqlite3.Connection, path: Path, size: int, progress: Progress):
        if "fork" not in multiprocessing.get_all_start_methods():
            size = 1  # workers inherit by fork; where there is none (Windows), one process
        self.conn, self.path, self.size, self.progress = conn, path, size, progress
        # two ranges per worker: one that finishes early takes the next
        self.jobs = 1 if size <= 1 else 2 * size

    def map(self, fn, shared, jobs: list, total: int, label: str) -> list:
        self.progress(label, 0, total)
        if self.size <= 1 or len(jobs) <= 1:
            done = [0]

            def tick(n: int) -> None:
                done[0] += n
                self.progress(label, done[0], total)

            return [fn(self.conn, shared, job, tick) for job in jobs]
        return self._forked(fn, shared, jobs, total, label)

    def _forked(self, fn, shared, jobs: list, total: int, label: str) -> list:
        ctx = multiprocessing.get_context("fork")
        counter = ctx.Value("q", 0)
        spill = tempfile.mkdtemp(prefix="census-")
        _inherited.update(path=self.path, shared=shared, counter=counter, spill=spill)
        # A worker that dies (killed for memory, say) breaks the pool: its job fails with
        # BrokenProcessPool instead of being waited for forever.
        pool = ProcessPoolExecutor(min(self.size, len(jobs)), ctx, initializer=_open_worker)
        try:
            with warnings.catch_warnings():
                # Python 3.12+ warns about forking a process that has threads (numpy's);
                # workers touch no lock those threads hold: they read SQLite and run numpy.
                warnings.simplefilter("ignore", DeprecationWarning)
                pending = [pool.submit(_run_job, fn, job) for job in jobs]
            while not all(f.done() for f in pending):
                wait(pending, timeout=0.2, return_when=FIRST_EXCEPTION)
                self.progress(label, counter.value, total)
                if any(f.done() and f.exception() for f in pending):
                    break
            return [f.result() for f in pending]  # re-raises a worker's exception here
        except BaseException:  # a failed range or Ctrl-C: the other ranges' work is moot
            for proc in getattr(pool, "_processes", {}).values():
                proc.kill()
            raise
        finally:
            pool.shutdown(wait=True, cancel_futures=True)
            _inherited.clear()
            shutil.rmtree(spill, ignore_errors=True)


def _open_worker() -> None:
    from multiprocessing.reduction import ForkingPickler

    from census.readonly import open_readonly

    _inherited["conn"] = open_readonly(_inherited["path"])
    ForkingPickler.register(np.ndarray, _spill_array)


SPILL_BYTES = 1 << 20


def _spill_array(a: np.ndarray):
    """Large result arrays travel as .npy files (one write, one mapped read), not through a
    pipe as pickled bytes (four copies)."""
    if a.nbytes < SPILL_BYTES:
        return a.__reduce__()
    fd, name = tempfile.mkstemp(suffix=".npy", dir=_inherited["spill"])
    with os.fdopen(fd, "wb") as fh:
        np.save(fh, np.ascontiguousarray(a))
    return _unspill, (name,)


def _unspill(name: str) -> np.ndarray:
    a = np.load(name, mmap_mode="r")
    os.unlink(name)
    return a


def _run_job(fn, job):
    counter = _inherited["counter"]

    def tick(n: int) -> None:
        with counter.get_lock():
            counter.value += n

    return fn(_inherited["conn"], _inherited["shared"], job, tick)

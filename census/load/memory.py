"""Memcpys and memsets -> their accumulators (census.load.accumulators: the counted copies and
the memsets per key, finished into the key table; the sums per copy kind), and the intervals
that count in busy time; whole CUDA graphs (CUPTI_ACTIVITY_KIND_GRAPH_TRACE: an export made with
--cuda-graph-trace=graph, one row a graph's execution on its device and stream) -> the intervals
that count in busy time and in the GPU spans, and no copy.

Read in rowid ranges, in parallel like the other passes; their order does not matter here.
The intervals of processes with steps come back sorted by start, for the GPU pass to sweep
beside the kernels that start when they do: each job's as one run, written to the pass's spill
folder where it has one (census.load.timeline.spilling), so that census's process neither
receives nor merges them (at 3x10^7 kernels, 6.8 million memsets: 116 MiB a copy); each kernel
range reads and merges the runs' intervals that start in its window (SpilledBusy).
"""

from __future__ import annotations

import os
import sqlite3
from dataclasses import dataclass, field

import numpy as np

from census.definitions import MEMSET_KIND
from census.load.accumulators import (
    CopySums,
    Count,
    KindSums,
    MemsetSums,
    Missing,
    Runs,
    add_batch,
    batched,
    for_keys,
    merge_fields,
    per_key,
)
from census.load.figures import Spans
from census.load.intervals import INT_NULL, Members, Windowed, add_spans, with_end
from census.load.kernels import GpuContext, add_timeline, busy_members
from census.load.timeline import BLOCK, TimelineParts, spill_folder
from census.paths import write_arrays
from census.sources import schema as sc
from census.sqlite import TIMED, read_batches, rowid_range, split

# (table, its copy kind's SQL expression; None: GPU work that is no copy)
TABLES = ((sc.MEMCPY, "copyKind"), (sc.MEMSET, str(MEMSET_KIND)), (sc.GRAPH_TRACE, None))


@dataclass
class MemoryResult:
    """What a rowid range of memcpys or memsets adds up to: accumulators
    (census.load.accumulators), merged field by field; the per-key ones declared (`per_key`)."""

    copies: CopySums = per_key(CopySums, batches=True)  # the counted copy kinds' count, bytes
    memsets: MemsetSums = per_key(MemsetSums, batches=True)
    kinds: KindSums = batched(KindSums)  # per copy kind, and memsets
    missing: Missing = batched(Missing)  # rows without a call
    unlaunched: Count = field(default_factory=Count)  # copies and memsets without a call
    # the job's intervals that count in busy time, as one run sorted by start
    busy: Runs = field(default_factory=Runs)
    span: Spans = field(default_factory=lambda: Spans(0))  # GPU work launched in each
    # zero-length memcpys/memsets (ctx.timeline): the next GPU work after a sync, too
    timeline: TimelineParts = field(default_factory=TimelineParts)


def memory_jobs(conn: sqlite3.Connection, ctx: GpuContext, parts: int, batch_rows: int) -> list:
    """(table, copy kind expression, rowid range, batch rows) of each job of the memory pass:
    up to `parts` ranges of each of the memcpy, memset and whole-graph tables there are."""
    jobs = []
    for table, kind in TABLES:
        whole = rowid_range(conn, table) if table in ctx.tables else None
        if whole is not None:
            n = max(1, min(parts, whole.rows // batch_rows))
            jobs += [(table, kind, r, batch_rows) for r in split(whole, n)]
    return jobs


def read_memory_part(
    conn: sqlite3.Connection, ctx: GpuContext, job: tuple, tick=lambda n: None
) -> MemoryResult:
    """One job's memcpys, memsets or whole graphs (memory_jobs): per batch its accumulators
    (copies only: a graph's rows only look up their calls), the GPU spans, and the intervals of
    processes with steps that count in busy time."""
    table, kind, rows, batch_rows = job
    res = for_keys(MemoryResult, ctx.steps.size, span=Spans(ctx.steps.size))
    batches: list[tuple[np.ndarray, np.ndarray, np.ndarray]] = []
    copies = {"bytes": "bytes", "kind": kind} if kind is not None else {}
    cols = {**TIMED, "proc": "globalPid >> 24", "corr": "correlationId", **copies}
    last = rows.lo
    procs = ctx.step_procs
    for b, top in read_batches(conn, table, cols, rows, "", batch_rows):
        with_end(table, b)
        b["found"], b["step"] = _, step = ctx.api.lookup(b["proc"], b["corr"])
        if copies:
            _known(b)
            add_batch(res, b)
            res.unlaunched.add(int(np.count_nonzero(~b["found"])))
        else:  # a whole graph: no copy, but GPU work whose call is looked up all the same
            res.missing.add(b)
        add_spans(res.span, step, b["start"], b["end"])
        extent = (b["dur"] != INT_NULL) & (b["dur"] > 0)
        m = busy_members(procs, b["proc"], b["start"], b["end"], extent)
        batches.append((m.code, m.start, m.end))
        if ctx.timeline:
            zero = (b["dur"] != INT_NULL) & (b["dur"] == 0)
            add_timeline(res.timeline, ctx.steps,
                         busy_members(procs, b["proc"], b["start"], b["end"], zero))  # fmt: skip
        tick(top - last)
        last = top
    run = _by_start(batches, len(procs))
    folder = spill_folder()
    res.busy.append(run if folder is None else SpilledRun.of(folder, *run))
    return res


def _by_start(batches: list, procs: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The busy intervals of a job's batches as one run sorted by start (stable), process
    codes in a byte or two: what census's process merges with the other jobs' runs."""
    none = [np.zeros(0, np.int64)]
    code, start, end = (np.concatenate([b[i] for b in batches] or none) for i in range(3))
    order = np.argsort(start, kind="stable")
    return code[order].astype(np.min_scalar_type(procs)), start[order], end[order]


def _known(b: dict[str, np.ndarray]) -> None:
    """The batch's unknown copy kind as 0 (Unknown), unknown bytes and time as 0."""
    b["kind"] = np.where(b["kind"] == INT_NULL, 0, b["kind"])
    b["bytes"] = np.where(b["bytes"] == INT_NULL, 0, b["bytes"])
    b["time_ns"] = np.where(b["dur"] == INT_NULL, 0, b["dur"])


def merge_memory(results: list[MemoryResult], ctx: GpuContext) -> tuple[MemoryResult, Windowed]:
    """The jobs' results merged in order into one (its busy intervals taken out), and those
    intervals as Members sorted by start (or the spilled runs, read a window at a time)."""
    n = ctx.steps.size
    out = for_keys(MemoryResult, n, span=Spans(n))
    for res in results:
        merge_fields(out, res)
    procs = ctx.step_procs
    runs, out.busy = list(out.busy), Runs()
    if runs and all(isinstance(run, SpilledRun) for run in runs):
        return out, SpilledBusy(runs, procs)
    code, start, end = _merged(runs, np.min_scalar_type(len(procs)))
    return out, Members(code, start, end, lambda c: int(procs[c]))


@dataclass(frozen=True)
class SpilledRun:
    """A job's busy intervals sorted by start, in a file from byte `offset`: `count` int64
    starts, then as many ends, then their process codes (`dtype`); `marks`: every BLOCK-th
    start, so that finding a time reads one block of starts."""

    path: str
    offset: int
    count: int
    dtype: str
    marks: np.ndarray

    @classmethod
    def of(cls, folder: str, code: np.ndarray, start: np.ndarray, end: np.ndarray) -> SpilledRun:
        """The run appended to this process's file in `folder` (a spill folder)."""
        path = os.path.join(folder, f"memory-busy-{os.getpid()}.bin")
        offset = write_arrays(path, [np.ascontiguousarray(c) for c in (start, end, code)])
        return cls(path, offset, len(start), code.dtype.str, start[::BLOCK].copy())

    def window(self, after_ns: int | None, before_ns: int | None) -> tuple:
        """(code, start, end) of the intervals starting in [after_ns, before_ns), read from
        the file."""
        a = 0 if after_ns is None else self._first(after_ns)
        b = self.count if before_ns is None else self._first(before_ns)
        n, code = max(b - a, 0), np.dtype(self.dtype)
        return (self._rows(code, 16 * self.count + code.itemsize * a, n),
                self._rows(np.dtype(np.int64), 8 * a, n),
                self._rows(np.dtype(np.int64), 8 * (self.count + a), n))  # fmt: skip

    def _first(self, t: int) -> int:
        """The index of the first start at or after t: searched in the one block of starts
        that holds it."""
        k = int(np.searchsorted(self.marks, t, "left")) - 1  # the block's first start < t
        if k < 0:
            return 0
        block = self._rows(np.dtype(np.int64), 8 * k * BLOCK, min(BLOCK, self.count - k * BLOCK))
        return k * BLOCK + int(np.searchsorted(block, t, "left"))

    def _rows(self, dtype: np.dtype, at: int, n: int) -> np.ndarray:
        return np.fromfile(self.path, dtype, n, offset=self.offset + at)


@dataclass(frozen=True)
class SpilledBusy:
    """The memory pass's busy intervals as the jobs' spilled runs: a window of them (by start)
    is read from each run and ordered as _merged orders whole runs (a stable sort of the runs'
    windows one after another: a kernel batch's window is small, and _merged's searches of
    each run in every other cost 3 ms a window of eight runs)."""

    runs: list[SpilledRun]
    procs: np.ndarray  # a code's process

    def window(self, after_ns: int | None, before_ns: int | None) -> Members:
        """The runs' intervals starting in [after_ns, before_ns), ordered as one merged run."""
        parts = [run.window(after_ns, before_ns) for run in self.runs]
        if not parts:
            parts = [(np.zeros(0, np.uint8), np.zeros(0, np.int64), np.zeros(0, np.int64))]
        code, start, end = (np.concatenate([part[i] for part in parts]) for i in range(3))
        order = np.argsort(start, kind="stable")
        code = code[order].astype(np.min_scalar_type(len(self.procs)), copy=False)
        start, end, procs = start[order], end[order], self.procs
        return Members(code, start, end, lambda c: int(procs[c]))


def _merged(runs: list, dtype) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Runs sorted by start merged into one, as a stable sort of their concatenation would
    order it: each interval goes after its run's earlier ones, the earlier runs' that start no
    later and the later runs' that start earlier (no concatenation, no sort)."""
    n = sum(len(run[1]) for run in runs)
    out = (np.empty(n, dtype), np.empty(n, np.int64), np.empty(n, np.int64))
    for r, run in enumerate(runs):
        at = np.arange(len(run[1]))
        for q, other in enumerate(runs):
            if q != r:
                at += np.searchsorted(other[1], run[1], "right" if q < r else "left")
        for column, values in zip(out, run, strict=True):
            column[at] = values
    return out

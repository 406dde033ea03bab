"""The idle split's pass: windows of steps (census.load.idle), each read from the gathered
timeline's pieces that touch it, split by cause and by host range (census.load.idle_ranges)
from the same gaps, mapped over the passes' worker processes (in this process for small
exports)."""

from __future__ import annotations

import sqlite3
from collections.abc import Iterable
from pathlib import Path
from typing import NamedTuple

import numpy as np

from census.load.figures import IdleColumns, int64_or_objects
from census.load.idle import classify_window
from census.load.idle_ranges import Threads, step_threads, sum_ranges, window_ranges
from census.load.idle_windows import Window, windows
from census.load.pool import Runner, SideProcess, alone
from census.load.timeline import TimelineParts
from census.metrics import IDLE_KEYS
from census.sources import schema as sc
from census.sources.readonly import open_readonly
from census.sqlite import notes, rowid_range

LABEL = "splitting the GPU idle time"


class IdleInputs(NamedTuple):
    """What the idle split needs besides the timeline: the windows of steps it works in, and
    the step threads' NVTX ranges (read while the passes run: census.load.passes' side work)."""

    windows: list[Window]
    threads: Threads


def idle_inputs(conn: sqlite3.Connection, schema: sc.Schema, steps: list, segments: Iterable,
                threads: Threads | None = None) -> IdleInputs:  # fmt: skip
    """The windows, and the step threads' ranges: `threads` where threads_early read them, else
    read now."""
    if threads is None:
        threads = step_threads(conn, schema, steps)
    return IdleInputs(windows(steps, segments), threads)


# NVTX rows from which reading the threads' ranges beside pays (at 16,200 rows: 0.04 s)
EARLY_MIN_ROWS = 10_000


def threads_early(conn: sqlite3.Connection, path: Path, schema: sc.Schema,
                  steps: list) -> SideProcess | None:  # fmt: skip
    """The step threads' ranges read in a process of their own, started now (while this one
    reads the phases, a single-core stretch), where the NVTX table is large enough for that to
    pay and no other thread runs (pool.alone); None otherwise. Take its result() before the
    passes (the process holds its rows until then), for idle_inputs; stop() it in any case."""
    rows = rowid_range(conn, sc.NVTX) if schema.has(sc.NVTX) else None
    if rows is None or rows.rows < EARLY_MIN_ROWS or not alone():
        return None
    return SideProcess(_read_threads, path, steps)


def _read_threads(path: Path, steps: list) -> tuple[Threads, dict[str, str]]:
    conn = open_readonly(path)
    try:
        return step_threads(conn, sc.read_schema(conn), steps), notes.taken()
    finally:
        conn.close()


def early_threads(early: SideProcess | None) -> Threads | None:
    """What threads_early read, its notes (census.sqlite.notes) kept here; None where it read
    nothing or failed (then they are read here)."""
    done = early.result() if early is not None else None
    if done is None:
        return None
    threads, told = done
    notes.add(told)
    return threads


class IdlePass:
    """The idle split started in the passes' workers (forked now: they inherit the windows,
    so a job is only an index), while this process goes on; result() collects it. It owns
    the timelines (close() removes their spill folder)."""

    def __init__(self, inputs: IdleInputs, timelines: TimelineParts, runner: Runner) -> None:
        self.ws = inputs.windows
        self.timelines = timelines
        shared = (timelines, self.ws, inputs.threads)
        jobs = list(range(len(self.ws)))
        self.started = runner.start(_window_job, shared, jobs, len(jobs), LABEL)

    def result(self, steps: int, segments: int) -> tuple[IdleColumns, dict[str, int]]:
        """The split per step idx and per segment idx as columns (no object per step), and the
        GPU idle ns per host range text."""
        done = self.started.result()
        out = []
        for side, size in ((0, steps), (1, segments)):
            keys = np.concatenate([(w.steps, w.segs)[side].idx for w in self.ws] or [[]])
            cols = int64_or_objects(np.array([np.concatenate([d[side][k] for d in done] or [[]])
                                   for k in range(len(IDLE_KEYS))], np.int64))  # fmt: skip
            split = np.zeros((size, len(IDLE_KEYS)), cols.dtype)
            split[keys] = cols.T
            out.append(split)
        return IdleColumns(*out), sum_ranges(d[2] for d in done)

    def close(self) -> None:
        """Stop the window jobs still running, and remove the timelines' spill folder."""
        try:
            self.started.close()
        finally:
            self.timelines.close()


def _window_job(conn, shared, job: int, tick):
    """Window `job` of the steps: its split by cause (steps, segments), and by host range."""
    timelines, ws, threads = shared
    steps, segs, busy, gaps = classify_window(timelines, ws[job])
    tick(1)
    return steps, segs, window_ranges(threads, ws[job], busy, gaps)

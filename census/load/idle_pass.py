"""The idle split's pass: windows of steps (census.load.idle) and of step threads
(census.load.idle_ranges), each read from the gathered timeline's pieces that touch it, mapped
over the passes' worker processes (in this process for small exports)."""

from __future__ import annotations

import sqlite3

from census.load.idle import as_splits, split_window, windows
from census.load.idle_ranges import attribute_window, range_jobs, sum_ranges
from census.load.pool import Runner
from census.load.timeline import TimelineParts
from census.model import IdleSplit
from census.sources import schema as sc

IdleResult = tuple[dict[int, IdleSplit], dict[int, IdleSplit], dict[str, int]]


def split_idle(
    conn: sqlite3.Connection,
    schema: sc.Schema,
    steps: list,
    segments: list,
    timelines: TimelineParts,
    runner: Runner,
) -> IdleResult:
    """(split per step idx, split per segment idx, GPU idle ns per host range text)."""
    ws = windows(steps, segments)
    threads, ranges = range_jobs(conn, schema, steps)
    # forked workers inherit the windows: a job is only an index (nothing to pickle)
    jobs = [*range(len(ws)), *(-1 - i for i in range(len(ranges)))]
    label = "splitting the GPU idle time"
    done = runner.map(_window_job, (timelines, ws, threads, ranges), jobs, len(jobs), label)
    step_idle, segment_idle = as_splits(ws, done[: len(ws)])
    return step_idle, segment_idle, sum_ranges(done[len(ws) :])


def _window_job(conn, shared, job: int, tick):
    """Window `job` of the steps, or, for job -1 - i, window i of the step threads."""
    timelines, ws, threads, ranges = shared
    steps = job >= 0
    out = (
        split_window(timelines, ws[job])
        if steps
        else attribute_window(timelines, threads, ranges[-1 - job])
    )
    tick(1)
    return out

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


LABEL = "splitting the GPU idle time"


class IdlePass:
    """The idle split started in the passes' workers (forked now: they inherit the windows,
    so a job is only an index), while this process goes on; result() collects it."""

    def __init__(self, conn: sqlite3.Connection, schema: sc.Schema, steps: list,
                 segments: list, timelines: TimelineParts, runner: Runner) -> None:  # fmt: skip
        self.ws = windows(steps, segments)
        threads, ranges = range_jobs(conn, schema, steps)
        jobs = [*range(len(self.ws)), *(-1 - i for i in range(len(ranges)))]
        shared = (timelines, self.ws, threads, ranges)
        self.started = runner.start(_window_job, shared, jobs, len(jobs), LABEL)

    def result(self) -> IdleResult:
        """(split per step idx, split per segment idx, GPU idle ns per host range text)."""
        done = self.started.result()
        n = len(self.ws)
        return (*as_splits(self.ws, done[:n]), sum_ranges(done[n:]))

    def close(self) -> None:
        self.started.close()


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

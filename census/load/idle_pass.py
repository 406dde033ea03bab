"""The idle split's pass: windows of steps (census.load.idle) and of step threads
(census.load.idle_ranges), each read from the gathered timeline's pieces that touch it, mapped
over the passes' worker processes (in this process for small exports)."""

from __future__ import annotations

import itertools
import sqlite3

import numpy as np

from census.definitions import IDLE_KEYS
from census.load.figures import IdleColumns, exact
from census.load.idle import split_window, windows
from census.load.idle_ranges import attribute_window, range_jobs, sum_ranges
from census.load.pool import Runner
from census.load.timeline import TimelineParts
from census.sources import schema as sc

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

    def result(self, steps: int, segments: int) -> tuple[IdleColumns, dict[str, int]]:
        """The split per step idx and per segment idx as columns (no object per step), and the
        GPU idle ns per host range text."""
        done = self.started.result()
        n = len(self.ws)
        out = []
        for side, size in ((0, steps), (1, segments)):
            keys = np.fromiter((r.idx for w in self.ws for r in (w.steps, w.segs)[side]), np.int64)
            cols = exact([list(itertools.chain.from_iterable(d[side][k] for d in done[:n]))
                          for k in range(len(IDLE_KEYS))])  # fmt: skip
            split = np.zeros((size, len(IDLE_KEYS)), cols.dtype)
            split[keys] = cols.T
            out.append(split)
        return IdleColumns(*out), sum_ranges(done[n:])

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

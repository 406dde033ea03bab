"""The windows the idle split works in: a process's steps, CHUNK_STEPS at a time by start
(all of them at once where two overlap), with their phase segments, as arrays."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from operator import attrgetter

import numpy as np

from census.load.intervals import INT_NULL, unique
from census.load.phases import Segments

CHUNK_STEPS = 256  # steps classified at a time: the temporary arrays stay small
NO_TID = INT_NULL  # a step range whose thread is not known


@dataclass(frozen=True)
class Rows:
    """Ranges (steps or segments) of a window: their idx, start and end, whether each is closed
    at its end (census.load.idle.sync_calls), and, for steps, their thread (NO_TID: none)."""

    idx: np.ndarray
    start_ns: np.ndarray
    end_ns: np.ndarray
    closed: np.ndarray
    tid: np.ndarray | None = None

    def __len__(self) -> int:
        return len(self.idx)


@dataclass(frozen=True)
class Window:
    """Steps of one process classified together (by start), and their segments."""

    proc: int
    steps: Rows
    segs: Rows


def windows(steps: list, segments: Iterable) -> list[Window]:
    """The steps in windows of CHUNK_STEPS per process (all of a process's steps in one where
    two overlap), each with its steps' segments (a step's in their given order). A step whose
    end is where the next one starts is open at its end (that instant is the next one's), and
    so is each segment but a step's last, and that one when its step is open."""
    st = _columns(steps, ("idx", "proc", "start_ns", "end_ns"))
    tid = np.fromiter((NO_TID if s.tid is None else s.tid for s in steps), np.int64, len(steps))
    sg = Segments.of(segments)
    # each segment's step's position in the steps list, by idx (idx need not be that position)
    by_idx = np.argsort(st["idx"], kind="stable")
    seg_step = by_idx[np.searchsorted(st["idx"], sg.step, sorter=by_idx)]
    out = []
    for proc in unique(st["proc"]).tolist():
        mine = np.flatnonzero(st["proc"] == proc)
        mine = mine[np.argsort(st["start_ns"][mine], kind="stable")]
        start, end = st["start_ns"][mine], st["end_ns"][mine]
        open_end = np.append(end[:-1] == start[1:], False)  # a seam with the next step
        rank = np.full(len(steps), -1, np.int64)
        rank[mine] = np.arange(len(mine))
        segs = np.flatnonzero(rank[seg_step] >= 0)
        segs = segs[np.argsort(rank[seg_step[segs]], kind="stable")]  # by step, given order
        seg_rank = rank[seg_step[segs]]
        last = np.append(seg_rank[1:] != seg_rank[:-1], True)  # its step's last segment
        seg_closed = last & ~open_end[seg_rank]
        overlap = bool(np.any(start[1:] < end[:-1]))
        size = len(mine) if overlap else CHUNK_STEPS
        for lo in range(0, len(mine), size):
            hi = min(lo + size, len(mine))
            a, b = np.searchsorted(seg_rank, [lo, hi])
            rows, seg_rows = mine[lo:hi], segs[a:b]
            out.append(Window(
                proc,
                Rows(st["idx"][rows], start[lo:hi], end[lo:hi], ~open_end[lo:hi], tid[rows]),
                Rows(sg.idx[seg_rows], sg.start_ns[seg_rows], sg.end_ns[seg_rows],
                     seg_closed[a:b]),
            ))  # fmt: skip
    return out


def _columns(rows: list, names: tuple[str, ...]) -> dict[str, np.ndarray]:
    get = attrgetter(*names)
    table = np.array([get(r) for r in rows], np.int64).reshape(len(rows), len(names))
    return {n: np.ascontiguousarray(table[:, k]) for k, n in enumerate(names)}

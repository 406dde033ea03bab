"""GPU idle time by host range: what the training loop's thread was inside while the GPU idled.

Rule (census.definitions.IDLE_BY_RANGE_RULE): for every instant of a step at which the GPU of
its process is idle (no kernel, memcpy or memset of the process running: the complement of the
busy union gpu_busy_ns is made of), the innermost NVTX range open at that instant on the step
range's thread (push/pop or start/end, any domain; the latest-started of those open; the step
ranges themselves excluded) gets the instant. Summed per range text over the steps, an op range's
text normalised (census.findings.op_ranges.range_group: one row per operation, not per op_id). Idle time
with no range open goes to none, so the ranges' sum never exceeds gpu_idle_ns.
"""

from __future__ import annotations

import sqlite3
from dataclasses import dataclass

import numpy as np

from census.findings.op_ranges import range_group
from census.load.idle import idle_gaps
from census.load.idle_windows import Window, windows
from census.load.intervals import Covered, sums_per_code, unique
from census.load.steps import StepRange, nvtx_text
from census.load.timeline import Intervals, TimelineParts, union
from census.sources import schema as sc

UNNAMED = "(unnamed range)"


@dataclass(frozen=True)
class Thread:
    """A step thread's NVTX ranges: their distinct texts, every range bound (sorted), and the
    text of the innermost range of each stretch between two bounds (its index in `texts`; -1:
    no range open)."""

    proc: int
    texts: list[str]
    cuts: np.ndarray
    owner: np.ndarray


Threads = dict[tuple[int, int], Thread]  # (process, thread id) -> its ranges


def step_threads(conn: sqlite3.Connection, schema: sc.Schema, steps: list[StepRange]) -> Threads:
    """The step threads that have NVTX ranges inside their steps."""
    by_thread: dict[tuple[int, int], list[StepRange]] = {}
    for s in steps:
        if s.tid is not None:
            by_thread.setdefault((s.proc, s.tid), []).append(s)
    threads: Threads = {}
    for (proc, tid), mine in by_thread.items():
        texts, text, starts, ends = _ranges(conn, schema, tid, mine)
        if not len(starts):
            continue
        cuts = unique(np.concatenate([starts, ends]))
        inner = innermost(starts, ends, cuts[:-1])
        owner = np.where(inner >= 0, text[np.maximum(inner, 0)], -1)
        threads[(proc, tid)] = Thread(proc, texts, cuts, owner)
    return threads


def window_ranges(threads: Threads, w: Window, busy: Intervals, gaps: Intervals | None) -> dict:
    """Range text -> the GPU idle ns inside it, over the steps of window `w`; `busy`: the GPU
    busy union where the window is; `gaps`: idle_gaps(busy, the window's steps) where those are
    disjoint, or None (then the gaps are taken per thread)."""
    steps = w.steps
    out: dict[str, int] = {}
    for tid in unique(steps.tid).tolist():
        t = threads.get((w.proc, tid))
        if t is None:  # no thread (NO_TID), or one with no ranges
            continue
        mine = steps.tid == tid
        ws, we = union(steps.start_ns[mine], steps.end_ns[mine])  # an idle instant counts once
        # the window's gaps serve when its steps are all this thread's (cut where two steps
        # touch, which changes no sum)
        own = gaps if gaps is not None and bool(mine.all()) else None
        if own is None:
            own = idle_gaps(busy, (ws, we))
        a = max(int(np.searchsorted(t.cuts, ws[0], "right")) - 1, 0)
        b = int(np.searchsorted(t.cuts, we[-1], "left")) + 1
        per = _attribute(own, t.cuts[a : b + 1], t.owner[a:b], len(t.texts))
        for i, ns in per.items():
            out[t.texts[i]] = out.get(t.texts[i], 0) + ns
    return out


def idle_by_range(
    conn: sqlite3.Connection, schema: sc.Schema, steps: list[StepRange], timelines: TimelineParts
) -> dict[str, int]:
    """Range text -> GPU idle ns inside it, summed over `steps`, a window of steps at a time."""
    threads = step_threads(conn, schema, steps)
    parts = []
    for w in windows(steps, []):
        lo, hi = int(w.steps.start_ns.min()), int(w.steps.end_ns.max())
        parts.append(window_ranges(threads, w, union(*timelines.intervals("busy", w.proc, lo, hi)),
                                   None))  # fmt: skip
    return sum_ranges(parts)


def sum_ranges(parts) -> dict[str, int]:
    """Range text -> GPU idle ns, summed over the parts (the windows' dicts)."""
    out: dict[str, int] = {}
    for part in parts:
        for name, ns in part.items():
            out[name] = out.get(name, 0) + ns
    return out


def _ranges(
    conn: sqlite3.Connection, schema: sc.Schema, tid: int, steps: list[StepRange]
) -> tuple[list[str], np.ndarray, np.ndarray, np.ndarray]:
    """(distinct texts, each range's text among them, start, end) of the thread's NVTX ranges
    that overlap its steps, sorted by start (ties: the longer first, so the inner one is
    later), the step ranges excluded."""
    if not schema.has(sc.NVTX):
        empty = np.zeros(0, np.int64)
        return [], empty, empty, empty
    text, join = nvtx_text(schema)
    rows = conn.execute(
        f"""SELECT {text}, n.start, n.end FROM "{sc.NVTX}" n {join}
            WHERE n.globalTid = ? AND n.eventType IN ({",".join(map(str, sc.NVTX_RANGE_TYPES))})
              AND n.start IS NOT NULL AND n.end IS NOT NULL AND n.end > n.start
              AND n.end > ? AND n.start < ?""",
        (tid, min(s.start_ns for s in steps), max(s.end_ns for s in steps)),
    ).fetchall()
    own = {(s.start_ns, s.end_ns, s.name) for s in steps}
    kept = [r for r in rows if (r[1], r[2], r[0]) not in own]
    group = {r[0]: UNNAMED if r[0] is None else range_group(str(r[0])) for r in kept}
    texts = sorted(set(group.values()))
    code = {t: i for i, t in enumerate(texts)}
    name = np.array([code[group[r[0]]] for r in kept], np.int64)
    start = np.array([r[1] for r in kept], np.int64)
    end = np.array([r[2] for r in kept], np.int64)
    order = np.lexsort((-end, start))
    return texts, name[order], start[order], end[order]


def _attribute(gaps: Intervals, cuts: np.ndarray, owner: np.ndarray, n: int) -> dict[int, int]:
    """Text index -> the idle ns of `gaps` whose innermost open range has that text: the gaps'
    length inside each stretch between two range bounds (`cuts`, sorted), given to the
    stretch's owner (`owner`, -1: none; n texts)."""
    inside = np.diff(Covered(*gaps).upto(cuts))
    named = owner >= 0
    per = sums_per_code(owner[named], n, inside[named])
    return {i: ns for i, ns in enumerate(per) if ns}


def innermost(starts: np.ndarray, ends: np.ndarray, t: np.ndarray) -> np.ndarray:
    """For each time t, the index of the latest-started range (by `starts`, sorted; ties: the
    later index) with start <= t < end, or -1: binary lifting over a sparse table of running
    maxima of `ends`, O((n + q) log n) in numpy."""
    n = len(starts)
    if not n or not len(t):
        return np.full(len(t), -1, np.int64)
    levels = [ends]
    while (1 << len(levels)) <= n:
        prev, half = levels[-1], 1 << (len(levels) - 1)
        cur = prev.copy()
        cur[half:] = np.maximum(prev[half:], prev[:-half])  # max of ends[i - 2^k + 1 .. i]
        levels.append(cur)
    cur = np.searchsorted(starts, t, "right") - 1
    for k in range(len(levels) - 1, -1, -1):
        size = 1 << k
        can = cur - size + 1 >= 0
        skip = can & (levels[k][np.where(can, cur, 0)] <= t)  # that whole block ended by t
        cur = np.where(skip, cur - size, cur)
    return np.where((cur >= 0) & (ends[np.maximum(cur, 0)] > t), cur, -1)

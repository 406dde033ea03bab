"""Where the GPU idle time inside a step comes from.

Per step, on the timeline of the step's process: the GPU is busy while any of its kernels,
memcpys or memsets runs (the union gpu_busy_ns is made of) and idle otherwise. Each idle instant
of the step is put in exactly one class:

- after a host synchronisation: from the end of a synchronising API call (SYNC_APIS) that returns
  while the GPU is idle, until the next GPU work starts (or the step ends): the GPU drained and
  waits for the host to launch again;
- launch-bound: the rest of the idle time during which a launch API call of the process was in
  progress: the host was busy launching;
- other host time: the rest (Python, data loading, the framework between launches).

So gpu_idle_ns = idle_after_sync_ns + idle_launch_ns + idle_other_ns, exactly, per step and per
phase (a phase takes the classified idle time inside the time it owns). sync_count and
sync_time_ns (the time the host was blocked) count the synchronising calls that start in it.
This is one more pass over the start and end of the GPU tables and the runtime calls it needs,
made only when the capture has steps.
"""

from __future__ import annotations

import sqlite3

import numpy as np

from census.definitions import SYNC_APIS, launch_api_kind, normalise_api_name
from census.load.columns import read_batches, rowid_range
from census.model import IdleSplit
from census.sources import schema as sc

Intervals = tuple[np.ndarray, np.ndarray]  # sorted, disjoint [start, end)
GPU_TABLES = (sc.KERNEL, sc.MEMCPY, sc.MEMSET)


def read_timelines(
    conn: sqlite3.Connection, schema: sc.Schema, procs: set[int]
) -> dict[int, tuple[Intervals, Intervals, tuple[np.ndarray, np.ndarray]]]:
    """Per process: (union of its GPU work, union of its launch calls, its sync calls' starts
    and ends, by start)."""
    gpu = _read(conn, schema, GPU_TABLES, "globalPid >> 24", procs)
    launch, sync = _runtime(conn, schema, procs)
    out = {}
    for p in procs:
        s, e = gpu.get(p, _EMPTY)
        ls, le = launch.get(p, _EMPTY)
        ss, se = sync.get(p, _EMPTY)
        order = np.argsort(ss, kind="stable")
        out[p] = (union(s, e), union(ls, le), (ss[order], se[order]))
    return out


_EMPTY = (np.zeros(0, np.int64), np.zeros(0, np.int64))


def _read(conn, schema, tables, proc_sql: str, procs: set[int], where: str = "", extra=None):
    """Per process, (start, end[, extra]) of the rows of `tables` that do not end before they
    start."""
    parts: dict[int, list[tuple[np.ndarray, ...]]] = {}
    columns = {
        "start": "start",
        "end": '"end"',
        "proc": proc_sql,
        **({"x": extra} if extra else {}),
    }
    for table in tables:
        rows = rowid_range(conn, table) if schema.has(table) else None
        if rows is None:
            continue
        for batch, _ in read_batches(conn, table, columns, rows, where):
            ok = batch["end"] >= batch["start"]  # a zero-length kernel is the next GPU work too
            for p in procs:
                keep = ok & (batch["proc"] == p) if len(procs) > 1 else ok
                if keep.any():
                    parts.setdefault(p, []).append(
                        tuple(batch[c][keep] for c in columns if c != "proc")
                    )
    return {p: tuple(np.concatenate(c) for c in zip(*v, strict=True)) for p, v in parts.items()}


def _runtime(conn, schema, procs: set[int]) -> tuple[dict, dict]:
    """Per process, the launch calls and the synchronising calls: one read of the runtime rows
    with either name."""
    if not schema.has(sc.RUNTIME) or not schema.has(sc.STRINGS):
        return {}, {}
    names = {i: n for i, n in conn.execute(
        f'SELECT id, value FROM "{sc.STRINGS}" WHERE id IN (SELECT DISTINCT nameId FROM "{sc.RUNTIME}")'
    )}  # fmt: skip
    launch = np.array([i for i, n in names.items() if launch_api_kind(n)], np.int64)
    sync = np.array([i for i, n in names.items() if normalise_api_name(n) in SYNC_APIS], np.int64)
    wanted = [*launch.tolist(), *sync.tolist()]
    where = f"nameId IN ({','.join(map(str, wanted))})" if wanted else "0"
    rows = _read(conn, schema, (sc.RUNTIME,), "globalTid >> 24", procs, where, extra="nameId")
    split = ({}, {})
    for p, (s, e, name) in rows.items():
        for out, ids in zip(split, (launch, sync), strict=True):
            keep = np.isin(name, ids)
            out[p] = (s[keep], e[keep])
    return split


def union(start: np.ndarray, end: np.ndarray) -> Intervals:
    """The union of [start, end) intervals as sorted, disjoint intervals."""
    if not len(start):
        return _EMPTY
    order = np.argsort(start, kind="stable")
    s, e = start[order], end[order]
    reach = np.maximum.accumulate(e)
    new = np.ones(len(s), bool)
    new[1:] = s[1:] > reach[:-1]
    firsts = np.flatnonzero(new)
    lasts = np.append(firsts[1:] - 1, len(s) - 1)
    return s[firsts], reach[lasts]


def _inside(iv: Intervals, t: np.ndarray) -> np.ndarray:
    """Whether each time t lies in one of the intervals [start, end)."""
    s, e = iv
    i = np.searchsorted(s, t, "right") - 1
    return (i >= 0) & (e[np.maximum(i, 0)] > t) if len(s) else np.zeros(len(t), bool)


def _after_sync(busy: Intervals, sync_end: np.ndarray, steps: Intervals) -> Intervals:
    """From each sync end that falls inside a step while the GPU is idle, to the next GPU work
    of the process or the end of that step, merged."""
    bs, _ = busy
    ss, se = steps
    k = np.searchsorted(ss, sync_end, "right") - 1
    keep = (k >= 0) & (se[np.maximum(k, 0)] > sync_end) & ~_inside(busy, sync_end)
    t, k = sync_end[keep], k[keep]
    nxt_i = np.searchsorted(bs, t, "right")
    nxt = np.where(
        nxt_i < len(bs), bs[np.minimum(nxt_i, max(len(bs) - 1, 0))] if len(bs) else 0, se[k]
    )
    end = np.minimum(nxt, se[k]) if len(bs) else se[k]
    return union(t, end)


def classify_timeline(
    timeline, steps: Intervals, cuts: np.ndarray
) -> tuple[np.ndarray, list[np.ndarray]]:
    """(boundaries, [prefix sums of after-sync, launch-bound, other idle ns]) over the process's
    timeline cut at every interval end and at `cuts` (every bound that will be measured);
    `steps`: the step ranges, by start."""
    busy, launch, (_, sync_end) = timeline
    after = _after_sync(busy, sync_end, steps)
    bounds = np.sort(np.concatenate([*busy, *after, *launch, cuts]))
    bounds = bounds[np.concatenate(([True], bounds[1:] != bounds[:-1]))]
    left = bounds[:-1]
    is_busy = _inside(busy, left)
    is_after = ~is_busy & _inside(after, left)
    is_launch = ~is_busy & ~is_after & _inside(launch, left)
    is_other = ~is_busy & ~is_after & ~is_launch
    lengths = np.diff(bounds)
    sums = [np.concatenate([[0], np.cumsum(np.where(m, lengths, 0))]) for m in
            (is_after, is_launch, is_other)]  # fmt: skip
    return bounds, sums


def measure(bounds: np.ndarray, sums: list[np.ndarray], lo: np.ndarray, hi: np.ndarray) -> list:
    """Per range [lo, hi] (both among `bounds`): the ns of each class inside it."""
    i, j = np.searchsorted(bounds, lo), np.searchsorted(bounds, hi)
    return [(p[j] - p[i]).tolist() for p in sums]


def sync_calls(timeline, lo: np.ndarray, hi: np.ndarray, closed: np.ndarray) -> tuple[list, list]:
    """Per range: (count, blocked ns) of the synchronising calls that start in [lo, hi] ([lo, hi)
    where not `closed`: a step's segments but its last, so a call on a seam counts once)."""
    ss, se = timeline[2]
    blocked = np.concatenate([[0], np.cumsum(se - ss)])
    i = np.searchsorted(ss, lo, "left")
    j = np.where(closed, np.searchsorted(ss, hi, "right"), np.searchsorted(ss, hi, "left"))
    return (j - i).tolist(), (blocked[j] - blocked[i]).tolist()


def idle_splits(
    conn: sqlite3.Connection, schema: sc.Schema, steps: list, segments: list
) -> tuple[dict[int, IdleSplit], dict[int, IdleSplit]]:
    """Per step idx and per segment idx: the split of its GPU idle time."""
    timelines = read_timelines(conn, schema, {s.proc for s in steps})
    last_seg = {}
    for seg in segments:
        last_seg[seg.step] = seg.idx
    out_steps: dict[int, IdleSplit] = {}
    out_segs: dict[int, IdleSplit] = {}
    for proc, tl in timelines.items():
        mine = sorted((s for s in steps if s.proc == proc), key=lambda s: s.start_ns)
        segs = [g for g in segments if g.proc == proc]
        step_iv = (np.array([s.start_ns for s in mine], np.int64),
                   np.array([s.end_ns for s in mine], np.int64))  # fmt: skip
        cuts = np.array([t for r in (*mine, *segs) for t in (r.start_ns, r.end_ns)], np.int64)
        bounds, sums = classify_timeline(tl, step_iv, cuts)
        for rows, target, closed in (
            (mine, out_steps, [True] * len(mine)),
            (segs, out_segs, [last_seg[g.step] == g.idx for g in segs]),
        ):
            lo = np.array([r.start_ns for r in rows], np.int64)
            hi = np.array([r.end_ns for r in rows], np.int64)
            if not len(rows):
                continue
            counts, blocked = sync_calls(tl, lo, hi, np.array(closed))
            after_sync, launch, other = measure(bounds, sums, lo, hi)
            for k, r in enumerate(rows):
                target[r.idx] = IdleSplit(
                    sync_count=counts[k],
                    sync_time_ns=blocked[k],
                    idle_after_sync_ns=after_sync[k],
                    idle_launch_ns=launch[k],
                    idle_other_ns=other[k],
                )
    return out_steps, out_segs

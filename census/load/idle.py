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
from collections.abc import Iterable

import numpy as np

from census.definitions import SYNC_APIS, launch_api_kind, normalise_api_name
from census.load import schema as sc
from census.load.columns import read_batches, read_strings, rowid_range

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


def _read(conn, schema, tables, proc_sql: str, procs: set[int], where: str = "") -> dict:
    parts: dict[int, list[tuple[np.ndarray, np.ndarray]]] = {}
    columns = {"start": "start", "end": '"end"', "proc": proc_sql}
    for table in tables:
        rows = rowid_range(conn, table) if schema.has(table) else None
        if rows is None:
            continue
        for batch, _ in read_batches(conn, table, columns, rows, where):
            for p in procs:
                keep = (batch["proc"] == p) & (batch["end"] > batch["start"])
                if keep.any():
                    parts.setdefault(p, []).append((batch["start"][keep], batch["end"][keep]))
    return {p: (np.concatenate([a for a, _ in v]), np.concatenate([b for _, b in v]))
            for p, v in parts.items()}  # fmt: skip


def _runtime(conn, schema, procs: set[int]) -> tuple[dict, dict]:
    if not schema.has(sc.RUNTIME) or not schema.has(sc.STRINGS):
        return {}, {}
    ids = [
        i for (i,) in conn.execute(f'SELECT DISTINCT nameId FROM "{sc.RUNTIME}"') if i is not None
    ]
    names = read_strings(conn, ids)
    launch = [i for i, n in names.items() if launch_api_kind(n)]
    sync = [i for i, n in names.items() if normalise_api_name(n) in SYNC_APIS]
    proc = "globalTid >> 24"
    found = []
    for chosen in (launch, sync):
        where = f"nameId IN ({','.join(map(str, chosen))})" if chosen else "0"
        found.append(_read(conn, schema, (sc.RUNTIME,), proc, procs, where))
    return found[0], found[1]


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


def clip(iv: Intervals, lo: int, hi: int) -> list[tuple[int, int]]:
    s, e = iv
    i, j = np.searchsorted(e, lo, "right"), np.searchsorted(s, hi, "left")
    return [(max(int(a), lo), min(int(b), hi)) for a, b in zip(s[i:j], e[i:j], strict=True)
            if min(int(b), hi) > max(int(a), lo)]  # fmt: skip


def gaps(busy: list[tuple[int, int]], lo: int, hi: int) -> list[tuple[int, int]]:
    out, t = [], lo
    for a, b in busy:
        if a > t:
            out.append((t, a))
        t = max(t, b)
    if hi > t:
        out.append((t, hi))
    return out


def intersect(xs: list[tuple[int, int]], ys: list[tuple[int, int]]) -> list[tuple[int, int]]:
    out, i, j = [], 0, 0
    while i < len(xs) and j < len(ys):
        a, b = max(xs[i][0], ys[j][0]), min(xs[i][1], ys[j][1])
        if b > a:
            out.append((a, b))
        if xs[i][1] < ys[j][1]:
            i += 1
        else:
            j += 1
    return out


def subtract(xs: list[tuple[int, int]], ys: list[tuple[int, int]]) -> list[tuple[int, int]]:
    out = []
    for a, b in xs:
        t = a
        for c, d in ys:
            if d <= t or c >= b:
                continue
            if c > t:
                out.append((t, c))
            t = max(t, d)
        if b > t:
            out.append((t, b))
    return out


def length(xs: Iterable[tuple[int, int]]) -> int:
    return sum(b - a for a, b in xs)


def classify_idle(timeline, lo: int, hi: int) -> tuple[list, list, list]:
    """The idle time of [lo, hi] as (after a sync, launch-bound, other) interval lists."""
    busy_iv, launch_iv, (_, se) = timeline
    idle = gaps(clip(busy_iv, lo, hi), lo, hi)
    bs, be = busy_iv
    after = []
    for t in se[(se >= lo) & (se < hi)].tolist():
        i = int(np.searchsorted(bs, t, "right")) - 1
        if i >= 0 and be[i] > t:
            continue  # the GPU was still busy when the call returned
        nxt = bs[i + 1] if i + 1 < len(bs) else hi
        after.append((t, min(int(nxt), hi)))
    after = intersect(idle, _merge(after))
    rest = subtract(idle, after)
    launch = intersect(rest, clip(launch_iv, lo, hi))
    return after, launch, subtract(rest, launch)


def _merge(xs: list[tuple[int, int]]) -> list[tuple[int, int]]:
    out: list[tuple[int, int]] = []
    for a, b in sorted(xs):
        if out and a <= out[-1][1]:
            out[-1] = (out[-1][0], max(out[-1][1], b))
        elif b > a:
            out.append((a, b))
    return out


def sync_calls(timeline, lo: int, hi: int, closed: bool = True) -> tuple[int, int]:
    """(count, blocked ns) of the synchronising calls that start in [lo, hi] ([lo, hi) unless
    `closed`: a step's segments but its last, so that a call on a seam counts once, later)."""
    ss, se = timeline[2]
    inside = (ss >= lo) & ((ss <= hi) if closed else (ss < hi))
    return int(inside.sum()), int((se[inside] - ss[inside]).sum())


def idle_splits(
    conn: sqlite3.Connection, schema: sc.Schema, steps: list, segments: list
) -> tuple[dict[int, tuple[int, ...]], dict[int, tuple[int, ...]]]:
    """Per step idx and per segment idx: (sync_count, sync_time_ns, idle_after_sync_ns,
    idle_launch_ns, idle_other_ns)."""
    timelines = read_timelines(conn, schema, {s.proc for s in steps})
    by_step: dict[int, list] = {}
    for seg in segments:
        by_step.setdefault(seg.step, []).append(seg)
    out_steps, out_segs = {}, {}
    for st in steps:
        tl = timelines[st.proc]
        classes = classify_idle(tl, st.start_ns, st.end_ns)
        out_steps[st.idx] = (*sync_calls(tl, st.start_ns, st.end_ns), *map(length, classes))
        segs = by_step.get(st.idx, [])
        for k, seg in enumerate(segs):
            window = [(seg.start_ns, seg.end_ns)]
            calls = sync_calls(tl, seg.start_ns, seg.end_ns, closed=k == len(segs) - 1)
            parts = (length(intersect(c, window)) for c in classes)
            out_segs[seg.idx] = (*calls, *parts)
    return out_steps, out_segs

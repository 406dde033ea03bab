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
The timelines come from the engine's passes (census.load.timeline), which gather them while
they read the GPU and runtime rows anyway.
"""

from __future__ import annotations

import itertools
import sqlite3
from collections.abc import Iterable

import numpy as np

from census.load.api_names import name_in, read_api_names
from census.load.idle_windows import Rows, Window, windows
from census.load.intervals import Covered
from census.load.timeline import Intervals, Timeline, TimelineParts, union
from census.model.step import IdleSplit
from census.sources import schema as sc
from census.sqlite import read_batches, rowid_range

GPU_TABLES = (sc.KERNEL, sc.MEMCPY, sc.MEMSET)


def read_timelines(conn: sqlite3.Connection, schema: sc.Schema, procs: set[int]) -> TimelineParts:
    """The timelines read on their own, without the passes: the slow reference tests compare
    the gathered ones with."""
    parts = TimelineParts()
    _put(parts, "busy", _read(conn, schema, GPU_TABLES, "globalPid >> 24", procs))
    _runtime(conn, schema, procs, parts)
    return parts


def gathered_timelines(
    conn: sqlite3.Connection, schema: sc.Schema, parts: TimelineParts, procs: set[int]
) -> TimelineParts:
    """The timelines the passes gathered; the runtime calls read here when the runtime pass
    had to regroup calls recorded twice (legacy exports) and so gathered none."""
    if not parts.has_runtime:
        parts.launch, parts.sync = {}, {}
        _runtime(conn, schema, procs, parts)
    return parts


def _put(parts: TimelineParts, kind: str, batches: dict) -> None:
    for p, rows in batches.items():
        for s, e, *_ in rows:
            parts.put(kind, p, s, e)


def _read(conn, schema, tables, proc_sql: str, procs: set[int], where: str = "", extra=None):
    """Per process, batches of (start, end[, extra]) of the rows of `tables` that do not end
    before they start."""
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
    return parts


def _runtime(conn, schema, procs: set[int], parts: TimelineParts) -> None:
    """The launch calls and the synchronising calls, into `parts`: one read of the runtime
    rows with either name (the names as the runtime pass picks them)."""
    if not schema.has(sc.RUNTIME) or not schema.has(sc.STRINGS):
        return
    names = read_api_names(conn, schema, syncs=True)
    launch, sync = names.launch_ids, np.array(names.sync_ids, np.int64)
    where = name_in([*launch.tolist(), *sync.tolist()])
    rows = _read(conn, schema, (sc.RUNTIME,), "globalTid >> 24", procs, where, extra="nameId")
    for p, batches in rows.items():
        for s, e, name in batches:
            for kind, ids in (("launch", launch), ("sync", sync)):
                keep = np.isin(name, ids)
                parts.put(kind, p, s[keep], e[keep])


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


class ByBounds:
    """The classes over a timeline cut at every bound: exact for any steps, overlapping ones
    included, but it sorts and searches every bound (the reference, and the path for steps
    that overlap within a process)."""

    def __init__(self, timeline, steps: Intervals, cuts: np.ndarray) -> None:
        busy, launch, (_, sync_end) = timeline
        after = _after_sync(busy, sync_end, steps)
        bounds = np.sort(np.concatenate([*busy, *after, *launch, cuts]))
        self.bounds = bounds = bounds[np.concatenate(([True], bounds[1:] != bounds[:-1]))]
        left = bounds[:-1]
        is_busy = _inside(busy, left)
        is_after = ~is_busy & _inside(after, left)
        is_launch = ~is_busy & ~is_after & _inside(launch, left)
        is_other = ~is_busy & ~is_after & ~is_launch
        lengths = np.diff(bounds)
        self.sums = [np.concatenate([[0], np.cumsum(np.where(m, lengths, 0))]) for m in
                     (is_after, is_launch, is_other)]  # fmt: skip

    def measure(self, lo: np.ndarray, hi: np.ndarray) -> list:
        """Per range [lo, hi] (both among the cuts): the ns of each class inside it."""
        i, j = np.searchsorted(self.bounds, lo), np.searchsorted(self.bounds, hi)
        return [p[j] - p[i] for p in self.sums]


class ByGaps:
    """The classes from the GPU's idle gaps inside the steps (steps disjoint, by start): linear
    in the gaps, a few searches, no sort. Each gap between two pieces of GPU work (a zero-length
    one too) cut to a step is [g0, g1); its after-sync part is [a, g1) from the first sync end
    a inside it (a = g1 without one); of [g0, a), the launch calls' union covers the
    launch-bound part, and the rest is other host time."""

    def __init__(self, timeline, steps: Intervals) -> None:
        busy, launch, (_, sync_end) = timeline
        self.g0, self.g1 = g0, g1 = idle_gaps(busy, steps)
        self.a = a = first_ends(g0, g1, sync_end)
        self.launched = Covered(*launch)
        # whole gaps: [a, g1) after a sync, [g0, a) launch-bound or other; g0 <= a <= g1 <= the
        # next g0, so the bounds interleaved are sorted: one merged search
        bounds = np.empty(2 * len(g0), np.int64)
        bounds[0::2], bounds[1::2] = g0, a
        covered = self.launched.upto(bounds, ordered=True)
        launched = covered[1::2] - covered[0::2]
        parts = [g1 - a, launched, a - g0 - launched]
        self.prefix = [np.concatenate(([0], np.cumsum(x))) for x in parts]

    def _parts(self, x: np.ndarray, rows: np.ndarray) -> list[np.ndarray]:
        """(after-sync, launch-bound, other) ns of gaps `rows` before x."""
        g0, a, g1 = self.g0[rows], self.a[rows], self.g1[rows]
        end = np.minimum(x, g1)
        after = np.maximum(end - a, 0)
        pre_end = np.maximum(np.minimum(end, a), g0)
        launch = self.launched.upto(pre_end) - self.launched.upto(g0)
        return [after, launch, pre_end - g0 - launch]

    def measure(self, lo: np.ndarray, hi: np.ndarray) -> list:
        """Per range [lo, hi] inside one step: the ns of each class inside it."""
        return [b - a for a, b in zip(self._upto(lo), self._upto(hi), strict=True)]

    def _upto(self, x: np.ndarray) -> list[np.ndarray]:
        """Each class's ns before each time x: the whole gaps before, and the part of the gap x
        falls in."""
        m = np.searchsorted(self.g0, x, "right") - 1
        whole = [p[np.maximum(m, 0)] for p in self.prefix]
        rows = np.maximum(m, 0)
        part = self._parts(x, rows) if len(self.g0) else [np.zeros(len(x), np.int64)] * 3
        return [np.where(m >= 0, w + p, 0) for w, p in zip(whole, part, strict=True)]


_MIN, _MAX = np.iinfo(np.int64).min, np.iinfo(np.int64).max


def idle_gaps(busy: Intervals, windows: Intervals) -> Intervals:
    """The stretches of the sorted, disjoint `windows` with no GPU work (cut at zero-length
    work too, which ends an after-sync stretch): gap i of the busy union is [be[i-1], bs[i])
    (from -inf, to +inf at the edges); each window takes the gaps that reach into it, its first
    and last cut to it."""
    bs, be = busy
    w0, w1 = windows
    g0, g1 = np.concatenate(([_MIN], be)), np.concatenate((bs, [_MAX]))
    lo = np.searchsorted(bs, w0, "right")  # the first gap that ends after the window starts
    hi = np.searchsorted(be, w1, "left") + 1  # past the last gap that starts before it ends
    count = np.maximum(hi - lo, 0)
    took = np.flatnonzero(count)
    if not len(took):
        return g0[:0], g1[:0]
    # how many windows take each gap (two where a gap spans the seam of two windows)
    edges = np.zeros(len(g0) + 1, np.int64)
    np.add.at(edges, lo[took], 1)
    np.add.at(edges, hi[took], -1)
    takes = np.cumsum(edges[:-1])
    rows = np.repeat(np.arange(len(g0)), takes) if takes.max() > 1 else np.flatnonzero(takes)
    s, e = g0[rows], g1[rows]
    last = np.cumsum(count[took]) - 1
    first = last - count[took] + 1
    s[first] = np.maximum(s[first], w0[took])
    e[last] = np.minimum(e[last], w1[took])
    keep = e > s  # not where a window of no length was cut to nothing
    return (s, e) if bool(keep.all()) else (s[keep], e[keep])


def first_ends(g0: np.ndarray, g1: np.ndarray, sync_end: np.ndarray) -> np.ndarray:
    """Per gap [g0, g1) (sorted, disjoint): the first sync end inside it, else g1."""
    a = g1.copy()
    if len(g0) and len(sync_end):
        k = np.searchsorted(g0, sync_end, "right") - 1
        inside = (k >= 0) & (sync_end < g1[np.maximum(k, 0)])
        np.minimum.at(a, k[inside], sync_end[inside])
    return a


def classify_timeline(timeline, steps: Intervals, cuts: np.ndarray) -> ByGaps | ByBounds:
    """The idle classes of one process's timeline; `steps` by start; `cuts`: every bound that
    will be measured."""
    ss, se = steps
    if len(ss) > 1 and bool(np.any(ss[1:] < se[:-1])):  # steps overlap
        return ByBounds(timeline, steps, cuts)
    return ByGaps(timeline, steps)


def sync_calls(timeline, lo: np.ndarray, hi: np.ndarray, closed: np.ndarray) -> tuple:
    """Per range: (count, blocked ns) of the synchronising calls that start in [lo, hi] ([lo, hi)
    where not `closed`: a step's segments but its last, and a step that the next one starts
    where it ends, with its last segment), so a call on a seam counts once, in the later range
    (as a launch there does)."""
    ss, se = timeline[2]
    blocked = np.concatenate([[0], np.cumsum(se - ss)])
    i = np.searchsorted(ss, lo, "left")
    j = np.where(closed, np.searchsorted(ss, hi, "right"), np.searchsorted(ss, hi, "left"))
    return j - i, blocked[j] - blocked[i]


# sync_count, sync_time_ns, after-sync, launch-bound, other ns: int64 columns
Columns = list[np.ndarray]


def split_window(timelines: TimelineParts, w: Window) -> tuple[Columns, Columns]:
    """The idle split of a window's steps and of its segments, as columns (IdleSplit's fields,
    in its order)."""
    return classify_window(timelines, w)[:2]


def classify_window(
    timelines: TimelineParts, w: Window
) -> tuple[Columns, Columns, Intervals, Intervals | None]:
    """split_window's columns, the GPU busy union where the window is, and the idle gaps of its
    steps (None where two of them overlap): what the split by host range reads too."""
    steps, segs = w.steps, w.segs
    cuts = np.concatenate([steps.start_ns, steps.end_ns, segs.start_ns, segs.end_ns])
    tl = timelines.at(w.proc, int(steps.start_ns[0]), int(steps.end_ns.max()))
    classes = classify_timeline(tl, (steps.start_ns, steps.end_ns), cuts)
    gaps = (classes.g0, classes.g1) if isinstance(classes, ByGaps) else None
    return _measure(classes, tl, steps), _measure(classes, tl, segs), tl[0], gaps


def idle_splits(
    timelines: TimelineParts, steps: list, segments: Iterable
) -> tuple[dict[int, IdleSplit], dict[int, IdleSplit]]:
    """Per step idx and per segment idx: the split of its GPU idle time, a window of steps at
    a time, each on the part of the timeline it spans."""
    ws = windows(steps, segments)
    return as_splits(ws, [split_window(timelines, w) for w in ws])


def as_splits(ws: list[Window], columns: list) -> tuple[dict, dict]:
    """(step idx -> IdleSplit, segment idx -> IdleSplit) from each window's split columns."""
    out_steps: dict[int, IdleSplit] = {}
    out_segs: dict[int, IdleSplit] = {}
    for w, (a, b) in zip(ws, columns, strict=True):
        for rows, cols, target in ((w.steps, a, out_steps), (w.segs, b, out_segs)):
            splits = itertools.starmap(IdleSplit, zip(*(c.tolist() for c in cols), strict=True))
            target.update(zip(rows.idx.tolist(), splits, strict=True))
    return out_steps, out_segs


def _measure(classes, tl: Timeline, rows: Rows) -> Columns:
    if not len(rows):
        return [np.zeros(0, np.int64)] * 5
    counts, blocked = sync_calls(tl, rows.start_ns, rows.end_ns, rows.closed)
    return [counts, blocked, *classes.measure(rows.start_ns, rows.end_ns)]

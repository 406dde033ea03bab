"""Each launching call's operation (#56): the innermost `aten::` range that encloses the call's
start on the call's thread, and, for backward work, the forward operation it belongs to.

Pure numpy over columns a reader hands in (Kineto `cpu_op` events; op NVTX ranges in nsys
exports), with no knowledge of either format: `OpRanges` holds one process's ranges, the
launches are (start_ns, thread) columns of the same process, and `attribute_launches` answers
with indices into the ranges (-1 for none). A range contains an instant t when
start_ns <= t < end_ns; of the ranges that contain it, the innermost is the one that starts
last, then the shortest, then the later one in the columns' order. Ranges on one thread nest
(a record function ends before its parent does); where a trace has ranges that cross, the
threads holding them are answered by a slower exact search, never by a guess.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import numpy as np

ATEN = "aten::"
# Kineto names the autograd engine's call of a backward node so; emit_nvtx's ranges of a node
# carry the same sequence number as the forward op that made it.
BACKWARD_PREFIX = "autograd::engine::evaluate_function: "


def normalize_op_name(name: str) -> str:
    """An op range's name as census shows it: `aten::mm, seq = 12, op_id = 40` is `aten::mm`
    (emit_nvtx appends the sequence number and the op id after the first comma)."""
    return name.split(",", 1)[0].strip()


# what emit_nvtx and nsys's --pytorch=autograd-nvtx append to an op range's text
_OP_DECORATION = re.compile(r",\s*(?:seq|op_id)\s*=\s*\d+")


def range_group(text: str) -> str:
    """A host range's row in the GPU-idle-by-range table: an op range (its text decorated with
    `, seq = N` or `, op_id = N`) under its normalised name, so that one operation's idle time
    adds up in one row (`aten::addmm, seq = 791, op_id = 11000` is `aten::addmm`); any other
    range under its text as written (`forward`, `my, range`)."""
    return normalize_op_name(text) if _OP_DECORATION.search(text) else text


def normalize_names(names: list[str] | tuple[str, ...]) -> tuple[tuple[str, ...], np.ndarray]:
    """The distinct normalised names of a string table, and each raw id's new id (int64)."""
    normal = [normalize_op_name(n) for n in names]
    table = tuple(dict.fromkeys(normal))
    index = {n: i for i, n in enumerate(table)}
    return table, np.array([index[n] for n in normal], dtype=np.int64)


@dataclass(frozen=True)
class OpRanges:
    """One process's op ranges as columns (int64; `backward` bool): `thread` is the same id the
    launches carry, `name_id` indexes `names` (normalised), `sequence` is the autograd sequence
    number (-1 where the range has none) and `backward` marks the ranges of backward nodes
    (Kineto: `Fwd thread id` > 0, or a name starting with BACKWARD_PREFIX)."""

    start_ns: np.ndarray
    end_ns: np.ndarray
    thread: np.ndarray
    name_id: np.ndarray
    sequence: np.ndarray
    backward: np.ndarray
    names: tuple[str, ...]

    def named(self, prefix: str) -> np.ndarray:
        """Which ranges' names start with `prefix` (bool per range)."""
        hit = np.array([n.startswith(prefix) for n in self.names] + [False], dtype=bool)
        return hit[self.name_id] if len(self.name_id) else np.zeros(0, dtype=bool)


@dataclass(frozen=True)
class LaunchOps:
    """Per launch: `op`, the innermost enclosing `aten::` range; `node`, the innermost enclosing
    backward range; `forward`, the forward range that backward node belongs to (the outermost
    range of the same sequence number that is not backward): indices into the ranges, -1 for
    none."""

    op: np.ndarray
    node: np.ndarray
    forward: np.ndarray


def attribute_launches(
    launch_start_ns: np.ndarray, launch_thread: np.ndarray, ranges: OpRanges
) -> LaunchOps:
    """Each launch's operation, backward node and that node's forward operation (LaunchOps)."""
    at, thread = np.asarray(launch_start_ns, np.int64), np.asarray(launch_thread, np.int64)
    op = _within(ranges, ranges.named(ATEN), at, thread)
    back = ranges.backward.astype(bool) & (ranges.sequence >= 0)
    node = _within(ranges, back, at, thread)
    forward = np.full(len(at), -1, dtype=np.int64)
    has = node >= 0
    forward[has] = forward_ranges(ranges)[node[has]]
    return LaunchOps(op=op, node=node, forward=forward)


def forward_ranges(ranges: OpRanges) -> np.ndarray:
    """For each range, the forward operation its sequence number names (-1 where it has none,
    or no forward range has it). Forward ops record the sequence number the next autograd node
    will take, so ops run before the node's op (an `aten::copy_` under no_grad, say) carry it
    too: the node is made by the forward range with that number that starts last, and the
    operation shown is the outermost range with that number enclosing its start on its thread
    (`aten::layer_norm` around `aten::native_layer_norm`)."""
    seq, start, end = ranges.sequence, ranges.start_ns, ranges.end_ns
    fwd = np.flatnonzero((seq >= 0) & ~ranges.backward.astype(bool))
    out = np.full(len(seq), -1, dtype=np.int64)
    if not len(fwd):
        return out
    fwd = fwd[np.lexsort((fwd, -end[fwd], start[fwd], seq[fwd]))]
    seqs, first = np.unique(seq[fwd], return_index=True)
    last = np.append(first[1:], len(fwd)) - 1
    which = np.repeat(np.arange(len(seqs)), np.diff(np.append(first, len(fwd))))
    node = fwd[last][which]  # the latest-starting forward range of each one's number
    holds = (
        (ranges.thread[fwd] == ranges.thread[node])
        & (start[fwd] <= start[node])
        & (end[fwd] > start[node])
    ) | (fwd == node)
    held = np.flatnonzero(holds)
    outer = fwd[held[np.unique(which[held], return_index=True)[1]]]
    pos = np.minimum(np.searchsorted(seqs, seq), len(seqs) - 1)
    hit = (seq >= 0) & (seqs[pos] == seq)
    out[hit] = outer[pos[hit]]
    return out


def _within(ranges: OpRanges, keep: np.ndarray, at: np.ndarray, thread: np.ndarray) -> np.ndarray:
    chosen = np.flatnonzero(keep)
    if not len(chosen):  # none of the kind (a trace without backward nodes)
        return np.full(len(at), -1, dtype=np.int64)
    found = innermost(
        ranges.start_ns[chosen], ranges.end_ns[chosen], ranges.thread[chosen], at, thread
    )
    return np.where(found >= 0, chosen[np.maximum(found, 0)], -1)


QUERY_CHUNK = 1 << 16  # instants answered at a time (innermost's work arrays stay this size)


def innermost(
    start_ns: np.ndarray,
    end_ns: np.ndarray,
    thread: np.ndarray,
    at_ns: np.ndarray,
    at_thread: np.ndarray,
) -> np.ndarray:
    """For each instant (at_ns on at_thread), the index of the innermost interval
    [start_ns, end_ns) on that thread containing it (latest start, then shortest, then the later
    index), -1 where none does. Nested intervals are answered by their nesting level (the last
    interval of the instant's level starting at or before it); threads whose intervals cross
    are answered by `_innermost_any`.

    The instants are answered QUERY_CHUNK at a time in time order, each chunk against the
    intervals that overlap its span (those still open are carried to the next), so that the
    sorted keys and levels grow with the chunk, not with the trace (#55: at 3x10^5 kernels they
    were 110 MiB of census summary's peak)."""
    s, e, h = (np.asarray(a, np.int64) for a in (start_ns, end_ns, thread))
    q, qh = np.asarray(at_ns, np.int64), np.asarray(at_thread, np.int64)
    if len(q) <= QUERY_CHUNK:
        return _innermost(s, e, h, q, qh)
    out = np.full(len(q), -1, dtype=np.int64)
    by_time, by_start = np.argsort(q, kind="stable"), np.argsort(s, kind="stable")
    starts = s[by_start]
    carry, taken = np.zeros(0, np.int64), 0
    for lo in range(0, len(q), QUERY_CHUNK):
        which = by_time[lo : lo + QUERY_CHUNK]
        first, last = q[which[0]], q[which[-1]]
        upto = int(np.searchsorted(starts, last, side="right"))
        near = np.concatenate((carry, by_start[taken:upto]))  # started by the chunk's last
        taken = upto
        near = near[e[near] > first]  # and open after its first instant
        carry = near[e[near] > last]
        chosen = np.sort(near)  # the columns' order: the tie-break's "later index"
        if len(chosen):
            found = _innermost(s[chosen], e[chosen], h[chosen], q[which], qh[which])
            out[which] = np.where(found >= 0, chosen[np.maximum(found, 0)], -1)
    return out


def _innermost(s: np.ndarray, e: np.ndarray, h: np.ndarray, q: np.ndarray,
               qh: np.ndarray) -> np.ndarray:  # fmt: skip
    """innermost over all the intervals at once."""
    out = np.full(len(q), -1, dtype=np.int64)
    real = np.flatnonzero(e > s)
    if not len(real) or not len(q):
        return out
    ix = real[np.lexsort((real, -e[real], s[real], h[real]))]
    t = _Keys(s[ix], e[ix], h[ix], q, qh)
    found, crossed = _by_level(t)
    slow = np.isin(qh, t.threads[crossed]) if crossed.any() else np.zeros(len(q), bool)
    if slow.any():
        found[slow] = _innermost_any(t, np.flatnonzero(slow))
    return np.where(found >= 0, ix[np.maximum(found, 0)], -1)


class _Keys:
    """Intervals sorted by (thread, start, -end, index) and instants, with (thread, time) made
    one int64 key: thread code * span + the time's offset from the earliest (or, where that
    could overflow, its rank among all the times)."""

    def __init__(self, s: np.ndarray, e: np.ndarray, h: np.ndarray, q: np.ndarray, qh: np.ndarray):
        self.s, self.e = s, e
        self.threads = _distinct(h)
        self.code = np.searchsorted(self.threads, h).astype(np.int64)
        qpos = np.minimum(np.searchsorted(self.threads, qh), len(self.threads) - 1)
        self.q_known = self.threads[qpos] == qh
        self.q_code = qpos.astype(np.int64)
        low = min(int(s.min()), int(q.min()) if len(q) else int(s.min()))
        high = max(int(e.max()), int(q.max()) if len(q) else int(e.max()))
        if (high - low + 2) * len(self.threads) < 2**62:
            self.span = np.int64(high - low + 2)
            s_rank, self.e_rank, self.q_rank = s - low, e - low, q - low
        else:
            times = _distinct(np.concatenate((s, e, q)))
            self.span = np.int64(len(times) + 1)
            s_rank, self.e_rank, self.q_rank = (
                np.searchsorted(times, a).astype(np.int64) for a in (s, e, q)
            )
        self.s_key = self.code * self.span + s_rank
        self.e_key = np.sort(self.code * self.span + self.e_rank)
        self.q_key = self.q_code * self.span + self.q_rank
        self.first = np.searchsorted(self.s_key, np.arange(len(self.threads)) * self.span)
        self.e_first = np.searchsorted(self.e_key, np.arange(len(self.threads)) * self.span)

    def open_at(self, key: np.ndarray, code: np.ndarray) -> np.ndarray:
        """How many intervals of the thread have started and not ended at each key."""
        started = np.searchsorted(self.s_key, key, side="right") - self.first[code]
        ended = np.searchsorted(self.e_key, key, side="right") - self.e_first[code]
        return started - ended


def _distinct(a: np.ndarray) -> np.ndarray:
    """The sorted distinct values (np.unique's hashing is many times slower on 10^6 int64)."""
    a = np.sort(a)
    keep = np.ones(len(a), dtype=bool)
    keep[1:] = a[1:] != a[:-1]
    return a[keep]


def _by_level(t: _Keys) -> tuple[np.ndarray, np.ndarray]:
    """(the innermost interval for every instant, threads with crossing intervals (bool per
    thread code)): the intervals of one level on a thread are disjoint when they nest, so the
    last one of the instant's level that starts at or before it contains it."""
    n = len(t.s)
    pos = np.arange(n) - t.first[t.code]
    ended = np.searchsorted(t.e_key, t.s_key, side="right") - t.e_first[t.code]
    level = pos + 1 - ended
    top = np.int64(level.max() + 2)
    group = (t.code * top + level) * t.span + (t.s_key - t.code * t.span)
    order = np.argsort(group, kind="stable")
    g_sorted = group[order]

    def last_at(code: np.ndarray, lvl: np.ndarray, key: np.ndarray) -> np.ndarray:
        base = (code * top + lvl) * t.span
        p = np.searchsorted(g_sorted, base + (key - code * t.span), side="right") - 1
        ok = (lvl >= 1) & (p >= 0) & (g_sorted[np.maximum(p, 0)] >= base)
        return np.where(ok, order[np.maximum(p, 0)], -1)

    parent = last_at(t.code, level - 1, t.s_key)
    has = parent >= 0
    bad = (level > 1) & (~has | (t.e[np.maximum(parent, 0)] < t.e))
    crossed = np.zeros(len(t.threads), dtype=bool)
    crossed[t.code[bad]] = True
    depth = t.open_at(t.q_key, t.q_code)
    found = last_at(t.q_code, depth, t.q_key)
    return np.where(t.q_known, found, -1), crossed


def _innermost_any(t: _Keys, which: np.ndarray) -> np.ndarray:
    """The innermost interval for the instants `which`, for any intervals: the last interval
    starting at or before the instant whose end is after it, found by a descending search over
    a sparse table of the ends' running maxima (blocks of 2^k intervals skipped while none of
    them ends after the instant)."""
    code, times = t.q_code[which], t.q_rank[which]
    lo = t.first[code]
    pos = np.searchsorted(t.s_key, t.q_key[which], side="right") - 1
    tables = [t.e_rank]
    while (1 << len(tables)) <= len(t.e_rank):
        prev, step = tables[-1], 1 << (len(tables) - 1)
        tables.append(np.maximum(prev, np.concatenate((prev[:step], prev[:-step]))))
    for k in range(len(tables) - 1, -1, -1):
        size = 1 << k
        skip = (pos - size + 1 >= lo) & (tables[k][np.maximum(pos, 0)] <= times)
        pos = np.where(skip, pos - size, pos)
    ok = t.q_known[which] & (pos >= lo) & (t.e_rank[np.maximum(pos, 0)] > times)
    return np.where(ok, pos, -1)

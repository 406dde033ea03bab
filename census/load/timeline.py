"""The timelines the idle split reads, gathered by the passes as they go (no second read).

Per process with steps, three kinds of intervals, kept only where they touch a step (or phase
segment): the GPU's busy pieces (the new coverage the kernel pass sweeps, memcpys and memsets
included, plus zero-length GPU work, which counts as "the next GPU work" after a sync), the
launch calls and the synchronising calls (SYNC_APIS) the runtime pass reads. Parts read in
parallel merge by concatenation; `timelines()` then makes each process's unions.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from census.load.intervals import StepIndex

Intervals = tuple[np.ndarray, np.ndarray]  # sorted, disjoint [start, end)
# (GPU busy union, launch calls' union, (sync starts, sync ends) by start)
Timeline = tuple[Intervals, Intervals, Intervals]
Batches = dict[int, list[Intervals]]
EMPTY: Intervals = (np.zeros(0, np.int64), np.zeros(0, np.int64))


@dataclass
class TimelineParts:
    """Per process, batches of intervals that touch a step; `None` runtime kinds: not gathered
    (the runtime pass regrouped calls recorded twice, so the idle split reads them itself)."""

    busy: Batches = field(default_factory=dict)
    launch: Batches | None = field(default_factory=dict)
    sync: Batches | None = field(default_factory=dict)

    def add(self, kind: str, index: StepIndex, proc: int, start, end) -> None:
        keep = index.touching(proc, start, end)
        if keep.any():
            getattr(self, kind).setdefault(proc, []).append((start[keep], end[keep]))

    def merge(self, other: TimelineParts) -> None:
        for kind in ("busy", "launch", "sync"):
            mine, theirs = getattr(self, kind), getattr(other, kind)
            if mine is None or theirs is None:
                setattr(self, kind, None)
                continue
            for proc, batches in theirs.items():
                mine.setdefault(proc, []).extend(batches)

    @property
    def has_runtime(self) -> bool:
        return self.launch is not None and self.sync is not None

    def timelines(self, procs: set[int]) -> dict[int, Timeline]:
        """Per process: its GPU busy union, its launch calls' union, its sync calls by start.
        The batches are let go as they are joined (this object is empty afterwards)."""
        out = {}
        for p in procs:
            ss, se = _joined(self.sync, p)
            order = np.argsort(ss, kind="stable")
            out[p] = (union(*_joined(self.busy, p)), union(*_joined(self.launch, p)),
                      (ss[order], se[order]))  # fmt: skip
        return out


def _joined(batches: Batches | None, proc: int) -> Intervals:
    parts = (batches or {}).pop(proc, None)
    if not parts:
        return EMPTY
    start = np.concatenate([s for s, _ in parts])
    end = np.concatenate([e for _, e in parts])
    return start, end


def window(iv: Intervals, lo: int, hi: int) -> Intervals:
    """The sorted, disjoint intervals of `iv` that touch [lo, hi] (views, no copies)."""
    s, e = iv
    a, b = np.searchsorted(e, lo, "left"), np.searchsorted(s, hi, "right")
    return s[a:b], e[a:b]


def union(start: np.ndarray, end: np.ndarray) -> Intervals:
    """The union of [start, end) intervals as sorted, disjoint intervals (a zero-length one
    stays where nothing covers it)."""
    if not len(start):
        return EMPTY
    if bool(np.all(start[1:] >= start[:-1])):  # the passes' pieces mostly come sorted
        s, e = start, end
    else:
        order = np.argsort(start, kind="stable")
        s, e = start[order], end[order]
    reach = np.maximum.accumulate(e)
    new = np.ones(len(s), bool)
    new[1:] = s[1:] > reach[:-1]
    if bool(new.all()) and bool(np.all(e >= s)):  # already disjoint: no copies (fresh memory
        return s, e  # is slow to come by on a VM: fewer arrays, less time)
    firsts = np.flatnonzero(new)
    lasts = np.append(firsts[1:] - 1, len(s) - 1)
    return s[firsts], reach[lasts]

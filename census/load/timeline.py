"""The timelines the idle split reads, gathered by the passes as they go (no second read).

Per process with steps, three kinds of intervals: the GPU's busy pieces (the new coverage the
kernel pass sweeps, memcpys and memsets included, plus zero-length GPU work, which counts as "the
next GPU work" after a sync), the launch calls and the synchronising calls (SYNC_APIS) the
runtime pass reads. They are kept only where they touch a step (or phase segment), or a batch
whole where the steps cover its span but for 1/64 of it (StepIndex.keeping: no search per
interval, and at most that 64th kept between steps).

Each batch a pass gathers is one Piece: in memory, or, while a pass spills (`spilling`, on
exports large enough to be read by worker processes), written to a file of the pass's spill
folder at once, so neither the workers nor census hold the gathered intervals. The idle split
then reads the timeline a window of steps at a time (`TimelineParts.at`): only the pieces that
touch the window, so its memory follows the window, not the capture's length.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from functools import partial

import numpy as np

from census.load.intervals import StepIndex
from census.paths import write_arrays

Intervals = tuple[np.ndarray, np.ndarray]  # sorted, disjoint [start, end)
# (GPU busy union, launch calls' union, (sync starts, sync ends) by start)
Timeline = tuple[Intervals, Intervals, Intervals]
EMPTY: Intervals = (np.zeros(0, np.int64), np.zeros(0, np.int64))
KINDS = ("busy", "launch", "sync")

_U32 = (1 << 32) - 1
BLOCK = 4096  # a packed piece is read back from the block that holds a window's first interval
_spill: list[str | None] = [None]  # the folder gathered pieces go to (None: kept in memory)


@contextmanager
def spilling(folder: str) -> Iterator[None]:
    """Pieces gathered inside (by this process, or by workers forked inside) go to `folder`."""
    _spill[0] = folder
    try:
        yield
    finally:
        _spill[0] = None


def spill_folder() -> str | None:
    """The folder a pass spills to now (`spilling`), or None."""
    return _spill[0]


@dataclass(frozen=True)
class Piece:
    """One batch of intervals [start, end) (any order), with its earliest start `lo` and latest
    end `hi`: in memory (`arrays`), or in a file (`path`, from byte `offset`): sorted by start
    and packed as 32-bit gaps between starts and 32-bit lengths where they fit (8 bytes an
    interval: writes past the page cache's dirty limit stall, and half the bytes take a fraction
    of the time), else `count` int64 starts then `count` int64 ends."""

    lo: int
    hi: int
    count: int
    arrays: Intervals | None = None
    path: str | None = None
    offset: int = 0
    packed: bool = False
    marks: np.ndarray | None = None  # packed (only then): the start of every BLOCK-th interval
    longest: int = 0  # packed: the longest interval's length

    @classmethod
    def of(cls, kind: str, proc: int, start: np.ndarray, end: np.ndarray) -> Piece:
        """A piece of the intervals: kept in memory, or, while a pass spills, written to a file
        of its folder (packed where the gaps and lengths fit 32 bits)."""
        lo, hi, n = int(start.min()), int(end.max()), len(start)
        folder = spill_folder()
        if folder is None:
            return cls(lo, hi, n, arrays=(start, end))
        start, end = by_start(start, end)
        gaps, lengths = np.diff(start, prepend=lo), end - start
        longest = int(lengths.max())
        packed = int(gaps.max()) <= _U32 and int(lengths.min()) >= 0 and longest <= _U32
        if packed:
            arrays = (gaps.astype(np.uint32), lengths.astype(np.uint32))
        else:
            arrays = (np.ascontiguousarray(start, np.int64), np.ascontiguousarray(end, np.int64))
        path = os.path.join(folder, f"{kind}-{proc}-{os.getpid()}.bin")
        offset = write_arrays(path, arrays)
        marks = start[::BLOCK].copy() if packed else None
        return cls(lo, hi, n, path=path, offset=offset, packed=packed, marks=marks,
                   longest=longest)  # fmt: skip

    def load(self, lo: int | None = None, hi: int | None = None) -> Intervals:
        """The intervals; of a packed file, with `lo` and `hi`, only the blocks of BLOCK that
        can hold one touching [lo, hi] (the rest may hold more)."""
        if self.arrays is not None:
            return self.arrays
        if self.marks is None:  # not packed: int64 starts, then ends
            both = np.fromfile(self.path or "", np.int64, 2 * self.count, offset=self.offset)
            return both[: self.count], both[self.count :]
        a, b = 0, len(self.marks)
        if lo is not None and hi is not None:
            # an interval that starts before lo - longest ends before lo
            a = max(int(np.searchsorted(self.marks, lo - self.longest, "left")) - 1, 0)
            b = int(np.searchsorted(self.marks, hi, "right"))
        r0, r1 = a * BLOCK, min(b * BLOCK, self.count)
        if r1 <= r0:
            return EMPTY
        read = partial(np.fromfile, self.path or "", np.uint32, r1 - r0)
        gaps = read(offset=self.offset + 4 * r0)
        lengths = read(offset=self.offset + 4 * (self.count + r0))
        start = np.cumsum(gaps, dtype=np.int64)
        start += int(self.marks[a]) - int(gaps[0])  # the block's first start is a mark
        return start, start + lengths


Pieces = dict[int, list[Piece]]


@dataclass
class TimelineParts:
    """Per process, the pieces of each kind; `None` runtime kinds: not gathered (the runtime
    pass regrouped calls recorded twice, so the idle split reads them itself). `folder`: the
    spill folder this object owns (close() removes it)."""

    busy: Pieces = field(default_factory=dict)
    launch: Pieces | None = field(default_factory=dict)
    sync: Pieces | None = field(default_factory=dict)
    folder: str | None = None

    def add(self, kind: str, index: StepIndex, proc: int, start, end) -> None:
        """Intervals (none ending before it starts) of one kind, kept where they touch a step."""
        start, end = by_start(start, end)
        keep = index.keeping(proc, start, end)
        if keep is None:
            self.put(kind, proc, start, end)
        elif keep.any():
            self.put(kind, proc, start[keep], end[keep])

    def put(self, kind: str, proc: int, start: np.ndarray, end: np.ndarray) -> None:
        """Keep the intervals as one more piece of `kind` of process `proc` (none: nothing)."""
        if len(start):
            getattr(self, kind).setdefault(proc, []).append(Piece.of(kind, proc, start, end))

    def merge(self, other: TimelineParts) -> None:
        """Add another range's pieces after these; a kind either did not gather stays not
        gathered (None)."""
        for kind in KINDS:
            mine, theirs = getattr(self, kind), getattr(other, kind)
            if mine is None or theirs is None:
                setattr(self, kind, None)
                continue
            for proc, pieces in theirs.items():
                mine.setdefault(proc, []).extend(pieces)

    @property
    def has_runtime(self) -> bool:
        """Whether the launch and sync calls were gathered (not left to the idle split)."""
        return self.launch is not None and self.sync is not None

    def intervals(self, kind: str, proc: int, lo: int, hi: int) -> Intervals:
        """The intervals of one kind of process `proc` that touch [lo, hi] (ends included),
        read from the pieces that reach into it only."""
        got = []
        for piece in (getattr(self, kind) or {}).get(proc, ()):
            if piece.lo <= hi and piece.hi >= lo:
                got.append(_touching(*piece.load(lo, hi), lo, hi, piece.packed))
        if not got:
            return EMPTY
        return np.concatenate([s for s, _ in got]), np.concatenate([e for _, e in got])

    def at(self, proc: int, lo: int, hi: int) -> Timeline:
        """Process `proc`'s timeline where it touches [lo, hi]: its GPU busy union, its launch
        calls' union, its sync calls by start. Inside [lo, hi] it equals the whole timeline."""
        return (union(*self.intervals("busy", proc, lo, hi)),
                union(*self.intervals("launch", proc, lo, hi)),
                by_start(*self.intervals("sync", proc, lo, hi)))  # fmt: skip

    def close(self) -> None:
        """Remove the spill folder this object owns, if any."""
        if self.folder:
            shutil.rmtree(self.folder, ignore_errors=True)
            self.folder = None


def _touching(s: np.ndarray, e: np.ndarray, lo: int, hi: int, packed: bool) -> Intervals:
    """The intervals [s, e] that touch [lo, hi]; `packed`: sorted by start and none ending
    before it starts (a packed piece), so those are the ones that start in [lo, hi], plus
    those before lo that end at or after it."""
    if not packed:
        keep = (e >= lo) & (s <= hi)
        return s[keep], e[keep]
    i, j = np.searchsorted(s, lo, "left"), np.searchsorted(s, hi, "right")
    head = np.flatnonzero(e[:i] >= lo)
    if len(head) == 0:
        return s[i:j], e[i:j]
    return np.concatenate((s[head], s[i:j])), np.concatenate((e[head], e[i:j]))


def by_start(start: np.ndarray, end: np.ndarray) -> Intervals:
    """The intervals in order of start (a stable sort), as given when they already are: the
    passes' pieces mostly come sorted."""
    if bool(np.all(start[1:] >= start[:-1])):
        return start, end
    order = np.argsort(start, kind="stable")
    return start[order], end[order]


def union(start: np.ndarray, end: np.ndarray) -> Intervals:
    """The union of [start, end) intervals as sorted, disjoint intervals (a zero-length one
    stays where nothing covers it)."""
    if not len(start):
        return EMPTY
    s, e = by_start(start, end)
    ordered = bool(np.all(e >= s))
    # none overlapping the next (touching it at most): each end is the furthest so far
    reach = e if ordered and bool(np.all(s[1:] >= e[:-1])) else np.maximum.accumulate(e)
    new = np.ones(len(s), bool)
    new[1:] = s[1:] > reach[:-1]
    if ordered and bool(new.all()):  # already disjoint: no copies
        return s, e
    firsts = np.flatnonzero(new)
    lasts = np.append(firsts[1:] - 1, len(s) - 1)
    return s[firsts], reach[lasts]

"""Phases inside steps: NVTX ranges (any domain, push/pop or start/end) whose text matches the
phases regex and that start inside a step of the same process, cut into segments.

Each step is partitioned into consecutive segments, each owned by one phase occurrence or by
nobody (the step's OUTSIDE_PHASES remainder): at every instant the latest-started phase that
covers it owns it, so overlapping phases go to the later one. The segments are then read exactly
like steps (GPU work belongs to the segment its launching API call starts in), so the phases and
the remainder of a step add up to the step.

The segments are columns (Segments); a step whose phases do not overlap is cut with array
operations, one whose phases overlap (rare) by the rule above, elementary interval by interval.
"""

from __future__ import annotations

import itertools
import sqlite3
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import NamedTuple, overload

import numpy as np

from census.definitions import OUTSIDE_PHASES
from census.load.intervals import unique
from census.load.steps import StepRange, matching_ranges
from census.sources import schema as sc

OVERLAP_WARNING = (
    "phase ranges overlap inside a step: the overlap counts in the later-started phase"
)


class Segment(NamedTuple):
    """One phase segment: a stretch of one step owned by one phase (or by none:
    OUTSIDE_PHASES)."""

    idx: int  # position in the segment index
    step: int  # the StepRange.idx it belongs to
    name: str  # the phase's NVTX text, or OUTSIDE_PHASES
    proc: int
    start_ns: int
    end_ns: int


@dataclass(frozen=True, eq=False)
class Segments(Sequence[Segment]):
    """Segments as columns; `code` indexes `names` (names[0] is OUTSIDE_PHASES). Read as a
    sequence, it gives one Segment at a time."""

    idx: np.ndarray
    step: np.ndarray
    code: np.ndarray
    names: tuple[str, ...]
    proc: np.ndarray
    start_ns: np.ndarray
    end_ns: np.ndarray

    @classmethod
    def of(cls, segments: Iterable[Segment]) -> Segments:
        """Segments from Segment objects (or Segments, returned as they are)."""
        if isinstance(segments, Segments):
            return segments
        rows = list(segments)
        codes = {OUTSIDE_PHASES: 0}
        code = [codes.setdefault(g.name, len(codes)) for g in rows]

        def column(k: int) -> np.ndarray:
            return np.array([g[k] for g in rows], np.int64)

        return cls(column(0), column(1), np.array(code, np.int64), tuple(codes), column(3),
                   column(4), column(5))  # fmt: skip

    def __len__(self) -> int:
        return len(self.idx)

    @overload
    def __getitem__(self, i: int) -> Segment: ...
    @overload
    def __getitem__(self, i: slice) -> Sequence[Segment]: ...
    def __getitem__(self, i):
        if isinstance(i, slice):
            return [self[k] for k in range(*i.indices(len(self)))]
        if not -len(self) <= i < len(self):
            raise IndexError(i)
        return Segment(int(self.idx[i]), int(self.step[i]), self.names[int(self.code[i])],
                       int(self.proc[i]), int(self.start_ns[i]), int(self.end_ns[i]))  # fmt: skip

    def duration_ns(self) -> list[int]:
        """Each segment's end - start, exactly (Python ints)."""
        return [e - s for s, e in zip(self.start_ns.tolist(), self.end_ns.tolist(), strict=True)]


NO_SEGMENTS = Segments.of(())


def read_segments(
    conn: sqlite3.Connection, schema: sc.Schema, phases_regex: str, steps: list[StepRange]
) -> tuple[Segments, list[str]]:
    """The segments of every step, or none when no phase range lies inside any step."""
    rows = matching_ranges(conn, schema, phases_regex, table="phase_texts", option="--phases")
    phases = [(proc, start, end, name) for name, start, end, proc, _ in rows
              if start is not None and end is not None and proc is not None and end >= start]  # fmt: skip
    return cut(steps, phases)


def cut(
    steps: Sequence[StepRange], phases: Sequence[tuple[int, int, int, str]]
) -> tuple[Segments, list[str]]:
    """The steps cut into segments by phases (proc, start, end, name), given by start: a phase
    belongs to each step of its process that it starts in (ends included), cut at its end."""
    names = {OUTSIDE_PHASES: 0}
    code = np.array([names.setdefault(p[3], len(names)) for p in phases], np.int64)
    ph = [np.array([p[k] for p in phases], np.int64) for k in range(3)]
    st = [np.array([getattr(s, k) for s in steps], np.int64)
          for k in ("idx", "proc", "start_ns", "end_ns")]  # fmt: skip
    m, j = _inside(st[1], st[2], st[3], ph[0], ph[1])
    if not len(m):
        return NO_SEGMENTS, []
    start, end = ph[1][j], np.minimum(ph[2][j], st[3][m])
    crossed = (m[1:] == m[:-1]) & (start[1:] < end[:-1])  # a phase starts before the last ends
    slow = np.zeros(len(steps), bool)
    slow[m[1:][crossed]] = True
    fast = ~slow[m] & (end > start)  # phases of length 0 own nothing
    parts = [_disjoint(m[fast], start[fast], end[fast], code[j][fast], st, slow)]
    for k in np.flatnonzero(slow).tolist():
        mine = np.flatnonzero(m == k)
        cuts = _partition(steps[k], list(zip(start[mine].tolist(), end[mine].tolist(),
                                             code[j][mine].tolist(), strict=True)))  # fmt: skip
        owned = np.array(cuts, np.int64).reshape(-1, 3)
        parts.append((np.full(len(owned), k), owned[:, 0], owned[:, 1], owned[:, 2]))
    seg_m, seg_code, seg_start, seg_end = (np.concatenate(c) for c in zip(*parts, strict=True))
    order = np.lexsort((seg_start, seg_m))  # by step, then in time (disjoint, but for length 0)
    seg_m = seg_m[order]
    segments = Segments(np.arange(len(order)), st[0][seg_m], seg_code[order], tuple(names),
                        st[1][seg_m], seg_start[order], seg_end[order])  # fmt: skip
    return segments, [OVERLAP_WARNING] if slow.any() else []


def _inside(proc, start, end, ph_proc, ph_start) -> tuple[np.ndarray, np.ndarray]:
    """Every (step, phase) pair, by step and then phase, whose phase starts in the step (ends
    included) on the same process: step positions and phase rows."""
    order = np.argsort(ph_proc, kind="stable")  # by process, each in start order
    lo = np.zeros(len(proc), np.int64)
    hi = np.zeros(len(proc), np.int64)
    procs = ph_proc[order]
    for p in unique(proc).tolist():
        a, b = np.searchsorted(procs, p, "left"), np.searchsorted(procs, p, "right")
        starts = ph_start[order[a:b]]
        mine = proc == p
        lo[mine] = a + np.searchsorted(starts, start[mine], "left")
        hi[mine] = a + np.searchsorted(starts, end[mine], "right")
    count = hi - lo
    m = np.repeat(np.arange(len(proc)), count)
    first = np.cumsum(count) - count
    return m, order[np.arange(len(m)) - np.repeat(first, count) + np.repeat(lo, count)]


def _disjoint(m, start, end, code, st, slow) -> tuple[np.ndarray, ...]:
    """(step position, code, start, end) of the segments of the steps not `slow`, from their
    phases of some length, disjoint and by start: each phase, the gap before it, and the rest
    of the step after the last (the whole step, of any length, when it has none)."""
    step_start, step_end = st[2], st[3]
    new_step = np.ones(len(m), bool)
    new_step[1:] = m[1:] != m[:-1]
    before = step_start[m]
    before[~new_step] = end[:-1][~new_step[1:]]  # the previous phase's end, in the same step
    gap = start > before
    last = np.append(new_step[1:], True)[: len(m)]  # each step's last phase
    last_end = step_start.copy()
    last_end[m[last]] = end[last]
    has = np.zeros(len(step_start), bool)
    has[m] = True
    rest = ~slow & (~has | (step_end > last_end))
    rest_start = np.where(has, last_end, step_start)[rest]
    zero = np.zeros(int(gap.sum()) + int(rest.sum()), np.int64)
    return (np.concatenate([m[gap], m, np.flatnonzero(rest)]),
            np.concatenate([zero[: int(gap.sum())], code, zero[int(gap.sum()):]]),
            np.concatenate([before[gap], start, rest_start]),
            np.concatenate([start[gap], end, step_end[rest]]))  # fmt: skip


def _partition(st: StepRange, phases: list[tuple[int, int, int]]) -> list[tuple[int, int, int]]:
    """(owner's code, start, end) covering [step start, step end]: the latest-started phase
    (start, end, code) covering each elementary interval owns it, else OUTSIDE_PHASES (code 0);
    neighbours with one owner merge."""
    cuts = sorted({st.start_ns, st.end_ns, *(t for s, e, _ in phases for t in (s, e))})
    out: list[tuple[int, int, int, int]] = []  # (occurrence or -1, code, start, end)
    for a, b in itertools.pairwise(cuts):
        owner = -1
        for i, (s, e, _) in enumerate(phases):  # phases are in start order: the last one wins
            if s <= a and e >= b:
                owner = i
        if out and out[-1][0] == owner:
            out[-1] = (owner, out[-1][1], out[-1][2], b)
        else:
            out.append((owner, 0 if owner < 0 else phases[owner][2], a, b))
    if not out:  # a step of zero length
        return [(0, st.start_ns, st.end_ns)]
    return [(code, a, b) for _, code, a, b in out]

"""Phases inside steps: NVTX ranges (any domain, push/pop or start/end) whose text matches the
phases regex and that start inside a step of the same process, cut into segments.

Each step is partitioned into consecutive segments, each owned by one phase occurrence or by
nobody (the step's OUTSIDE_PHASES remainder): at every instant the latest-started phase that
covers it owns it, so overlapping phases go to the later one. The segments are then read exactly
like steps (GPU work belongs to the segment its launching API call starts in), so the phases and
the remainder of a step add up to the step.
"""

from __future__ import annotations

import bisect
import itertools
import sqlite3
from dataclasses import dataclass

from census.definitions import OUTSIDE_PHASES
from census.load.steps import StepRange, matching_ranges
from census.sources import schema as sc


@dataclass(frozen=True)
class Segment:
    idx: int  # position in the segment index
    step: int  # the StepRange.idx it belongs to
    name: str  # the phase's NVTX text, or OUTSIDE_PHASES
    proc: int
    start_ns: int
    end_ns: int


def read_segments(
    conn: sqlite3.Connection, schema: sc.Schema, phases_regex: str, steps: list[StepRange]
) -> tuple[list[Segment], list[str]]:
    """The segments of every step, or none when no phase range lies inside any step."""
    rows = matching_ranges(conn, schema, phases_regex, table="phase_texts", option="--phases")
    by_proc: dict[int, list[tuple[int, int, str]]] = {}
    for name, start, end, proc, _ in rows:
        if start is not None and end is not None and proc is not None and end >= start:
            by_proc.setdefault(proc, []).append((start, end, name))
    starts = {p: [r[0] for r in v] for p, v in by_proc.items()}
    inside: list[list[tuple[int, int, str]]] = []
    for st in steps:
        ranges = by_proc.get(st.proc, [])
        lo = bisect.bisect_left(starts.get(st.proc, []), st.start_ns)
        hi = bisect.bisect_right(starts.get(st.proc, []), st.end_ns)
        inside.append([(s, min(e, st.end_ns), n) for s, e, n in ranges[lo:hi]])
    if not any(inside):
        return [], []
    segments: list[Segment] = []
    overlap = False
    for st, phases in zip(steps, inside, strict=True):
        overlap = overlap or any(b[0] < a[1] for a, b in itertools.pairwise(phases))
        for name, start, end in _partition(st, phases):
            segments.append(Segment(len(segments), st.idx, name, st.proc, start, end))
    warnings = []
    if overlap:
        warnings.append(
            "phase ranges overlap inside a step: the overlap counts in the later-started phase"
        )
    return segments, warnings


def _partition(st: StepRange, phases: list[tuple[int, int, str]]) -> list[tuple[str, int, int]]:
    """(owner, start, end) covering [step start, step end]: the latest-started phase covering
    each elementary interval owns it, else OUTSIDE_PHASES; neighbours with one owner merge."""
    cuts = sorted({st.start_ns, st.end_ns, *(t for s, e, _ in phases for t in (s, e))})
    out: list[tuple[int, str, int, int]] = []  # (occurrence or -1, owner, start, end)
    for a, b in itertools.pairwise(cuts):
        owner = -1
        for i, (s, e, _) in enumerate(phases):  # phases are in start order: the last one wins
            if s <= a and e >= b:
                owner = i
        if out and out[-1][0] == owner:
            out[-1] = (owner, out[-1][1], out[-1][2], b)
        else:
            out.append((owner, OUTSIDE_PHASES if owner < 0 else phases[owner][2], a, b))
    if not out:  # a step of zero length
        return [(OUTSIDE_PHASES, st.start_ns, st.end_ns)]
    return [(name, a, b) for _, name, a, b in out]

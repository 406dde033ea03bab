"""The kernel ranges' results, read in parallel, merged into one in rowid order, each range
boundary fixed up (census.load.accumulators: the merge of the map-reduce).

Counts and sums add (PartResult.merge). Unions need one correction at each boundary: range B starts no earlier
than range A ends its starts, so A's union covers everything from B's first start up to A's
running maximum end M. Hence U(A ∪ B) = U(A) + U(B) − |U(B) ∩ (−∞, M)|, per partition, and
only B's first kernels (those starting before M) are read again to measure the overlap.
The same holds for busy time, per process and clipped to each step. The earliest start and
latest end of the GPU work launched in each step (its GPU span) fold as min and max.
"""

from __future__ import annotations

import sqlite3

import numpy as np

from census.load.intervals import Members, no_members
from census.load.kernels import (
    STRADDLING,
    GpuContext,
    Part,
    PartReader,
    PartResult,
    kernel_columns,
)
from census.sources import schema as sc
from census.sqlite import RowidRange, read_batches

HEAD_BATCH_ROWS = 4096


def merge_ranges(
    conn: sqlite3.Connection, ctx: GpuContext, parts: list[Part], results: list[PartResult]
) -> PartResult:
    """One result of the ranges' results, merged in order, each boundary fixed up first; each
    range's result is dropped once merged (its columns, mapped from the file it came in, are
    released one range at a time)."""
    total = results[0]
    for i in range(1, len(results)):
        res, results[i] = results[i], None
        _remove_overlap(conn, ctx, total, parts[i], res)
        total.merge(res)
    return total


def _remove_overlap(
    conn: sqlite3.Connection, ctx: GpuContext, before: PartResult, part: Part, res: PartResult
) -> None:
    """Take away from `res` what its range's head adds to the unions and busy time that the
    ranges before it (`before`) already cover: the boundary fix-up of the Straddling
    accumulators."""
    reach = max(getattr(before, name).reach() for name in STRADDLING)
    if part.after_ns is None or reach <= part.after_ns:
        return  # nothing earlier reaches into this range
    heads = _head(conn, ctx, part, reach)
    assert heads.keys() == set(STRADDLING), "every straddling accumulator needs its head"
    for name, head in heads.items():
        getattr(res, name).take_overlap(head, getattr(before, name), ctx.steps)


def _head(conn: sqlite3.Connection, ctx: GpuContext, part: Part, reach: int) -> dict:
    """What the range's intervals that start before `reach` add to each Straddling
    accumulator: its field's name -> the Members."""
    reader = PartReader(conn, ctx)  # its aggregates are thrown away: only members are kept
    unions: list[Members] = []
    busy: list[Members] = []
    rows = part.rows or RowidRange(0, 0)
    for b, _ in read_batches(conn, sc.KERNEL, kernel_columns(ctx), rows, "", HEAD_BATCH_ROWS):
        latest, u, k = reader.add_kernels(b, part)
        unions += u
        busy.append(k)
        if latest is not None and latest >= reach:
            break
    end = reach if part.before_ns is None else min(reach, part.before_ns)
    busy.append((ctx.memory_busy or no_members()).window(part.after_ns, end))
    return {"unions": _concat(unions), "busy": _concat(busy)}


def _concat(members: list[Members]) -> Members:
    """Members of several batches; codes are re-keyed so one decoder serves them all."""
    keys: dict[tuple, int] = {}
    code_parts, starts, ends = [], [], []
    for m in members:
        if not len(m.code):
            continue
        uniq, inverse = np.unique(m.code, return_inverse=True)
        mapped = np.array([keys.setdefault(m.key(c), len(keys)) for c in uniq.tolist()])
        code_parts.append(mapped[inverse].astype(np.int64))
        starts.append(m.start)
        ends.append(m.end)
    decode = list(keys)
    if not code_parts:
        empty = np.zeros(0, np.int64)
        return Members(empty, empty, empty, decode.__getitem__)
    return Members(
        np.concatenate(code_parts), np.concatenate(starts), np.concatenate(ends), decode.__getitem__
    )

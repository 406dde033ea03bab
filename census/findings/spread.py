"""The spread over ranks: each key's per-step means over a rank folder's ranks, smallest,
median and largest, and which ranks (census.sources.ranks reads them; census.load.finish
merges them into one Census)."""

from __future__ import annotations

import statistics
from dataclasses import dataclass

from census.metrics import GPU_BUSY_NS, NCCL_KERNEL_TIME_NS, NON_NCCL_UNION_NS, STEP_TIME_NS
from census.model.census import Census

# What the spread over ranks is shown for (per-step means per rank).
SPREAD_KEYS = (STEP_TIME_NS, GPU_BUSY_NS, NCCL_KERNEL_TIME_NS, NON_NCCL_UNION_NS)


@dataclass(frozen=True)
class Spread:
    """One key's per-step means over ranks: smallest, median and largest, and the labels of the
    ranks with the smallest and largest."""

    min: float
    median: float
    max: float
    min_rank: str
    max_rank: str


def rank_spread(labels: list[str], ranks: list[Census]) -> dict[str, Spread]:
    """Per-step means per rank (whole capture without steps): min / median / max over ranks."""
    out: dict[str, Spread] = {}
    for key in SPREAD_KEYS:
        values = []
        for label, c in zip(labels, ranks, strict=True):
            per = {**(c.per_step() or c.totals.as_dict()), **(c.per_step_timing() or {})}
            if key in per and per[key] is not None:
                values.append((float(per[key]), label))
        if values:
            lo, hi = min(values), max(values)
            out[key] = Spread(lo[0], statistics.median(v for v, _ in values), hi[0], lo[1], hi[1])
    return out

"""A diff's NCCL change per rank (#46): each rank's NCCL time change split into wait and transfer,
naming the rank it waited for, e.g. "rank 1's NCCL time +15.52 ms is waiting for rank 0 (wait
+15.74 ms, transfer -218.8 µs)". Ranks are paired by position; both sides must hold as many
ranks, matched (on one host)."""

from __future__ import annotations

from census.compare.diff import CensusDiff
from census.findings.nccl_ranks import NcclRanks, split_ranks
from census.units import fmt_ns

TOP_RANKS = 3  # the ranks whose NCCL time changed most are said; the rest counted


def rank_nccl_sentences(d: CensusDiff, unit: str) -> list[tuple[float, str]]:
    """(weight, sentence) for the ranks whose NCCL time changed most."""
    a, b = split_ranks(d.a), split_ranks(d.b)
    if a is None or b is None or len(a.ranks) != len(b.ranks) or not (a.matched and b.matched):
        return []
    changes = []
    for r in range(len(a.ranks)):
        fa, fb = _figures(a, r, d.per_step), _figures(b, r, d.per_step)
        delta = fb[0] - fa[0]
        if delta:
            changes.append((delta, r, fb[1] - fa[1], fb[2] - fa[2]))
    changes.sort(key=lambda c: (-abs(c[0]), c[1]))
    out = [(delta, _sentence(a, b, r, delta, wait, transfer, unit))
           for delta, r, wait, transfer in changes[:TOP_RANKS]]  # fmt: skip
    rest = changes[TOP_RANKS:]
    if rest:
        out.append((0.0, f"NCCL time changed on {len(rest)} other rank(s), by "
                         f"{fmt_ns(max(abs(c[0]) for c in rest))}{unit} at most"))  # fmt: skip
    return out


def _figures(ranks: NcclRanks, r: int, per_step: bool) -> tuple[float, float, float]:
    """Rank r's (NCCL time, wait, transfer): per step (means over its steps) or in all."""
    means = ranks.rank_means(r) if per_step else None
    if means is not None:
        return means["nccl_time_ns"], means["wait_ns"], means["transfer_ns"]
    row = ranks.ranks[r]
    return row.nccl_time_ns, row.wait_ns or 0, row.transfer_ns or 0


def _sentence(a: NcclRanks, b: NcclRanks, r: int, delta: float, wait: float, transfer: float,
              unit: str) -> str:  # fmt: skip
    label = b.ranks[r].label
    split = (f"(wait {fmt_ns(wait, signed=True)}{unit}, transfer "
             f"{fmt_ns(transfer, signed=True)}{unit})")  # fmt: skip
    head = f"{label}'s NCCL time {fmt_ns(delta, signed=True)}{unit}"
    if abs(wait) < abs(transfer):
        return f"{head} is transfer, not waiting {split}"
    side = b if wait > 0 else a  # whom it waits for now, or waited for before
    row = side.waited_for[r].tolist()
    whom = max(range(len(row)), key=lambda s: (row[s], -s))
    if not row[whom]:
        return f"{head} is {'more' if wait > 0 else 'less'} waiting {split}"
    verb = "is waiting for" if wait > 0 else "is less waiting for"
    return f"{head} {verb} {side.ranks[whom].label} {split}"

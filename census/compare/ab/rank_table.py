"""The ranks of an experiment's arms, one row a rank over the measured arms, grouped by host.

An arm of several ranks keeps each rank's own figures (census.model.ab.RankRecord); the arm's step
is the slowest rank's (census.capture.arms). Over the measured arms of each side, per rank:

- `median_ns`: the median of the rank's arm medians (each on its own host's clock: durations
  are compared between ranks, never one host's absolute times with another's);
- `slowest_arms`: in how many measured arms this rank's median was the highest, strictly (an arm
  where two ranks tie for the highest counts for neither); per host, the arms where the ranks
  with the highest median all ran on it (slowest_hosts);
- `recompiles`, `graph_breaks`: the sum over the arms (None when any arm's is None: torch._dynamo
  was not loaded there); `peak_allocated_bytes`, `peak_reserved_bytes`: the highest;
- `counts`: per census.count name, the lowest and highest per-arm total of this rank.

Its place (host, local rank, node, GPU) is the first measured arm's. Ranks are ordered by host
(in the order of their lowest rank), then rank.
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from dataclasses import dataclass

from census.model.ab import Arm, RankRecord
from census.units import fmt_count


@dataclass(frozen=True)
class RankSide:
    """One rank over the measured arms of one side (the module's figures)."""

    arms: int
    median_ns: float
    slowest_arms: int
    recompiles: int | None
    graph_breaks: int | None
    peak_allocated_bytes: int | None
    peak_reserved_bytes: int | None
    counts: dict[str, tuple[int, int]]  # name -> (lowest, highest) per-arm total


@dataclass(frozen=True)
class RankRow:
    """One rank over the measured arms (module docstring): its place in the job and its figures on
    each side."""

    rank: int
    host: str | None
    local_rank: int | None
    node: int | None
    gpu_index: int | None
    gpu_uuid: str | None
    a: RankSide | None  # None: no measured arm of that side had this rank
    b: RankSide | None


def _measured(arms: Sequence[Arm], side: str) -> list[Arm]:
    return [a for a in arms if a.side == side and not a.discarded and a.ranks]


def rank_rows(arms: Sequence[Arm]) -> tuple[RankRow, ...]:
    """One row a rank that a measured arm of several ranks recorded; () without such arms."""
    sides = {s: _measured(arms, s) for s in ("a", "b")}
    first: dict[int, RankRecord] = {}
    for arm in sides["a"] + sides["b"]:
        for r in arm.ranks:
            first.setdefault(r.rank, r)
    rows = [RankRow(rank, r.host, r.local_rank, r.node, r.gpu_index, r.gpu_uuid,
                    _side(sides["a"], rank), _side(sides["b"], rank))
            for rank, r in first.items()]  # fmt: skip
    order = host_order(rows)
    return tuple(sorted(rows, key=lambda row: (order[row.host], row.rank)))


def host_order(rows: Sequence[RankRow]) -> dict[str | None, int]:
    """Each host's place: in the order of its lowest rank."""
    lowest: dict[str | None, int] = {}
    for row in rows:
        lowest[row.host] = min(lowest.get(row.host, row.rank), row.rank)
    return {host: i for i, host in enumerate(sorted(lowest, key=lowest.__getitem__))}


def _side(arms: list[Arm], rank: int) -> RankSide | None:
    held = [(arm, r) for arm in arms for r in arm.ranks if r.rank == rank]
    if not held:
        return None
    names = dict.fromkeys(n for arm, _ in held for n in arm.counts)
    counts = {}
    for name in names:
        totals = [_count(arm, name, rank) for arm, _ in held]
        counts[name] = (min(totals), max(totals))
    recompiles = [r.recompiles for _, r in held]
    breaks = [r.graph_breaks for _, r in held]
    return RankSide(
        arms=len(held),
        median_ns=float(statistics.median(r.median_ns for _, r in held)),
        slowest_arms=sum(slowest_rank(arm) == rank for arm, _ in held),
        recompiles=None if None in recompiles else sum(recompiles),  # type: ignore[arg-type]
        graph_breaks=None if None in breaks else sum(breaks),  # type: ignore[arg-type]
        peak_allocated_bytes=_highest(r.peak_allocated_bytes for _, r in held),
        peak_reserved_bytes=_highest(r.peak_reserved_bytes for _, r in held),
        counts=counts,
    )


def _count(arm: Arm, name: str, rank: int) -> int:
    per_rank = arm.counts.get(name, ())
    return per_rank[rank] if rank < len(per_rank) else 0


def _highest(values) -> int | None:
    found = [v for v in values if v is not None]
    return max(found) if found else None


def slowest_rank(arm: Arm) -> int | None:
    """The rank whose median step time is the arm's highest, strictly; None on a tie or
    without ranks."""
    if not arm.ranks:
        return None
    top = max(r.median_ns for r in arm.ranks)
    at_top = [r.rank for r in arm.ranks if r.median_ns == top]
    return at_top[0] if len(at_top) == 1 else None


def slowest_host(arm: Arm) -> tuple[bool, str | None]:
    """(found, host): the host of the ranks whose median step time is the arm's highest, when
    they all ran on one host; (False, None) when ranks of several hosts tie, or without ranks."""
    if not arm.ranks:
        return False, None
    top = max(r.median_ns for r in arm.ranks)
    hosts = {r.host for r in arm.ranks if r.median_ns == top}
    return (True, hosts.pop()) if len(hosts) == 1 else (False, None)


def slowest_hosts(arms: Sequence[Arm], side: str) -> tuple[dict[str | None, int], int]:
    """Per host, in how many measured arms of `side` its ranks were the slowest (slowest_host),
    most first; and the arms where ranks of several hosts tied."""
    counts: dict[str | None, int] = {}
    tied = 0
    for arm in _measured(arms, side):
        found, host = slowest_host(arm)
        if not found:
            tied += 1
            continue
        counts[host] = counts.get(host, 0) + 1
    return dict(sorted(counts.items(), key=lambda kv: -kv[1])), tied


def hosts_of(rows: Sequence[RankRow]) -> list[str | None]:
    """The hosts of `rows`, in the order of their lowest rank (host_order)."""
    order = host_order(rows)
    return sorted(order, key=order.__getitem__)


def rank_sentences(arms: Sequence[Arm], labels: tuple[str, str]) -> list[str]:
    """What the ranks say: recompilations on every rank, where the slowest rank ran, that each
    host timed its own ranks, and the launchers' disagreements; [] for single-process arms."""
    rows = rank_rows(arms)
    if not rows:
        return []
    hosts = hosts_of(rows)
    where = f"{len(rows)} ranks ({len(hosts)} host{'s' * (len(hosts) > 1)})"
    out = [_recompile_sentence(rows, where, labels)]
    for side, label in zip(("a", "b"), labels, strict=True):
        by_host, tied = slowest_hosts(arms, side)
        measured = len(_measured(arms, side))
        if not measured or len(hosts) < 2:
            continue
        if not by_host:
            out.append(f"{label}: ranks of several hosts tied for the slowest in every measured "
                       f"arm ({measured})")  # fmt: skip
            continue
        listed = ", ".join(f"{host or 'an unnamed host'} in {n}" for host, n in by_host.items())
        ties = f"; ranks of several hosts tied in {tied}" if tied else ""
        out.append(f"{label}: the slowest ranks of each measured arm ran on {listed} of "
                   f"{measured}{ties} (an arm's step is its slowest rank's)")  # fmt: skip
    if len(hosts) > 1:
        out.append("each rank timed its steps on its own host's clock: census compares their "
                   "durations, never one host's absolute times with another's")  # fmt: skip
    notes = dict.fromkeys(r.launcher_note for a in arms for r in a.ranks if r.launcher_note)
    out += [f"launchers disagree: {note}" for note in notes]
    return out


def _recompile_sentence(rows: Sequence[RankRow], where: str, labels: tuple[str, str]) -> str:
    sides = [(label, [(row, getattr(row, s)) for row in rows if getattr(row, s)])
             for s, label in zip(("a", "b"), labels, strict=True)]  # fmt: skip
    unknown = [f"{label} rank {row.rank}" for label, held in sides for row, side in held
               if side.recompiles is None]  # fmt: skip
    if unknown and len(unknown) == sum(len(held) for _, held in sides):
        return "recompilations not counted: torch._dynamo was not loaded on any rank"
    if unknown:
        return (f"recompilations not counted on {', '.join(unknown[:8])}"
                f"{' and more' if len(unknown) > 8 else ''} (torch._dynamo not loaded there)")  # fmt: skip
    some = [f"{label} rank {row.rank} ({row.host}) {fmt_count(side.recompiles or 0)}"
            for label, held in sides for row, side in held if side.recompiles]  # fmt: skip
    if not some:
        return f"zero recompilations on all {where} in every measured arm"
    return (f"recompilations inside measured windows (frames compiled, summed over the arms): "
            f"{', '.join(some[:8])}{' and more' if len(some) > 8 else ''}")  # fmt: skip

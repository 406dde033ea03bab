"""What the uncaptured arms say beyond the step times' verdict: their tail steps, each traced to
the phase that grew; the paired differences of what census.record stored (the loss); and whether
census.count's counters agree between the arms of a side.

- **Tails**: within each measured arm, a step slower than the captures' tail threshold
  (census.findings.tails.tail_threshold: median + 3 × 1.4826 × MAD or 1.5 × median, the lower)
  of that arm's own steps. Its phase is the census.phase whose time in that step exceeds the
  arm's median of that phase by the most; the other phases' excesses are kept, so that "forward
  grew while backward and optimizer stayed near their medians" can be said.
- **Record parity**: for each name given to census.record, the largest |B − A| between the values
  at the same step index of the two arms of an AB/BA pair (census.compare.ab.stats pairs), over all
  pairs and the steps both arms recorded. Comparing step i with step i is only meaningful when
  both sides start from the same seed and data order: that is the user's job, and said.
- **Counters**: census.count's totals per rank must be equal across the measured arms of a side
  (a region that should stay eager, or run N times a step); a counter that differs is a warning
  naming the arms.
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass

from census.compare.ab.stats import Pair
from census.findings.tails import median_mad, tail_threshold
from census.model.ab import Arm


@dataclass(frozen=True)
class ArmTail:
    """A tail step of one measured arm (module docstring): which arm and step, its time, the arm's
    median and tail threshold, and the phase that grew most against the arm's median of it, with
    every phase's excess."""

    arm_index: int
    side: str
    step: int  # position among the arm's measured steps
    step_time_ns: int
    median_ns: float  # the arm's median step time
    threshold_ns: float
    phase: str | None  # the phase that grew most against the arm's median of it
    phase_delta_ns: float | None
    # every phase's time in this step minus the arm's median of that phase
    phase_deltas_ns: tuple[tuple[str, float], ...] = ()

    @property
    def excess_ns(self) -> float:
        """The step's time above its arm's median (ns)."""
        return self.step_time_ns - self.median_ns


def arm_tails(arms: list[Arm] | tuple[Arm, ...]) -> tuple[ArmTail, ...]:
    """The tail steps of every measured arm, in run order then step order."""
    out: list[ArmTail] = []
    for arm in arms:
        if not arm.discarded:
            out.extend(_tails_of(arm))
    return tuple(out)


def _tails_of(arm: Arm) -> list[ArmTail]:
    times = arm.step_time_ns
    median, mad = median_mad(times)
    threshold = tail_threshold(median, mad)
    typical = {n: statistics.median(ts) for n, ts in arm.phase_time_ns.items()}
    out = []
    for i, t in enumerate(times):
        if t <= threshold:
            continue
        grew = sorted(((arm.phase_time_ns[n][i] - m, n) for n, m in typical.items()), reverse=True)
        delta, phase = grew[0] if grew else (None, None)
        out.append(ArmTail(arm.index, arm.side, i, t, median, threshold, phase, delta,
                           tuple((n, d) for d, n in grew)))  # fmt: skip
    return out


@dataclass(frozen=True)
class Parity:
    """The largest paired difference of one recorded name between A and B arms."""

    name: str
    max_abs_diff: float
    a_index: int  # the pair (arm indices) and the step where it is largest
    b_index: int
    step: int
    pairs: int  # pairs where both arms recorded the name at some common step
    steps_compared: int


def record_parity(arms: list[Arm] | tuple[Arm, ...], pairs: tuple[Pair, ...]) -> dict[str, Parity]:
    """Per census.record name, the largest |B − A| at the same step index over paired arms; a
    name no pair recorded at a common step is left out."""
    by_index = {a.index: a for a in arms}
    names = list(dict.fromkeys(n for a in arms if not a.discarded for n in a.values))
    out = {}
    for name in names:
        best, used, compared = None, 0, 0
        for p in pairs:
            diffs = _paired(by_index[p.a_index], by_index[p.b_index], name)
            used += bool(diffs)
            compared += len(diffs)
            top = max(diffs, key=lambda d: (d[0], -d[1]), default=None)  # ties: the first step
            if top is not None and (best is None or top[0] > best[0]):
                best = (top[0], p.a_index, p.b_index, top[1])
        if best is not None:
            out[name] = Parity(name, best[0], best[1], best[2], best[3], used, compared)
    return out


def _paired(a: Arm, b: Arm, name: str) -> list[tuple[float, int]]:
    """(|B − A|, step) at every step index both arms recorded `name` at."""
    va, vb = a.values.get(name, ()), b.values.get(name, ())
    both = enumerate(zip(va, vb, strict=False))  # the shorter arm's steps
    return [(abs(y - x), i) for i, (x, y) in both if x is not None and y is not None]


def count_warnings(arms: list[Arm] | tuple[Arm, ...], labels: tuple[str, str]) -> list[str]:
    """One warning per (side, counter) whose per-rank totals differ between measured arms of
    that side (a counter an arm never counted counts 0)."""
    out = []
    for side, label in zip(("a", "b"), labels, strict=True):
        measured = [a for a in arms if a.side == side and not a.discarded]
        names = list(dict.fromkeys(n for a in measured for n in a.counts))
        for name in names:
            seen: dict[tuple[int, ...], list[int]] = {}
            for arm in measured:
                seen.setdefault(arm.counts.get(name, (0,)), []).append(arm.index)
            if len(seen) > 1:
                listed = "; ".join(f"{_totals(k)} in arm{'s' if len(v) > 1 else ''} "
                                   f"{', '.join(map(str, v))}" for k, v in seen.items())  # fmt: skip
                out.append(f"census.count({name!r}) differs between the arms of {label}: {listed}")
    return out


def _totals(per_rank: tuple[int, ...]) -> str:
    if len(per_rank) == 1:
        return f"{per_rank[0]:,}"
    return "ranks " + "/".join(f"{c:,}" for c in per_rank)

"""An A/B experiment: the arms' statistics (the verdict) and the census diff of its captures (the
reasons), explained in that order. The step-time headline comes from the uncaptured arms only;
the captures contribute the deterministic counters and, qualified, their own step times.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import NamedTuple

from census.compare.diff import CensusDiff
from census.compare.explain import explain_diff
from census.compare.stats import ABStats
from census.model import Arm
from census.units import fmt_ns, fmt_pct


@dataclass(frozen=True)
class Experiment:
    labels: tuple[str, str]
    commands: dict[str, list[str]]
    arms: tuple[Arm, ...]  # run order, the discarded warm arm first
    stats: ABStats
    diff: CensusDiff | None = None  # of the two captures
    capture_note: str | None = None  # why there are no captures
    wall_s: float | None = None

    @property
    def order(self) -> list[str]:
        return [a.side for a in self.arms]


def verdict_sentence(st: ABStats, labels: tuple[str, str]) -> str:
    """The headline: what the uncaptured arms can support, and no more."""
    la, lb = labels
    lo, hi = st.ci95_ns
    n = len(st.pairs)
    arms = st.a.arms + st.b.arms
    if st.delta_median_ns == 0 and st.residual_sd_ns == 0:
        return (f"no difference between {la} and {lb}: every arm's median step time is the same "
                f"({fmt_ns(st.a.median_of_arm_medians_ns)}) over {arms} uncaptured arms")  # fmt: skip
    ci = f"95% CI {fmt_ns(lo, signed=True)} to {fmt_ns(hi, signed=True)}"
    if st.residual_sd_ns == 0:  # no arm-to-arm spread: the interval is the delta itself
        ci = "exact: no spread between arms"
    pct = "" if st.delta_pct is None else f"{fmt_pct(st.delta_pct)}; "
    if st.verdict != "no difference":
        word = "faster" if st.verdict == "faster" else "slower"
        return (
            f"{lb} is {word} than {la} by {fmt_ns(abs(st.delta_median_ns))}/step "
            f"({pct}{ci}; {st.pairs_agreeing}/{n} pairs agree), over {arms} uncaptured arms"
        )
    more = (
        f"about {st.arms_needed} arms would resolve a difference of this size at this spread"
        if st.arms_needed
        else f"no practical number of arms would resolve a difference of {fmt_ns(abs(st.delta_median_ns))}"
    )
    return (
        f"no difference between {la} and {lb} is settled: {lb} − {la} = "
        f"{fmt_ns(st.delta_median_ns, signed=True)}/step ({ci}; {st.pairs_agreeing}/{n} pairs "
        f"agree) over {arms} uncaptured arms; {more} (80% power)"
    )


def experiment_warnings(exp: Experiment) -> list[str]:
    out = []
    for side, label in zip(("a", "b"), exp.labels, strict=True):
        recompiled = sum(a.recompiles or 0 for a in exp.arms if a.side == side and not a.discarded)
        if recompiled:
            out.append(
                f"{label} compiled {recompiled} frame(s) inside measured windows (recompilation): "
                "those steps include compilation; raise --warmup"
            )
    if len({a.clock for a in exp.arms if not a.discarded}) > 1:
        out.append("arms were timed on different clocks (CUDA events and host): not comparable")
    captured = _captured_delta(exp.diff)
    if captured is not None and exp.stats.delta_median_ns * captured < 0:
        out.append(
            "the captured and the uncaptured step-time deltas disagree in sign: nsys changed the "
            "comparison; trust the arms"
        )
    return out


def _captured_delta(d: CensusDiff | None) -> float | None:
    return None if d is None else d.metrics["step_time_ns"].delta


class Explanation(NamedTuple):
    verdict: str  # what the uncaptured arms support
    warnings: list[str]
    findings: list[str]  # what the captures say, or why there are none

    @property
    def lines(self) -> list[str]:
        return [self.verdict, *self.warnings, *self.findings]


def explain_parts(exp: Experiment) -> Explanation:
    """The arms' verdict first, then the warnings, then what the captures say (their step times
    qualified as captured, their counters as they are)."""
    verdict, warnings = verdict_sentence(exp.stats, exp.labels), experiment_warnings(exp)
    if exp.diff is None:
        note = [f"no captures ({exp.capture_note}): no census of the reasons"]
        return Explanation(verdict, warnings, note if exp.capture_note else [])
    census_lines = explain_diff(exp.diff)
    step = exp.diff.metrics["step_time_ns"]
    if step.delta is not None and census_lines:
        # the census headline is about captured steps: say so, never as the verdict
        census_lines[0] = (
            f"under nsys the captures differ by {fmt_ns(step.delta, signed=True)}/step "
            f"({fmt_pct(step.pct)}): {census_lines[0]}"
        )
    return Explanation(verdict, warnings, census_lines)

"""An A/B experiment: the arms' statistics (the verdict) and the census diff of its captures (the
reasons), explained in that order. The step-time headline comes from the uncaptured arms only,
and so does "by phase" when the arms recorded phases; the captures contribute the deterministic
counters and, qualified "under nsys", their own step and phase times.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from functools import cached_property
from typing import NamedTuple

from census.compare.ab.arm_findings import ArmTail, Parity, arm_tails, count_warnings, record_parity
from census.compare.ab.rank_table import RankRow, rank_rows, rank_sentences
from census.compare.ab.stats import (
    NO_DIFFERENCE,
    UNSTABLE,
    ABStats,
    Equivalence,
    PhaseStats,
    fit_step,
    tost,
)
from census.compare.diff import CensusDiff, Delta
from census.compare.explain import HOST_BOUND, explain_diff, non_gain
from census.compare.gates import Amount
from census.metrics import STEP_TIME_NS
from census.model.ab import Arm, AutoArms
from census.model.shown import shown
from census.units import coverage_name, fmt_ci, fmt_ns, fmt_pct

# census.compare.explain's phase sentence starts so; in an experiment it is qualified
BY_PHASE = "by phase"


@dataclass(frozen=True, repr=False)
class Experiment:
    """An A/B experiment (`census ab`), as run or read back: its labels and commands, the arms in
    run order, their statistics, the census diff of its two captures (None: not captured;
    capture_note says why), and what --equivalence and --arms auto asked."""

    labels: tuple[str, str]
    commands: dict[str, list[str]]
    arms: tuple[Arm, ...]  # run order, the discarded warm arm first
    stats: ABStats
    diff: CensusDiff | None = None  # of the two captures
    capture_note: str | None = None  # why there are no captures
    wall_s: float | None = None
    equivalence: Equivalence | None = None  # when asked (census ab --equivalence)
    sequential: AutoArms | None = None  # `--arms auto`: asked and how it ended (stats.looks)

    @property
    def order(self) -> list[str]:
        """The side of each arm in run order, the warm arm first."""
        return [a.side for a in self.arms]

    @cached_property
    def tails(self) -> tuple[ArmTail, ...]:
        """The measured arms' tail steps (census.compare.ab.arm_findings)."""
        return arm_tails(self.arms)

    @cached_property
    def ranks(self) -> tuple[RankRow, ...]:
        """One row a rank, over the measured arms (census.compare.ab.rank_table); () for arms of
        one process."""
        return rank_rows(self.arms)

    @cached_property
    def parity(self) -> dict[str, Parity]:
        """Per census.record name, the largest paired |B − A| at the same step."""
        return record_parity(self.arms, self.stats.pairs)

    def label(self, side: str) -> str:
        """The label of side 'a' or 'b'."""
        return self.labels[0 if side == "a" else 1]

    def __repr__(self) -> str:
        """One line: the arms' verdict (census.render.notebook.experiment_repr), not every arm."""
        return shown("experiment_repr", self)


def _verdict_words(verdict: str | None, labels: tuple[str, str]) -> str:
    if verdict is None:
        return "too few arms are left to fit"
    if verdict == NO_DIFFERENCE:
        return "no difference is settled"
    return f"{labels[1]} is {verdict}"


def ci_text(st: ABStats, ci_ns: tuple[float, float] | None = None) -> str:
    """'95% CI lo to hi' of the step (or of `ci_ns`, an interval at the step's coverage)."""
    return fmt_ci(st.ci_ns if ci_ns is None else ci_ns, st.ci_coverage)


def unstable_sentence(st: ABStats, labels: tuple[str, str]) -> str:
    """The headline when disturbed arms decide the verdict: both fits, said first."""
    listed = ", ".join(str(i) for i in sorted(st.disturbed))
    kept = "" if st.undisturbed is None else (
        f" ({fmt_ns(st.undisturbed.delta_ns, signed=True)}/step, "
        f"{ci_text(st, st.undisturbed_ci_ns)})")  # fmt: skip
    return (
        f"unstable: disturbed arms decide the verdict: with the {len(st.disturbed)} disturbed "
        f"arm{'s' * (len(st.disturbed) > 1)} ({listed}), {_verdict_words(st.verdict_all, labels)} "
        f"({fmt_ns(st.delta_median_ns, signed=True)}/step, {ci_text(st)}); without them, "
        f"{_verdict_words(st.verdict_undisturbed, labels)}{kept}; rerun on a quiet machine"
    )


def stop_sentence(st: ABStats) -> str | None:
    """Under `--arms auto`: where the looks stopped and why; None for a fixed number of arms."""
    if not st.looks:
        return None
    stop = st.looks[-1]
    effect = fmt_ns(stop.min_effect_ns)
    why = {
        "settled": "the interval excludes 0",
        "within min-effect": f"the interval lies within ±{effect}, the smallest difference "
        "worth resolving (--min-effect): no difference that large",
        "max arms": f"the most arms (--max-arms) are run and the interval neither excludes 0 nor "
        f"lies within ±{effect}",
        "budget": f"8 more arms would not fit in the budget (--budget); the interval neither "
        f"excludes 0 nor lies within ±{effect}",
    }[stop.reason]
    return (f"--arms auto stopped at look {stop.number} ({stop.arms} measured arms): {why} "
            f"(O'Brien-Fleming boundary t = {stop.critical:.3g}: the intervals of every look "
            "together hold 95%)")  # fmt: skip


def verdict_sentence(st: ABStats, labels: tuple[str, str]) -> str:
    """The headline: what the uncaptured arms can support, and no more."""
    if st.verdict == UNSTABLE:
        return unstable_sentence(st, labels)
    la, lb = labels
    n = len(st.pairs)
    arms = st.a.arms + st.b.arms
    if st.delta_median_ns == 0 and st.residual_sd_ns == 0:
        return (f"no difference between {la} and {lb}: every arm's median step time is the same "
                f"({fmt_ns(st.a.median_of_arm_medians_ns)}) over {arms} uncaptured arms")  # fmt: skip
    ci = ci_text(st)
    if st.residual_sd_ns == 0:  # no arm-to-arm spread: the interval is the delta itself
        ci = "exact: no spread between arms"
    pct = "" if st.delta_pct is None else f"{fmt_pct(st.delta_pct)}; "
    if st.verdict != "no difference":
        word = "faster" if st.verdict == "faster" else "slower"
        return (
            f"{lb} is {word} than {la} by {fmt_ns(abs(st.delta_median_ns))}/step "
            f"({pct}{ci}; {st.pairs_agreeing}/{n} pairs agree), over {arms} uncaptured arms"
        )
    said = (f"{lb} − {la} = {fmt_ns(st.delta_median_ns, signed=True)}/step ({ci}; "
            f"{st.pairs_agreeing}/{n} pairs agree) over {arms} uncaptured arms")  # fmt: skip
    if st.looks and st.looks[-1].reason == "within min-effect":
        effect = fmt_ns(st.looks[-1].min_effect_ns)
        return f"no difference between {la} and {lb} as large as ±{effect}/step: {said}"
    if st.looks:
        return f"no difference between {la} and {lb} is settled: {said}"
    more = (
        f"about {st.arms_needed} arms would resolve a difference of this size at this spread"
        if st.arms_needed
        else f"no practical number of arms would resolve a difference of {fmt_ns(abs(st.delta_median_ns))}"
    )
    return f"no difference between {la} and {lb} is settled: {said}; {more} (80% power)"


def with_equivalence(exp: Experiment, margin: Amount) -> Experiment:
    """`exp` with the two one-sided tests of |B − A| < margin on its step fit (a percentage is
    of A's median of arm medians)."""
    a_ns = exp.stats.a.median_of_arm_medians_ns
    pct = margin.value if margin.percent else 100 * margin.value / a_ns if a_ns > 0 else None
    # under --arms auto, at the stopping look's boundary (wider than the 90% one: conservative)
    fit, stop = fit_step(list(exp.arms)), exp.stats.looks[-1] if exp.stats.looks else None
    if stop is None:
        return replace(exp, equivalence=tost(fit, margin.ns(a_ns), pct))
    eq = tost(fit, margin.ns(a_ns), pct, stop.critical, 1 - stop.level)
    return replace(exp, equivalence=eq)


def equivalence_sentence(eq: Equivalence, labels: tuple[str, str]) -> str:
    """Said right after the verdict: equivalent within the margin, or not shown to be."""
    la, lb = labels
    margin = f"±{fmt_ns(eq.margin_ns)}/step"
    if eq.margin_pct is not None:
        margin = f"±{eq.margin_pct:.3g}% ({margin})"
    lo, hi = eq.ci90_ns
    ci = (f"the {coverage_name(eq.coverage)} CI of {lb} − {la}, {fmt_ns(lo, signed=True)} to "
          f"{fmt_ns(hi, signed=True)},")  # fmt: skip
    tests = "two one-sided tests, α = 0.05"
    if eq.coverage != 0.90:  # under --arms auto: at the stopping look's boundary
        tests = "two one-sided tests at the stopping look's boundary, each at α ≤ 0.025"
    if eq.equivalent:
        return f"{lb} and {la} are equivalent within {margin}: {ci} lies inside it ({tests})"
    return (
        f"{lb} and {la} are not shown equivalent within {margin}: {ci} reaches beyond it ({tests})"
    )


def experiment_warnings(exp: Experiment) -> list[str]:
    """What qualifies the verdict: compilation inside measured windows, arms timed on different
    clocks, phases left out of the per-phase statistics, disturbed arms, counters that differ, and
    captured and uncaptured step-time deltas of opposite sign."""
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
    measured = sum(not a.discarded for a in exp.arms)
    for name, held in exp.stats.phases_left_out.items():
        out.append(
            f"phase {name!r} was recorded in {held} of {measured} measured arms: left out of the "
            "per-phase statistics"
        )
    out += disturbed_warnings(exp)
    out += count_warnings(exp.arms, exp.labels)
    captured = _captured_delta(exp.diff)
    if exp.diff is not None and captured is not None and exp.stats.delta_median_ns * captured < 0:
        out.append(
            "the captured and the uncaptured step-time deltas disagree in sign: "
            f"{exp.diff.a.source.profiler} changed the comparison; trust the arms"
        )
    return out


def _captured_delta(d: CensusDiff | None) -> float | None:
    return None if d is None else d.metrics[STEP_TIME_NS].delta


def phase_sentence(st: ABStats, labels: tuple[str, str]) -> str | None:
    """By phase, from the uncaptured arms: the phase whose delta is largest, with its interval
    and verdict, then the others; None when the arms have no phase in common."""
    if not st.phases:
        return None
    ranked = sorted(st.phases.items(), key=lambda kv: -abs(kv[1].delta_median_ns))
    name, top = ranked[0]
    others = "; ".join(f"{n} {fmt_ns(p.delta_median_ns, signed=True)} ({_called(p, labels)})"
                       for n, p in ranked[1:])  # fmt: skip
    settled = any(p.verdict != "no difference" for p in st.phases.values())
    where = (
        "most of the change is in" if settled else "no phase's change is settled; the largest is in"
    )
    return (
        f"by phase, uncaptured arms: {where} {name}: {labels[1]} − {labels[0]} "
        f"= {fmt_ns(top.delta_median_ns, signed=True)}/step ({fmt_ci(top.ci_ns, top.ci_coverage)}"
        f"; {_called(top, labels)}, {top.pairs_agreeing}/"
        f"{len(top.pairs)} pairs agree)" + (f"; {others}" if others else "")
    )


def _called(p: PhaseStats, labels: tuple[str, str]) -> str:
    return "no difference settled" if p.verdict == "no difference" else f"{labels[1]} {p.verdict}"


def spread_sentence(st: ABStats) -> str | None:
    """Which phase makes arms disagree: the one whose arm medians spread most around the block
    model (its residual sd), beside the step's; None without phases."""
    if not st.phases:
        return None
    ranked = sorted(st.phases.items(), key=lambda kv: -kv[1].residual_sd_ns)
    name, top = ranked[0]
    if top.residual_sd_ns == 0:
        return "no phase varies between arms: every phase's arm medians fit the blocks exactly"
    others = ", ".join(f"{n} {fmt_ns(p.residual_sd_ns)}" for n, p in ranked[1:])
    return (
        f"the arms disagree most in {name}: its arm medians spread {fmt_ns(top.residual_sd_ns)} "
        f"(residual sd, arm to arm; the step's {fmt_ns(st.residual_sd_ns)})"
        + (f"; {others}" if others else "")
    )


TAILS_LISTED = 5  # tail steps named in the explanation (all are in the table and the JSON)


def tail_sentence(exp: Experiment) -> str | None:
    """The uncaptured arms' tail steps, the largest first, each with the phase that grew and
    how far the others moved; None when no arm has a tail step."""
    if not exp.tails:
        return None
    ranked = sorted(exp.tails, key=lambda t: -t.excess_ns)
    listed = "; ".join(_tail_text(exp, t) for t in ranked[:TAILS_LISTED])
    more = f"; {len(ranked) - TAILS_LISTED} more" if len(ranked) > TAILS_LISTED else ""
    arms = len({t.arm_index for t in ranked})
    return (f"tail steps, uncaptured arms ({len(ranked)} in {arms} arm{'s' * (arms > 1)}, "
            f"beyond each arm's own threshold): {listed}{more}")  # fmt: skip


def _tail_text(exp: Experiment, t: ArmTail) -> str:
    text = (f"arm {t.arm_index} ({exp.label(t.side)}) step {t.step}: {fmt_ns(t.step_time_ns)} "
            f"against its median {fmt_ns(t.median_ns)} ({fmt_ns(t.excess_ns, signed=True)})")  # fmt: skip
    if t.phase is None or t.phase_delta_ns is None:
        return text
    others = ", ".join(f"{n} {fmt_ns(d, signed=True)}" for n, d in t.phase_deltas_ns[1:])
    return f"{text}, {t.phase} {fmt_ns(t.phase_delta_ns, signed=True)}" + (
        f" while {others}" if others else ""
    )


def parity_sentences(exp: Experiment) -> list[str]:
    """Per census.record name, its largest paired difference between the sides."""
    return [
        f"{p.name} (census.record): largest paired |{exp.labels[1]} − {exp.labels[0]}| at the "
        f"same step {p.max_abs_diff:.6g} (arms {p.a_index} and {p.b_index}, step {p.step}; "
        f"{p.pairs} pairs, {p.steps_compared} steps compared; meaningful only when both sides "
        "start from the same seed and data order)"
        for p in exp.parity.values()
    ]


_NOT_FASTER = {NO_DIFFERENCE: "not shown faster", UNSTABLE: "unstable, not shown faster"}


def disturbed_warnings(exp: Experiment) -> list[str]:
    """One warning per disturbed arm, with what was seen."""
    return [
        f"arm {i} ({exp.label(next(a.side for a in exp.arms if a.index == i))}) was disturbed: "
        f"{why}"
        for i, why in sorted(exp.stats.disturbed.items())
    ]


class Explanation(NamedTuple):
    """An experiment explained, each part a list of lines or one (None or (): nothing to say)."""

    verdict: str  # what the uncaptured arms support
    warnings: list[str]
    findings: list[str]  # what the captures say, or why there are none
    phases: tuple[str, ...] = ()  # what the uncaptured arms say by phase
    equivalence: str | None = None  # said right after the verdict, when asked
    arm_notes: tuple[str, ...] = ()  # the arms' tail steps and census.record parity
    sequential: str | None = None  # under --arms auto: where the looks stopped and why
    ranks: tuple[str, ...] = ()  # arms of several ranks: census.compare.ab.rank_table

    @property
    def said_next(self) -> list[str]:
        """What follows the verdict at once: why --arms auto stopped, the equivalence asked."""
        return [x for x in (self.sequential, self.equivalence) if x]

    @property
    def lines(self) -> list[str]:
        """Every line in the order it is said: the verdict, said_next, the warnings, phases, arm
        notes, ranks and findings."""
        return [self.verdict, *self.said_next, *self.warnings, *self.phases, *self.arm_notes,
                *self.ranks, *self.findings]  # fmt: skip


def explain_parts(exp: Experiment) -> Explanation:
    """The arms' verdict first (and their equivalence, when asked), then the warnings, then
    what the arms say by phase, then what the captures say (their step times and phases
    qualified as captured, their counters as they are)."""
    verdict, warnings = verdict_sentence(exp.stats, exp.labels), experiment_warnings(exp)
    said = (phase_sentence(exp.stats, exp.labels), spread_sentence(exp.stats))
    phases = tuple(line for line in said if line)
    notes = tuple(line for line in (tail_sentence(exp), *parity_sentences(exp)) if line)
    eq = None if exp.equivalence is None else equivalence_sentence(exp.equivalence, exp.labels)
    stop = stop_sentence(exp.stats)
    ranks = tuple(rank_sentences(exp.arms, exp.labels))
    if exp.diff is None:
        note = [f"no captures ({exp.capture_note}): no census of the reasons"]
        return Explanation(verdict, warnings, note if exp.capture_note else [], phases, eq, notes,
                           stop, ranks)  # fmt: skip
    census_lines = explain_diff(exp.diff)
    step = exp.diff.metrics[STEP_TIME_NS]
    if step.delta is not None and census_lines:
        # the census headline is about captured steps: say so, never as the verdict
        census_lines[0] = (
            f"under {exp.diff.a.source.profiler} the captures differ by "
            f"{fmt_ns(step.delta, signed=True)}/step "
            f"({fmt_pct(step.pct)}): {census_lines[0]}"
        )
    # so are the captures' phases (census.compare.explain's "by phase" sentence)
    census_lines = [
        f"{BY_PHASE} under {exp.diff.a.source.profiler}" + line[len(BY_PHASE) :]
        if line.startswith(BY_PHASE)
        else line
        for line in census_lines
        if not line.startswith(HOST_BOUND)  # said again below, on the arms' step times
    ]
    st = exp.stats
    arms = Delta(st.a.median_of_arm_medians_ns, st.b.median_of_arm_medians_ns)
    unsettled = "" if st.verdict == "faster" else (
        f", {ci_text(st)}: {_NOT_FASTER.get(st.verdict, 'slower')}")  # fmt: skip
    bound = non_gain(exp.diff, "/step" if exp.diff.per_step else "", arms, unsettled)
    if bound:
        census_lines.insert(1 if census_lines else 0, bound)
    return Explanation(verdict, warnings, census_lines, phases, eq, notes, stop, ranks)

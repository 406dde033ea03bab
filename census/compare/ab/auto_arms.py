"""`census ab --arms auto`: the runner's rule between pairs of blocks, and the experiment decided
at the look where it stopped (the boundaries and the rule of one look: census.compare.ab.sequential).

The runner (census.capture.arms.run_arms) asks AutoRule after each 8 measured arms whether to go
on; the budget, when given, is checked first. ab.json keeps what was asked and how the runner
ended (census.model.ab.AutoArms), never a computed number: reading it back, looks_of takes every
look again from the arms, and with_look decides the experiment's statistics at the last one.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, replace

from census.compare.ab.sequential import (
    ARMS_PER_LOOK,
    DEFAULT_MAX_ARMS,
    DEFAULT_MIN_EFFECT_PCT,
    Look,
    default_min_effect_ns,
    look,
    next_look_fits,
    plan,
    t_critical,
)
from census.compare.ab.stats import ABStats, Fit, interval_verdict, settle
from census.compare.gates import Amount
from census.model.ab import Arm, AutoArms
from census.units import fmt_ci, fmt_ns


def looks_of(arms: list[Arm], auto: AutoArms) -> tuple[Look, ...]:
    """Every look the runner took, from the arms in run order: look k on the warm arm and the
    first 8k measured ones. Every look but the last must go on and the last must stop (the
    runner stopped there); a ValueError naming the record's field otherwise."""
    try:
        seq = plan(auto.max_arms)
    except ValueError as exc:
        raise ValueError(f"sequential.max_arms: {exc}".replace("--max-arms ", "")) from None
    measured = [a for a in arms if not a.discarded]
    if not measured or len(measured) % ARMS_PER_LOOK or len(measured) > auto.max_arms:
        raise ValueError(f"--arms auto: {len(measured)} measured arms do not end at a look "
                         f"(a multiple of {ARMS_PER_LOOK} up to {auto.max_arms})")  # fmt: skip
    warm = [a for a in arms if a.discarded]
    out = []
    for n in range(ARMS_PER_LOOK, len(measured) + 1, ARMS_PER_LOOK):
        last = n == len(measured) and auto.budget_stop
        out.append(look(seq, [*warm, *measured[:n]], auto.min_effect_ns, last))
    early = next((lk for lk in out[:-1] if lk.decision == "stop"), None)
    if early is not None:
        raise ValueError(f"--arms auto: the rule stops at look {early.number} ({early.arms} "
                         f"arms, {early.reason}), but the arms go on to {len(measured)}")  # fmt: skip
    if out[-1].decision != "stop":
        raise ValueError(f"--arms auto: the rule goes on after look {out[-1].number} "
                         f"({out[-1].arms} arms), where the arms end")  # fmt: skip
    return tuple(out)


def refit_half(stop: Look, fit: Fit) -> float:
    """The half-width of the fit without the disturbed arms at the stopping look: its SE times
    the t of its own degrees of freedom at the look's level (fewer arms, fewer df: a wider
    boundary than the look's own), so its interval has the look's coverage."""
    return t_critical(stop.level, fit.df) * fit.se_ns


def with_look(st: ABStats, looks: tuple[Look, ...]) -> ABStats:
    """`st` (census.compare.ab.stats.analyze of the same arms) decided at the stopping look, the
    last of `looks`: the step's interval and verdict are the look's (its repeated interval, at
    its coverage), and so are every phase's (delta ± the look's boundary · SE); the fit without
    the disturbed arms is judged at the look's level on its own df (refit_half), and the two
    settle the verdict as in a fixed design (census.compare.ab.stats.settle). No "arms needed":
    the looks say why it stopped."""
    stop = looks[-1]
    crit, coverage = stop.critical, 1 - stop.level
    full = Fit(st.delta_median_ns, st.ci95_ns, st.df, st.residual_sd_ns, stop.verdict, st.se_ns)
    undisturbed, undisturbed_ci = st.undisturbed, None
    if undisturbed is not None:
        half = refit_half(stop, undisturbed)
        undisturbed = replace(undisturbed, verdict=interval_verdict(undisturbed.delta_ns, half))
        undisturbed_ci = (undisturbed.delta_ns - half, undisturbed.delta_ns + half)
    phases = {
        name: replace(p, ci_ns=(p.delta_median_ns - crit * p.se_ns, p.delta_median_ns + crit * p.se_ns),
                      ci_coverage=coverage, verdict=interval_verdict(p.delta_median_ns, crit * p.se_ns))
        for name, p in st.phases.items()
    }  # fmt: skip
    return replace(
        st, ci_ns=stop.ci_ns, ci_coverage=coverage, verdict=settle(full, undisturbed, bool(st.disturbed)),
        verdict_all=stop.verdict, arms_needed=None, phases=phases, looks=looks,
        verdict_undisturbed=undisturbed.verdict if undisturbed else (None if st.disturbed else stop.verdict),
        undisturbed=undisturbed, undisturbed_ci_ns=undisturbed_ci)  # fmt: skip


def decided(st: ABStats, arms: list[Arm], auto: AutoArms | None) -> ABStats:
    """`st` as a fixed design decides it, or under `--arms auto` at its stopping look."""
    return st if auto is None else with_look(st, looks_of(arms, auto))


@dataclass(frozen=True)
class AutoSpec:
    """`census ab --arms auto [--max-arms N] [--min-effect X] [--budget T]`."""

    max_arms: int = DEFAULT_MAX_ARMS
    min_effect: Amount | None = None  # None: DEFAULT_MIN_EFFECT_PCT of A's step
    budget_s: float | None = None


def auto_rule(auto: AutoSpec | None, progress: Callable[[str], None] | None) -> AutoRule | None:
    """The AutoRule of `--arms auto` as asked; None without it (a fixed number of arms)."""
    return (
        None if auto is None else AutoRule(auto.max_arms, auto.min_effect, auto.budget_s, progress)
    )


class AutoRule:
    """The runner's side of `--arms auto`: asked after each 8 measured arms whether to run 8
    more (census.capture.arms.run_arms calls it); the look is taken on the arms so far, and
    the budget (seconds of arms from the first, the warm one included; the captures after the
    arms are not counted) is checked first: when the next 8 arms would not fit in what is left
    at the mean measured arm's duration so far, this look is the last."""

    def __init__(self, max_arms: int, min_effect: Amount | None, budget_s: float | None,
                 progress: Callable[[str], None] | None = None) -> None:  # fmt: skip
        self.seq = plan(max_arms)  # a ValueError for a bad --max-arms, before any arm runs
        self.min_effect, self.budget_s, self.progress = min_effect, budget_s, progress
        self.started = self.warm_end = time.monotonic()
        self.min_effect_ns: float | None = None
        self.budget_stop = False

    def start(self) -> None:
        """The clock of the budget starts (at the warm arm)."""
        self.started = self.warm_end = time.monotonic()

    def warm_done(self) -> None:
        """The warm arm has ended: the measured arms' mean duration is timed from now."""
        self.warm_end = time.monotonic()

    def __call__(self, arms: list[Arm]) -> bool:
        if self.min_effect_ns is None:  # a share is of A's step at the first look
            effect = self.min_effect or Amount(DEFAULT_MIN_EFFECT_PCT, percent=True)
            self.min_effect_ns = effect.ns(default_min_effect_ns(arms, 100.0))
        now = time.monotonic()
        measured = sum(not a.discarded for a in arms)
        last = self.budget_s is not None and not next_look_fits(
            now - self.warm_end, measured, self.budget_s - (now - self.started)
        )
        taken = look(self.seq, arms, self.min_effect_ns, last)
        self.budget_stop = taken.reason == "budget"
        if self.progress:
            self.progress(look_text(taken))
        return taken.decision == "continue"

    def record(self) -> AutoArms:
        """What ab.json keeps of the rule (census.model.ab.AutoArms): the most arms, the minimum effect
        in ns and as given, the budget and whether it stopped the runner. A RuntimeError before the
        first look."""
        if self.min_effect_ns is None:
            raise RuntimeError("no look was taken")
        text = None
        if self.min_effect is not None:
            m = self.min_effect
            text = f"{m.value:g}%" if m.percent else f"{m.value:g}ns"
        return AutoArms(
            self.seq.max_arms, self.min_effect_ns, text, self.budget_s, self.budget_stop
        )


def look_text(lk: Look) -> str:
    """One look in words (the runner's progress line)."""
    what = "continue" if lk.decision == "continue" else f"stop ({lk.reason})"
    return (f"look {lk.number} at {lk.arms} arms: B − A = {fmt_ns(lk.delta_ns, signed=True)}/step, "
            f"{fmt_ci(lk.ci_ns, 1 - lk.level)} "
            f"(min effect ±{fmt_ns(lk.min_effect_ns)}): {what}")  # fmt: skip

"""Statistics of an A/B experiment: arms of repeated uncaptured runs -> a verdict it can back.

The unit is the arm (one fresh process), not the step: steps within a process share its
compilation, allocator state, clocks and neighbours, so they are correlated and would overstate
the evidence. Each arm is reduced to its median step time. Arms run as one discarded warm arm (A)
and then blocks of four, ABBA BAAB ABBA ...; the difference is estimated by least squares on the
arm medians with one intercept per block and one term for side B:

    median(arm) = block + delta * [arm is B] + error

In a balanced block (two A, two B) the estimate of delta is mean(B arm medians) − mean(A arm
medians); the block intercepts absorb drift between blocks and ABBA's order cancels a linear drift
inside one. The 95% interval is delta ± t(0.975, df) · SE with df = arms − blocks − 1 and SE from
the residuals. The verdict is "faster" or "slower" (B against A) only when the interval excludes 0;
otherwise "no difference", with the number of arms that would resolve a difference of the observed
size at the observed spread (80% power). tests/test_stats.py proves the error rates by simulation.

Per census.phase the same fit (fit_blocks, one definition) runs on each arm's median time of that
phase per step: its delta, interval, pairs and verdict, and its residual spread, which says which
phase makes arms disagree. A phase that only some measured arms recorded is left out (and said):
a phase an arm never ran is not a phase of no time.

Equivalence (`census ab --equivalence 2%`) is the converse question, asked of the same step fit:
two one-sided tests at α = 0.05, equivalent when the 90% interval delta ± t(0.95, df) · SE lies
inside (−margin, +margin). tests/test_ab_equivalence.py proves its error rates by simulation.

Disturbed arms (census.compare.ab.disturbed: an arm that ran beside other load, a lower clock, a
throttled GPU, or whose steps spread far beyond the typical arm's) are flagged with the reason.
When any is, the same fit runs again without them (a block left with one side then says nothing
of B − A). When the two fits' verdicts differ, the disturbed arms decide the verdict and it is
"unstable", with both verdicts kept; so it is when the undisturbed arms are too few to fit and
the full fit settled a difference. Otherwise the verdict stands and the arms are only flagged.
tests/test_disturbed.py proves by simulation that this keeps A/A experiments free of a false
"faster" or "slower" when disturbed arms show it, and what it costs in power.

Degenerate arms are said as they are: a delta under 1 ns (the record's unit) is "no difference",
never "faster by 0 ns"; arms without any spread (SE 0) give an interval of one point, the delta
itself, which settles any nonzero difference exactly.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

from census.compare.ab.disturbed import find_disturbed
from census.compare.quantiles import Z_80, t_95, t_975
from census.model.ab import Arm
from census.model.step import percentile

MAX_ARMS_ADVISED = 400
RESOLUTION_NS = 1.0  # step times are integer ns: a smaller difference is never claimed
NO_DIFFERENCE = "no difference"
UNSTABLE = "unstable"  # ABStats.verdict when disturbed arms decide it


@dataclass(frozen=True)
class Side:
    """One side's measured steps, all arms pooled, and the median of its arm medians."""

    median_ns: float
    p95_ns: float
    steps: int
    arms: int
    median_of_arm_medians_ns: float
    peak_allocated_bytes: int | None
    peak_reserved_bytes: int | None
    recompiles: int | None


@dataclass(frozen=True)
class Pair:
    """One consecutive AB or BA pair of measured arms (by Arm.index) and B − A of their medians."""

    a_index: int
    b_index: int
    delta_ns: float  # median(B arm) − median(A arm)


def count_agreeing(delta_ns: float, pairs: tuple[Pair, ...]) -> int:
    """Pairs whose delta has the sign of the estimate (is 0, when the estimate is)."""
    if delta_ns == 0:
        return sum(1 for p in pairs if p.delta_ns == 0)
    sign = math.copysign(1.0, delta_ns)
    return sum(1 for p in pairs if p.delta_ns * sign > 0)


@dataclass(frozen=True)
class Fit:
    """The block model fitted to one time's arm medians (the step's, or one phase's)."""

    delta_ns: float  # the least-squares estimate of B − A
    ci95_ns: tuple[float, float]
    df: int
    residual_sd_ns: float  # arm-to-arm spread left after the blocks and the side
    verdict: str  # "faster", "slower" (B relative to A) or "no difference"
    se_ns: float = 0.0  # the standard error of delta_ns (the 95% half-width over t_975(df))


def fit_blocks(medians: list[float], sides: list[str], blocks: list[int] | None = None) -> Fit:
    """`median = block + delta · [B] + error` over measured arms in run order (blocks of four,
    or the block of each arm given in `blocks`, which may leave some arms out of their block):
    the estimate of delta, its 95% interval and the verdict (the rule of the module's
    docstring). The one fit of the step and of every phase; needs can_fit."""
    import numpy as np  # here: a cached summary reads no numpy (census --help neither)

    y = np.array(medians, dtype=np.float64)
    is_b = np.array([side == "b" for side in sides], dtype=np.float64)
    block = np.arange(len(y)) // 4 if blocks is None else np.array(blocks)
    design = np.column_stack([*(block == j for j in np.unique(block)), is_b]).astype(float)
    beta, *_ = np.linalg.lstsq(design, y, rcond=None)
    df = len(y) - design.shape[1]
    resid = y - design @ beta
    # what least squares leaves of an exact 0 (identical arms) is rounding, not a difference
    tiny = 1e-9 * max(1.0, float(np.max(np.abs(y))))
    sd = _exact(math.sqrt(float(resid @ resid) / df), tiny)
    se = _exact(sd * math.sqrt(np.linalg.inv(design.T @ design)[-1, -1]), tiny)
    delta = _exact(float(beta[-1]), tiny)
    half = t_975(df) * se
    return Fit(delta, (delta - half, delta + half), df, sd, interval_verdict(delta, half), se)


def interval_verdict(delta_ns: float, half_ns: float) -> str:
    """ "faster" or "slower" (B against A) when delta ± half excludes 0 and |delta| is at least
    RESOLUTION_NS; else "no difference". The one rule of every interval's verdict."""
    if abs(delta_ns) >= RESOLUTION_NS and not delta_ns - half_ns <= 0 <= delta_ns + half_ns:
        return "faster" if delta_ns < 0 else "slower"
    return NO_DIFFERENCE


def can_fit(sides: list[str], blocks: list[int]) -> bool:
    """Whether fit_blocks can estimate delta and its spread from these arms: some block holds
    both sides (a block left with one side says nothing of B − A) and a residual degree of
    freedom is left (arms − blocks − 1 >= 1)."""
    held: dict[int, set[str]] = {}
    for side, block in zip(sides, blocks, strict=True):
        held.setdefault(block, set()).add(side)
    return any(len(s) == 2 for s in held.values()) and len(sides) - len(held) - 1 >= 1


def fit_step(arms: list[Arm]) -> Fit:
    """fit_blocks of the measured arms' median step times (what `analyze` fits)."""
    measured = [a for a in arms if not a.discarded]
    return fit_blocks([a.median_ns for a in measured], [a.side for a in measured])


@dataclass(frozen=True)
class Equivalence:
    """Whether B − A is shown to lie within ±margin_ns: two one-sided tests at α = 0.05."""

    margin_ns: float
    margin_pct: float | None  # the margin as a share of A's median of arm medians
    ci90_ns: tuple[float, float]  # delta ± t(0.95, df) · SE, of the same block fit
    equivalent: bool
    coverage: float = 0.90  # of ci90_ns: 0.90, or more at a sequential look's boundary


def tost(fit: Fit, margin_ns: float, margin_pct: float | None = None,
         critical: float | None = None, coverage: float = 0.90) -> Equivalence:  # fmt: skip
    """Two one-sided tests (TOST) on the block fit: "B − A <= −margin" and "B − A >= +margin"
    are each rejected at α = 0.05 exactly when the 90% interval delta ± t(0.95, df) · SE lies
    inside (−margin, +margin); then B and A are equivalent within the margin. Arms without
    spread (SE 0) give an interval of one point, the delta. With `critical` (`--arms auto`:
    the stopping look's boundary, which exceeds t(0.95, df)) the interval is delta ± critical ·
    SE (its `coverage` given), each one-sided test then at most at α = 0.025."""
    c = t_95(fit.df) if critical is None else critical
    half = c * fit.se_ns
    lo, hi = fit.delta_ns - half, fit.delta_ns + half
    return Equivalence(
        margin_ns, margin_pct, (lo, hi), -margin_ns < lo and hi < margin_ns, coverage
    )


@dataclass(frozen=True)
class PhaseStats:
    """One census.phase over the arms, fitted as the step is: each arm reduced to its median
    time of the phase per step."""

    a_median_ns: float  # the median of A's arm medians of the phase
    b_median_ns: float
    pairs: tuple[Pair, ...]
    delta_median_ns: float
    ci95_ns: tuple[float, float]  # the fixed design's 95% interval
    df: int
    residual_sd_ns: float  # how much the phase's arm medians disagree, beyond blocks and side
    verdict: str  # of ci_ns
    se_ns: float
    # the interval the verdict rests on, and its coverage: ci95_ns and 0.95, or under
    # `--arms auto` the stopping look's (census.compare.ab.auto_arms.with_look)
    ci_ns: tuple[float, float]
    ci_coverage: float = 0.95

    @property
    def pairs_agreeing(self) -> int:
        """Pairs whose delta has the sign of the estimate (is 0, when the estimate is)."""
        return count_agreeing(self.delta_median_ns, self.pairs)


@dataclass(frozen=True)
class ABStats:
    """An experiment's statistics (module docstring): each side's figures, the pairs, the step fit
    of every measured arm, the verdict it backs, per phase its own fit, and the disturbed arms."""

    a: Side
    b: Side
    pairs: tuple[Pair, ...]
    delta_median_ns: float  # the model's estimate of B − A, per step
    delta_pct: float | None  # of A's median of arm medians
    ci95_ns: tuple[float, float]  # the fixed design's 95% interval of the fit of every arm
    # the interval the verdict rests on, and its coverage: ci95_ns and 0.95, or under
    # `--arms auto` the stopping look's repeated interval (census.compare.ab.auto_arms.with_look)
    ci_ns: tuple[float, float]
    ci_coverage: float
    se_ns: float
    df: int
    residual_sd_ns: float  # arm-to-arm spread left after the blocks and the side
    # "faster", "slower" (B relative to A), "no difference", or UNSTABLE when disturbed arms
    # decide it (verdict_all and verdict_undisturbed differ)
    verdict: str
    verdict_all: str  # the fit of every measured arm (delta_median_ns, ci95_ns, ...)
    # the fit without the disturbed arms (verdict_all when none is; None when too few are left)
    verdict_undisturbed: str | None
    arms_needed: int | None  # with "no difference": arms for 80% power at this size and spread
    phases: dict[str, PhaseStats] = field(default_factory=dict)  # those every measured arm has
    # phases some measured arms recorded and others did not -> how many did: left out of
    # `phases` (a phase an arm never ran is not a phase of no time)
    phases_left_out: dict[str, int] = field(default_factory=dict)
    disturbed: dict[int, str] = field(default_factory=dict)  # Arm.index -> why (measured arms)
    undisturbed: Fit | None = None  # the fit without them (None: none disturbed, or too few left)
    # its interval at ci_coverage: its ci95_ns, or under `--arms auto` the stopping look's level
    undisturbed_ci_ns: tuple[float, float] | None = None
    # under `--arms auto`: every look taken, the last one the stop (census.compare.ab.sequential)
    looks: tuple[Any, ...] = ()

    @property
    def pairs_agreeing(self) -> int:
        """Pairs whose delta has the sign of the estimate (is 0, when the estimate is)."""
        return count_agreeing(self.delta_median_ns, self.pairs)


def analyze(arms: list[Arm]) -> ABStats:
    """The ABStats of `arms` in run order (the discarded warm arm among them); a ValueError unless
    the measured arms are blocks of four."""
    measured = [a for a in arms if not a.discarded]
    if len(measured) < 4 or len(measured) % 4:
        raise ValueError("an experiment needs measured arms in blocks of four")
    medians = [a.median_ns for a in measured]
    fit = fit_blocks(medians, [a.side for a in measured])
    a, b = _side(measured, "a"), _side(measured, "b")
    phases, left_out = _phases(measured)
    disturbed = find_disturbed(measured)
    refit = fit_undisturbed(measured, medians, disturbed)
    verdict = settle(fit, refit, bool(disturbed))
    return ABStats(
        a=a,
        b=b,
        pairs=_pairs(measured, medians),
        delta_median_ns=fit.delta_ns,
        delta_pct=100.0 * fit.delta_ns / a.median_of_arm_medians_ns
        if a.median_of_arm_medians_ns > 0
        else None,
        ci95_ns=fit.ci95_ns,
        ci_ns=fit.ci95_ns,
        ci_coverage=0.95,
        se_ns=fit.se_ns,
        df=fit.df,
        residual_sd_ns=fit.residual_sd_ns,
        verdict=verdict,
        verdict_all=fit.verdict,
        verdict_undisturbed=refit.verdict if refit else (None if disturbed else fit.verdict),
        arms_needed=None
        if verdict != NO_DIFFERENCE
        else arms_needed(fit.delta_ns, fit.residual_sd_ns),
        phases=phases,
        phases_left_out=left_out,
        disturbed=disturbed,
        undisturbed=refit,
        undisturbed_ci_ns=None if refit is None else refit.ci95_ns,
    )


def fit_undisturbed(
    measured: list[Arm], medians: list[float], disturbed: dict[int, str]
) -> Fit | None:
    """fit_blocks of the measured arms not in `disturbed`, each in its block of four; None when
    no arm is disturbed or the rest cannot be fitted (can_fit)."""
    keep = [i for i, arm in enumerate(measured) if arm.index not in disturbed]
    sides, blocks = [measured[i].side for i in keep], [i // 4 for i in keep]
    if not disturbed or not can_fit(sides, blocks):
        return None
    return fit_blocks([medians[i] for i in keep], sides, blocks)


def settle(full: Fit, undisturbed: Fit | None, any_disturbed: bool) -> str:
    """The verdict: the full fit's, unless disturbed arms decide it (UNSTABLE): the fit without
    them says otherwise, or cannot be made while the full fit settled a difference."""
    if not any_disturbed:
        return full.verdict
    if undisturbed is None:
        return full.verdict if full.verdict == NO_DIFFERENCE else UNSTABLE
    return full.verdict if undisturbed.verdict == full.verdict else UNSTABLE


def _phases(measured: list[Arm]) -> tuple[dict[str, PhaseStats], dict[str, int]]:
    """The statistics of every phase all measured arms recorded, in the order the arms first
    recorded them; and the phases only some arms recorded, with how many."""
    names = list(dict.fromkeys(n for a in measured for n in a.phase_time_ns))
    held = {n: sum(n in a.phase_time_ns for a in measured) for n in names}
    sides = [a.side for a in measured]
    out = {}
    for name in (n for n in names if held[n] == len(measured)):
        medians = [percentile(a.phase_time_ns[name], 50) for a in measured]
        fit = fit_blocks(medians, sides)
        by_side = {s: percentile([m for m, x in zip(medians, sides, strict=True) if x == s], 50)
                   for s in ("a", "b")}  # fmt: skip
        out[name] = PhaseStats(by_side["a"], by_side["b"], _pairs(measured, medians),
                               fit.delta_ns, fit.ci95_ns, fit.df, fit.residual_sd_ns,
                               fit.verdict, fit.se_ns, fit.ci95_ns)  # fmt: skip
    return out, {n: k for n, k in held.items() if k < len(measured)}


def _exact(x: float, tiny: float) -> float:
    return 0.0 if abs(x) <= tiny else x


def arms_needed(delta_ns: float, sd_ns: float) -> int | None:
    """The fewest measured arms (a multiple of 4) whose interval would exclude 0 with 80%
    probability if B − A were `delta_ns` and the arm-to-arm spread `sd_ns`; None beyond
    MAX_ARMS_ADVISED (or for a difference under RESOLUTION_NS, which is never claimed)."""
    if abs(delta_ns) < RESOLUTION_NS:
        return None
    for n in range(4, MAX_ARMS_ADVISED + 1, 4):
        se = sd_ns * 2 / math.sqrt(n)
        if abs(delta_ns) >= (t_975(n - n // 4 - 1) + Z_80) * se:
            return n
    return None


def _side(measured: list[Arm], side: str) -> Side:
    arms = [a for a in measured if a.side == side]
    steps = [t for a in arms for t in a.step_time_ns]
    recompiles = [a.recompiles for a in arms if a.recompiles is not None]
    return Side(
        median_ns=percentile(steps, 50),
        p95_ns=percentile(steps, 95),
        steps=len(steps),
        arms=len(arms),
        median_of_arm_medians_ns=percentile([a.median_ns for a in arms], 50),
        peak_allocated_bytes=_max(a.peak_allocated_bytes for a in arms),
        peak_reserved_bytes=_max(a.peak_reserved_bytes for a in arms),
        recompiles=sum(recompiles) if recompiles else None,
    )


def _max(values) -> int | None:
    known = [v for v in values if v is not None]
    return max(known) if known else None


def _pairs(measured: list[Arm], medians: list[float]) -> tuple[Pair, ...]:
    """B − A of `medians` (one per measured arm) for each consecutive AB/BA pair of arms."""
    out = []
    for i in range(0, len(measured), 2):
        j, k = (i, i + 1) if measured[i].side == "a" else (i + 1, i)
        out.append(Pair(measured[j].index, measured[k].index, medians[k] - medians[j]))
    return tuple(out)

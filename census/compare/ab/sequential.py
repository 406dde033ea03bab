"""Sequential arms (`census ab --arms auto`): add blocks until the interval resolves, at 5% A/A.

The runner measures arms in pairs of blocks, ABBA then BAAB (8 arms), and looks after each pair:
look k sees n_k = 8k measured arms, up to K = max_arms / 8 looks. Each look fits the block model
of census.compare.ab.stats (fit_blocks, the one fit) to every measured arm so far, and its interval
is delta ± c_k · SE with c_k the look's t boundary (df_k = n_k − n_k/4 − 1: 5 at the first look).

Alpha spending (Lan-DeMets), O'Brien-Fleming type, on the information fraction t = n_k / max_arms,
two-sided, α = 0.05: by look k the false-positive rate spent is

    α(t) = 2 − 2 Φ(z_0.975 / √t)        (α(1) = 0.05)

O'Brien-Fleming rather than Pocock: the first looks, whose spread rests on 5 or 11 df, spend
almost nothing, and the last look spends nearly all of α, so its interval is barely wider than
a fixed design's of max_arms; the price is a look later for large differences (16 arms, not 8).

The boundaries, two steps. (1) Normal theory (known spread): z_k with P(no |Z_j| ≥ z_j before
look k, |Z_k| ≥ z_k) = α(t_k) − α(t_k−1), Z_k the z statistics of one growing experiment
(corr √(n_j/n_k)), solved look by look by numerical integration (z_boundaries). Turned into t
boundaries with the same two-sided tail at df_k they spend too much (5.1-5.2% over 2-6 looks):
the spread re-estimated at each look makes the looks less alike. (2) So the t boundaries are
calibrated on the exact null distribution of the block fit's t statistics, simulated (seeded,
CALIBRATION_PATHS experiments of normal arm noise, which the t statistic does not depend on the
spread or block levels of): at each look the |t| that exactly the look's share of the experiments
still running reaches (t_boundaries), aiming at the cumulative count. The first look's boundary
is exact (its tail-matched t: nothing was spent before it); a later look whose share is too rare
to simulate (early looks of many, under 0.05% together) keeps its tail-matched boundary.

At a look the interval delta ± c_k · SE decides (classify):
- it excludes 0: "settled", the verdict "faster" or "slower" (a difference under 1 ns never is);
- it lies inside (−min_effect, +min_effect): "within min-effect", the verdict "no difference",
  resolved: no difference as large as min_effect. This stop only ends experiments that have not
  crossed a boundary, so it cannot raise the false-positive rate (the boundaries are computed
  without it: a non-binding futility stop);
- otherwise "continue"; at the last look (max arms), or when the runner will run no more arms
  (its budget is spent), "no difference", unresolved, with the interval as it is.
Stopping early for the budget keeps the rule valid: the looks taken spent α(t_k) of the 5%, the
rest is left unspent, so the false-positive rate is at most what was spent. A budget ends the
experiment at a look (next_look_fits), never between two.

The interval reported at the stop is the repeated confidence interval of that look (delta ± c_k
· SE, at the look's nominal level, not the fixed 95% one): it agrees with the verdict, and the
intervals of all looks together cover the true difference at least 95% of the time.
tests/test_sequential.py proves the rates by simulation (docs/statistics.md has them).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import lru_cache
from statistics import NormalDist

import numpy as np

from census.compare.ab.stats import MAX_ARMS_ADVISED, NO_DIFFERENCE, RESOLUTION_NS, fit_blocks
from census.model.ab import Arm
from census.model.step import percentile

ALPHA = 0.05
ARMS_PER_LOOK = 8  # one ABBA and one BAAB block
DEFAULT_MAX_ARMS = 48
DEFAULT_MIN_EFFECT_PCT = 1.0  # of A's step time (the median of A's arm medians)
CALIBRATION_PATHS = 2_000_000  # simulated null experiments behind the t boundaries
CALIBRATION_SEED = 20261222
_MIN_CROSSINGS = 1000  # a look's share of fewer paths is too rare to simulate
_GRID = 2001  # points of the numerical integration (odd: Simpson's rule)
_NORMAL = NormalDist()


def spent_alpha(fraction: float, alpha: float = ALPHA) -> float:
    """The O'Brien-Fleming-type spending function of Lan and DeMets: the two-sided type-I error
    spent by information fraction `fraction` (0 to 1), 2 − 2 Φ(z_(1−α/2) / √t)."""
    if fraction <= 0:
        return 0.0
    z = -_NORMAL.inv_cdf(alpha / 2)
    return math.erfc(z / math.sqrt(fraction) / math.sqrt(2))


def _upper_tail(x: np.ndarray) -> np.ndarray:
    """1 − Φ(x), elementwise, without cancellation in the far tail."""
    return np.array([math.erfc(v) for v in (x / math.sqrt(2)).tolist()]) / 2


def _simpson(b: float) -> tuple[np.ndarray, np.ndarray]:
    """The grid of (−b, b) and its Simpson weights."""
    x = np.linspace(-b, b, _GRID)
    w = np.ones(_GRID)
    w[1:-1:2], w[2:-1:2] = 4, 2
    return x, w * (x[1] - x[0]) / 3


def _crossing(b: float, x: np.ndarray, mass: np.ndarray, s: float) -> float:
    """P(|B_prev + N(0, s²)| ≥ b) over the continuing paths (grid x, weighted density mass)."""
    return float(mass @ (_upper_tail((b - x) / s) + _upper_tail((b + x) / s)))


def _solve_boundary(target: float, x: np.ndarray, mass: np.ndarray, s: float) -> float:
    """The b at which the continuing paths cross with probability `target` (bisection on the
    log: targets of early looks are tiny)."""
    lo, hi = 0.0, 64.0
    log_target = math.log(target)
    for _ in range(100):
        mid = (lo + hi) / 2
        p = _crossing(mid, x, mass, s)
        lo, hi = (mid, hi) if p > 0 and math.log(p) > log_target else (lo, mid)
    return (lo + hi) / 2


def z_boundaries(fractions: tuple[float, ...], alpha: float = ALPHA) -> tuple[float, ...]:
    """Two-sided z boundaries at increasing information fractions whose cumulative type-I error
    at each look is spent_alpha of its fraction (normal theory, known variance): the recursive
    numerical integration of Armitage, McPherson and Rowe on the Brownian scale B(t) = Z·√t."""
    out: list[float] = []
    x = mass = None
    prev = 0.0
    for t in fractions:
        target = spent_alpha(t, alpha) - spent_alpha(prev, alpha)
        if x is None or mass is None:
            b = -math.sqrt(t) * _NORMAL.inv_cdf(target / 2)
            y, w = _simpson(b)
            density = np.exp(-(y**2) / (2 * t)) / math.sqrt(2 * math.pi * t)
        else:
            s = math.sqrt(t - prev)
            b = _solve_boundary(target, x, mass, s)
            y, w = _simpson(b)
            kernel = np.exp(-((y[:, None] - x[None, :]) ** 2) / (2 * s * s))
            density = kernel @ mass / (s * math.sqrt(2 * math.pi))
        x, mass, prev = y, w * density, t
        out.append(b / math.sqrt(t))
    return tuple(out)


def _beta_fraction(a: float, b: float, x: float) -> float:
    """The continued fraction of the incomplete beta function (modified Lentz)."""
    tiny = 1e-300
    c, d = 1.0, 1.0 - (a + b) * x / (a + 1)
    d = 1.0 / (d if abs(d) > tiny else tiny)
    h = d
    for m in range(1, 500):
        for num in (m * (b - m) * x / ((a + 2 * m - 1) * (a + 2 * m)),
                    -(a + m) * (a + b + m) * x / ((a + 2 * m) * (a + 2 * m + 1))):  # fmt: skip
            d = 1.0 + num * d
            d = 1.0 / (d if abs(d) > tiny else tiny)
            c = 1.0 + num / c
            c = c if abs(c) > tiny else tiny
            h *= d * c
        if abs(d * c - 1.0) < 1e-15:
            break
    return h


def t_tail(t: float, df: int) -> float:
    """P(|T| ≥ t) for Student's t with `df` degrees of freedom: the regularized incomplete beta
    I_x(df/2, 1/2) at x = df / (df + t²), exact in the far tail."""
    if t <= 0:
        return 1.0
    a, b, x = df / 2, 0.5, df / (df + t * t)
    front = math.exp(math.lgamma(a + b) - math.lgamma(a) - math.lgamma(b)
                     + a * math.log(x) + b * math.log1p(-x))  # fmt: skip
    if x < (a + 1) / (a + b + 2):
        return front * _beta_fraction(a, b, x) / a
    return 1.0 - front * _beta_fraction(b, a, 1 - x) / b


def t_critical(level: float, df: int) -> float:
    """The t with P(|T| ≥ t) = `level` at `df` degrees of freedom (bisection on log t)."""
    lo, hi = math.log(1e-6), math.log(1e30)
    for _ in range(200):
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if t_tail(math.exp(mid), df) > level else (lo, mid)
    return math.exp((lo + hi) / 2)


def look_df(arms: int) -> int:
    """The residual degrees of freedom of the block fit of `arms` measured arms."""
    return arms - arms // 4 - 1


def advance_null(rng: np.random.Generator, sums: np.ndarray, done: int, blocks: int) -> None:
    """Add blocks done+1 .. `blocks` to null experiments of unit normal arm noise, in place.
    sums[0] is S, the sum of the block deltas; sums[1] is Q, the sum of each block's own squared
    residuals plus its squared delta. Per block of 2 A and 2 B arms the delta is N(0, 1) and its
    own residual sum of squares χ²(2), independent of it."""
    new = rng.standard_normal((blocks - done, sums.shape[1]))
    sums[0] += new.sum(axis=0)
    sums[1] += (new * new).sum(axis=0) + rng.chisquare(2 * (blocks - done), sums.shape[1])


def null_abs_t(sums: np.ndarray, blocks: int) -> np.ndarray:
    """|t| of the block fit of every null experiment: RSS = Q − S²/blocks, delta = S/blocks and
    SE² = RSS / (df · blocks). Exact for normal arm noise at any spread and block levels (the
    t statistic does not depend on them)."""
    s, q = sums
    rss = np.maximum(q - s * s / blocks, 1e-300)
    return np.abs(s / blocks) / np.sqrt(rss / ((3 * blocks - 1) * blocks))


def t_boundaries(arms: tuple[int, ...], spent: tuple[float, ...], tail_matched: tuple[float, ...],
                 paths: int = CALIBRATION_PATHS, seed: int = CALIBRATION_SEED) -> tuple[float, ...]:  # fmt: skip
    """The t boundaries whose cumulative false-positive rate at each look is `spent`, found on
    `paths` simulated null experiments (normal arm noise, seeded): the first look's is its
    tail-matched boundary (exact: nothing was spent before it); at each later look the boundary
    is the |t| that the look's share of paths (still running) reaches. A look whose share is
    too rare to simulate (under _MIN_CROSSINGS paths) keeps its tail-matched boundary."""
    if len(arms) == 1:
        return tail_matched
    rng = np.random.default_rng(seed)
    sums, blocks = np.zeros((2, paths)), 0
    running = np.ones(paths, dtype=bool)
    out: list[float] = []
    for n, cumulative, matched in zip(arms, spent, tail_matched, strict=True):
        advance_null(rng, sums, blocks, n // 4)
        blocks = n // 4
        t = null_abs_t(sums, blocks)
        share = round(cumulative * paths) - (paths - int(running.sum()))
        c = matched
        if out and share >= _MIN_CROSSINGS:
            c = float(-np.partition(-t[running], share - 1)[share - 1])
        running &= t < c
        out.append(c)
    return tuple(out)


@dataclass(frozen=True)
class SequentialPlan:
    """The looks of `--arms auto` up to max_arms: per look (index k − 1), its measured arms, the
    α spent by then, the normal-theory z boundary, and the t boundary the look uses with its
    nominal two-sided level."""

    max_arms: int
    alpha: float
    arms: tuple[int, ...]  # 8, 16, ... max_arms
    spent: tuple[float, ...]  # cumulative α(n_k / max_arms)
    z: tuple[float, ...]  # normal-theory boundaries (known spread)
    df: tuple[int, ...]
    critical: tuple[float, ...]  # the t boundary: the look's interval is delta ± critical · SE
    level: tuple[float, ...]  # P(|T_df| ≥ critical): the look's nominal two-sided level

    @property
    def looks(self) -> int:
        """The number of looks."""
        return len(self.arms)


@lru_cache(maxsize=16)
def plan(max_arms: int = DEFAULT_MAX_ARMS, alpha: float = ALPHA) -> SequentialPlan:
    """The looks and boundaries of `--arms auto --max-arms max_arms` (a multiple of 8)."""
    if max_arms < ARMS_PER_LOOK or max_arms % ARMS_PER_LOOK or max_arms > MAX_ARMS_ADVISED:
        raise ValueError(f"--max-arms {max_arms}: give a multiple of {ARMS_PER_LOOK} from "
                         f"{ARMS_PER_LOOK} to {MAX_ARMS_ADVISED}")  # fmt: skip
    arms = tuple(range(ARMS_PER_LOOK, max_arms + 1, ARMS_PER_LOOK))
    spent = tuple(spent_alpha(n / max_arms, alpha) for n in arms)
    z = z_boundaries(tuple(n / max_arms for n in arms), alpha)
    df = tuple(look_df(n) for n in arms)
    matched = tuple(t_critical(math.erfc(c / math.sqrt(2)), d) for c, d in zip(z, df, strict=True))
    critical = t_boundaries(arms, spent, matched)
    level = tuple(t_tail(c, d) for c, d in zip(critical, df, strict=True))
    return SequentialPlan(max_arms, alpha, arms, spent, z, df, critical, level)


# what a look decides, by code: classify's value
CONTINUE, SETTLED, WITHIN = 0, 1, 2


def classify(delta_ns: float | np.ndarray, se_ns: float | np.ndarray, critical: float,
             min_effect_ns: float | np.ndarray) -> np.ndarray:  # fmt: skip
    """The rule at one look, elementwise (floats or numpy arrays): SETTLED when delta ± critical
    · SE excludes 0 (and |delta| ≥ 1 ns), WITHIN when it lies inside (−min_effect, +min_effect),
    else CONTINUE. The one definition of the rule, for look() and for the simulations."""
    half = critical * se_ns
    lo, hi = delta_ns - half, delta_ns + half
    settled = ((lo > 0) | (hi < 0)) & (np.abs(delta_ns) >= RESOLUTION_NS)
    within = (lo > -min_effect_ns) & (hi < min_effect_ns)
    return np.where(settled, SETTLED, np.where(within, WITHIN, CONTINUE))


@dataclass(frozen=True)
class Look:
    """One look of `--arms auto` at the measured arms so far."""

    number: int  # 1-based: look k sees 8k measured arms
    arms: int  # measured arms
    decision: str  # "continue" or "stop"
    reason: str  # "settled", "within min-effect", "max arms", "budget" or "unresolved"
    verdict: str  # "faster", "slower" (B relative to A) or "no difference"
    resolved: bool  # settled, or within min-effect
    delta_ns: float  # the block fit's estimate of B − A
    ci_ns: tuple[float, float]  # delta ± critical · SE: the repeated interval at the look's level
    level: float  # the look's nominal two-sided level (its interval is at 1 − level)
    critical: float
    se_ns: float
    df: int
    min_effect_ns: float


_REASONS = {SETTLED: "settled", WITHIN: "within min-effect"}


def look(seq: SequentialPlan, arms: list[Arm], min_effect_ns: float, last: bool = False) -> Look:
    """Decide at the measured arms so far (a multiple of 8, at most max_arms; the warm arm is
    left out): stop when the look's interval excludes 0 or lies within ±min_effect_ns, or at
    max arms, or when `last` (the runner will run no more arms: its budget is spent)."""
    measured = [a for a in arms if not a.discarded]
    n = len(measured)
    if n not in seq.arms:
        raise ValueError(f"a look needs a multiple of {ARMS_PER_LOOK} measured arms up to "
                         f"{seq.max_arms}, not {n}")  # fmt: skip
    k = seq.arms.index(n)
    fit = fit_blocks([a.median_ns for a in measured], [a.side for a in measured])
    crit = seq.critical[k]
    code = int(classify(fit.delta_ns, fit.se_ns, crit, min_effect_ns))
    verdict = NO_DIFFERENCE
    if code == SETTLED:
        verdict = "faster" if fit.delta_ns < 0 else "slower"
    reason = _REASONS.get(code, "unresolved")
    if code == CONTINUE and (n == seq.max_arms or last):
        reason = "max arms" if n == seq.max_arms else "budget"
    half = crit * fit.se_ns
    return Look(k + 1, n, "continue" if reason == "unresolved" else "stop", reason, verdict,
                code != CONTINUE, fit.delta_ns, (fit.delta_ns - half, fit.delta_ns + half),
                seq.level[k], crit, fit.se_ns, fit.df, min_effect_ns)  # fmt: skip


def default_min_effect_ns(arms: list[Arm], pct: float = DEFAULT_MIN_EFFECT_PCT) -> float:
    """`pct` percent of A's step time: the median of the measured A arms' median step times."""
    a = [x.median_ns for x in arms if not x.discarded and x.side == "a"]
    if not a:
        raise ValueError("no measured arm of side A")
    return pct / 100 * percentile(a, 50)


def next_look_fits(measured_s: float, measured: int, budget_left_s: float) -> bool:
    """Whether the next 8 arms fit in the budget left, at the mean duration of the `measured`
    arms so far (`measured_s` seconds in all). A budget ends the experiment at a look, never
    between two: the runner asks this before each pair of blocks."""
    return ARMS_PER_LOOK * measured_s / measured <= budget_left_s

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

Degenerate arms are said as they are: a delta under 1 ns (the record's unit) is "no difference",
never "faster by 0 ns"; arms without any spread (SE 0) give an interval of one point, the delta
itself, which settles any nonzero difference exactly.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from census.model import Arm, percentile

Z_975 = 1.959963984540054
Z_80 = 0.8416212335729143
_T_975 = (12.706205, 4.302653, 3.182446, 2.776445, 2.570582, 2.446912, 2.364624, 2.306004,
          2.262157, 2.228139, 2.200985, 2.178813, 2.160369, 2.144787, 2.13145, 2.119905,
          2.109816, 2.100922, 2.093024, 2.085963, 2.079614, 2.073873, 2.068658, 2.063899,
          2.059539, 2.055529, 2.051831, 2.048407, 2.04523, 2.042272)  # fmt: skip
MAX_ARMS_ADVISED = 400
RESOLUTION_NS = 1.0  # step times are integer ns: a smaller difference is never claimed


def t_975(df: int) -> float:
    """The 97.5% quantile of Student's t with `df` degrees of freedom (a table to 30, then the
    Cornish-Fisher expansion, within 1e-4 of the exact value)."""
    if df < 1:
        raise ValueError("df must be 1 or more")
    if df <= len(_T_975):
        return _T_975[df - 1]
    z = Z_975
    return z + (z**3 + z) / (4 * df) + (5 * z**5 + 16 * z**3 + 3 * z) / (96 * df * df)


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
    a_index: int
    b_index: int
    delta_ns: float  # median(B arm) − median(A arm)


@dataclass(frozen=True)
class ABStats:
    a: Side
    b: Side
    pairs: tuple[Pair, ...]
    delta_median_ns: float  # the model's estimate of B − A, per step
    delta_pct: float | None  # of A's median of arm medians
    ci95_ns: tuple[float, float]
    df: int
    residual_sd_ns: float  # arm-to-arm spread left after the blocks and the side
    verdict: str  # "faster", "slower" (B relative to A) or "no difference"
    arms_needed: int | None  # with "no difference": arms for 80% power at this size and spread

    @property
    def pairs_agreeing(self) -> int:
        """Pairs whose delta has the sign of the estimate (is 0, when the estimate is)."""
        if self.delta_median_ns == 0:
            return sum(1 for p in self.pairs if p.delta_ns == 0)
        sign = math.copysign(1.0, self.delta_median_ns)
        return sum(1 for p in self.pairs if p.delta_ns * sign > 0)


def analyze(arms: list[Arm]) -> ABStats:
    measured = [a for a in arms if not a.discarded]
    if len(measured) < 4 or len(measured) % 4:
        raise ValueError("an experiment needs measured arms in blocks of four")
    medians = np.array([a.median_ns for a in measured])
    is_b = np.array([a.side == "b" for a in measured], dtype=np.float64)
    blocks = np.arange(len(measured)) // 4
    design = np.column_stack([*(blocks == j for j in range(blocks.max() + 1)), is_b]).astype(float)
    beta, *_ = np.linalg.lstsq(design, medians, rcond=None)
    df = len(measured) - design.shape[1]
    resid = medians - design @ beta
    # what least squares leaves of an exact 0 (identical arms) is rounding, not a difference
    tiny = 1e-9 * max(1.0, float(np.max(np.abs(medians))))
    sd = _exact(math.sqrt(float(resid @ resid) / df), tiny)
    se = _exact(sd * math.sqrt(np.linalg.inv(design.T @ design)[-1, -1]), tiny)
    delta = _exact(float(beta[-1]), tiny)
    half = t_975(df) * se
    lo, hi = delta - half, delta + half
    verdict = "no difference"
    if abs(delta) >= RESOLUTION_NS and not lo <= 0 <= hi:
        verdict = "faster" if delta < 0 else "slower"
    a, b = _side(measured, "a"), _side(measured, "b")
    pairs = tuple(_pair(measured[i], measured[i + 1]) for i in range(0, len(measured), 2))
    return ABStats(
        a=a,
        b=b,
        pairs=pairs,
        delta_median_ns=delta,
        delta_pct=100.0 * delta / a.median_of_arm_medians_ns
        if a.median_of_arm_medians_ns > 0
        else None,
        ci95_ns=(lo, hi),
        df=df,
        residual_sd_ns=sd,
        verdict=verdict,
        arms_needed=None if verdict != "no difference" else arms_needed(delta, sd),
    )


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


def _pair(x: Arm, y: Arm) -> Pair:
    a, b = (x, y) if x.side == "a" else (y, x)
    return Pair(a.index, b.index, b.median_ns - a.median_ns)

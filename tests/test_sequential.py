"""`census ab --arms auto` (census.compare.ab.sequential): the spending function and its boundaries
exactly, decisions on hand-made arms, and the error rates, arms used and power by simulation.

The simulations run the rule itself (sequential.classify, at the plan's boundaries) on a
vectorized copy of the block fit that is checked against fit_blocks, and on the same arms through
look() (the decisions agree experiment by experiment). Their rates are printed (pytest -s) and
are those of docs/statistics.md, "Sequential arms (--arms auto)".
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from census.capture.arms import arm_order
from census.compare.ab.sequential import (
    CONTINUE,
    SETTLED,
    WITHIN,
    advance_null,
    classify,
    default_min_effect_ns,
    look,
    next_look_fits,
    null_abs_t,
    plan,
    spent_alpha,
    t_critical,
    t_tail,
    z_boundaries,
)
from census.compare.ab.stats import fit_blocks, t_975
from census.model.ab import Arm

STEP_NS = 100e6  # A's step time in the simulations
RUNS = 20_000  # simulated experiments per setting
SIDES = np.array([s == "b" for s in arm_order(400)[1:]], dtype=float)  # measured arms' [B]


def arms_from(medians: list[float]) -> list[Arm]:
    """The warm arm (150 ms), then measured arms in ABBA BAAB order with these medians."""
    order = arm_order(len(medians))
    values = [150e6, *medians]
    return [Arm(s, i, i == 0, (int(values[i]),)) for i, s in enumerate(order)]


# The spending function and the boundaries


def test_spending_at_known_fractions() -> None:
    assert spent_alpha(1.0) == pytest.approx(0.05, rel=1e-12)
    assert spent_alpha(0.5) == pytest.approx(0.005574596680784402, rel=1e-9)
    assert spent_alpha(0.25) == pytest.approx(8.857543832140365e-05, rel=1e-9)
    assert spent_alpha(1 / 6) == pytest.approx(1.579449240239549e-06, rel=1e-9)
    assert spent_alpha(0.0) == 0.0
    assert spent_alpha(1.0, alpha=0.01) == pytest.approx(0.01, rel=1e-9)


def test_z_boundaries_spend_exactly() -> None:
    # the first look's boundary is the spending function's own; two looks by hand (at t = 1/2
    # the z boundary is 1.96·√2); the crossing probabilities against scipy's bivariate normal
    z = z_boundaries((0.5, 1.0))
    assert z[0] == pytest.approx(1.959963984540054 * math.sqrt(2), rel=1e-9)
    assert z == pytest.approx((2.771807, 1.979321), abs=2e-5)
    stats = pytest.importorskip("scipy.stats")
    for fractions in ((0.5, 1.0), (1 / 3, 2 / 3, 1.0), (0.25, 0.5, 0.75, 1.0)):
        c = np.array(z_boundaries(fractions))
        t = np.array(fractions)
        corr = np.sqrt(np.minimum.outer(t, t) / np.maximum.outer(t, t))
        mvn = stats.multivariate_normal(np.zeros(len(t)), corr)
        inside = mvn.cdf(c, lower_limit=-c)  # no look crosses
        assert 1 - inside == pytest.approx(0.05, abs=2e-5), fractions


def test_t_tail_and_critical() -> None:
    assert t_tail(t_975(5), 5) == pytest.approx(0.05, rel=1e-5)
    assert t_critical(0.05, 5) == pytest.approx(2.5705818356363155, rel=1e-9)
    assert t_critical(1.579449240239549e-06, 5) == pytest.approx(25.98, abs=0.01)
    stats = pytest.importorskip("scipy.stats")
    for df in (1, 2, 5, 11, 35, 299):
        for t in (0.1, 1.0, 2.0, 5.0, 30.0, 1e4):
            assert t_tail(t, df) == pytest.approx(2 * stats.t.sf(t, df), rel=1e-9), (t, df)


# plan(48), as docs/statistics.md tabulates it (the t boundaries calibrated by simulation, seed
# 20261222, 2,000,000 null experiments)
CRITICAL_48 = (25.977, 4.655, 3.210, 2.664, 2.373, 2.179)


def test_plan_of_the_default_max_arms() -> None:
    seq = plan()
    assert seq.max_arms == 48 and seq.looks == 6 and seq.arms == (8, 16, 24, 32, 40, 48)
    assert seq.df == (5, 11, 17, 23, 29, 35)
    assert seq.spent == pytest.approx([spent_alpha(k / 6) for k in range(1, 7)], rel=1e-12)
    assert seq.spent[-1] == pytest.approx(0.05)
    assert seq.critical == pytest.approx(CRITICAL_48, abs=1e-3)
    # the first look's boundary is exact: its t tail is the α spent by then
    assert seq.level[0] == pytest.approx(seq.spent[0], rel=1e-6)
    assert seq.level == pytest.approx(
        [t_tail(c, d) for c, d in zip(seq.critical, seq.df, strict=True)]
    )
    assert plan(8).critical == pytest.approx((t_975(5),), abs=1e-6)  # one look: the fixed test


def test_the_calibrated_boundaries_spend_alpha_on_new_null_experiments() -> None:
    """The exact null of the block fit (normal arm noise), 2,000,000 new experiments (a seed
    unlike the calibration's) of up to 48 arms: the false-positive rate of each plan(8K), K = 1
    to 6, is 5% up to this simulation's error. plan(8K) looks at the first 8, 16, ... 8K arms,
    so one set of experiments serves the six plans, each read at its own looks: every rate rests
    on 2,000,000 experiments and is held to the same 3 SD, from a sixth of the random draws that
    six separate sets took."""
    paths, error = 2_000_000, math.sqrt(0.05 * 0.95 / 2_000_000)
    plans = [plan(8 * looks) for looks in range(1, 7)]
    rng, sums = np.random.default_rng([4242, 0]), np.zeros((2, paths))
    running = np.ones((len(plans), paths), dtype=bool)  # per plan, the experiments not stopped
    for k in range(6):  # look k + 1: arms 8(k + 1), blocks 2(k + 1)
        advance_null(rng, sums, 2 * k, 2 * (k + 1))
        t = null_abs_t(sums, 2 * (k + 1))
        for seq, still in zip(plans[k:], running[k:], strict=True):
            still &= t < seq.critical[k]
    for looks, still in enumerate(running, start=1):
        rate = 1 - still.mean()
        print(f"null K={looks}: {rate:.5f} ({paths - int(still.sum())}/{paths})")
        assert abs(rate - 0.05) <= 3 * error, looks


def test_max_arms_must_be_a_multiple_of_eight() -> None:
    for bad in (0, 4, 12, 44, 408):
        with pytest.raises(ValueError, match="give a multiple of 8 from 8 to 400"):
            plan(bad)


# One look at hand-made arms (plan(48): look 2 at 16 arms has t boundary 4.655, df 11)

FASTER_16 = [100e6, 90e6, 91e6, 101e6, 89e6, 99e6, 100e6, 90e6] * 2  # B 10 ms faster
NOISY_16 = [100e6, 103e6, 97e6, 101e6, 98e6, 102e6, 99e6, 100e6] * 2  # ±3%: unresolved


def test_a_look_that_settles() -> None:
    seq = plan()
    arms = arms_from(FASTER_16)
    fit = fit_blocks(FASTER_16, [a.side for a in arms[1:]])
    got = look(seq, arms, 1e6)
    half = seq.critical[1] * fit.se_ns
    assert (got.number, got.arms, got.decision, got.reason) == (2, 16, "stop", "settled")
    assert got.verdict == "faster" and got.resolved
    assert got.delta_ns == pytest.approx(-10e6) and got.se_ns == fit.se_ns and got.df == 11
    assert got.ci_ns == pytest.approx((-10e6 - half, -10e6 + half))
    assert got.level == seq.level[1] and got.critical == seq.critical[1]


def test_a_look_within_min_effect() -> None:
    same = [100e6 + d for d in (0, 20e3, -10e3, 10e3, -20e3, 0, 10e3, -10e3)] * 2
    got = look(plan(), arms_from(same), default_min_effect_ns(arms_from(same)))
    assert (got.decision, got.reason, got.verdict, got.resolved) == (
        "stop", "within min-effect", "no difference", True)  # fmt: skip
    lo, hi = got.ci_ns
    assert -1e6 < lo < 0 < hi < 1e6 and got.min_effect_ns == pytest.approx(1e6, rel=1e-4)


def test_a_look_that_continues_and_the_last_looks() -> None:
    got = look(plan(), arms_from(NOISY_16), 1e6)
    assert (got.decision, got.reason, got.verdict, got.resolved) == (
        "continue", "unresolved", "no difference", False)  # fmt: skip
    budget = look(plan(), arms_from(NOISY_16), 1e6, last=True)
    assert (budget.decision, budget.reason, budget.resolved) == ("stop", "budget", False)
    assert budget.ci_ns == got.ci_ns  # the interval at the look's level, as at any look
    at_max = look(plan(16), arms_from(NOISY_16), 1e6)
    assert (at_max.decision, at_max.reason, at_max.number) == ("stop", "max arms", 2)
    assert at_max.critical == plan(16).critical[1] < got.critical  # the last look spends all α
    with pytest.raises(ValueError, match="a multiple of 8 measured arms up to 48, not 12"):
        look(plan(), arms_from(NOISY_16[:12]), 1e6)


def test_arms_without_spread_and_a_difference_under_a_nanosecond() -> None:
    assert int(classify(-5.0, 0.0, 25.0, 1e6)) == SETTLED  # an exact difference settles
    assert int(classify(0.5, 0.0, 25.0, 1e6)) == WITHIN  # never "faster by 0.5 ns"
    assert int(classify(0.5, 0.0, 25.0, 0.0)) == CONTINUE


def test_min_effect_and_the_budget() -> None:
    arms = arms_from(FASTER_16)
    assert default_min_effect_ns(arms) == pytest.approx(0.01 * 100e6)  # A's arm medians: 99-101 ms
    assert default_min_effect_ns(arms, 2.0) == pytest.approx(2e6)
    assert next_look_fits(80.0, 8, 80.0) and not next_look_fits(80.0, 8, 79.0)


# Simulation: arm medians (ns) of an experiment whose A step is 100 ms; arm noise sd_pct of the
# step, normal or t3 (scaled to that sd); block drift: each block of four its own level (sd 2% of
# the step) and a steady drift of +0.2% per arm over the whole experiment.


def simulate_arms(rng: np.random.Generator, delta_pct: float, sd_pct: float, arms: int,
                  noise: str = "normal") -> np.ndarray:  # fmt: skip
    """`noise` "normal" or "t3", with the block drift; "normal, no drift" without it."""
    shape = (RUNS, arms)
    e = rng.standard_t(3, shape) / math.sqrt(3) if noise == "t3" else rng.standard_normal(shape)
    blocks = np.repeat(rng.standard_normal((RUNS, arms // 4)), 4, axis=1)
    drift = 0.02 * blocks + 0.002 * np.arange(arms)
    level = 1 + delta_pct / 100 * SIDES[:arms] + (0 if noise.endswith("no drift") else drift)
    return STEP_NS * (level + sd_pct / 100 * e)


def fit_many(y: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """fit_blocks of every row (arm medians in ABBA BAAB order): the delta and its SE. In a block
    of 2 A and 2 B the centred [B] is ±1/2, so delta = Σ centred y · ±1/2 / (n/4)."""
    runs, n = y.shape
    blocks = y.reshape(runs, n // 4, 4)
    centred = (blocks - blocks.mean(axis=2, keepdims=True)).reshape(runs, n)
    delta = centred @ (SIDES[:n] - 0.5) / (n / 4)
    rss = (centred**2).sum(axis=1) - delta**2 * (n / 4)
    sd = np.sqrt(np.maximum(rss, 0) / (n - n // 4 - 1))
    return delta, sd * 2 / math.sqrt(n)


def run_sequential(y: np.ndarray, max_arms: int = 48) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Every experiment's stop by the plan's rule (min effect 1% of its A arms' median): the
    decision code, the arms used and the delta at the stop."""
    seq = plan(max_arms)
    code, used, delta = (np.zeros(len(y), int), np.zeros(len(y), int), np.zeros(len(y)))
    running = np.ones(len(y), dtype=bool)
    for k, n in enumerate(seq.arms):
        d, se = fit_many(y[:, :n])
        m = 0.01 * np.median(y[:, :n][:, SIDES[:n] == 0], axis=1)
        c = classify(d, se, seq.critical[k], m)
        stop = running & ((c != CONTINUE) | (n == max_arms))
        code[stop], used[stop], delta[stop] = c[stop], n, d[stop]
        running &= ~stop
    return code, used, delta


def test_the_vectorized_fit_is_fit_blocks() -> None:
    y = simulate_arms(np.random.default_rng(1), -3.0, 2.0, 24)
    d, se = fit_many(y)
    for i in range(20):
        fit = fit_blocks(list(y[i]), ["b" if s else "a" for s in SIDES[:24]])
        assert (d[i], se[i]) == pytest.approx((fit.delta_ns, fit.se_ns), rel=1e-9)


def test_the_simulation_decides_as_look_does() -> None:
    y = np.round(simulate_arms(np.random.default_rng(2), -1.0, 1.0, 48)[:300])
    code, used, _ = run_sequential(y)
    reasons = {SETTLED: "settled", WITHIN: "within min-effect", CONTINUE: "max arms"}
    assert set(code) == {SETTLED, WITHIN, CONTINUE}  # every way to stop, among these 300
    for i in range(300):
        for n in range(8, 49, 8):
            arms = arms_from(list(y[i, :n]))
            got = look(plan(), arms, default_min_effect_ns(arms))
            if got.decision == "stop":
                break
        assert (got.arms, got.reason) == (used[i], reasons[code[i]]), i


MC_5 = math.sqrt(0.05 * 0.95 / RUNS)  # the simulation error of a 5% rate over RUNS experiments
NOISES = ("normal", "t3", "normal, no drift")


@pytest.mark.parametrize("noise", NOISES)
def test_a_a_false_positives_stay_within_five_percent(noise: str) -> None:
    """A/A (true delta 0), arm noise 2% of the step: the share of experiments that end faster or
    slower, for every number of looks K = max_arms / 8 from 1 to 6. Without drift and with
    normal noise the rate is 5% up to the simulations' error (the boundaries are exact there);
    the drift left inside blocks widens the intervals and t3 noise makes the t test cautious."""
    for looks in range(1, 7):
        rng = np.random.default_rng([20261222, looks, NOISES.index(noise)])
        code, used, _ = run_sequential(simulate_arms(rng, 0.0, 2.0, 8 * looks, noise), 8 * looks)
        rate = float(np.mean(code == SETTLED))
        print(f"A/A {noise} K={looks}: {rate:.4f} ({int(np.sum(code == SETTLED))}/{RUNS}), "
              f"mean arms {used.mean():.1f}, within min-effect {np.mean(code == WITHIN):.4f}")  # fmt: skip
        assert rate <= 0.05 + 3 * MC_5, (noise, looks)


@pytest.mark.parametrize("sd_pct", [2.0, 1.0])
def test_power_and_arms_used(sd_pct: float) -> None:
    """B faster by 1%, 3% and 10% of the step (and A/A), max 48 arms: the share of experiments
    that end "faster", their wrong-way share and the mean arms used."""
    found = {}
    for gain in (0.0, 1.0, 3.0, 10.0):
        rng = np.random.default_rng([20261223, int(gain), int(sd_pct)])
        code, used, delta = run_sequential(simulate_arms(rng, -gain, sd_pct, 48))
        faster = float(np.mean((code == SETTLED) & (delta < 0)))
        slower = float(np.mean((code == SETTLED) & (delta > 0)))
        within = float(np.mean(code == WITHIN))
        found[gain] = (faster, slower, within, float(used.mean()))
        print(f"sd {sd_pct}% gain {gain}%: faster {faster:.4f} slower {slower:.4f} within "
              f"min-effect {within:.4f} mean arms {used.mean():.1f}")  # fmt: skip
    assert found[10.0][0] == 1.0 and found[10.0][3] <= 16.5
    assert found[3.0][0] >= 0.99 and found[3.0][3] < 48
    assert found[1.0][2] <= 0.05  # a true 1% is rarely "within ±1%" (the interval covers it)
    assert found[1.0][0] >= (0.3 if sd_pct == 2.0 else 0.85)
    assert all(slower <= 0.05 + 3 * MC_5 for _, slower, _, _ in found.values())
    assert found[0.0][0] + found[0.0][1] <= 0.05 + 3 * MC_5

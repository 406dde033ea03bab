"""The A/B statistics: exact values on fixed arms, and error rates proven by simulation."""

from __future__ import annotations

import math

import numpy as np
import pytest

from census.capture.arms import arm_order
from census.compare.ab.stats import analyze, arms_needed
from census.compare.quantiles import t_95, t_975
from census.model.ab import Arm
from census.model.step import percentile


def arms_from(order: list[str], medians: list[float], steps: int = 3) -> list[Arm]:
    """Arms whose steps are (m - 1, m, m + 1): median m."""
    out = []
    for i, (side, m) in enumerate(zip(order, medians, strict=True)):
        out.append(Arm(side, i, i == 0, tuple(int(m) + d for d in range(-1, steps - 1))))
    return out


def test_order_is_a_warm_arm_then_abba_baab() -> None:
    assert arm_order(8) == ["a", "a", "b", "b", "a", "b", "a", "a", "b"]
    assert arm_order(4) == ["a", "a", "b", "b", "a"]
    assert arm_order(12)[9:] == ["a", "b", "b", "a"]
    for bad in (0, 2, 6, 10):
        with pytest.raises(ValueError, match="multiple of 4"):
            arm_order(bad)


def test_t_quantiles() -> None:
    assert t_975(3) == 3.182446
    assert abs(t_975(60) - 2.0002978220142604) < 1e-4
    assert abs(t_975(31) - 2.039513446396408) < 1e-4


# t(0.95, df) from a printed table (reference values, six decimals): the table's rows and the
# expansion beyond it
T_95_REFERENCE = {1: 6.313752, 2: 2.919986, 5: 2.015048, 10: 1.812461, 20: 1.724718,
                  30: 1.697261, 31: 1.695519, 40: 1.683851, 60: 1.670649, 120: 1.657651,
                  1000: 1.646379}  # fmt: skip


def test_t_95_quantiles() -> None:
    for df, value in T_95_REFERENCE.items():
        assert abs(t_95(df) - value) < (1e-9 if df <= 30 else 1e-4), df
    with pytest.raises(ValueError, match="df must be 1 or more"):
        t_95(0)


def test_t_quantiles_against_scipy() -> None:
    stats = pytest.importorskip("scipy.stats")
    for df in range(1, 400):
        assert abs(t_95(df) - stats.t.ppf(0.95, df)) < 1e-4, df
        assert abs(t_975(df) - stats.t.ppf(0.975, df)) < 1e-4, df


def test_exact_statistics_on_fixed_arms() -> None:
    order = arm_order(8)
    # warm arm, then A B B A B A A B with A near 100 ms and B near 90 ms
    medians = [150e6, 100e6, 90e6, 91e6, 101e6, 89e6, 99e6, 100e6, 90e6]
    st = analyze(arms_from(order, medians))
    assert st.delta_median_ns == pytest.approx((90 + 91 + 89 + 90) / 4 * 1e6 - 100e6)
    assert st.delta_median_ns == pytest.approx(-10e6)
    assert [p.delta_ns for p in st.pairs] == [-10e6, -10e6, -10e6, -10e6]
    assert [(p.a_index, p.b_index) for p in st.pairs] == [(1, 2), (4, 3), (6, 5), (7, 8)]
    assert st.df == 5 and st.verdict == "faster" and st.pairs_agreeing == 4
    # residuals of the block model, by hand: block 1 mean A 100.5, B 90.5; block 2 A 99.5, B 89.5
    resid = np.array([-0.5, -0.5, 0.5, 0.5, -0.5, -0.5, 0.5, 0.5]) * 1e6
    sd = math.sqrt(resid @ resid / 5)
    assert st.residual_sd_ns == pytest.approx(sd)
    half = 3.182446 * 0 + t_975(5) * sd * math.sqrt(0.5)  # SE = sd·sqrt(1/4 + 1/4)
    assert st.ci95_ns == pytest.approx((-10e6 - half, -10e6 + half))
    assert st.a.median_of_arm_medians_ns == 100e6 and st.b.median_of_arm_medians_ns == 90e6
    assert st.a.steps == 12 and st.a.arms == 4
    assert st.a.median_ns == percentile([t for m in (100, 101, 99, 100) for t in
                                         (m * 10**6 - 1, m * 10**6, m * 10**6 + 1)], 50)  # fmt: skip
    assert st.delta_pct == pytest.approx(-10.0)
    assert st.arms_needed is None


def test_within_noise_says_no_difference_and_how_many_arms() -> None:
    order = arm_order(8)
    medians = [150, 100, 99, 103, 98, 101, 97, 100, 102]
    st = analyze(arms_from(order, [m * 1e6 for m in medians]))
    assert st.verdict == "no difference"
    assert st.ci95_ns[0] < 0 < st.ci95_ns[1]
    assert st.arms_needed == arms_needed(st.delta_median_ns, st.residual_sd_ns)
    assert st.arms_needed is None or st.arms_needed > 8


def test_arms_needed_grows_as_the_effect_shrinks() -> None:
    assert arms_needed(10.0, 1.0) == 4
    assert arms_needed(1.0, 1.0) > arms_needed(2.0, 1.0) > arms_needed(4.0, 1.0)
    assert arms_needed(0.0, 1.0) is None and arms_needed(0.001, 1.0) is None


def simulate(gain: float, arm_cv: float, rng: np.random.Generator, arms: int = 8) -> str:
    """One experiment: each arm's steps share an arm-level offset (correlated within the
    process) plus step noise; a slow warm arm; a slow drift over the whole experiment."""
    order = arm_order(arms)
    out = []
    for i, side in enumerate(order):
        base = 100e6 * (1 - gain if side == "b" else 1) * (1 + 0.002 * i)
        level = base * (1 + arm_cv * rng.standard_normal()) * (1.5 if i == 0 else 1)
        steps = level * (1 + 0.02 * rng.standard_normal(20)) + rng.exponential(1e6, 20)
        out.append(Arm(side, i, i == 0, tuple(int(s) for s in steps)))
    return analyze(out).verdict


def test_simulated_a_a_experiments_say_no_difference() -> None:
    rng = np.random.default_rng(20261203)
    verdicts = [simulate(0.0, 0.03, rng) for _ in range(400)]
    assert verdicts.count("no difference") / 400 >= 0.93


def test_simulated_ten_percent_gain_is_found() -> None:
    rng = np.random.default_rng(7)
    verdicts = [simulate(0.10, 0.03, rng) for _ in range(400)]
    assert verdicts.count("faster") / 400 >= 0.80
    assert verdicts.count("slower") == 0


def test_simulated_slowdown_is_called_slower() -> None:
    rng = np.random.default_rng(11)
    verdicts = [simulate(-0.10, 0.03, rng) for _ in range(100)]
    assert verdicts.count("slower") >= 80


def _sentence(a: tuple[int, ...], b: tuple[int, ...]) -> str:
    from census.compare.ab.experiment import verdict_sentence

    order = arm_order(4)
    runs = [Arm(s, i, i == 0, a if s == "a" else b) for i, s in enumerate(order)]
    return verdict_sentence(analyze(runs), ("eager", "compiled"))


def test_verdict_sentences_of_degenerate_arms() -> None:
    assert _sentence((1000,) * 3, (1000,) * 3) == (
        "no difference between eager and compiled: every arm's median step time is the same "
        "(1.0 µs) over 4 uncaptured arms"
    )
    assert _sentence((1000,) * 3, (1005,) * 3) == (
        "compiled is slower than eager by 5 ns/step (+0.5%; exact: no spread between arms; 2/2 "
        "pairs agree), over 4 uncaptured arms"
    )

"""`census ab --equivalence` (two one-sided tests on the verdict's block fit) and `census ab
--fail-if` (gates on the arms' 95% interval): exact values on hand-made arms, the error rates
by simulation, every format, and the CLI's exit codes."""

from __future__ import annotations

import json
import math
import sys
from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

from census.api import experiment_view
from census.capture.arms import arm_order
from census.cli import app
from census.compare.ab.experiment import Experiment, with_equivalence
from census.compare.ab.gates import check_ab, parse_ab_gate
from census.compare.ab.stats import analyze, fit_blocks, fit_step, t_95, t_975, tost
from census.compare.gates import Amount, parse_amount
from census.errors import UsageError
from census.model.ab import Arm
from census.render import render

runner = CliRunner()
HELPER = Path(__file__).parent / "helpers" / "sleep_train.py"
ORDER = arm_order(8)  # the warm arm first
SIDES = ORDER[1:]


def arms_from(medians: list[float]) -> list[Arm]:
    """Arms (warm arm first, ABBA BAAB) whose steps are (m − 1, m, m + 1): median m."""
    return [Arm(side, i, i == 0, tuple(int(m) + d for d in (-1, 0, 1)))
            for i, (side, m) in enumerate(zip(ORDER, medians, strict=True))]  # fmt: skip


def experiment(medians: list[float]) -> Experiment:
    arms = arms_from(medians)
    return Experiment(("base", "new"), {"a": ["a"], "b": ["b"]}, tuple(arms), analyze(arms),
                      None, "--no-capture")  # fmt: skip


# A near 100 ms, B near 90 ms: delta −10 ms, residual sd 0.5 ms·sqrt(8/5), SE = sd·sqrt(1/2)
FASTER = [150e6, 100e6, 90e6, 91e6, 101e6, 89e6, 99e6, 100e6, 90e6]
# A and B both near 100 ms: no difference
SAME = [150e6, 100e6, 100.2e6, 99.9e6, 100.1e6, 99.8e6, 100e6, 100.1e6, 99.9e6]


def test_tost_is_the_90_percent_interval_of_the_verdicts_fit() -> None:
    arms = arms_from(FASTER)
    st, fit = analyze(arms), fit_step(arms)
    assert (fit.delta_ns, fit.ci95_ns, fit.df) == (st.delta_median_ns, st.ci95_ns, st.df)
    sd = math.sqrt(8 * 0.25e12 / 5)
    assert fit.se_ns == pytest.approx(sd * math.sqrt(0.5))
    assert fit.ci95_ns[1] - fit.delta_ns == pytest.approx(t_975(5) * fit.se_ns)
    half = t_95(5) * fit.se_ns
    eq = tost(fit, 12e6, 12.0)
    assert eq.ci90_ns == pytest.approx((-10e6 - half, -10e6 + half))
    assert eq.equivalent and eq.margin_pct == 12.0
    assert not tost(fit, 10e6).equivalent  # the interval reaches −10 ms − half
    assert not tost(fit, 10e6 + half).equivalent  # the bound is not inside: open interval
    assert tost(fit, 10e6 + half * 1.001).equivalent


def test_arms_without_spread_give_the_point() -> None:
    fit = fit_blocks([5e6] * 8, SIDES)
    assert fit.se_ns == 0 and tost(fit, 1.0).ci90_ns == (0.0, 0.0) and tost(fit, 1.0).equivalent
    fit = fit_blocks([5e6 + 100 * (s == "b") for s in SIDES], SIDES)
    assert tost(fit, 99.0).equivalent is False and tost(fit, 101.0).equivalent


def test_amounts() -> None:
    assert parse_amount("2%") == Amount(2.0, True)
    assert parse_amount("0.5ms") == parse_amount(" 500 us ") == parse_amount("500µs")
    assert parse_amount("0.5ms") == Amount(500_000.0, False)
    assert parse_amount("1s").ns(1e6) == 1e9 and parse_amount("2%").ns(100e6) == 2e6
    for bad in ("2", "0%", "-1%", "1h", "2 %%", "２%"):
        with pytest.raises(UsageError, match="give a share of A's step above 0"):
            parse_amount(bad)


# By simulation: 8 arms of 20 steps; each arm has its own level (arm-to-arm noise), its steps
# their own noise and a heavy tail, and the whole experiment a slow drift. The margin is 2% of A's
# median of arm medians, as census ab takes it.
def simulate(true_pct: float, arm_cv: float, n: int, seed: int) -> float:
    """The share of `n` experiments that say "equivalent within ±2%" when B − A is `true_pct`
    percent of A's step."""
    rng = np.random.default_rng(seed)
    is_b = np.array([s == "b" for s in SIDES])
    level = 100e6 * (1 + true_pct / 100 * is_b) * (1 + 0.001 * np.arange(8))
    arm = level * (1 + arm_cv * rng.standard_normal((n, 8)))
    steps = arm[..., None] * (1 + 0.01 * rng.standard_normal((n, 8, 20)))
    medians = np.median(steps + rng.exponential(0.2e6, (n, 8, 20)), axis=2)
    said = 0
    for m in medians:
        margin = 0.02 * float(np.median(m[~is_b]))
        said += tost(fit_blocks(list(m), SIDES), margin, 2.0).equivalent
    return said / n


def test_simulated_difference_at_the_margin_is_rarely_equivalent() -> None:
    # at the margin the one-sided test on that side rejects in 5% of experiments (exactly, for
    # normal errors) and TOST needs both: its rate is at most 5%, up to simulation error
    assert simulate(2.0, 0.005, 4000, 20261203) <= 0.05  # 195/4000
    assert simulate(-2.0, 0.005, 4000, 20261204) <= 0.05  # 179/4000
    assert simulate(2.0, 0.01, 4000, 20261205) <= 0.05  # 176/4000


def test_simulated_no_difference_at_small_spread_is_equivalent() -> None:
    assert simulate(0.0, 0.005, 2000, 20261206) >= 0.95  # 1,968/2000
    # at 3% arm-to-arm spread 8 arms cannot show ±2%: "not shown equivalent" every time
    assert simulate(0.0, 0.03, 500, 20261207) == 0.0


def test_the_sentence_follows_the_verdict_in_every_format() -> None:
    exp = with_equivalence(experiment(SAME), parse_amount("2%"))
    eq = exp.equivalence
    assert eq is not None and eq.equivalent and eq.margin_pct == 2.0
    assert eq.margin_ns == pytest.approx(0.02 * exp.stats.a.median_of_arm_medians_ns)
    view = experiment_view(exp)
    sentence = view.explanation.equivalence
    lo, hi = eq.ci90_ns
    assert sentence is not None and sentence.startswith("new and base are equivalent within ±2% ")
    assert sentence.endswith("lies inside it (two one-sided tests, α = 0.05)")
    assert view.explanation.lines[:2] == [view.explanation.verdict, sentence]
    terminal = render(view, "terminal", width=400).splitlines()
    assert terminal[1] == sentence
    markdown = render(view, "markdown").splitlines()
    assert markdown[markdown.index(f"**{view.explanation.verdict}**") + 2] == sentence
    page = render(view, "html").replace("\u00a0", " ")  # a number kept with its unit
    assert f"{view.explanation.verdict}; {sentence}" in page
    doc = json.loads(render(view, "json"))
    assert doc["equivalence"] == {"margin_ns": eq.margin_ns, "margin_pct": 2.0,
                                  "ci90_ns": [lo, hi], "coverage": 0.9,
                                  "equivalent": True}  # fmt: skip
    assert doc["explanation"][:2] == [view.explanation.verdict, sentence]


def test_not_shown_equivalent_and_an_absolute_margin() -> None:
    exp = with_equivalence(experiment(FASTER), parse_amount("0.5ms"))
    eq = exp.equivalence
    assert eq is not None and not eq.equivalent
    assert eq.margin_ns == 500_000.0 and eq.margin_pct == pytest.approx(0.5)
    assert experiment_view(exp).explanation.equivalence == (
        "new and base are not shown equivalent within ±0.5% (±500.0 µs/step): the 90% CI of "
        f"new − base, {_ms(eq.ci90_ns[0])} to {_ms(eq.ci90_ns[1])}, reaches beyond it (two "
        "one-sided tests, α = 0.05)"
    )
    plain = experiment_view(experiment(FASTER))
    assert plain.explanation.equivalence is None
    assert json.loads(render(plain, "json"))["equivalence"] is None


def _ms(ns: float) -> str:
    return f"{ns / 1e6:.2f} ms"


# Gates on the arms' 95% interval


def gates(*texts: str) -> list:
    return [parse_ab_gate(t) for t in texts]


def test_a_settled_slowdown_beyond_the_amount_fails() -> None:
    slower = [150e6, 90e6, 100e6, 101e6, 91e6, 99e6, 89e6, 90e6, 100e6]  # B 10 ms slower
    st = analyze(arms_from(slower))
    lo, hi = st.ci95_ns
    assert st.verdict == "slower" and 8.5e6 < lo < 9e6  # of A's 90 ms: 9.4-10%
    texts = ("slower>2%", "slower>0%", "slower>9%", "faster>0%", "slower>15%", "slower>=1ms",
             "slower>9ms")  # fmt: skip
    failed = check_ab(gates(*texts), st, ("base", "new"))
    assert [line.split(":")[1].strip() for line in failed] == [
        "slower>2%",
        "slower>0%",
        "slower>9%",
        "slower>=1ms",
    ]
    assert failed[0] == (
        f"gate failed: slower>2%: new is slower than base by 10.00 ms/step (+11.1%), 95% CI "
        f"+{_ms(lo)} to +{_ms(hi)} (+{100 * lo / 90e6:.1f}% to +{100 * hi / 90e6:.1f}%)"
    )


def test_a_settled_gain_fails_faster_gates_only() -> None:
    st = analyze(arms_from(FASTER))  # −10 ms of 100 ms, CI about −11.1 to −8.9 ms
    labels = ("base", "new")
    assert check_ab(gates("slower>0%", "faster>12%", "faster>=9.5ms"), st, labels) == []
    failed = check_ab(gates("faster>5%", "faster>=1ms"), st, labels)
    assert len(failed) == 2 and failed[0].startswith("gate failed: faster>5%: new is faster")


def test_an_unsettled_difference_fails_no_gate() -> None:
    st = analyze(arms_from(SAME))
    assert st.verdict == "no difference"
    assert (
        check_ab(gates("slower>0%", "faster>0%", "slower>=0ms", "faster>=0ns"), st, ("a", "b"))
        == []
    )


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("slower>2", "census ab gates on its arms' 95% CI: write slower>V, slower>=V"),
        ("kernel_count>+0", "census ab gates on its arms' 95% CI"),
        ("slower>-2%", "census ab gates on its arms' 95% CI"),
        ("faster<5%", "an upper bound is not a gate on arms (an unsettled difference never fails"),
    ],
)
def test_a_malformed_gate_is_a_usage_error(text: str, message: str) -> None:
    with pytest.raises(UsageError, match=message.replace("(", r"\(").replace(")", r"\)")):
        parse_ab_gate(text)


def cmd(*args: str) -> str:
    return " ".join([sys.executable, str(HELPER), *args])


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--fail-if", "slower>2"], "--fail-if 'slower>2': census ab gates on its arms' 95% CI"),
        (["--equivalence", "2"], "--equivalence '2': give a share of A's step above 0"),
    ],
)
def test_bad_options_exit_2_before_any_arm(tmp_path: Path, args: list[str], message: str):
    never = tmp_path / "ran"  # an arm would create it
    r = runner.invoke(app, ["ab", "exp", "-o", str(tmp_path), "--no-capture", "--a",
                            cmd("--counter", str(never)), "--b", cmd(), *args],
                      env={"CENSUS_NSYS": ""})  # fmt: skip
    assert r.exit_code == 2, r.output
    assert message in r.stderr and not never.exists() and not (tmp_path / "exp").exists()


def test_ab_prints_then_fails_its_gates(tmp_path: Path) -> None:
    r = runner.invoke(app, ["ab", "exp", "-o", str(tmp_path), "--no-capture", "--a",
                            cmd("--ms", "6"), "--b", cmd("--ms", "2"), "--warmup", "2",
                            "--active", "6", "--json", "--equivalence", "2%", "--fail-if",
                            "faster>10%", "--fail-if", "slower>0%"],
                      env={"CENSUS_NSYS": ""})  # fmt: skip
    assert r.exit_code == 5, r.output
    doc = json.loads(r.stdout)  # the output first, whole
    assert doc["verdict"] == "faster" and doc["equivalence"]["equivalent"] is False
    assert doc["equivalence"]["margin_pct"] == 2.0
    failed = [line for line in r.stderr.splitlines() if line.startswith("gate failed")]
    assert len(failed) == 1 and failed[0].startswith("gate failed: faster>10%: B is faster than A")

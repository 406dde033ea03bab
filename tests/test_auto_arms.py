"""`census ab --arms auto` end to end (census.compare.ab.auto_arms): the runner adds ABBA BAAB pairs
of blocks until the rule stops, for each of its reasons; what ab.json keeps and what every
format says; the arguments refused before any arm runs. The rule and its error rates are proven
in test_sequential.py.

The arms are CPU stand-ins on a virtual clock (sleep_train.py --fake-clock): every step time is
exact, and --arm-noise adds to every forward of run k an offset drawn from random.Random(k), so
each arm's median is known here before it runs (expected_medians) and the look where the rule
stops follows from them.
"""

from __future__ import annotations

import html
import json
import shutil
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from census.api import experiment_view, load_experiment
from census.capture.arms import arm_order
from census.cli import app
from census.compare.ab.sequential import look, plan, t_critical
from census.model.ab import Arm
from census.render import render
from tests.helpers.sleep_train import arm_offset_ms

HELPER = Path(__file__).parent / "helpers" / "sleep_train.py"
runner = CliRunner()


def cmd(counter: Path, ms: float, noise: float) -> str:
    return " ".join([sys.executable, str(HELPER), "--fake-clock", "--steps", "3", "--ms", str(ms),
                     "--counter", str(counter), "--arm-noise", str(noise)])  # fmt: skip


def run_auto(tmp_path: Path, a_ms: float, b_ms: float, noise: float, *args: str):
    counter = tmp_path / "runs"
    return runner.invoke(app, ["ab", "exp", "-o", str(tmp_path), "--no-capture", "--json",
                               "--a", cmd(counter, a_ms, noise), "--b", cmd(counter, b_ms, noise),
                               "--warmup", "0", "--arms", "auto", *args],
                         env={"CENSUS_NSYS": ""})  # fmt: skip


def expected_medians(a_ms: float, b_ms: float, noise: float, arms: int) -> list[int]:
    """Every arm's median step time (the warm arm's first): run k (1-based, in run order) spends
    forward ms + its offset and backward ms / 2 on the virtual clock, each rounded to ns."""
    out = []
    for k, side in enumerate(arm_order(arms), start=1):
        ms = a_ms if side == "a" else b_ms
        out.append(round((ms + arm_offset_ms(k, noise)) * 1e6) + round(ms / 2 * 1e6))
    return out


def stop_of(medians: list[int], max_arms: int, min_effect_ns: float) -> tuple[int, str]:
    """Where the rule stops on these arms (look(), look by look): its arms and reason."""
    seq, order = plan(max_arms), arm_order(max_arms)
    arms = [Arm(s, i, i == 0, (m,)) for i, (s, m) in enumerate(zip(order, medians, strict=True))]
    for n in seq.arms:
        taken = look(seq, arms[: n + 1], min_effect_ns)
        if taken.decision == "stop":
            return n, taken.reason
    raise AssertionError("the rule never stopped")


@pytest.fixture(scope="module")
def slowdown(tmp_path_factory: pytest.TempPathFactory) -> tuple:
    """B's forward 0.6 ms longer; arms spread by offsets of sd 0.8 ms: settled at the third look
    (24 arms). Run once for the tests that read it: (the command's result, its folder)."""
    folder = tmp_path_factory.mktemp("slowdown")
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("CENSUS_CACHE_DIR", str(folder / "cache"))
        r = run_auto(folder, 4.0, 4.6, 0.8, "--max-arms", "32")
    assert r.exit_code == 0, r.output
    return r, folder / "exp"


def test_a_real_slowdown_stops_at_the_look_that_settles_it(slowdown: tuple) -> None:
    r = slowdown[0]
    doc = json.loads(r.stdout)
    medians = expected_medians(4.0, 4.6, 0.8, 32)
    ran = len(doc["arms"]) - 1
    assert [a["median_ns"] for a in doc["arms"]] == medians[: ran + 1]
    seq = doc["sequential"]
    assert (ran, seq["reason"]) == stop_of(medians, 32, seq["min_effect_ns"]) == (24, "settled")
    assert doc["verdict"] == "slower" and seq["stopped_at_look"] == 3
    assert [lk["decision"] for lk in seq["looks"]] == ["continue", "continue", "stop"]
    assert seq["max_arms"] == 32 and seq["min_effect"] is None and seq["budget_s"] is None
    # the default min effect: 1% of A's step (the median of A's arm medians at the first look)
    a8 = sorted(m for m, s in zip(medians[1:9], arm_order(8)[1:], strict=True) if s == "a")
    assert seq["min_effect_ns"] == pytest.approx((a8[1] + a8[2]) / 2 / 100)
    # the headline's interval is the stopping look's, at its coverage, not the fixed 95% one
    stop = seq["looks"][-1]
    assert doc["ci_ns"] == stop["ci_ns"] and doc["ci_coverage"] == stop["ci_coverage"]
    assert 0.9792 < doc["ci_coverage"] < 0.9793 and doc["ci_ns"][0] > 0
    assert doc["ci_ns"][0] < doc["ci95_ns"][0]  # wider than the fixed design's
    # so are the phases' (the offsets are in forward: backward's arms agree exactly)
    forward, backward = doc["phases"]["forward"], doc["phases"]["backward"]
    assert forward["ci_coverage"] == backward["ci_coverage"] == doc["ci_coverage"]
    assert forward["ci_ns"][0] < forward["ci95_ns"][0] and forward["verdict"] == "slower"
    assert (
        backward["ci_ns"] == pytest.approx([300_000, 300_000]) and backward["verdict"] == "slower"
    )
    assert doc["explanation"][0].startswith("B is slower than A by ")
    assert "97.9% CI" in doc["explanation"][0]
    assert doc["explanation"][1].startswith("--arms auto stopped at look 3 (24 measured arms): "
                                            "the interval excludes 0")  # fmt: skip
    # the runner said each look on stderr
    assert "look 1 at 8 arms: B − A = " in r.stderr and ": continue" in r.stderr
    assert "look 3 at 24 arms: " in r.stderr and "stop (settled)" in r.stderr
    assert "arm 9 (up to 32): A" in r.stderr


def test_a_a_within_the_min_effect_stops_early_and_says_how_large(tmp_path: Path) -> None:
    r = run_auto(tmp_path, 4.0, 4.0, 0.05, "--min-effect", "5%", "--equivalence", "5%")
    assert r.exit_code == 0, r.output
    doc = json.loads(r.stdout)
    seq = doc["sequential"]
    medians = expected_medians(4.0, 4.0, 0.05, 48)
    assert (len(doc["arms"]) - 1, seq["reason"]) == stop_of(medians, 48, seq["min_effect_ns"])
    assert seq["reason"] == "within min-effect" and doc["verdict"] == "no difference"
    assert seq["min_effect"] == "5%"
    head = doc["explanation"][0]
    assert head.startswith("no difference between A and B as large as ±")
    assert (len(doc["arms"]) - 1, seq["stopped_at_look"]) == (16, 2)
    assert doc["explanation"][1].startswith("--arms auto stopped at look 2 (16 measured arms): "
                                            "the interval lies within ±")  # fmt: skip
    # equivalence at the stopping look's boundary: its interval is the verdict's
    eq = doc["equivalence"]
    assert eq["coverage"] == doc["ci_coverage"] and eq["ci90_ns"] == pytest.approx(doc["ci_ns"])
    assert eq["equivalent"] and "the 99.93% CI of B − A" in doc["explanation"][2]
    # asked again of the folder: the same answer; of two captures, refused
    r = runner.invoke(app, ["diff", str(tmp_path / "exp"), "--equivalence", "5%", "--format",
                            "json"])  # fmt: skip
    assert r.exit_code == 0 and json.loads(r.stdout)["equivalence"] == eq, r.output
    r = runner.invoke(app, ["diff", "sample:eager", "sample:compiled", "--equivalence", "5%"])
    assert r.exit_code == 2 and "--equivalence asks a `census ab` experiment's arms" in r.stderr


def test_at_the_most_arms_an_unresolved_interval_says_so(tmp_path: Path) -> None:
    # a difference far inside the spread: neither settled nor within 0.1 µs at 16 arms
    r = run_auto(tmp_path, 4.0, 4.01, 1.0, "--max-arms", "16", "--min-effect", "100ns")
    assert r.exit_code == 0, r.output
    doc = json.loads(r.stdout)
    seq = doc["sequential"]
    assert (len(doc["arms"]) - 1, seq["reason"], doc["verdict"]) == (16, "max arms",
                                                                     "no difference")  # fmt: skip
    assert seq["min_effect_ns"] == 100.0 and seq["min_effect"] == "100ns"
    assert doc["arms_needed"] is None  # the looks say why it stopped
    assert "the most arms (--max-arms) are run" in doc["explanation"][1]
    # the fixed 95% interval is kept beside the look's
    assert doc["ci95_ns"] != doc["ci_ns"]


def test_a_budget_ends_the_experiment_at_a_look(tmp_path: Path) -> None:
    r = run_auto(tmp_path, 4.0, 4.01, 1.0, "--budget", "0.001", "--min-effect", "100ns")
    assert r.exit_code == 0, r.output
    doc = json.loads(r.stdout)
    seq = doc["sequential"]
    assert (len(doc["arms"]) - 1, seq["reason"], seq["budget_s"]) == (8, "budget", 0.001)
    assert "8 more arms would not fit in the budget (--budget)" in doc["explanation"][1]
    # read back, the same looks and the same stop
    again = json.loads(render(experiment_view(load_experiment(tmp_path / "exp")), "json"))
    assert again["sequential"] == seq and again["explanation"] == doc["explanation"]
    record = json.loads((tmp_path / "exp" / "ab.json").read_text())
    assert record["sequential"] == {"max_arms": 48, "min_effect_ns": 100.0,
                                    "min_effect": "100ns", "budget_s": 0.001,
                                    "budget_stop": True}  # fmt: skip


def test_every_format_says_where_it_stopped(slowdown: tuple) -> None:
    view = experiment_view(load_experiment(slowdown[1]))
    stop = view.explanation.sequential
    assert stop is not None and stop.startswith("--arms auto stopped at look 3")
    terminal = render(view, "terminal", width=400)
    assert terminal.index(view.explanation.verdict) < terminal.index(stop)
    assert "97.9% CI" in terminal and "--arms auto, look 3" in terminal
    assert stop in render(view, "markdown")
    assert html.escape(stop) in render(view, "html")


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--arms", "auto", "--max-arms", "12"], "--max-arms 12: give a multiple of 8 from 8"),
        (["--arms", "8", "--max-arms", "16"], "--max-arms: only with --arms auto"),
        (["--min-effect", "1%", "--budget", "1h"], "--min-effect, --budget: only with --arms auto"),
        (["--arms", "many"], "--arms 'many': give a multiple of 4, or auto"),
        (["--arms", "auto", "--budget", "0"], "--budget '0': give a time above 0"),
        (["--arms", "auto", "--budget", "soon"], "--budget 'soon': give a time above 0"),
        (["--arms", "auto", "--min-effect", "-1%"], "--min-effect '-1%': give a share"),
        (["--arms", "auto", "--min-effect", "9" * 400 + "%"], "give a share of A's step above 0"),
        (["--arms", "auto", "--budget", "9" * 400 + "h"], "give a time above 0"),
    ],
)
def test_arguments_are_refused_before_any_arm(
    tmp_path: Path, args: list[str], message: str
) -> None:
    counter = tmp_path / "runs"
    r = runner.invoke(app, ["ab", "exp", "-o", str(tmp_path), "--no-capture", "--a",
                            cmd(counter, 1, 0), "--b", cmd(counter, 1, 0), *args],
                      env={"CENSUS_NSYS": ""})  # fmt: skip
    assert r.exit_code == 2, r.output
    assert message in r.stderr and not counter.exists()


def test_a_record_whose_arms_do_not_end_at_a_stop_is_refused(
    tmp_path: Path, slowdown: tuple
) -> None:
    shutil.copytree(slowdown[1], tmp_path / "exp")  # its record is cut here, not the shared one
    path = tmp_path / "exp" / "ab.json"
    record = json.loads(path.read_text())
    record["sequential"]["max_arms"] = 48
    cut = dict(record, arms=record["arms"][:9])  # the first look, where the rule went on
    path.write_text(json.dumps(cut))
    r = runner.invoke(app, ["diff", str(tmp_path / "exp")])
    assert r.exit_code == 1, r.output
    assert f"{path}: not a census experiment record (--arms auto: the rule goes on after look 1 " \
        "(8 arms), where the arms end)" in r.stderr  # fmt: skip
    # a record whose rule stops before its arms end: the first look already lies within a huge
    # min effect
    path.write_text(json.dumps(dict(record, sequential={**record["sequential"], "max_arms": 32,
                                                        "min_effect_ns": 1e300})))  # fmt: skip
    r = runner.invoke(app, ["diff", str(tmp_path / "exp")])
    assert r.exit_code == 1 and "(--arms auto: the rule stops at look 1 (8 arms, within " \
        "min-effect), but the arms go on to 24)" in r.stderr, r.output  # fmt: skip
    for bad, why in ((12, "sequential.max_arms: 12 is not a multiple of 8"),
                     ("x", 'sequential.max_arms: "x" is not a multiple of 8'),
                     (1000, "sequential.max_arms: 1000: give a multiple of 8 from 8 to 400")):  # fmt: skip
        record["sequential"]["max_arms"] = bad
        path.write_text(json.dumps(record))
        r = runner.invoke(app, ["diff", str(tmp_path / "exp")])
        assert r.exit_code == 1 and why in r.stderr, r.output
    record["sequential"] = {**record["sequential"], "max_arms": 32, "budget_stop": True}
    path.write_text(json.dumps(record))  # a budget stop without a budget
    r = runner.invoke(app, ["diff", str(tmp_path / "exp")])
    assert r.exit_code == 1 and "sequential.budget_stop: true is not true or false (true only " \
        "with a budget_s)" in r.stderr, r.output  # fmt: skip


@pytest.mark.parametrize(
    ("coverage", "shown"),
    [
        (0.95, "95%"),
        (0.90, "90%"),
        (0.97929, "97.9%"),
        (0.9604230274587234, "96%"),
        (0.99930, "99.93%"),
        (1 - 1.5794e-6, "99.99984%"),
        (0.99999, "99.999%"),
        (0.999999999999, ">99.999999999%"),
        (1.0, ">99.999999999%"),
    ],
)
def test_a_coverage_is_shown_rounded_down(coverage: float, shown: str) -> None:
    from census.units import coverage_name

    assert coverage_name(coverage) == shown


def test_disturbed_arms_are_judged_at_the_looks_boundary() -> None:
    """The unstable experiment of test_disturbed.py, run as --arms auto --max-arms 8 (one look,
    the boundary the t of 5 df at α = 0.05 after calibration): the fit of every arm settles
    "slower", the one without the hogged arms 2 and 8 does not, at the look's boundary too; and
    with a boundary too wide for either (a look of 48) the verdict is no difference, not
    unstable."""
    from census.compare.ab.auto_arms import looks_of, with_look
    from census.compare.ab.stats import UNSTABLE, analyze
    from census.model.ab import AutoArms
    from tests.helpers.arms import UNSTABLE_ENVS, UNSTABLE_MEDIANS, arms_from

    arms = arms_from(UNSTABLE_MEDIANS, UNSTABLE_ENVS)
    st = analyze(arms)
    one = with_look(st, looks_of(arms, AutoArms(8, 1e5, None, None, False)))
    stop = one.looks[-1]
    assert (stop.reason, stop.critical) == ("settled", plan(8).critical[0])
    assert (one.verdict, one.verdict_all, one.verdict_undisturbed) == (UNSTABLE, "slower",
                                                                       "no difference")  # fmt: skip
    half = stop.critical * st.se_ns
    assert one.ci_ns == pytest.approx((st.delta_median_ns - half, st.delta_median_ns + half))
    assert one.ci_coverage == pytest.approx(1 - plan(8).level[0])
    # the fit without arms 2 and 8 has 3 df: its boundary is the t of 3 df at the look's level
    fit = st.undisturbed
    assert fit is not None and fit.df == 3
    refit = t_critical(stop.level, 3) * fit.se_ns
    assert refit > stop.critical * fit.se_ns
    assert one.undisturbed_ci_ns == pytest.approx((fit.delta_ns - refit, fit.delta_ns + refit))
    # budget-stopped at the first look of 48: boundary t = 26, nothing settled
    wide = with_look(st, looks_of(arms, AutoArms(48, 1e5, None, None, True)))
    assert (wide.looks[-1].reason, wide.verdict, wide.verdict_undisturbed) == (
        "budget", "no difference", "no difference")  # fmt: skip


def test_the_budget_times_the_measured_arms_without_the_warm_one(monkeypatch) -> None:
    """A warm arm of 60 s (a cold compile cache), then 8 measured arms of 20 s each, under a
    400 s budget: at the first look 220 s are spent and 180 s are left, and 8 more arms at the
    measured arms' 20 s fit (160 s): the rule goes on. At 10 s more per arm they would not."""
    from census.compare.ab import auto_arms
    from tests.helpers.arms import arms_from

    clock = [0.0]
    monkeypatch.setattr(auto_arms.time, "monotonic", lambda: clock[0])
    arms = arms_from([150.0, *[100.0, 100.2, 99.9, 100.1] * 2])  # unresolved at look 1 of 48
    for measured_s, goes_on in ((20.0, True), (30.0, False)):
        rule = auto_arms.AutoRule(48, None, 60 + 8 * measured_s + 180)
        rule.start()
        clock[0] += 60
        rule.warm_done()
        clock[0] += 8 * measured_s
        assert rule(arms) is goes_on and rule.budget_stop is not goes_on

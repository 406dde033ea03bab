"""The uncaptured arms' tail steps, census.record parity and census.count agreement
(census.compare.ab.arm_findings): exact values on the real H200 DeepSpeed experiment and on built
arms, and the same numbers in every format."""

from __future__ import annotations

import json
import statistics
from pathlib import Path

from census.api import experiment_view, load_experiment
from census.compare.ab.arm_findings import arm_tails, count_warnings, record_parity
from census.compare.ab.experiment import explain_parts
from census.compare.ab.stats import analyze
from census.model.ab import Arm
from census.render import render

DS = Path(__file__).parent / "data" / "ab-deepspeed" / "ds"


def _brute_tails(arm: Arm) -> list[int]:
    """Steps above min(median + 3·1.4826·MAD, 1.5·median), written out again."""
    times = arm.step_time_ns
    med = statistics.median(times)
    mad = statistics.median([abs(t - med) for t in times])
    limit = min(med + 3 * 1.4826 * mad, 1.5 * med) if mad else 1.5 * med
    return [i for i, t in enumerate(times) if t > limit]


def test_tails_of_the_real_deepspeed_arms() -> None:
    """The H200 DeepSpeed ZeRO-1 experiment (8 arms x 4 steps): four tail steps, all compiled,
    each grown in backward, the other phases' changes kept."""
    exp = load_experiment(DS)
    tails = exp.tails
    assert [(t.arm_index, t.side, t.step, t.step_time_ns) for t in tails] == [
        (2, "b", 1, 381_668_610), (2, "b", 2, 368_467_102), (5, "b", 0, 257_237_640),
        (8, "b", 1, 261_993_134),
    ]  # fmt: skip
    for arm in exp.arms:
        if not arm.discarded:
            assert [t.step for t in tails if t.arm_index == arm.index] == _brute_tails(arm)
    first = tails[0]
    assert first.median_ns == 315_923_355.0 and first.phase == "backward"
    assert first.phase_delta_ns == 49_868_431.5
    assert dict(first.phase_deltas_ns) == {
        "backward": 49_868_431.5, "forward": 16_289_757.0, "optimizer": 45_823.0
    }  # fmt: skip
    arm2 = next(a for a in exp.arms if a.index == 2)
    typical = statistics.median(arm2.phase_time_ns["backward"])
    assert arm2.phase_time_ns["backward"][1] - typical == first.phase_delta_ns
    parts = explain_parts(exp)
    said = next(s for s in parts.arm_notes if s.startswith("tail steps"))
    assert said.startswith(
        "tail steps, uncaptured arms (4 in 3 arms, beyond each arm's own threshold): arm 5 "
        "(compiled) step 0: 257.24 ms against its median 188.65 ms (+68.59 ms), backward +48.55 ms "
        "while forward +18.48 ms, optimizer +1.29 ms; arm 2 (compiled) step 1: 381.67 ms"
    )  # the largest excess first


def test_tails_in_every_format() -> None:
    view = experiment_view(DS)
    doc = json.loads(render(view, "json"))
    assert [(t["arm"], t["step"], t["phase"]) for t in doc["tails"]] == [
        (2, 1, "backward"), (2, 2, "backward"), (5, 0, "backward"), (8, 1, "backward")
    ]  # fmt: skip
    assert doc["tails"][0]["excess_ns"] == 381_668_610 - 315_923_355
    assert doc["record_parity"] == {}
    for fmt in ("terminal", "markdown", "html"):
        text = render(view, fmt, width=200) if fmt == "terminal" else render(view, fmt)
        text = text.replace("\u00a0", " ")  # the page keeps a number with its unit
        assert "Tail steps, uncaptured arms" in text and "381.67 ms" in text, fmt


def _arm(index: int, side: str, values=None, counts=None) -> Arm:
    return Arm(side, index, index == 0, (10, 11, 12, 13), values=values or {},
               counts=counts or {})  # fmt: skip


def test_record_parity_is_the_largest_paired_difference_at_the_same_step() -> None:
    order = ["a", "a", "b", "b", "a", "b", "a", "a", "b"]
    loss = {
        1: (2.0, 1.5, 1.25, None), 2: (2.0, 1.5, 1.0, 0.5), 3: (2.5, 1.5, None, 0.75),
        4: (2.0, 1.0, 1.0, 1.0), 5: (2.0, 1.0, 1.0, 1.0), 6: (2.0, 1.0, 1.0, 1.0),
        7: (2.0, 1.0, 1.0, 1.0), 8: (2.0, 1.0, 1.0, 1.125),
    }  # fmt: skip
    arms = [_arm(i, s, {"loss": loss[i]} if i else {}) for i, s in enumerate(order)]
    pairs = analyze(arms).pairs
    assert [(p.a_index, p.b_index) for p in pairs] == [(1, 2), (4, 3), (6, 5), (7, 8)]
    parity = record_parity(arms, pairs)["loss"]
    # pair (1, 2): |1.0 − 1.25| at step 2 (step 3: arm 1 recorded none); pair (4, 3): 0.5 at
    # step 0; (7, 8): 0.125 at step 3
    assert (parity.max_abs_diff, parity.a_index, parity.b_index, parity.step) == (0.5, 4, 3, 0)
    assert (parity.pairs, parity.steps_compared) == (4, 3 + 3 + 4 + 4)


def test_counters_that_differ_between_arms_of_a_side_are_a_warning() -> None:
    order = ["a", "a", "b", "b", "a"]
    counts = {1: {"eager": (2880,)}, 2: {"eager": (0, 0)}, 3: {"eager": (0, 1)},
              4: {"eager": (2880,)}}  # fmt: skip
    arms = [_arm(i, s, counts=counts.get(i)) for i, s in enumerate(order)]
    assert count_warnings(arms, ("eager", "compiled")) == [
        "census.count('eager') differs between the arms of compiled: ranks 0/0 in arm 2; "
        "ranks 0/1 in arm 3"
    ]
    same = [_arm(i, s, counts={"eager": (2880,)}) for i, s in enumerate(order)]
    assert count_warnings(same, ("eager", "compiled")) == []
    missing = [_arm(i, s, counts={"x": (3,)} if i == 1 else {}) for i, s in enumerate(order)]
    assert count_warnings(missing, ("A", "B")) == [
        "census.count('x') differs between the arms of A: 3 in arm 1; 0 in arm 4"
    ]


def test_no_tail_in_arms_of_equal_steps() -> None:
    arms = [Arm(s, i, i == 0, (5, 5, 5, 5)) for i, s in enumerate("aabba")]
    assert arm_tails(arms) == ()
    # a step 1.5x the median with MAD 0 is not beyond it; a step above it is
    arms = [Arm("a", 1, False, (10, 10, 15, 10)), Arm("b", 2, False, (10, 10, 16, 10))]
    assert [(t.arm_index, t.step) for t in arm_tails(arms)] == [(2, 2)]

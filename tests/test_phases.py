"""Phases inside steps: exact values on small built exports and on real H200 captures (checked
against the slow reference in tests/oracle.py), and the law phases + remainder = step."""

from __future__ import annotations

import itertools
import json
import tempfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

import census
from census.cli import app
from census.definitions import OUTSIDE_PHASES
from census.metrics import METRIC_KEYS, PHASE_KEYS
from tests.helpers.files import fixture_file
from tests.nsysdb import Export
from tests.oracle import phase_oracle

runner = CliRunner()
OUT = OUTSIDE_PHASES


def phases_of(c: census.Census) -> list[dict[str, dict[str, int]]]:
    return [{p.name: p.as_dict() for p in s.phases} for s in c.steps]


def check_against_oracle(path: Path) -> census.Census:
    c = census.summarize(path, use_cache=False, idle=True)
    expected = phase_oracle(path)
    assert len(expected) == len(c.steps)
    for got, want in zip(phases_of(c), expected, strict=True):
        assert set(got) == set(want) | {OUT}
        for name, values in want.items():
            for key, value in values.items():
                assert got[name][key] == value, (name, key)
    return c


@pytest.mark.fixtures
@pytest.mark.parametrize("name", ["h200_eager_3steps.sqlite", "h200_compiled_3steps.sqlite"])
def test_shared_h200_captures_agree_with_the_oracle(name: str) -> None:
    check_against_oracle(fixture_file(name))


def test_fresh_h200_demo_captures_agree_with_the_oracle(ab_demo: Path) -> None:
    eager = check_against_oracle(ab_demo / "a" / "capture.sqlite")
    compiled = check_against_oracle(ab_demo / "b" / "capture.sqlite")
    assert [p.name for p in eager.steps[0].phases] == ["forward", "backward", "optimizer", OUT]
    # the backward's kernels are launched from autograd's thread: they still land in backward
    assert (
        eager.per_phase()["backward"]["kernel_count"] > eager.per_phase()["forward"]["kernel_count"]
    )
    assert eager.per_phase()["optimizer"]["d2d_count"] == 1  # the demo's scratch copy
    assert (
        compiled.per_phase()["forward"]["kernel_count"]
        < eager.per_phase()["forward"]["kernel_count"]
    )


def build_step(tmp_path: Path) -> Path:
    """One step [0, 1000] on the main thread with forward [100, 400] and backward [400, 900]
    pushed on the main thread, backward's kernels launched from thread 2 (autograd), and an
    optimizer [850, 950] that overlaps backward and starts later, so owns [850, 950]."""
    e = Export()
    e.range("step 0", 0, 1000)
    e.range("forward", 100, 400)
    e.range("backward", 400, 900)
    e.range("optimizer", 850, 950)
    e.launch("k_outside", 50, 60, 70)  # before forward: the remainder
    e.launch("k_fwd", 150, 160, 200)
    e.launch("k_fwd_late", 400, 410, 420)  # exactly at forward's end = backward's start
    e.launch("k_bwd", 500, 510, 600, tid=2)
    e.launch("k_bwd2", 860, 870, 880, tid=2)  # inside backward's range, but optimizer owns 850+
    e.copy(8, 1 << 20, 920, 930, 940)  # D2D in the optimizer
    e.launch("k_tail", 960, 1005, 1100)  # after optimizer: the remainder (runs past the step)
    return e.write(tmp_path / "phases.sqlite")


def test_built_step_exact_values(tmp_path: Path) -> None:
    path = build_step(tmp_path)
    c = census.summarize(path, use_cache=False)
    (step,) = c.steps
    got = {p.name: p for p in step.phases}
    assert list(got) == ["forward", "backward", "optimizer", OUT]
    assert {n: p.metrics.kernel_count for n, p in got.items()} == {
        "forward": 1, "backward": 2, "optimizer": 1, OUT: 2}  # fmt: skip
    assert {n: p.duration_ns for n, p in got.items()} == {
        "forward": 300, "backward": 450, "optimizer": 100, OUT: 150}  # fmt: skip
    # busy: [60,70] outside, [160,200] forward, [410,420] + [510,600] backward,
    # [870,880] + [930,940] optimizer, [1005,1100] clipped to the step: [1005..1000] none
    assert {n: p.gpu_busy_ns for n, p in got.items()} == {
        "forward": 40, "backward": 100, "optimizer": 20, OUT: 10}  # fmt: skip
    assert got["optimizer"].metrics.d2d_bytes == 1 << 20
    assert any("phase ranges overlap inside a step" in w for w in c.warnings)
    assert phase_oracle(path)[0]["backward"]["kernel_count"] == 2
    check_against_oracle(path)


def test_idle_split_around_a_sync(tmp_path: Path) -> None:
    """forward launches a kernel [100, 300] (its call [40, 45]) and synchronizes [120, 310]: the
    GPU idles from 310 until the next kernel starts at 500, after the sync (the launch call
    [480, 520] overlaps it, but after-sync comes first); [300, 310] the host still waits in the
    sync (other); [0, 100] idle: 5 ns in a launch call, the rest other; [900, 1000] other."""
    e = Export()
    e.range("step 0", 0, 1000)
    e.range("forward", 0, 400)
    e.launch("k1", 40, 100, 300)  # the call [40, 45]
    e.api("cudaStreamSynchronize_v3020", 120, 310)
    e.launch("k2", 480, 500, 900, api_len=40)  # the call [480, 520], in the remainder
    path = e.write(tmp_path / "sync.sqlite")
    c = census.summarize(path, use_cache=False, idle=True)
    (s,) = c.steps
    assert s.gpu_busy_ns == 600 and s.gpu_idle_ns == 400
    assert s.idle.as_dict() == {"sync_count": 1, "sync_time_ns": 190, "idle_after_sync_ns": 190,
                                "idle_launch_ns": 5, "idle_other_ns": 205}  # fmt: skip
    fwd = {p.name: p for p in s.phases}["forward"]
    assert (fwd.idle.sync_count, fwd.idle.idle_after_sync_ns) == (1, 90)  # [310, 400]
    assert {p.name: p.idle.idle_after_sync_ns for p in s.phases}[OUT] == 100  # [400, 500]
    assert_law(c)
    check_against_oracle(path)


def test_phases_add_up_to_the_step(tmp_path: Path) -> None:
    path = build_step(tmp_path)
    c = census.summarize(path, use_cache=False, idle=True)
    assert_law(c)
    plain = census.summarize(path, use_cache=False, idle=False)  # --no-idle
    assert plain.steps[0].idle is None and plain.per_step_timing()["idle_other_ns"] is None
    assert plain.per_phase()["forward"]["sync_count"] is None


def assert_law(c: census.Census) -> None:
    for s in c.steps:
        if not s.phases:
            continue
        step = {**s.metrics.as_dict(), "duration_ns": s.duration_ns, "gpu_busy_ns": s.gpu_busy_ns,
                **s.idle.as_dict()}  # fmt: skip
        idle = s.idle.idle_after_sync_ns + s.idle.idle_launch_ns + s.idle.idle_other_ns
        assert idle == s.gpu_idle_ns
        for key in PHASE_KEYS:
            assert sum(p.as_dict()[key] for p in s.phases) == step[key], key


@settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    phases=st.lists(st.tuples(st.integers(0, 1200), st.integers(0, 400)), max_size=5),
    calls=st.lists(st.tuples(st.integers(-50, 1250), st.integers(0, 300), st.booleans()),
                   max_size=25),
    syncs=st.lists(st.tuples(st.integers(-50, 1250), st.integers(1, 200)), max_size=4),
)  # fmt: skip
@example(
    phases=[(0, 3)], calls=[(-3, 0, False)], syncs=[(0, 1)]
)  # a zero-length kernel after a sync
@example(phases=[(0, 0)], calls=[(1000, 0, False)], syncs=[])  # a call where two steps meet
@example(phases=[(0, 0)], calls=[], syncs=[(0, 1), (1000, 1)])  # a sync there: the later step's
def test_law_holds_for_any_phases_and_calls(tmp_path: Path, phases, calls, syncs) -> None:
    e = Export()
    e.range("step 0", 0, 1000)
    e.range("step 1", 1000, 1300)
    for i, (start, length) in enumerate(phases):
        e.range(("forward", "backward", "optimizer")[i % 3], start, start + length)
    for t, run, d2d in calls:
        if d2d:
            e.copy(8, 64, t, t + 5, t + 5 + run)
        else:
            e.launch("k", t, t + 5, t + 5 + run, tid=1 + t % 2)
    for t, blocked in syncs:
        e.api("cudaStreamSynchronize_v3020", t, t + blocked)
    with tempfile.TemporaryDirectory(dir=tmp_path) as folder:  # a fresh file for every example
        path = e.write(Path(folder) / "law.sqlite")
        c = census.summarize(path, use_cache=False, idle=True)
        assert_law(c)
        if any(s.phases for s in c.steps):
            check_against_oracle(path)


def test_no_phase_ranges_means_no_phases(tmp_path: Path) -> None:
    e = Export()
    e.range("step 0", 0, 100)
    e.launch("k", 10, 20, 30)
    c = census.summarize(e.write(tmp_path / "plain.sqlite"), use_cache=False)
    assert c.steps[0].phases == () and c.per_phase() == {}
    assert census.summarize(build_step(tmp_path), phases="", use_cache=False).per_phase() == {}


def test_json_and_frames_carry_phases(ab_demo: Path) -> None:
    path = ab_demo / "a" / "capture.sqlite"
    r = runner.invoke(app, ["summary", str(path), "--json"])
    doc = json.loads(r.stdout)
    c = census.summarize(path)
    assert doc["per_phase"] == c.per_phase()
    assert set(doc["per_phase"]["forward"]) == {*PHASE_KEYS, "gpu_span_ns"}
    assert doc["steps"][0]["phases"][0]["name"] == "forward"
    assert doc["steps"][0]["phases"][0]["kernel_count"] == c.steps[0].phases[0].metrics.kernel_count
    assert set(METRIC_KEYS) <= set(doc["per_phase"][OUT])


def test_diff_has_a_phase_table_and_names_the_phase(ab_demo: Path) -> None:
    r = runner.invoke(app, ["diff", str(ab_demo / "a"), str(ab_demo / "b"), "--format", "json",
                            "--labels", "eager,compiled"])  # fmt: skip
    doc = json.loads(r.stdout)
    fwd = doc["phases"]["forward"]["kernel_count"]
    assert fwd["delta"] == fwd["b"] - fwd["a"] and fwd["delta"] < 0
    assert set(doc["phases"]) == {"forward", "backward", "optimizer", OUT}
    assert any(s.startswith("by phase:") for s in doc["explanation"])
    md = runner.invoke(app, ["diff", str(ab_demo / "a"), str(ab_demo / "b"), "--format",
                             "markdown"]).stdout  # fmt: skip
    assert "#### Phases" in md and "| forward |" in md


def _plain_segments(steps, phases) -> tuple[list[tuple], bool]:
    """The definition, read literally: per step (in order) the phases of its process starting in
    it (ends included), cut at its end; each elementary interval owned by the latest-started
    phase covering it, else nobody; neighbours with one owner merged; a step with phases none
    of which owns anything (or of zero length) is one OUTSIDE segment."""
    out, crossed, inside = [], False, False
    for step in steps:
        mine = [(s, min(e, step.end_ns), n) for p, s, e, n in phases
                if p == step.proc and step.start_ns <= s <= step.end_ns]  # fmt: skip
        inside = inside or bool(mine)
        crossed = crossed or any(b[0] < a[1] for a, b in itertools.pairwise(mine))
        cuts = sorted({step.start_ns, step.end_ns, *(t for s, e, _ in mine for t in (s, e))})
        owned: list[list] = []
        for a, b in itertools.pairwise(cuts):
            owners = [i for i, (s, e, _) in enumerate(mine) if s <= a and e >= b]
            owner = owners[-1] if owners else -1
            if owned and owned[-1][0] == owner:
                owned[-1][3] = b
            else:
                owned.append([owner, OUT if owner < 0 else mine[owner][2], a, b])
        for _, name, a, b in owned or [[-1, OUT, step.start_ns, step.end_ns]]:
            out.append((len(out), step.idx, name, step.proc, a, b))
    return (out if inside else []), crossed


def test_segments_against_the_plain_definition() -> None:
    """census.load.phases.cut (arrays, with the elementary-interval rule only for steps whose
    phases cross) equals the definition read literally, on random steps and phases: several
    processes, overlapping and touching steps, nested, crossing, tied and zero-length phases,
    phases at a step's bounds, steps of zero length."""
    import numpy as np

    from census.load.phases import OVERLAP_WARNING, cut
    from census.load.steps import StepRange

    rng = np.random.default_rng(11)
    for trial in range(1500):
        steps, t = [], 0
        for k in range(int(rng.integers(0, 6))):
            t += int(rng.integers(-5, 10)) if trial % 4 == 0 else int(rng.integers(0, 10))
            length = int(rng.integers(0, 40))
            steps.append(StepRange(k, "step", int(rng.integers(0, 2)), t, t + length))
            t += length
        phases = []
        for _ in range(int(rng.integers(0, 12))):
            s = int(rng.integers(-5, t + 5))
            e = s + int(rng.choice([0, 0, 1, 3, 8, 20, 60]))
            phases.append((int(rng.integers(0, 2)), s, e, str(rng.choice(["fwd", "bwd", "opt"]))))
        if trial % 2:  # mostly disjoint phases, the common case
            phases = [(p, s, s + min(e - s, 4), n) for p, s, e, n in phases]
        phases.sort(key=lambda r: r[1])
        if trial % 7 == 0:  # process ids at the int64 limit (a search for p + 1 overflowed)
            top = (1 << 63) - 1
            steps = [StepRange(s.idx, s.name, top - s.proc, s.start_ns, s.end_ns) for s in steps]
            phases = [(top - p, a, b, n) for p, a, b, n in phases]
        got, warnings = cut(steps, phases)
        want, crossed = _plain_segments(steps, phases)
        assert [tuple(g) for g in got] == want, trial
        assert warnings == ([OVERLAP_WARNING] if crossed and want else []), trial

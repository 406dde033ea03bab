"""Tail steps: the step-time distribution and the steps far above its median, exactly."""

from __future__ import annotations

import json
import statistics
from pathlib import Path

from typer.testing import CliRunner

import census
from census.cli import app
from census.findings.tails import tail_steps
from tests.nsysdb import Export

runner = CliRunner()


def build(tmp_path: Path, lengths: list[int], slow: int, extra_kernels: int = 0) -> Path:
    """Steps of the given lengths (µs), each with forward [start, +40%] and backward after it,
    and one kernel each; step `slow` gets `extra_kernels` more, launched in its backward."""
    e = Export()
    t = 0
    for i, us in enumerate(lengths):
        length = us * 1000
        e.range(f"step {i}", t, t + length)
        e.range("forward", t, t + length * 4 // 10)
        e.range("backward", t + length * 4 // 10, t + length)
        e.launch("k", t + 10, t + 20, t + 1000)
        for j in range(extra_kernels if i == slow else 0):
            e.launch("extra", t + length // 2 + j * 100, t + length // 2 + j * 100 + 10,
                     t + length // 2 + j * 100 + 50)  # fmt: skip
        t += length
    return e.write(tmp_path / "tail.sqlite")


def test_tail_statistics_and_the_outlier(tmp_path: Path) -> None:
    lengths = [100, 102, 98, 101, 99, 100, 250, 100, 103, 97]
    c = census.summarize(build(tmp_path, lengths, slow=6, extra_kernels=3), use_cache=False)
    tail = tail_steps(c)
    times = [us * 1000 for us in lengths]
    median = statistics.median(times)
    mad = statistics.median(abs(t - median) for t in times)
    assert (tail.median_ns, tail.mad_ns, tail.max_ns) == (median, mad, 250_000)
    assert tail.threshold_ns == min(median + 3 * 1.4826 * mad, 1.5 * median)
    (o,) = tail.outliers
    assert (o.index, o.name, o.step_time_ns, o.excess_ns) == (6, "step 6", 250_000, 150_000)
    # forward grows 100 -> 40% of 250 = +60 µs, backward 60 -> 150 = +90 µs
    assert (o.phase, o.phase_delta_ns) == ("backward", 150_000 - 60_000)
    assert (o.kernel_count_delta, o.launch_count_delta) == (3, 3)


def test_uniform_steps_have_no_tail(tmp_path: Path) -> None:
    c = census.summarize(build(tmp_path, [100] * 8, slow=-1), use_cache=False)
    tail = tail_steps(c)
    assert tail.mad_ns == 0 and tail.threshold_ns == 150_000 and tail.outliers == ()


def test_a_long_capture_lists_edges_and_tail_unless_all_steps(tmp_path: Path) -> None:
    lengths = [100] * 30
    lengths[15] = 400
    path = build(tmp_path, lengths, slow=15)
    out = runner.invoke(app, ["summary", str(path)], env={"COLUMNS": "200"}).stdout
    assert "step 15 (tail)" in out and "… 12 more" in out and "step 29" in out
    assert "step 10 " not in out
    assert "tail above 150.0 µs: 1 of 30 step(s); --all-steps lists every step" in out
    every = runner.invoke(app, ["summary", str(path), "--all-steps"], env={"COLUMNS": "200"})
    assert "step 10 " in every.stdout and "more" not in every.stdout


def test_real_h200_capture_tail_in_json(ab_demo: Path) -> None:
    r = runner.invoke(app, ["summary", str(ab_demo / "a"), "--json"])
    doc = json.loads(r.stdout)["tail"]
    times = [s.duration_ns for s in census.summarize(ab_demo / "a").steps]
    assert doc["steps"] == 20 and doc["max_ns"] == max(times)
    assert doc["median_ns"] == statistics.median(times)
    assert [o["name"] for o in doc["outliers"]] == ["step 23"]
    assert doc["outliers"][0]["phase"] == "backward"

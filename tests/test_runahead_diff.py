"""The diff when a host ran ahead of its GPU: steps and phases compared by their GPU spans, said
so, and the calibration runs read on the GPU's clock. On the H200 captures of
examples/gpu_bound.py (no per-step sync) and on built exports."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

import census
from census.cli import app
from census.compare.explain import explain_diff
from census.metrics import GPU_SPAN_NS, PHASE_LABELS
from tests.helpers.exports import capture_folder
from tests.helpers.files import DATA
from tests.helpers.terminal import headings, terminal_tables
from tests.nsysdb import Export

MS = 1_000_000


@pytest.fixture(scope="module")
def captures(tmp_path_factory) -> Path:
    """The two H200 capture folders, with the GPU clock added to eager's calibration record."""
    root = tmp_path_factory.mktemp("ra")
    for side in ("eager", "compiled"):
        capture_folder(root / side, DATA / "runahead" / f"ra-{side}.sqlite.xz",
                       DATA / "runahead" / f"ra-{side}.run.json")  # fmt: skip
    return root


def test_steps_and_phases_are_compared_on_the_gpu(captures: Path) -> None:
    d = census.diff(captures / "eager", captures / "compiled", labels=("eager", "compiled"))
    assert d.clock == "gpu" and d.step_key == "gpu_span_ns"
    span = d.metrics["gpu_span_ns"]
    # nsys's nvtx_gpu_proj_trace projects steps 5 and 6 of eager to these same durations
    assert [s.gpu_span_ns for s in d.a.steps][:2] == [44_407_393, 44_326_978]
    assert span.a == sum(s.gpu_span_ns for s in d.a.steps) / 12 == 46_699_575.583333336
    why = explain_diff(d)
    assert why[0].startswith("compiled is faster than eager on the GPU: GPU span -1.31 ms/step (")
    assert (
        "the host ran ahead of the GPU, so the NVTX ranges time its enqueueing (step time "
        in (why[0])
    )
    assert why[1].startswith(
        "by phase on the GPU: most of the change is in backward: phase GPU span -1.17 ms/step"
    )
    assert d.spread[0].steps == 12 and d.spread[0].mean_ns == span.a


def test_the_diff_json_and_tables_say_which_clock(captures: Path) -> None:
    args = ["diff", str(captures / "eager"), str(captures / "compiled"), "--labels", "e,c"]
    doc = json.loads(CliRunner().invoke(app, [*args, "--format", "json"]).stdout)
    assert doc["clock"] == "gpu"
    assert doc["spread"]["a"]["mean_ns"] == doc["metrics"]["gpu_span_ns"]["a"]
    table = CliRunner().invoke(app, args, env={"COLUMNS": "200"}).stdout
    assert "steps are compared by their GPU spans" in table
    assert "│ GPU span (first to last GPU op)" in table
    heads = [h for t in terminal_tables(table) for h in headings(t)]
    assert f"Δ {PHASE_LABELS[GPU_SPAN_NS]}" in heads  # the phase table's (`Δ GPU span` was its own)
    plain = CliRunner().invoke(app, ["diff", "sample:eager", "sample:compiled"]).stdout
    assert "GPU spans" not in plain.split("\n")[0]


def test_the_calibration_runs_are_read_on_the_gpu_clock(captures: Path, tmp_path: Path) -> None:
    for side, mean in (("eager", 46 * MS), ("compiled", 45 * MS)):
        folder = tmp_path / side
        folder.mkdir()
        (folder / "capture.sqlite").write_bytes((captures / side / "capture.sqlite").read_bytes())
        info = json.loads((captures / side / "run.json").read_text())
        info["calibration"]["uncaptured_gpu_mean_step_time_ns"] = mean
        (folder / "run.json").write_text(json.dumps(info))
    d = census.diff(tmp_path / "eager", tmp_path / "compiled", labels=("eager", "compiled"))
    assert d.uncaptured_ns == (46 * MS, 45 * MS)
    (line,) = [s for s in explain_diff(d) if s.startswith("without nsys")]
    assert line.startswith(
        "without nsys (the captures' calibration runs, timed on the GPU): compiled − eager = "
        "-1.00 ms/step (-2.2%) against -1.31 ms/step GPU span under nsys"
    )


def _side(tmp_path: Path, name: str, ahead: bool) -> census.Census:
    """Three 10 ms steps; the host leaves each after 3 ms when `ahead`, else waits its GPU."""
    e = Export()
    gpu = 0
    for k in range(3):
        start = (4 if ahead else 11) * MS * k
        end = start + (3 if ahead else 10) * MS + 500
        e.range(f"step {k}", start, end)
        begin = max(start + 1000, gpu)
        e.launch("k", start + 100, begin, begin + 10 * MS)
        gpu = begin + 10 * MS
    return census.summarize(e.write(tmp_path / f"{name}.sqlite"), use_cache=False)


def test_sides_that_differ_in_running_ahead_are_a_note(tmp_path: Path) -> None:
    a, b = _side(tmp_path, "sync", False), _side(tmp_path, "ahead", True)
    assert (a.host_ran_ahead(), b.host_ran_ahead()) == (False, True)
    d = census.diff(a, b, labels=("synced", "ahead"))
    assert d.clock == "gpu"
    assert d.comparability.notes == (
        "ahead's host ran ahead of its GPU and the other's did not: steps and phases are "
        "compared by their GPU spans, not their NVTX ranges",
    )
    assert d.metrics["gpu_span_ns"].delta == 0  # the same GPU work
    assert explain_diff(d)[0].startswith(
        "on the GPU, ahead and synced are within noise: GPU span 0 ns"
    )
    same = census.diff(a, a, labels=("x", "y"))
    assert same.clock == "host" and same.comparability.notes == ()


def test_the_capture_overhead_is_read_on_the_gpu_clock(captures: Path, tmp_path: Path) -> None:
    folder = tmp_path / "eager"
    folder.mkdir()
    (folder / "capture.sqlite").write_bytes((captures / "eager" / "capture.sqlite").read_bytes())
    info = json.loads((captures / "eager" / "run.json").read_text())
    info["calibration"]["uncaptured_gpu_mean_step_time_ns"] = 47 * MS
    (folder / "run.json").write_text(json.dumps(info))
    run = CliRunner()
    out = run.invoke(app, ["summary", str(folder)], env={"COLUMNS": "200"}).stdout
    assert out.splitlines()[-1] == (
        "capture overhead on the GPU: GPU span 46.70 ms/step inside nsys vs 47.00 ms/step "
        "uncaptured (CUDA events) (x0.99): nsys narrows or widens the gaps you compare"
    )
    for args in (["--json"], ["--json", "--top", "3"]):
        doc = json.loads(run.invoke(app, ["summary", str(folder), *args]).stdout)
        assert doc["capture"]["clock"] == "gpu"
        assert doc["capture"]["uncaptured_mean_step_time_ns"] == 47 * MS

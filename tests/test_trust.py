"""Never damage, never mislead: output targets, foreign inputs, damaged records and caches."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from census.cli.app import app
from tests.conftest import SHARED, fixture_file
from tests.nsysdb import Export
from tests.test_robustness import small_export

runner = CliRunner()


def digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


@pytest.fixture
def export(tmp_path: Path) -> Path:
    return small_export(tmp_path)


def test_a_report_never_replaces_an_input(export: Path) -> None:
    before = digest(export)
    r = runner.invoke(app, ["dashboard", str(export), "-o", str(export)])
    assert r.exit_code == 2
    assert (
        r.stderr.strip() == f"Error: {export}: is an input of this command; choose another output"
    )
    assert digest(export) == before
    r = runner.invoke(app, ["diff", str(export), str(export), "--html", str(export)])
    assert r.exit_code == 2 and digest(export) == before


def test_a_report_never_replaces_a_directory_or_a_device(export: Path, tmp_path: Path) -> None:
    r = runner.invoke(app, ["dashboard", str(export), "-o", str(tmp_path)])
    assert r.exit_code == 2 and "is a directory" in r.stderr
    r = runner.invoke(app, ["dashboard", str(export), "-o", os.devnull])
    assert r.exit_code == 2 and "not a regular file" in r.stderr
    assert Path(os.devnull).is_char_device()


def test_an_unwritable_target_is_one_line_naming_it(export: Path) -> None:
    target = export / "sub" / "x.html"  # under a regular file: no directory can be made there
    r = runner.invoke(app, ["dashboard", str(export), "-o", str(target)])
    assert r.exit_code == 2
    assert r.stderr.strip() == (
        f"Error: {target}: cannot write there ({export} is not a writable directory)"
    )


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["summary", "X", "--top", "-1"], "--top -1: give 0 or more"),
        (["diff", "X", "X", "--top", "-3"], "--top -3: give 0 or more"),
        (["ab", "e", "--a", "x", "--b", "y", "--steps", "-2"], "--steps -2: give 1 or more"),
        (["ab", "e", "--demo", "eager,compiled", "--steps", "0"], "--steps 0: give 1 or more"),
        (["ab", "e", "--a", "x", "--b", "y", "--warmup", "-1"], "--warmup -1: give 0 or more"),
        (["summary", "X", "--skip-first", "-1"], "--skip-first must be 0 or more"),
        # Checked before nsys is looked for: a usage error, not "nsys not found" (exit 3).
        (["capture", "c", "--demo", "eager", "--warmup", "-1"], "--warmup -1: give 0 or more"),
        (["capture", "c", "--demo", "eager", "--steps", "0"], "--steps 0: give 1 or more"),
        (["capture", "c", "--demo", "ddp-eager", "--nproc", "0"], "--nproc 0: give 1 or more"),
        (["demo", "--steps", "-2"], "--steps -2: give 1 or more"),
        (["demo", "--warmup", "-1"], "--warmup -1: give 0 or more"),
    ],
)
def test_negative_counts_are_usage_errors(export: Path, args: list[str], message: str) -> None:
    r = runner.invoke(app, [str(export) if a == "X" else a for a in args])
    assert r.exit_code == 2 and message in r.stderr


@pytest.mark.skipif(not (SHARED / "fixtures" / "kineto").is_dir(), reason="../shared absent")
def test_a_kineto_trace_is_named_for_what_it_is(tmp_path: Path) -> None:
    trace = SHARED / "fixtures" / "kineto" / "h200_eager_3steps.kineto.json.gz"
    r = runner.invoke(app, ["summary", str(trace)])
    assert r.exit_code == 1
    assert "a PyTorch profiler (Kineto) trace, not an nsys export" in r.stderr
    plain = tmp_path / "trace.json"
    plain.write_text(json.dumps({"schemaVersion": 1, "traceEvents": []}))
    r = runner.invoke(app, ["summary", str(plain)])
    assert r.exit_code == 1 and "Kineto" in r.stderr


def test_both_sides_without_steps_have(tmp_path: Path) -> None:
    e = Export()
    e.launch("k", 10, 20, 30)
    a, b = e.write(tmp_path / "a.sqlite"), e.write(tmp_path / "b.sqlite")
    r = runner.invoke(app, ["diff", str(a), str(b), "--format", "json"])
    assert "a and b have no step ranges" in r.stderr


def test_a_malformed_run_json_is_an_input_error(tmp_path: Path) -> None:
    folder = tmp_path / "cap"
    folder.mkdir()
    shutil.copy(fixture_file("h200_eager_3steps.sqlite"), folder / "capture.sqlite")
    (folder / "run.json").write_text('["not", "a", "record"]')
    r = runner.invoke(app, ["summary", str(folder)])
    assert r.exit_code == 1
    assert r.stderr.strip().endswith(
        "run.json: not a census capture record (a JSON object with a calibration)"
    )


def test_a_cut_cache_entry_is_recomputed_not_printed(export: Path, tmp_path: Path) -> None:
    env = {**os.environ, "CENSUS_CACHE_DIR": str(tmp_path / "cache")}
    env.pop("CENSUS_NO_CACHE", None)

    def run() -> subprocess.CompletedProcess:
        return subprocess.run([sys.executable, "-m", "census", "summary", str(export), "--json"],
                              capture_output=True, text=True, env=env, check=False)  # fmt: skip

    first = run()
    assert first.returncode == 0
    (entry,) = (tmp_path / "cache" / "summary-json").iterdir()
    data = entry.read_bytes()
    entry.write_bytes(data[: len(data) - 40])
    again = run()
    assert again.returncode == 0 and json.loads(again.stdout) == json.loads(first.stdout)
    entry.write_text('{"meta": [], "sha256": "x"}\n{}')
    assert json.loads(run().stdout) == json.loads(first.stdout)


def test_no_step_ranges_names_the_texts_and_a_steps_regex(tmp_path: Path) -> None:
    e = Export()
    for i in range(3):
        e.range(f"iteration {i}", i * 100, i * 100 + 90)
        e.range("fwd", i * 100, i * 100 + 40)
    e.launch("k", 10, 20, 30)
    path = e.write(tmp_path / "x.sqlite")
    r = runner.invoke(app, ["summary", str(path), "--json"])
    assert (
        "warning: no NVTX step ranges matched --steps '^(step\\b|ProfilerStep#)': per-step "
        "figures are unavailable; its most frequent ranges: 'fwd' ×3, 'iteration 0' ×1, "
        "'iteration 1' ×1, 'iteration 2' ×1; try --steps '^iteration\\b'"
    ) in r.stderr
    r = runner.invoke(app, ["summary", str(path), "--json", "--steps", "^iteration\\b"])
    assert json.loads(r.stdout)["timing"]["per_step"]["step_time_ns"] == 90


@pytest.mark.fixtures
def test_a_missing_memset_table_is_warned() -> None:
    r = runner.invoke(app, ["summary", str(fixture_file("nsysai_mock.sqlite")), "--json"])
    assert "warning: no CUPTI_ACTIVITY_KIND_MEMSET table: no memsets were captured" in r.stderr


def test_a_fifo_is_refused_without_reading_it(tmp_path: Path) -> None:
    fifo = tmp_path / "pipe.sqlite"
    os.mkfifo(fifo)
    r = runner.invoke(app, ["summary", str(fifo)])
    assert r.exit_code == 1
    assert r.stderr.strip() == (
        f"Error: {fifo}: not a regular file (a FIFO or a device?), not an nsys export"
    )


def test_sigterm_ends_census_like_ctrl_c(tmp_path: Path) -> None:
    """SIGTERM during an experiment's arm: exit 130, the arm's process group stopped, no
    experiment folder and no temporary folder left."""
    helper = Path(__file__).parent / "helpers" / "sleep_train.py"
    arm = f"{sys.executable} {helper} --ms 50 --steps 400"
    env = {**os.environ, "TMPDIR": str(tmp_path / "tmp"), "PYTHONUNBUFFERED": "1"}
    (tmp_path / "tmp").mkdir()
    command = [sys.executable, "-m", "census", "ab", "exp", "-o", str(tmp_path / "out"),
               "--no-capture", "--a", arm, "--b", arm]  # fmt: skip
    with subprocess.Popen(command, env=env, stderr=subprocess.PIPE, text=True) as proc:
        assert proc.stderr is not None
        for line in proc.stderr:
            if "warm arm" in line:
                break
        import time

        time.sleep(1.0)
        proc.terminate()
        assert proc.wait(timeout=30) == 130
    assert not (tmp_path / "out" / "exp").exists()
    assert list((tmp_path / "tmp").iterdir()) == []


@pytest.mark.fixtures
def test_incomparable_sides_are_said_first_and_voided_sentences_withheld() -> None:
    eager = fixture_file("h200_eager_3steps.sqlite")
    graph = fixture_file("flameox_nsight-2025.5.2_cudagraph.sqlite")
    for fmt in ("json", "markdown", "table"):
        r = runner.invoke(app, ["diff", str(eager), str(graph), "--labels", "node,graph",
                                "--format", fmt], env={"COLUMNS": "400"})  # fmt: skip
        assert r.exit_code == 0
        out = " ".join(r.stdout.split())
        assert "not directly comparable: graph traced CUDA graphs as whole graphs" in out, fmt
        assert "kernels (" not in out and "over 0 calls" not in out
        if fmt != "json":  # JSON also carries it as data (comparability, warnings)
            assert out.count("traced CUDA graphs as whole graphs") == 1, fmt  # once, first
    doc = json.loads(runner.invoke(app, ["diff", str(eager), str(graph), "--format", "json",
                                         "--labels", "node,graph"]).stdout)  # fmt: skip
    first = doc["explanation"][0]
    assert first.startswith("not directly comparable: graph traced CUDA graphs")
    assert "graph has no step ranges: whole captures are compared" in first
    assert "different GPUs (node: 1 × NVIDIA H200; graph: 1 × NVIDIA GeForce RTX 3060)" in first
    assert first == "not directly comparable: " + "; ".join(doc["comparability"]["problems"])
    assert len(doc["comparability"]["problems"]) == 3
    assert not any("kernels" in s and "Triton" in s for s in doc["explanation"])


def test_a_steps_suggestion_needs_numbered_texts() -> None:
    from census.load.steps import _steps_suggestion

    assert _steps_suggestion([("aten::mm", 18088), ("aten::add", 900)]).startswith(
        "none looks like a numbered step"
    )
    assert (
        _steps_suggestion([("iter_1", 1), ("iter_2", 1), ("fwd", 9)])
        == "try --steps '^iter_?[0-9]'"
    )
    assert _steps_suggestion([("ProfilerStep#3", 1), ("ProfilerStep#4", 1)]) == (
        "try --steps '^ProfilerStep\\b'"
    )
    assert _steps_suggestion([("layer 1", 5)]).startswith("none looks")  # one number is no series

"""`census ab` on CPU stand-in workloads (sleep-based steps inside census.steps): the protocol,
the document, the failure paths. The statistics are proven in test_stats.py; the GPU run is
scripts/gpu_check.sh ab."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from typer.testing import CliRunner

from census.api import load_experiment
from census.cli import app
from tests.helpers.cli import started

HELPER = Path(__file__).parent / "helpers" / "sleep_train.py"
FAKE_NSYS = Path(__file__).parent / "helpers" / "fake_nsys.py"
runner = CliRunner()


def cmd(*args: str) -> str:
    return " ".join([sys.executable, str(HELPER), *args])


def run_ab(tmp_path: Path, *args: str, env: dict | None = None):
    return runner.invoke(
        app,
        ["ab", "exp", "-o", str(tmp_path), "--no-capture", *args],
        env={"CENSUS_NSYS": "", **(env or {})},
    )


def test_ab_finds_a_real_gain_and_writes_the_document(tmp_path: Path) -> None:
    page = tmp_path / "ab.html"
    r = run_ab(tmp_path, "--a", cmd("--ms", "6"), "--b", cmd("--ms", "2"), "--labels",
               "slow,fast", "--warmup", "2", "--active", "6", "--json", "--html", str(page))  # fmt: skip
    assert r.exit_code == 0, r.output
    doc = json.loads(r.stdout)
    assert doc["labels"] == {"a": "slow", "b": "fast"}
    assert doc["order"] == ["a", "a", "b", "b", "a", "b", "a", "a", "b"]
    assert [a["discarded"] for a in doc["arms"]] == [True] + [False] * 8
    assert all(len(a["step_time_ns"]) == 6 and a["clock"] == "host" for a in doc["arms"])
    arm = doc["arms"][1]
    assert (
        arm["median_ns"] == sorted(arm["step_time_ns"])[2] / 2 + sorted(arm["step_time_ns"])[3] / 2
    )
    assert doc["e2e"]["a"]["steps"] == 24 and doc["e2e"]["b"]["arms"] == 4
    assert len(doc["pairs"]) == 4 and all(p["delta_ns"] < 0 for p in doc["pairs"])
    assert doc["verdict"] == "faster"
    lo, hi = doc["ci95_ns"]
    assert lo < doc["delta_median_ns"] < hi < 0
    # the steps sleep 6+3 ms and 2+1 ms: the gain is about 6 ms
    assert -7.5e6 < doc["delta_median_ns"] < -5.5e6
    # and per phase (forward sleeps 6 and 2 ms, backward 3 and 1 ms), from the same arms
    assert list(doc["phases"]) == ["forward", "backward"]
    assert [p["verdict"] for p in doc["phases"].values()] == ["faster", "faster"]
    assert all(len(t) == 6 for a in doc["arms"] for t in a["phase_time_ns"].values())
    assert doc["explanation"][0].startswith("fast is faster than slow by")
    assert doc["capture"] == "--no-capture" and doc["census"] is None
    exp = load_experiment(tmp_path / "exp")
    assert exp.stats.verdict == "faster" and exp.order == doc["order"]
    html = page.read_text(encoding="utf-8")
    assert "Step time of every arm, in run order" in html and "fast is faster than slow" in html


def test_diff_of_an_experiment_folder_shows_the_same(tmp_path: Path) -> None:
    r = run_ab(tmp_path, "--a", cmd("--ms", "2"), "--b", cmd("--ms", "2"), "--arms", "4",
               "--active", "4", "--warmup", "1")  # fmt: skip
    assert r.exit_code == 0, r.output
    again = runner.invoke(app, ["diff", str(tmp_path / "exp"), "--format", "markdown"])
    assert again.exit_code == 0, again.output
    assert "uncaptured arms" in again.stdout and "| side |" in again.stdout
    doc = json.loads(runner.invoke(app, ["diff", str(tmp_path / "exp"), "--format", "json"]).stdout)
    assert doc["order"] == ["a", "a", "b", "b", "a"]
    first = doc["explanation"][0]
    # "unstable": a busy machine disturbed an arm (census/compare/ab/disturbed.py), said first
    assert first.startswith(("no difference", "B is faster", "B is slower", "unstable"))
    if doc["verdict"] == "no difference":
        assert "arms would resolve" in first or "no practical number" in first
    page = tmp_path / "exp.html"
    shown = runner.invoke(app, ["dashboard", str(tmp_path / "exp"), "--html", str(page)])
    assert shown.exit_code == 0, shown.output
    assert "Step time of every arm, in run order" in page.read_text(encoding="utf-8")


def test_a_failing_arm_stops_the_experiment(tmp_path: Path) -> None:
    counter = tmp_path / "runs"
    failing = cmd("--counter", str(counter), "--fail-on-run", "2")
    r = run_ab(tmp_path, "--a", failing, "--b", cmd())
    assert r.exit_code == 4
    # run 1 of side A is the warm arm 0; its run 2 is arm 1
    assert "arm 1 (A) failed (exit 3)" in r.stderr
    assert "failing on run 2 as asked" in r.stderr
    assert not (tmp_path / "exp").exists()
    assert [p.name for p in tmp_path.iterdir()] == ["runs"]


def test_an_arm_without_steps_says_to_use_census_steps(tmp_path: Path) -> None:
    r = run_ab(tmp_path, "--a", cmd("--no-census"), "--b", cmd())
    assert r.exit_code == 4
    assert "arm 0 (A, the discarded warm arm) recorded no steps: wrap the training loop in " \
        "census.steps()" in r.stderr  # fmt: skip


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--arms", "6"], "--arms 6: give a multiple of 4"),
        (["--arms", "0"], "--arms 0: give a multiple of 4"),
        (["--b", ""], "give both --a and --b (each a shell-quoted command), or --demo"),
        (["--labels", "one"], "--labels 'one': give two labels"),
        (["--format", "yaml"], "--format 'yaml': choose table, markdown or json"),
        (["--demo", "eager,fast"], "--demo 'eager,fast': give two of eager, compiled"),
    ],
)
def test_usage_errors_exit_2(tmp_path: Path, args: list[str], message: str) -> None:
    base = {"--a": cmd(), "--b": cmd()}
    for i in range(0, len(args), 2):
        base[args[i]] = args[i + 1]
    flat = [x for kv in base.items() for x in kv]
    if "--demo" in base:
        flat = ["--demo", base["--demo"]]
    r = run_ab(tmp_path, *flat)
    assert r.exit_code == 2, r.output
    assert message in r.stderr


def test_an_existing_experiment_needs_force(tmp_path: Path) -> None:
    (tmp_path / "exp").mkdir()
    r = run_ab(tmp_path, "--a", cmd(), "--b", cmd())
    assert r.exit_code == 2 and "exists: choose another name or pass --force" in r.stderr


def test_a_damaged_record_is_an_input_error(tmp_path: Path) -> None:
    folder = tmp_path / "exp"
    folder.mkdir()
    (folder / "ab.json").write_text('{"labels": ["a", "b"], "arms": "nope"}')
    r = runner.invoke(app, ["diff", str(folder)])
    assert r.exit_code == 1 and "ab.json: not a census experiment record" in r.stderr


def test_ctrl_c_during_a_capture_leaves_no_folder(tmp_path: Path) -> None:
    env = {**os.environ, "CENSUS_NSYS": str(FAKE_NSYS), "FAKE_NSYS_MODE": "hang",
           "PYTHONUNBUFFERED": "1"}  # fmt: skip
    command = [sys.executable, "-m", "census", "ab", "exp", "-o", str(tmp_path), "--arms", "4",
               "--a", cmd("--steps", "3"), "--b", cmd("--steps", "3")]  # fmt: skip
    with started(
        command, env=env, stderr=subprocess.PIPE, stdout=subprocess.DEVNULL, text=True
    ) as proc:
        assert proc.stderr is not None
        deadline = time.monotonic() + 60
        for line in proc.stderr:
            if "capture of A under nsys" in line or time.monotonic() > deadline:
                break
        time.sleep(0.5)
        proc.send_signal(signal.SIGINT)
        assert proc.wait(timeout=30) == 130
    assert list(tmp_path.iterdir()) == []


LOOP = """
import sys, census
from pathlib import Path
out = Path(sys.argv[1])
stop = sys.argv[2] == "stop"
n = sum(1 for _ in census.steps(range(100), warmup=2, active=3, stop=stop))
out.write_text(out.read_text() + f"{n} " if out.exists() else f"{n} ")
"""


@pytest.mark.parametrize(("stop", "runs"), [("stop", "5 " * 5), ("keep", "100 " * 5)])
def test_an_arm_runs_its_loop_for_the_measured_steps_alone(tmp_path: Path, stop, runs) -> None:
    """Under census ab the loop ends after warm-up + measured steps (2 + 3 of 100), in the warm
    arm and every measured one; `stop=False` keeps the rest of the loop; outside census the loop
    runs whole."""
    script, count = tmp_path / "loop.py", tmp_path / "count"
    script.write_text(LOOP)
    command = f"{sys.executable} {script} {count} {stop}"
    r = run_ab(tmp_path, "--a", command, "--b", command, "--arms", "4")
    assert r.exit_code == 0, r.output
    assert count.read_text() == runs
    count.unlink()
    subprocess.run([sys.executable, str(script), str(count), stop], check=True,
                   env={k: v for k, v in os.environ.items() if not k.startswith("CENSUS_")})  # fmt: skip
    assert count.read_text() == "100 "

"""`census capture --ops` (#56): op ranges in the captured run alone, never in its calibration run
or in `census ab`'s arms, whose timing they would disturb; the overhead line says they were on.

nsys's own option is proven on the GPU only; here the stand-in nsys (tests/helpers/fake_nsys.py,
whose help names no `--pytorch`) runs the program in its `crash` mode, so that the environment
census gives the captured run is seen by a real census.steps loop.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from census.capture.arms import ArmsSpec, run_arms
from census.capture.ops import NSYS_PYTORCH, nsys_pytorch, op_ranges
from census.capture.records import capture_overhead
from census.capture.run import (
    CaptureSpec,
    capture_foreign,
    nsys_profile_command,
    run_capture,
)
from census.capture.steps import OPS_EMIT_NVTX
from census.cli import app
from census.errors import CaptureError
from census.render.table import render_overhead
from tests.helpers.files import FAKE_NSYS, fixture_file

# a census.steps loop that appends "RUN ASKED" (census.capture.steps.op_ranges_asked, inside a
# measured step) to the file named by its argument
SEEN = """
import os, sys
import census
from census.capture.steps import op_ranges_asked
for i in census.steps(range(3)):
    with open(sys.argv[1], "a") as fh:
        fh.write(f"{os.environ['CENSUS_RUN']} {op_ranges_asked()}\\n")
"""


def _seen(path: Path) -> list[str]:
    return sorted(set(path.read_text().split("\n")) - {""})


def test_nsys_command_line_with_nsys_op_ranges() -> None:
    cmd = nsys_profile_command("nsys", Path("o"), ("python", "t.py"), "cuda,nvtx", ops=NSYS_PYTORCH)
    assert cmd[:4] == ["nsys", "profile", "--trace=cuda,nvtx", "--pytorch=autograd-nvtx"]
    assert cmd[-2:] == ["python", "t.py"] and cmd.count(NSYS_PYTORCH) == 1
    for ops in (None, OPS_EMIT_NVTX):  # census.steps' op ranges: nothing for nsys to do
        assert NSYS_PYTORCH not in nsys_profile_command("nsys", Path("o"), ("p",), "x", ops=ops)


def test_who_records_op_ranges() -> None:
    """An nsys whose help names no --pytorch (the stand-in, as nsys 2022.4): census.steps does."""
    assert nsys_pytorch(FAKE_NSYS) is False
    assert nsys_pytorch(str(Path("/nonexistent/nsys"))) is False
    assert op_ranges(False, FAKE_NSYS, several_ranks=False) is None  # without --ops
    assert op_ranges(True, FAKE_NSYS, several_ranks=False) == OPS_EMIT_NVTX
    assert op_ranges(True, FAKE_NSYS, several_ranks=True) == OPS_EMIT_NVTX


@pytest.mark.parametrize("ops", [True, False])
def test_op_ranges_in_the_captured_run_alone(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, ops: bool
) -> None:
    """The calibration run never asks for op ranges, the captured run only with --ops, whatever
    $CENSUS_OPS the environment census runs in holds."""
    seen = tmp_path / "seen.txt"
    monkeypatch.setenv("FAKE_NSYS_MODE", "crash")  # runs the program, writes no report
    monkeypatch.setenv("CENSUS_OPS", OPS_EMIT_NVTX)
    spec = CaptureSpec("x", (sys.executable, "-c", SEEN, str(seen)), tmp_path / "prof",
                       nsys=FAKE_NSYS, warmup=1, active=2, calibrate=True, ops=ops)  # fmt: skip
    with pytest.raises(CaptureError, match="nsys produced no report"):
        run_capture(spec)
    assert _seen(seen) == ["calibration False", f"capture {ops}"]


def test_arms_never_ask_for_op_ranges(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    seen = tmp_path / "seen.txt"
    monkeypatch.setenv("CENSUS_OPS", OPS_EMIT_NVTX)
    command = (sys.executable, "-c", SEEN, str(seen))
    arms = run_arms(ArmsSpec({"a": command, "b": command}, ("A", "B"), arms=4, warmup=1,
                             active=2, env=(("CENSUS_OPS", OPS_EMIT_NVTX),)))  # fmt: skip
    assert len(arms) == 5 and _seen(seen) == ["arm False"]
    assert len(seen.read_text().splitlines()) == 5 * 3  # every step of every arm


@pytest.mark.skipif(shutil.which("gcc") is None, reason="no C compiler for torch")
def test_steps_never_imports_torch_and_needs_a_gpu_for_op_ranges(tmp_path: Path) -> None:
    """In a run asked for op ranges, census.steps leaves torch alone when the script did not
    import it, and enters emit_nvtx only where torch sees a GPU (this CPU machine: none)."""
    pytest.importorskip("torch")
    program = """
import sys
import census
from census.capture.steps import op_ranges_asked
for i in census.steps(range(2), warmup=0, active=2, stop=False):
    assert op_ranges_asked()
assert "torch" not in sys.modules
import torch
assert not torch.cuda.is_available()
for i in census.steps(range(2), warmup=0, active=2, stop=False):
    assert not torch.autograd._profiler_enabled()
print("ok")
"""
    env = {**os.environ, "CENSUS_RUN": "capture", "CENSUS_OPS": OPS_EMIT_NVTX}
    out = subprocess.run([sys.executable, "-c", program], env=env, capture_output=True,
                         text=True, check=False, timeout=300)  # fmt: skip
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.strip() == "ok"


def test_cli_ops_recorded_in_run_json(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """`census capture --ops` (the stand-in nsys copies a real export): run.json names who
    recorded the op ranges; the capture with its map is census's own (--force replaces it)."""
    monkeypatch.setenv("FAKE_NSYS_MODE", "copy")
    monkeypatch.setenv("FAKE_NSYS_SQLITE", str(fixture_file("h200_eager_3steps.sqlite")))
    args = ["capture", "run", "-o", str(tmp_path), "--nsys", FAKE_NSYS, "--ops", "--", "true"]
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 0, result.output
    info = json.loads((tmp_path / "run" / "run.json").read_text())
    assert info["op_ranges"] == OPS_EMIT_NVTX
    (tmp_path / "run" / "inductor_map.json").write_text("{}")
    assert capture_foreign(tmp_path / "run") is None
    result = CliRunner().invoke(app, [*args[:-3], "--force", "--", "true"])
    assert result.exit_code == 0, result.output
    assert json.loads((tmp_path / "run" / "run.json").read_text())["op_ranges"] is None


def test_overhead_says_op_ranges_were_on(tmp_path: Path) -> None:
    calibration = {"uncaptured_mean_step_time_ns": 10_000_000}
    (tmp_path / "run.json").write_text(json.dumps({"calibration": calibration,
                                                   "op_ranges": NSYS_PYTORCH}))  # fmt: skip
    overhead = capture_overhead(tmp_path, {"step_time_ns": 12_500_000})
    assert overhead == {"clock": "host", "tracer": "nsys", "captured_mean_step_time_ns": 12_500_000,
                        "uncaptured_mean_step_time_ns": 10_000_000, "overhead_ratio": 1.25,
                        "op_ranges": NSYS_PYTORCH}  # fmt: skip
    assert render_overhead(overhead).startswith(
        "capture overhead: 12.50 ms/step inside nsys with op ranges vs 10.00 ms/step uncaptured "
        "(x1.25)"
    )
    (tmp_path / "run.json").write_text(json.dumps({"calibration": calibration}))
    assert "op_ranges" not in capture_overhead(tmp_path, {"step_time_ns": 12_500_000})

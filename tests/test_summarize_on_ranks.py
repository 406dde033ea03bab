"""`census capture --summarize-on-ranks` under a real torchrun on the CPU: each rank's census is
computed in the rank's own process once its nsys stops (a stand-in nsys that writes a real
export, tests/helpers/fake_nsys.py), cached for the finished capture folder, so census itself
computes no rank."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from census.capture.launcher import split_launcher
from census.capture.per_rank import distributed_profile_command, run_rank
from census.capture.run import CaptureSpec
from census.cli import app
from tests.helpers.files import FAKE_NSYS, fixture_file

runner = CliRunner()
TORCHRUN = (sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node",
            "2", "train.py")  # fmt: skip


def test_each_rank_summarizes_its_own_export(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    pytest.importorskip("torch", reason="torchrun needs torch")
    monkeypatch.setenv("FAKE_NSYS_MODE", "copy")
    monkeypatch.setenv("FAKE_NSYS_SQLITE", str(fixture_file("h200_eager_3steps.sqlite")))
    monkeypatch.setattr("census.load.finish.compute_census", _not_here)  # this process and its pool
    args = ["capture", "ddp", "-o", str(tmp_path), "--nsys", FAKE_NSYS, "--summarize-on-ranks"]
    r = runner.invoke(app, [*args, "--", *TORCHRUN])
    assert r.exit_code == 0, r.output
    folder = tmp_path / "ddp"
    assert sorted(p.name for p in folder.iterdir()) == [
        "rank0.nsys-rep", "rank0.sqlite", "rank1.nsys-rep", "rank1.sqlite", "run.json"]  # fmt: skip
    info = json.loads((folder / "run.json").read_text())
    assert info["ranks"] == {"0": "rank0.sqlite", "1": "rank1.sqlite"}
    assert "census.cli.on_rank" in info["nsys_command"]
    assert "Spread over ranks" in r.stdout  # read from the caches the ranks wrote


def test_the_wrapper_summarizes_only_when_asked(tmp_path: Path) -> None:
    launch = split_launcher(TORCHRUN)
    assert launch is not None
    plain = distributed_profile_command("nsys", tmp_path, launch, "cuda,nvtx")
    wrapped = distributed_profile_command("nsys", tmp_path, launch, "cuda,nvtx", tmp_path / "x")
    cut = plain.index("--", plain.index("census.cli.on_rank"))
    assert wrapped == [*plain[:cut], "--summarize", str(tmp_path / "x"), *plain[cut:]]
    r = runner.invoke(app, ["capture", "one", "-o", str(tmp_path), "--nsys", FAKE_NSYS,
                            "--summarize-on-ranks", "--", sys.executable, "train.py"])  # fmt: skip
    assert r.exit_code == 2
    assert r.stderr == (
        "Error: --summarize-on-ranks: each rank summarizes its own export under a launcher of "
        "several ranks; give a torchrun, srun or mpirun command after --\n"
    )
    assert CaptureSpec("x", ("python", "t.py")).on_ranks is False


def test_a_failed_nsys_is_no_census_and_its_status() -> None:
    assert run_rank([sys.executable, "-c", "import sys; sys.exit(3)"]) == 3
    assert run_rank([sys.executable, "-c", "import os; os.kill(os.getpid(), 9)"]) == 137


def _not_here(*args, **kwargs):
    raise AssertionError("a rank's census was computed by census capture, not on its rank")

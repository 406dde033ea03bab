"""`census doctor` on an analysis-only machine (issue #59): it says first that analysis works
here and what capturing would need, keeps exit 3 and keeps its --json keys."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from census.cli import app

runner = CliRunner()


def _analysis_only(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, *extra: str):
    import census.capture.doctor

    # no nsys at the path given, torch without a GPU, no nvidia-smi
    probes = {"torch": (0, '["2.9.0+cpu", null, false, null]'), "nvidia-smi": (127, "not found")}
    monkeypatch.setattr(census.capture.doctor, "_run",
                        lambda cmd, *a, **k: probes["nvidia-smi" if cmd[0] == "nvidia-smi" else "torch"])  # fmt: skip
    args = ["doctor", "--nsys", str(tmp_path / "no-nsys"), "-o", str(tmp_path / "p"), *extra]
    return runner.invoke(app, args)


def test_doctor_says_analysis_works_before_the_failed_checks(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    r = _analysis_only(tmp_path, monkeypatch)
    assert r.exit_code == 3
    lines = r.stdout.splitlines()
    assert lines[0] == (
        "Analysis works here: census summary, diff and dashboard read nsys exports (.sqlite) and "
        "torch.profiler traces (.json, .json.gz) on any machine."
    )
    assert lines[1] == (
        "Capturing needs nsys, a CUDA GPU and torch with CUDA; it lacks nsys (Nsight Systems), a "
        "CUDA GPU that torch sees, the NVIDIA driver (the checks below say what to do)."
    )
    assert [line.split(" ", 1)[0] for line in lines[2:]] == ["FAIL", "ok", "FAIL", "FAIL", "ok"]


def test_doctor_json_keeps_its_keys(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    r = _analysis_only(tmp_path, monkeypatch, "--json")
    assert r.exit_code == 3
    doc = json.loads(r.stdout)
    assert set(doc) == {"ok", "checks"} and doc["ok"] is False
    assert [c["name"] for c in doc["checks"]][:3] == ["nsys", "torch", "GPU visible to torch"]

"""Capture on the CPU: the nsys command line, run.json, the NVTX step API and every failure path.

nsys's success path is proven on the GPU only (scripts/gpu_check.sh); here a stand-in nsys
(tests/helpers/fake_nsys.py) fails in each way a real one can.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from typer.testing import CliRunner

import census
from census.capture import steps as cnvtx
from census.capture.run import CaptureSpec, nsys_profile_command, run_info
from census.cli import app
from census.sources.samples import SAMPLES_DIR
from tests.helpers.cli import started
from tests.helpers.files import fixture_file

FAKE = str(Path(__file__).parent / "helpers" / "fake_nsys.py")
runner = CliRunner()


def test_nsys_command_line() -> None:
    cmd = nsys_profile_command("nsys", Path("out/capture"), ("python", "train.py"), "cuda,nvtx")
    assert cmd == [
        "nsys",
        "profile",
        "--trace=cuda,nvtx",
        "--cuda-graph-trace=node",
        "--capture-range=cudaProfilerApi",
        "--capture-range-end=stop",
        "--sample=none",
        "--cpuctxsw=none",
        "--export=sqlite",
        "--force-overwrite=true",
        "--output=out/capture",
        "python",
        "train.py",
    ]


def test_run_info_fields(tmp_path: Path) -> None:
    spec = CaptureSpec("x", ("python", "t.py"), tmp_path, nsys=FAKE, warmup=2, active=3)
    t0 = dt.datetime(2026, 1, 1, tzinfo=dt.timezone.utc)
    info = run_info(spec, ["nsys", "profile"], t0, t0, {"uncaptured_mean_step_time_ns": 5.0})
    assert {
        "command",
        "nsys_command",
        "start_time",
        "end_time",
        "gpus",
        "driver_version",
        "cuda_version",
        "torch_version",
        "nsys_version",
        "hostname",
        "git_commit",
        "census_version",
        "calibration",
        "warmup",
        "active",
    } <= set(info)
    assert info["nsys_version"] == "NVIDIA Nsight Systems version 0000.0.0-fake"
    assert info["command"] == ["python", "t.py"] and (info["warmup"], info["active"]) == (2, 3)


@pytest.mark.parametrize("name", ["eager", "compiled"])
def test_bundled_run_json_came_from_a_real_h200_capture(name: str) -> None:
    info = json.loads((SAMPLES_DIR / f"{name}.run.json").read_text())
    assert info["gpus"] == ["NVIDIA H200"]
    assert info["nsys_version"].startswith("NVIDIA Nsight Systems version 2025.3")
    assert info["torch_version"].startswith("2.11") and info["cuda_version"] == "13.0"
    # the demo workload at its defaults (16k tokens a step), as scripts/gpu_check.sh demo-size ran it
    assert info["command"][1:] == ["-m", "census.capture.demo.train", "--batch", "16", "--seq",
                                   "1024", "--warmup", "5", "--steps", "20", "--mode", name]  # fmt: skip
    assert len(info["calibration"]["uncaptured_step_time_ns"]) == 20


def test_steps_api_wraps_the_window(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    events: list[str] = []

    monkeypatch.setattr(
        cnvtx, "_push", lambda message, domain: events.append(f"{domain}:{message}")
    )
    monkeypatch.setattr(cnvtx, "_pop", lambda domain: events.append("pop"))
    monkeypatch.setattr(cnvtx, "profiler_start", lambda: events.append("start"))
    monkeypatch.setattr(cnvtx, "profiler_stop", lambda: events.append("stop"))
    times = tmp_path / "t.json"
    monkeypatch.setenv("CENSUS_STEP_TIMES", str(times))
    seen = list(census.steps(range(6), warmup=2, active=3))
    assert seen == list(range(6))
    assert events == [
        "start",
        "census:step 2",
        "pop",
        "census:step 3",
        "pop",
        "census:step 4",
        "pop",
        "stop",
    ]
    assert len(json.loads(times.read_text())["step_time_ns"]) == 3
    events.clear()
    monkeypatch.setenv("CENSUS_WARMUP", "1")
    monkeypatch.setenv("CENSUS_ACTIVE", "1")
    list(census.steps(range(3)))
    assert events == ["start", "census:step 1", "pop", "stop"]


def test_real_nvtx_ranges_without_a_gpu() -> None:
    with census.step(0):
        pass
    assert list(census.steps(range(2), warmup=0, active=2)) == [0, 1]


def _capture(tmp_path: Path, mode: str, *extra: str, env: dict | None = None):
    env = {"FAKE_NSYS_MODE": mode, **(env or {})}
    for k, v in env.items():
        os.environ[k] = v
    try:
        return runner.invoke(
            app,
            [
                "capture",
                "run",
                "-o",
                str(tmp_path),
                "--nsys",
                FAKE,
                *extra,
                "--",
                sys.executable,
                "-c",
                "print('train')",
            ],
        )
    finally:
        for k in env:
            os.environ.pop(k, None)


def _left(tmp_path: Path) -> list[str]:
    return sorted(p.name for p in tmp_path.iterdir())


def test_nsys_not_found(tmp_path: Path) -> None:
    r = runner.invoke(
        app, ["capture", "run", "-o", str(tmp_path), "--nsys", "/no/nsys", "--", "true"]
    )
    assert r.exit_code == 3
    assert r.stderr.startswith("Error: nsys not found at /no/nsys: install Nsight Systems")


def test_nsys_fails(tmp_path: Path) -> None:
    r = _capture(tmp_path, "fail")
    assert r.exit_code == 4
    err = next(ln for ln in r.stderr.splitlines() if ln.startswith("Error:"))
    assert err.startswith(f"Error: nsys profile failed (exit 1): {FAKE} profile --trace=cuda,nvtx")
    assert err.endswith("ERROR: profiling failed")
    assert _left(tmp_path) == []


def test_only_qdstrm(tmp_path: Path) -> None:
    r = _capture(tmp_path, "qdstrm")
    assert r.exit_code == 4 and "lacks its importer (QdstrmImporter)" in r.stderr
    assert _left(tmp_path) == []


def test_no_report(tmp_path: Path) -> None:
    r = _capture(tmp_path, "noreport")
    assert r.exit_code == 4 and "did the program reach the capture range" in r.stderr


def test_program_crashes_under_nsys(tmp_path: Path) -> None:
    r = runner.invoke(
        app,
        [
            "capture",
            "crash",
            "-o",
            str(tmp_path),
            "--nsys",
            FAKE,
            "--",
            sys.executable,
            "-c",
            "import sys; sys.exit(3)",
        ],
        env={"FAKE_NSYS_MODE": "crash"},
    )
    assert r.exit_code == 4 and "nsys profile failed (exit 3)" in r.stderr
    assert _left(tmp_path) == []


def test_no_step_ranges_discards_the_capture(tmp_path: Path) -> None:
    r = _capture(
        tmp_path, "copy", env={"FAKE_NSYS_SQLITE": str(fixture_file("nsysai_mock.sqlite"))}
    )
    assert r.exit_code == 4
    assert "holds no NVTX step ranges, so it was discarded: wrap each training step" in r.stderr
    assert _left(tmp_path) == []


def test_existing_capture_needs_force(tmp_path: Path) -> None:
    (tmp_path / "run").mkdir()
    r = _capture(tmp_path, "fail")
    assert r.exit_code == 2
    assert (
        r.stderr.strip()
        == f"Error: {tmp_path / 'run'} exists: choose another name or pass --force to replace it"
    )


def test_calibration_needs_census_steps(tmp_path: Path) -> None:
    r = _capture(tmp_path, "fail", "--calibrate")
    assert r.exit_code == 4 and "calibration run recorded no steps" in r.stderr


def test_demo_needs_a_mode(tmp_path: Path) -> None:
    r = runner.invoke(app, ["capture", "d", "-o", str(tmp_path), "--nsys", FAKE, "--demo", "fast"])
    assert (
        r.exit_code == 2
        and "--demo 'fast': choose eager, compiled, ddp-eager or ddp-compiled" in r.stderr
    )


def test_ctrl_c_stops_nsys_and_leaves_nothing(tmp_path: Path) -> None:
    env = {**os.environ, "FAKE_NSYS_MODE": "hang", "CENSUS_CACHE_DIR": str(tmp_path / "c")}
    out = tmp_path / "profiles"
    command = [sys.executable, "-m", "census", "capture", "run", "-o", str(out), "--nsys", FAKE,
               "--", "sleep", "100"]  # fmt: skip
    with started(command, env=env, stderr=subprocess.PIPE, text=True) as proc:
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline and not (out.exists() and any(out.iterdir())):
            time.sleep(0.1)
        time.sleep(0.3)
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=30)
    assert proc.returncode == 130, err
    assert err.strip().endswith("Error: interrupted")
    assert list(out.iterdir()) == []


def test_torchrun_is_wrapped_per_rank(tmp_path: Path) -> None:
    from census.capture.demo import demo_command
    from census.capture.launcher import split_launcher
    from census.capture.per_rank import distributed_profile_command

    launch = split_launcher(("torchrun", "--nproc-per-node", "2", "train.py", "--lr", "1"))
    assert launch is not None and launch.world_size == 2
    assert launch.program == (sys.executable, "train.py", "--lr", "1")
    cmd = distributed_profile_command("nsys", tmp_path, launch, "cuda,nvtx")
    assert cmd == ["torchrun", "--nproc-per-node", "2", "--no-python", sys.executable, "-m",
                   "census.cli.on_rank", str(tmp_path), "--nsys", "nsys", "--trace", "cuda,nvtx",
                   "--", sys.executable, "train.py", "--lr", "1"]  # fmt: skip
    demo = demo_command("ddp-compiled", 5, 20, nproc=2)
    assert demo[-7:] == ("--ddp", "--mode", "compiled", "--warmup", "5", "--steps", "20")
    assert demo[demo.index("--nproc-per-node") + 1] == "2"


def test_multi_gpu_env_keeps_nvlink_multicast_off() -> None:
    from census.capture.run import MULTI_GPU_ENV

    assert MULTI_GPU_ENV == {
        "NCCL_NVLS_ENABLE": "0",
        "TORCH_SYMM_MEM_DISABLE_MULTICAST": "1",
        "NVSHMEM_DISABLE_NVLS": "1",
    }


def test_torchrun_capture_run_json_from_the_gpu() -> None:
    """run.json of `census capture ddp-eager --demo ddp-eager --nproc 1` on an H200."""
    info = json.loads((Path(__file__).parent / "data" / "ddp" / "run.json").read_text())
    assert info["world_size"] == 1 and info["ranks"] == {"0": "rank0.sqlite"}
    assert info["nsys_command"][info["nsys_command"].index("--no-python") + 1].endswith("nsys")
    assert "--output=/tmp/prof/ddp-eager/rank%q{RANK}" in info["nsys_command"]


def test_calibration_keeps_the_gpu_clock_beside_the_host_clock(tmp_path: Path) -> None:
    """A run whose record has CUDA-event step times (a GPU run): run.json keeps both clocks, the
    host's (what NVTX ranges span) and the GPU's (what GPU spans compare with)."""
    from census.capture.run import calibrate

    record = {"clock": "cuda_events", "step_time_ns": [47, 45, 46], "host_step_time_ns": [5, 4, 6]}
    write = f"import json, os; json.dump({record!r}, open(os.environ['CENSUS_STEP_TIMES'], 'w'))"
    spec = CaptureSpec("x", (sys.executable, "-c", write), tmp_path, nsys=FAKE, warmup=0, active=3)
    assert calibrate(spec, tmp_path) == {
        "uncaptured_step_time_ns": [5, 4, 6],
        "uncaptured_mean_step_time_ns": 5.0,
        "uncaptured_gpu_step_time_ns": [47, 45, 46],
        "uncaptured_gpu_mean_step_time_ns": 46.0,
    }
    host = {**record, "clock": "host"}
    write = f"import json, os; json.dump({host!r}, open(os.environ['CENSUS_STEP_TIMES'], 'w'))"
    spec = CaptureSpec("x", (sys.executable, "-c", write), tmp_path, nsys=FAKE, warmup=0, active=3)
    assert calibrate(spec, tmp_path)["uncaptured_gpu_step_time_ns"] is None

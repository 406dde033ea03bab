"""HIP's launch calls in the launch list (#55): a ROCm trace of torch.profiler writes its
launches as `cuda_runtime` events named hipLaunchKernel, hipExtModuleLaunchKernel and
hipModuleLaunchKernel (HTA's MI250 sample, TraceLens's MI300 traces); they count as launch API
calls beside their kernels, as cudaLaunchKernel does (docs/definitions.md, "launch API")."""

from __future__ import annotations

import json
from pathlib import Path

from typer.testing import CliRunner

from census.cli import app

runner = CliRunner()


def _trace(tmp_path: Path) -> Path:
    """One step; three HIP launches and a HIP graph launch, each with its kernel (same
    correlation), and one call that launches nothing."""
    gpu = {"pid": 0, "tid": 3}
    events = [{"ph": "X", "cat": "user_annotation", "name": "ProfilerStep#1", "pid": 9, "tid": 9,
               "ts": "100.000", "dur": "100.000"}]  # fmt: skip
    launches = [("hipLaunchKernel", 1), ("hipExtModuleLaunchKernel", 2),
                ("hipModuleLaunchKernel_spt", 3), ("hipGraphLaunch", 4)]  # fmt: skip
    for i, (name, corr) in enumerate(launches):
        t = 110 + 20 * i
        events += [
            {"ph": "X", "cat": "cuda_runtime", "name": name, "pid": 9, "tid": 9,
             "ts": f"{t}.000", "dur": "2.500", "args": {"correlation": corr}},
            {"ph": "X", "cat": "kernel", "name": f"k{corr}", **gpu, "ts": f"{t + 5}.000",
             "dur": "4.000", "args": {"device": 0, "stream": 3, "correlation": corr}},
        ]  # fmt: skip
    events.append({"ph": "X", "cat": "cuda_runtime", "name": "hipStreamGetDevice", "pid": 9,
                   "tid": 9, "ts": "190.000", "dur": "1.000", "args": {"correlation": 5}})  # fmt: skip
    path = tmp_path / "rocm.json"
    path.write_text(json.dumps({"traceEvents": events}).replace('"ts": "', '"ts": ')
                    .replace('"dur": "', '"dur": ').replace('.000"', ".000")
                    .replace('.500"', ".500"))  # fmt: skip
    return path


def test_hip_launch_calls_count_as_launches(tmp_path: Path) -> None:
    r = runner.invoke(app, ["summary", str(_trace(tmp_path)), "--json"])
    assert r.exit_code == 0, r.output
    doc = json.loads(r.stdout)
    totals = doc["totals"]
    assert totals["kernel_count"] == 4 and totals["kernel_time_ns"] == 16_000
    assert totals["launch_api_count"] == 4  # 0 before: HIP's names were not in the list
    assert totals["launch_api_time_ns"] == 4 * 2_500
    assert totals["graph_launch_count"] == 1
    (step,) = doc["steps"]
    assert (step["kernel_count"], step["launch_api_count"]) == (4, 4)

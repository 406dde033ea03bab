"""`census summary TRACE --json` on Kineto traces (#55): the trace made an nsys-shaped export
(census/sources/kineto/export.py) and read by the one engine. The totals and the steps are held
to the independent reading of tests/helpers/kineto_census.py; the H200 pair's counts to the nsys
exports of the same workload."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from census.cli import app
from tests.helpers.files import DATA, fixture_file
from tests.helpers.kineto_census import KEYS, independent_census
from tests.helpers.kineto_oracle import KINETO

runner = CliRunner()
NCCL = "hta_nccl_parser_config__nccl_data.json.gz"


def summary(path) -> dict:
    r = runner.invoke(app, ["summary", str(path), "--json"])
    assert r.exit_code == 0, r.output
    return json.loads(r.stdout)


@pytest.mark.parametrize("name", [NCCL, "h200_eager_3steps.kineto.json.gz",
                                  "h200_compiled_3steps.kineto.json.gz",
                                  "tracelens_b200__eager_trace.json.gz",
                                  DATA / "kineto_ranks" / "hta_execution_trace__benchmark_simple_add_trace.json.gz",
                                  "hta_triton_example__triton_example.json.gz"])  # fmt: skip
def test_summary_totals_equal_an_independent_reading(name: str) -> None:
    want = independent_census(KINETO / name)["totals"]
    got = summary(KINETO / name)["totals"]
    assert {k: got[k] for k in KEYS} == want


def test_profiler_steps_per_step() -> None:
    """HTA's NCCL trace: three ProfilerStep#N ranges; each step's census keys (work by its
    launching call's start, any thread of the process) as counted independently."""
    fields = ("name", "start_ns", "end_ns", *KEYS)
    want = [[s[k] for k in fields] for s in independent_census(KINETO / NCCL)["steps"]]
    doc = summary(KINETO / NCCL)
    got = [[s[k] for k in fields] for s in doc["steps"]]
    assert got == want and [s[3] for s in want] == [900, 900, 900]
    assert sum(s[3] for s in got) == doc["totals"]["kernel_count"]


@pytest.mark.fixtures
@pytest.mark.parametrize("side", ["eager", "compiled"])
def test_the_tracers_agree_on_the_h200_pair(side: str) -> None:
    """The same workload traced by nsys and by torch.profiler: equal kernel, launch and D2D
    counts and D2D bytes in census's totals."""
    keys = ("kernel_count", "launch_api_count", "nccl_kernel_count", "d2d_count", "d2d_bytes")
    kineto = summary(KINETO / f"h200_{side}_3steps.kineto.json.gz")["totals"]
    nsys = summary(fixture_file(f"h200_{side}_3steps.sqlite"))["totals"]
    assert {k: kineto[k] for k in keys} == {k: nsys[k] for k in keys}


def test_a_damaged_trace_is_one_line_exit_1(tmp_path) -> None:
    data = (KINETO / NCCL).read_bytes()
    path = tmp_path / "cut.pt.trace.json.gz"
    path.write_bytes(data[: len(data) // 2])
    r = runner.invoke(app, ["summary", str(path)])
    assert r.exit_code == 1 and "Traceback" not in r.output
    errors = [ln for ln in r.stderr.splitlines() if ln.startswith("Error:")]
    assert errors == [f"Error: {path}: truncated gzip file (it ends inside compressed data)"]


def test_torch_1_9_categories(tmp_path) -> None:
    """torch 1.8-1.9 (TensorBoard plugin's resnet50 samples, 2021) write the categories
    capitalised: `Kernel`, `Memcpy`, `Memset`, `Runtime`, and `Operator` for the ops and for
    `ProfilerStep#N` alike (TensorBoard's plugin takes them so); times as integer µs, host tids
    as strings. Their kernels, copies, memsets and launches count, and the step is a step."""
    gpu = {"pid": 0, "tid": "stream 7"}
    host = {"pid": 25738, "tid": "25738"}
    events = [
        {"ph": "X", "cat": "Operator", "name": "ProfilerStep#5", **host, "ts": 1000, "dur": 100},
        {"ph": "X", "cat": "Operator", "name": "aten::conv2d", **host, "ts": 1010, "dur": 20},
        {"ph": "X", "cat": "Runtime", "name": "cudaLaunchKernel", **host, "ts": 1020, "dur": 5,
         "args": {"cbid": 211, "correlation": 41}},
        {"ph": "X", "cat": "Runtime", "name": "cudaMemcpyAsync", **host, "ts": 1040, "dur": 7,
         "args": {"cbid": 41, "correlation": 42}},
        {"ph": "X", "cat": "Runtime", "name": "cudaMemsetAsync", **host, "ts": 1200, "dur": 3,
         "args": {"cbid": 51, "correlation": 43}},
        {"ph": "X", "cat": "Kernel", "name": "void k()", **gpu, "ts": 1030, "dur": 397,
         "args": {"device": 0, "stream": 7, "correlation": 41}},
        {"ph": "X", "cat": "Memcpy", "name": "Memcpy DtoD (Device -> Device)", **gpu,
         "ts": 1430, "dur": 2, "args": {"device": 0, "stream": 7, "correlation": 42,
                                         "bytes": 4096}},
        {"ph": "X", "cat": "Memset", "name": "Memset (Device)", **gpu, "ts": 1440, "dur": 1,
         "args": {"device": 0, "stream": 7, "correlation": 43, "bytes": 128000}},
    ]  # fmt: skip
    path = tmp_path / "worker0.pt.trace.json"
    path.write_text(json.dumps({"schemaVersion": 1, "traceEvents": events}))
    doc = summary(path)
    want = {"kernel_count": 1, "kernel_time_ns": 397_000, "launch_api_count": 1,
            "launch_api_time_ns": 5_000, "d2d_count": 1, "d2d_bytes": 4096, "memset_count": 1,
            "memset_bytes": 128000}  # fmt: skip
    assert {k: doc["totals"][k] for k in want} == want
    [step] = doc["steps"]
    assert (step["name"], step["start_ns"], step["end_ns"]) == (
        "ProfilerStep#5",
        1_000_000,
        1_100_000,
    )
    assert {k: step[k] for k in want} == {**want, "memset_count": 0, "memset_bytes": 0}
    assert independent_census(path)["totals"] == doc["totals"]


def test_events_set_aside_are_said(tmp_path) -> None:
    """A kernel with a negative duration is left out, and copies without `args.bytes` (ROCm's
    traces write none) count 0 bytes: `census summary` says both, with counts, never silently."""
    gpu = {"pid": 0, "tid": 7}
    args = {"device": 0, "stream": 7, "correlation": 5}
    events = [
        {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": 1,
         "ts": 10, "dur": 2, "args": {"correlation": 5}},
        {"ph": "X", "cat": "kernel", "name": "k", **gpu, "ts": 12, "dur": -3, "args": args},
        {"ph": "X", "cat": "kernel", "name": "k", **gpu, "ts": 20, "dur": 3, "args": args},
        {"ph": "X", "cat": "gpu_memcpy", "name": "Memcpy HtoD (Host -> Device)", **gpu,
         "ts": 30, "dur": 3, "args": args},
        {"ph": "X", "cat": "gpu_memcpy", "name": "Memcpy HtoD (Host -> Device)", **gpu,
         "ts": 40, "dur": 3, "args": {**args, "bytes": 64}},
    ]  # fmt: skip
    path = tmp_path / "rocm.json"
    path.write_text(json.dumps({"traceEvents": events}))
    doc = summary(path)
    assert (doc["totals"]["kernel_count"], doc["totals"]["h2d_count"]) == (1, 2)
    assert doc["totals"]["h2d_bytes"] == 64
    assert "1 kernels events with a negative duration, left out" in doc["warnings"]
    assert "1 copies or memsets carry no `args.bytes`: their bytes count as 0" in doc["warnings"]

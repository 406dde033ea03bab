"""`census summary TRACE --json` on Kineto traces (#55): the trace made an nsys-shaped export
(census/sources/kineto/export.py) and read by the one engine. The totals and the steps are held
to the independent reading of tests/helpers/kineto_oracle.py; the H200 pair's counts to the nsys
exports of the same workload."""

from __future__ import annotations

import json
import re

import pytest
from typer.testing import CliRunner

from census.cli import app
from census.definitions import launch_api_kind
from tests.helpers.files import fixture_file
from tests.helpers.kineto_oracle import KINETO, ns, oracle_events

runner = CliRunner()
NCCL = "hta_nccl_parser_config__nccl_data.json.gz"


def summary(path) -> dict:
    r = runner.invoke(app, ["summary", str(path), "--json"])
    assert r.exit_code == 0, r.output
    return json.loads(r.stdout)


def oracle_totals(name: str) -> dict:
    _, events = oracle_events(name)
    kernels = [e for e in events if e["cat"] == "kernel"]
    nccl = [e for e in kernels if re.match(r"nccl(Dev)?Kernel", e["name"])]
    launches = [e for e in events if e["cat"] in ("cuda_runtime", "cuda_driver")
                and launch_api_kind(e["name"])]  # fmt: skip
    d2d = [e for e in events if e["cat"] == "gpu_memcpy" and e["name"].startswith("Memcpy DtoD")]
    return {
        "kernel_count": len(kernels),
        "kernel_time_ns": sum(ns(e["dur"]) for e in kernels),
        "nccl_kernel_count": len(nccl),
        "nccl_kernel_time_ns": sum(ns(e["dur"]) for e in nccl),
        "launch_api_count": len(launches),
        "launch_api_time_ns": sum(ns(e["dur"]) for e in launches),
        "d2d_count": len(d2d),
        "d2d_bytes": sum(e["args"]["bytes"] for e in d2d),
    }


@pytest.mark.parametrize("name", [NCCL, "h200_eager_3steps.kineto.json.gz",
                                  "h200_compiled_3steps.kineto.json.gz",
                                  "tracelens_b200__eager_trace.json.gz"])  # fmt: skip
def test_summary_totals_equal_an_independent_reading(name: str) -> None:
    want = oracle_totals(name)
    got = summary(KINETO / name)["totals"]
    assert {k: got[k] for k in want} == want


def test_profiler_steps_per_step() -> None:
    """HTA's NCCL trace: three ProfilerStep#N ranges; each step's kernels (by their launching
    call's start, any thread of the process) and kernel time as counted independently."""
    _, events = oracle_events(NCCL)
    calls = {
        e["args"]["correlation"]: e for e in events if e["cat"] in ("cuda_runtime", "cuda_driver")
    }
    steps = sorted((e for e in events if e["cat"] == "user_annotation"
                    and e["name"].startswith("ProfilerStep#")), key=lambda e: ns(e["ts"]))  # fmt: skip
    want = []
    for s in steps:
        lo, hi = ns(s["ts"]), ns(s["ts"]) + ns(s["dur"])
        mine = [k for k in events if k["cat"] == "kernel"
                and lo <= ns(calls[k["args"]["correlation"]]["ts"]) < hi]  # fmt: skip
        want.append((s["name"], len(mine), sum(ns(k["dur"]) for k in mine)))
    doc = summary(KINETO / NCCL)
    got = [(s["name"], s["kernel_count"], s["kernel_time_ns"]) for s in doc["steps"]]
    assert got == want and [n for _, n, _ in want] == [900, 900, 900]
    assert sum(n for _, n, _ in got) == doc["totals"]["kernel_count"]


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

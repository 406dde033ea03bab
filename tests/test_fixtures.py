"""Exact census values on every real export in ../shared/fixtures/nsys (or the repository's
copies of them), and on the bundled H200 pair; each also checked against the slow oracle of the
definitions."""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

import pytest

from census.api import summarize
from census.metrics import METRIC_KEYS
from census.sources.samples import sample_path
from tests.helpers.files import (
    CHECKSUMS,
    PACKED,
    REPO,
    SHARED_FIXTURES,
    fixture_file,
    unpacked_fixtures,
)
from tests.oracle import oracle

# name -> (kernel_count, kernel_time_ns, nccl_count, nccl_time_ns, union_ns,
#          launch_count, launch_time_ns, graph_launches, d2d_count, d2d_bytes)
TOTALS = {
    "h200_eager_3steps.sqlite": (861, 16929824, 0, 0, 16929824, 861, 6740355, 0, 39, 352321536),
    "h200_compiled_3steps.sqlite": (732, 13561734, 0, 0, 13561734, 732, 6513133, 0, 3, 50331648),
    "nsysai_mfu_2gpu_before.sqlite": (
        4010,
        535200650,
        66,
        25401752,
        509786456,
        4006,
        31387035,
        0,
        986,
        8046134272,
    ),
    "nsysai_mfu_2gpu_after.sqlite": (
        3587,
        488835406,
        62,
        33742101,
        455093305,
        3580,
        39453182,
        0,
        872,
        7195376640,
    ),
    "pipit_saxpy-mpi-cuda_nsys_perlmutter0.sqlite": (
        5,
        88573480,
        0,
        0,
        88573480,
        5,
        162714,
        0,
        0,
        0,
    ),
    "flameox_nsight-2025.5.2_cudagraph.sqlite": (3, 3840, 0, 0, 3840, 6, 87088, 2, 0, 0),
    "nsysai_mock.sqlite": (2, 4129, 0, 0, 4129, 2, 35200405, 0, 0, 0),
}


def _tuple(m) -> tuple:
    return (
        m.kernel_count,
        m.kernel_time_ns,
        m.nccl_kernel_count,
        m.nccl_kernel_time_ns,
        m.non_nccl_union_ns,
        m.launch_api_count,
        m.launch_api_time_ns,
        m.graph_launch_count,
        m.d2d_count,
        m.d2d_bytes,
    )


@pytest.mark.parametrize("name", sorted(TOTALS))
def test_totals_exact(name: str) -> None:
    census = summarize(fixture_file(name))
    assert _tuple(census.totals) == TOTALS[name]
    t = census.totals
    assert t.nccl_kernel_count + t.non_nccl_kernel_count == t.kernel_count
    assert t.nccl_kernel_time_ns + t.non_nccl_kernel_time_ns == t.kernel_time_ns
    assert t.non_nccl_union_ns <= t.non_nccl_kernel_time_ns


@pytest.mark.parametrize("name", sorted(TOTALS))
def test_matches_oracle(name: str) -> None:
    path = fixture_file(name)
    census = summarize(path)
    expected = oracle(path)
    assert census.totals.as_dict() == expected["totals"]
    assert [s.metrics.as_dict() for s in census.steps] == expected["steps"]


def test_h200_eager_steps_hold_every_kernel() -> None:
    census = summarize(fixture_file("h200_eager_3steps.sqlite"))
    assert [s.name for s in census.steps] == ["step 0", "step 1", "step 2"]
    assert [s.metrics.kernel_count for s in census.steps] == [287, 287, 287]
    assert sum(s.metrics.kernel_count for s in census.steps) == 861
    assert [(s.start_ns, s.end_ns) for s in census.steps] == [
        (11342289, 27413837),
        (27616791, 41606489),
        (41744119, 55295063),
    ]
    assert [s.metrics.launch_api_time_ns for s in census.steps] == [2491509, 2187323, 2061523]
    assert [s.gpu_busy_ns for s in census.steps] == [5750717, 5743425, 5741185]
    assert census.per_step()["d2d_bytes"] == 117440512
    assert {a.api: (a.count, a.time_ns) for a in census.launch_apis} == {
        "cudaLaunchKernel": (669, 5242545),
        "cuLaunchKernelEx": (192, 1497810),
    }


def test_h200_compiled_launch_apis() -> None:
    census = summarize(fixture_file("h200_compiled_3steps.sqlite"))
    assert {a.api: a.count for a in census.launch_apis} == {
        "cuLaunchKernel": 453,
        "cuLaunchKernelEx": 192,
        "cudaLaunchKernel": 87,
    }
    assert [s.gpu_busy_ns for s in census.steps] == [4535496, 4543085, 4555697]


def test_busy_plus_idle_is_step_time_on_real_exports() -> None:
    for name in ("h200_eager_3steps.sqlite", "h200_compiled_3steps.sqlite"):
        for s in summarize(fixture_file(name)).steps:
            assert s.gpu_busy_ns + s.gpu_idle_ns == s.end_ns - s.start_ns
            assert 0 < s.gpu_busy_ns <= s.end_ns - s.start_ns


def test_legacy_duplicate_runtime_rows_count_once() -> None:
    census = summarize(fixture_file("pipit_saxpy-mpi-cuda_nsys_perlmutter0.sqlite"))
    # nsys stats lists both copies (162,714 and 160,329 ns); census keeps the longer one.
    assert census.totals.launch_api_count == 5
    assert census.totals.launch_api_time_ns == 162714
    assert census.source.schema_version == "2.9.1"
    assert census.source.nsys_version == "2022.2.1.31"


def test_cuda_graph_trace_mode_warns() -> None:
    census = summarize(fixture_file("flameox_nsight-2025.5.2_cudagraph.sqlite"))
    assert census.graph_trace_mode
    assert any("--cuda-graph-trace=node" in w for w in census.warnings)
    assert any("no NVTX_EVENTS table" in w for w in census.warnings)


def test_sliced_export_counts_orphans() -> None:
    census = summarize(fixture_file("nsysai_mfu_2gpu_before.sqlite"))
    assert census.sliced
    assert any("24 of 4010 kernels have no launching CUDA API row" in w for w in census.warnings)
    hint = [w for w in census.warnings if w.startswith("no NVTX step ranges matched")]
    assert hint[0].endswith(
        "its most frequent ranges: 'ncclRecv' ×132, 'ncclSend' ×132, 'ncclCommCount' ×66, "
        "'ncclGroupEnd' ×66, 'ncclGroupStart' ×66; none looks like a numbered step ('step 0', "
        "'step 1', ...): mark the steps with census.steps() or NVTX ranges 'step N', or name "
        "them with --steps"
    )
    assert [g.id for g in census.source.gpus] == [0, 1]
    assert census.steps == ()


def test_no_nvtx_table_is_a_warning_not_a_crash() -> None:
    census = summarize(fixture_file("nsysai_mock.sqlite"))
    assert census.steps == () and census.per_step() is None
    assert census.totals.kernel_count == 2


# The bundled pair, captured on an H200 (the demo at 16k tokens a step, 20 steps each; nsys
# stats agree: tests/test_nsys_stats.py).
SAMPLE_PER_STEP = {
    "eager": {"kernel_count": 251.0, "launch_api_count": 251.0, "d2d_bytes": 16777216.0},
    "compiled": {"kernel_count": 229.0, "launch_api_count": 229.0, "d2d_bytes": 16777216.0},
}


@pytest.mark.parametrize("name", ["eager", "compiled"])
def test_bundled_samples(name: str) -> None:
    path = sample_path(name)
    census = summarize(path)
    assert census.step_count == 20
    per = census.per_step()
    for key, value in SAMPLE_PER_STEP[name].items():
        assert per[key] == value
    expected = oracle(path / "capture.sqlite")
    assert census.totals.as_dict() == expected["totals"]
    assert [s.metrics.as_dict() for s in census.steps] == expected["steps"]
    assert set(census.totals.as_dict()) == set(METRIC_KEYS)


def _checksums() -> dict[str, str]:
    return {name: digest for digest, name in (line.split() for line in CHECKSUMS.read_text().splitlines())}  # fmt: skip


def test_the_repository_copies_are_the_shared_exports() -> None:
    # a fresh clone reads the copies (no ../shared beside it): they must be the same bytes
    sums = _checksums()
    assert sorted(sums) == sorted(p.stem for p in PACKED.glob("*.xz"))
    copies = unpacked_fixtures()
    shared = [SHARED_FIXTURES] if SHARED_FIXTURES.is_dir() else []
    for folder in (copies, *shared):
        for name, digest in sums.items():
            assert hashlib.sha256((folder / name).read_bytes()).hexdigest() == digest, folder / name
    for copy in copies.iterdir():
        assert copy.stat().st_mode & 0o222 == 0, f"{copy} is an input: read-only"


def test_a_fresh_clone_reads_the_copies(tmp_path: Path) -> None:
    # without ../shared (CENSUS_SHARED names a folder that does not exist), fixture_file finds
    # the exports in the unpacked copies instead of skipping the test
    import subprocess
    import sys

    code = "from tests.helpers.files import fixture_file; print(fixture_file('nsysai_mock.sqlite'))"
    env = {**os.environ, "CENSUS_SHARED": str(tmp_path / "absent"), "PYTHONPATH": str(REPO)}
    r = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    assert Path(r.stdout.strip()) == unpacked_fixtures() / "nsysai_mock.sqlite"

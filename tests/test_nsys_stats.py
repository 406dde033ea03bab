"""census against nsys's own reports on the same files.

tests/data/nsys_stats/ holds `nsys stats -r cuda_gpu_kern_sum,cuda_api_sum,cuda_gpu_mem_size_sum
-f csv` output, run with Nsight Systems 2025.3.1 on the GPU machine (scripts/gpu_check.sh).
"""

from __future__ import annotations

import csv
from collections import Counter
from pathlib import Path

import pytest

from census.api import summarize
from census.definitions import launch_api_kind
from census.sources.samples import sample_path
from tests.helpers.exports import unpacked
from tests.helpers.files import DATA, fixture_file

STATS = DATA / "nsys_stats"
FILES = {
    "h200_eager_3steps": lambda: fixture_file("h200_eager_3steps.sqlite"),
    "h200_compiled_3steps": lambda: fixture_file("h200_compiled_3steps.sqlite"),
    "nsysai_mfu_2gpu_before": lambda: fixture_file("nsysai_mfu_2gpu_before.sqlite"),
    "nsysai_mfu_2gpu_after": lambda: fixture_file("nsysai_mfu_2gpu_after.sqlite"),
    "nsysai_mock": lambda: fixture_file("nsysai_mock.sqlite"),
    "flameox_nsight-2025.5.2_cudagraph": lambda: fixture_file(
        "flameox_nsight-2025.5.2_cudagraph.sqlite"
    ),
    "pipit_saxpy-mpi-cuda_nsys_perlmutter0": lambda: fixture_file(
        "pipit_saxpy-mpi-cuda_nsys_perlmutter0.sqlite"
    ),
    "sample-eager": lambda: sample_path("eager"),
    "sample-compiled": lambda: sample_path("compiled"),
    "ddp-eager-rank0": lambda: unpacked(DATA / "ddp" / "rank0.sqlite.xz"),
    "engine-eager": lambda: unpacked(DATA / "engine" / "eager.sqlite.xz"),
    "engine-compiled": lambda: unpacked(DATA / "engine" / "compiled.sqlite.xz"),
    # issue #58's capture matrix (H100, tests/data/matrix/manifest.tsv)
    **{
        f"matrix-{m}": (lambda m=m: unpacked(DATA / "matrix" / f"{m}.sqlite.xz"))
        for m in ("plain", "census", "graph-node", "graph-graph")
    },
}


def _rows(stem: str, report: str) -> list[dict[str, str]]:
    path = STATS / f"{stem}_{report}.csv"
    text = path.read_text(encoding="utf-8")
    return list(csv.DictReader(text.splitlines())) if text.strip() else []


@pytest.mark.parametrize("stem", sorted(FILES))
def test_kernels_match_cuda_gpu_kern_sum(stem: str) -> None:
    census = summarize(FILES[stem]())
    rows = _rows(stem, "cuda_gpu_kern_sum")
    theirs = Counter()
    for r in rows:
        theirs[(r["Name"], "n")] += int(r["Instances"])
        theirs[(r["Name"], "t")] += int(r["Total Time (ns)"])
    ours = Counter()
    for k in census.kernels:
        ours[(k.name, "n")] += k.count
        ours[(k.name, "t")] += k.time_ns
    assert ours == theirs
    assert census.totals.kernel_count == sum(int(r["Instances"]) for r in rows)
    assert census.totals.kernel_time_ns == sum(int(r["Total Time (ns)"]) for r in rows)


@pytest.mark.parametrize("stem", sorted(set(FILES) - {"pipit_saxpy-mpi-cuda_nsys_perlmutter0"}))
def test_launch_apis_match_cuda_api_sum(stem: str) -> None:
    census = summarize(FILES[stem]())
    theirs: dict[str, tuple[int, int]] = {}
    for r in _rows(stem, "cuda_api_sum"):
        api = launch_api_kind(r["Name"])  # nsys keeps some `_v<N>` suffixes, census removes all
        if api:
            n, t = theirs.get(api, (0, 0))
            theirs[api] = (n + int(r["Num Calls"]), t + int(r["Total Time (ns)"]))
    assert {a.api: (a.count, a.time_ns) for a in census.launch_apis} == theirs
    assert census.totals.launch_api_count == sum(n for n, _ in theirs.values())
    assert census.totals.launch_api_time_ns == sum(t for _, t in theirs.values())


def test_legacy_duplicates_nsys_counts_twice_census_once() -> None:
    census = summarize(FILES["pipit_saxpy-mpi-cuda_nsys_perlmutter0"]())
    rows = [
        r
        for r in _rows("pipit_saxpy-mpi-cuda_nsys_perlmutter0", "cuda_api_sum")
        if r["Name"] == "cudaLaunchKernel"
    ]
    assert sorted(int(r["Total Time (ns)"]) for r in rows) == [160329, 162714]
    assert census.totals.launch_api_time_ns == max(int(r["Total Time (ns)"]) for r in rows)
    assert census.totals.launch_api_count == int(rows[0]["Num Calls"])


@pytest.mark.parametrize("stem", sorted(FILES))
def test_d2d_matches_cuda_gpu_mem_size_sum(stem: str) -> None:
    census = summarize(FILES[stem]())
    rows = {r["Operation"]: r for r in _rows(stem, "cuda_gpu_mem_size_sum")}
    d2d = rows.get("[CUDA memcpy Device-to-Device]")
    if d2d is None:
        assert census.totals.d2d_count == 0
    else:
        assert census.totals.d2d_count == int(d2d["Count"])
        assert f"{census.totals.d2d_bytes / 1e6:.3f}" == d2d["Total (MB)"]
    for m in census.memory:
        op = "[CUDA memset]" if m.kind == "memset" else f"[CUDA memcpy {m.kind}]"
        if rows:
            assert int(rows[op]["Count"]) == m.count


def test_stats_files_are_present() -> None:
    assert len(list(Path(STATS).glob("*.csv"))) == 3 * len(FILES)

"""Tiny exact exports built with sqlite-utils: each definition's corner, with hand-computed values."""

from __future__ import annotations

from pathlib import Path

import pytest

from census.api import summarize
from tests.nsysdb import Export
from tests.oracle import oracle

NCCL = "ncclDevKernel_AllReduce_Sum_f32_RING_LL(ncclDevKernelArgsStorage<4096>)"


def census_of(exp: Export, tmp_path: Path, **kw):
    path = tmp_path / "t.sqlite"
    if not path.exists():
        exp.write(path)
    return summarize(path, **kw)


def test_overlapping_kernels_on_two_streams_count_once(tmp_path: Path) -> None:
    e = Export()
    e.range("step 0", 0, 1000)
    e.launch("gemm_a", 10, 100, 300, stream=1)
    e.launch("gemm_b", 20, 200, 400, stream=2)  # overlaps [200, 300)
    e.launch("add", 30, 500, 600, stream=1)
    c = census_of(e, tmp_path)
    assert c.totals.kernel_time_ns == 200 + 200 + 100
    assert c.totals.non_nccl_union_ns == 300 + 100
    assert c.steps[0].metrics.non_nccl_union_ns == 400
    assert c.steps[0].gpu_busy_ns == 400
    assert c.steps[0].gpu_idle_ns == 600


def test_union_is_per_device_and_excludes_nccl(tmp_path: Path) -> None:
    e = Export()
    e.launch("k0", 1, 100, 200, device=0)
    e.launch("k1", 2, 100, 200, device=1)  # same time, other device: counted again
    e.launch(NCCL, 3, 150, 400, device=0)
    c = census_of(e, tmp_path)
    t = c.totals
    assert (t.kernel_count, t.nccl_kernel_count, t.non_nccl_kernel_count) == (3, 1, 2)
    assert (t.nccl_kernel_time_ns, t.non_nccl_kernel_time_ns) == (250, 200)
    assert t.non_nccl_union_ns == 200
    assert [g.id for g in c.source.gpus] == [0, 1]


def test_nested_and_contained_intervals(tmp_path: Path) -> None:
    e = Export()
    e.launch("outer", 1, 0, 1000)
    e.launch("inner", 2, 100, 200, stream=2)
    e.launch("tail", 3, 900, 1100, stream=3)
    e.launch("later", 4, 2000, 2001)
    assert census_of(e, tmp_path).totals.non_nccl_union_ns == 1100 + 1


def test_work_from_another_thread_belongs_to_the_step(tmp_path: Path) -> None:
    e = Export()
    e.range("step 0", 0, 1000, tid=1)
    e.launch("forward", 10, 20, 30, tid=1)
    e.launch("autograd_backward", 500, 510, 520, tid=2)  # PyTorch's autograd thread
    e.launch("after_step", 1500, 1510, 1520, tid=1)
    c = census_of(e, tmp_path)
    assert c.steps[0].metrics.kernel_count == 2
    assert c.steps[0].metrics.launch_api_count == 2
    assert c.totals.kernel_count == 3


def test_kernel_running_after_the_step_still_belongs_to_it(tmp_path: Path) -> None:
    e = Export()
    e.range("step 0", 0, 100)
    e.range("step 1", 200, 300)
    e.launch("queued", 90, 150, 250)  # launched in step 0, runs across the gap into step 1
    c = census_of(e, tmp_path)
    assert [s.metrics.kernel_count for s in c.steps] == [1, 0]
    assert [s.metrics.non_nccl_union_ns for s in c.steps] == [100, 0]
    # busy is GPU activity inside each step's own range, whoever launched it
    assert [s.gpu_busy_ns for s in c.steps] == [0, 50]
    assert [s.gpu_idle_ns for s in c.steps] == [100, 50]


def test_busy_clips_an_interval_spanning_several_steps(tmp_path: Path) -> None:
    e = Export()
    for i in range(3):
        e.range(f"step {i}", 100 * i, 100 * i + 80)
    e.launch("long", 1, 50, 250)
    e.copy(8, 1 << 20, 2, 10, 30)
    e.set(64, 3, 20, 40)
    c = census_of(e, tmp_path)
    # step 0: long [50, 80) + copy/memset union [10, 40)
    assert [s.gpu_busy_ns for s in c.steps] == [(80 - 50) + (40 - 10), 80, 50]
    for s in c.steps:
        assert s.gpu_busy_ns + s.gpu_idle_ns == s.end_ns - s.start_ns


def test_zero_kernels_and_nonpositive_durations(tmp_path: Path) -> None:
    e = Export()
    e.range("step 0", 0, 100)
    c = summarize(e.write(tmp_path / "none.sqlite"))
    assert c.totals.kernel_count == 0 and c.steps[0].gpu_busy_ns == 0
    f = Export()
    f.launch("zero", 1, 10, 10)
    f.launch("negative", 2, 50, 40)
    f.launch("fine", 3, 60, 70)
    c2 = summarize(f.write(tmp_path / "neg.sqlite"))
    assert c2.totals.kernel_time_ns == 0 + (-10) + 10  # sum of end - start, as defined
    assert c2.totals.non_nccl_union_ns == 10
    assert any("1 kernel(s) have a missing or negative duration" in w for w in c2.warnings)


def test_correlation_ids_are_per_process(tmp_path: Path) -> None:
    e = Export()
    e.range("step 0", 0, 100, pid=1)
    e.api("cudaLaunchKernel_v7000", 10, 15, pid=1, corr=7)
    e.api("cudaLaunchKernel_v7000", 500, 505, pid=2, corr=7)
    e.kernel("p1", 20, 30, pid=1, corr=7)
    e.kernel("p2", 520, 530, pid=2, corr=7)
    c = census_of(e, tmp_path)
    assert c.steps[0].metrics.kernel_count == 1
    assert c.totals.launch_api_count == 2


def test_duplicate_runtime_rows_keep_the_longest(tmp_path: Path) -> None:
    e = Export()
    corr = e.api("cudaLaunchKernel", 10, 40, event_class=67)
    e.api("cudaLaunchKernel_v7000", 11, 30, corr=corr)
    e.kernel("k", 50, 60, corr=corr)
    e.api("cudaLaunchKernel_ptsz_v7000", 100, 107)
    e.api("cuLaunchKernelEx", 200, 202)
    e.api("cudaGraphLaunch_v10000", 300, 350)
    e.api("cuGraphLaunch", 400, 410)
    e.api("cuKernelGetName", 500, 501)  # not a launch
    c = census_of(e, tmp_path)
    t = c.totals
    assert t.launch_api_count == 5
    assert t.launch_api_time_ns == 30 + 7 + 2 + 50 + 10
    assert t.graph_launch_count == 2
    assert t.kernel_count == 1
    assert {a.api for a in c.launch_apis} == {
        "cudaLaunchKernel",
        "cuLaunchKernelEx",
        "cudaGraphLaunch",
        "cuGraphLaunch",
    }


def test_memcpy_kinds_and_memsets(tmp_path: Path) -> None:
    e = Export()
    e.range("step 0", 0, 100)
    e.copy(8, 1000, 1, 10, 20)
    e.copy(8, 24, 200, 210, 220)  # outside the step
    e.copy(1, 4096, 2, 30, 40)
    e.set(512, 3, 50, 55)
    c = census_of(e, tmp_path)
    assert (c.totals.d2d_count, c.totals.d2d_bytes) == (2, 1024)
    assert (c.steps[0].metrics.d2d_count, c.steps[0].metrics.d2d_bytes) == (1, 1000)
    kinds = {m.kind: (m.count, m.bytes, m.step_count) for m in c.memory}
    assert kinds == {
        "Host-to-Device": (1, 4096, 1),
        "Device-to-Device": (2, 1024, 1),
        "memset": (1, 512, 1),
    }


def test_skip_first_regex_registered_names_and_start_end_ranges(tmp_path: Path) -> None:
    e = Export()
    for i in range(4):
        e.range(f"step {i}", 100 * i, 100 * i + 50, registered=(i % 2 == 0))
        e.launch("k", 100 * i + 1, 100 * i + 10, 100 * i + 20)
    e.range("ProfilerStep#7", 1000, 1050, event_type=60)
    e.range("stepper", 2000, 2050)  # not `step\b`
    c = census_of(e, tmp_path, skip_first=1)
    assert [s.name for s in c.steps] == ["step 1", "step 2", "step 3", "ProfilerStep#7"]
    c2 = census_of(e, tmp_path, steps=r"^ProfilerStep#")
    assert [s.name for s in c2.steps] == ["ProfilerStep#7"]


def test_a_skip_first_that_skips_every_step_says_so(tmp_path: Path) -> None:
    e = Export()
    for i in range(3):
        e.range(f"step {i}", 100 * i, 100 * i + 50)
        e.launch("k", 100 * i + 1, 100 * i + 10, 100 * i + 20)
    c = census_of(e, tmp_path, skip_first=3)
    assert c.step_count == 0
    assert list(c.warnings) == [  # was: "no NVTX step ranges matched --steps ..."
        "--skip-first 3 skips every step: the 3 range(s) matching --steps '^(step\\b|ProfilerStep#)' "
        "are 3 at most in one process; per-step figures are unavailable (skip fewer than 3)"
    ]
    assert census_of(e, tmp_path, skip_first=2).step_count == 1


def test_orphan_kernels_are_counted_and_warned(tmp_path: Path) -> None:
    e = Export()
    e.range("step 0", 0, 100)
    e.launch("k", 1, 10, 20)
    e.kernel("orphan", 30, 40, corr=999)
    c = census_of(e, tmp_path)
    assert c.totals.kernel_count == 2 and c.steps[0].metrics.kernel_count == 1
    assert c.sliced and "1 of 2 kernels have no launching CUDA API row" in c.warnings[0]


@pytest.mark.parametrize(
    "table",
    [
        "CUPTI_ACTIVITY_KIND_KERNEL",
        "CUPTI_ACTIVITY_KIND_RUNTIME",
        "CUPTI_ACTIVITY_KIND_MEMCPY",
        "CUPTI_ACTIVITY_KIND_MEMSET",
        "NVTX_EVENTS",
        "StringIds",
    ],
)
def test_missing_table_is_zero_plus_warning(tmp_path: Path, table: str) -> None:
    e = Export(omit={table})
    e.range("step 0", 0, 100)
    e.launch("k", 1, 10, 20)
    e.copy(8, 64, 2, 30, 40)
    e.set(8, 3, 50, 60)
    c = census_of(e, tmp_path)
    assert c.totals == c.totals  # built without error
    if table == "CUPTI_ACTIVITY_KIND_KERNEL":
        assert c.totals.kernel_count == 0
    if table == "CUPTI_ACTIVITY_KIND_RUNTIME":
        assert c.totals.launch_api_count == 0 and c.steps[0].metrics.kernel_count == 0
    if table == "CUPTI_ACTIVITY_KIND_MEMCPY":
        assert c.totals.d2d_count == 0
    if table == "NVTX_EVENTS":
        assert c.steps == ()
    if table == "StringIds":
        assert c.kernels[0].name.startswith("<unknown kernel name id")
    if table in (
        "CUPTI_ACTIVITY_KIND_KERNEL",
        "CUPTI_ACTIVITY_KIND_RUNTIME",
        "NVTX_EVENTS",
        "StringIds",
    ):
        assert any(table in w for w in c.warnings)


def test_legacy_metadata_and_future_schema(tmp_path: Path) -> None:
    e = Export(legacy_meta=True, schema_version="2.9.1")
    e.launch("k", 1, 10, 20)
    c = census_of(e, tmp_path)
    assert c.source.schema_version == "2.9.1"
    assert not any("schema" in w for w in c.warnings)
    f = Export(schema_version="4.0.0")
    f.launch("k", 1, 10, 20)
    c2 = summarize(f.write(tmp_path / "future.sqlite"))
    assert c2.totals.kernel_count == 1
    assert any("newer than census knows" in w for w in c2.warnings)


def test_edge_exports_agree_with_oracle(tmp_path: Path) -> None:
    e = Export()
    e.range("step 0", 0, 500)
    e.range("step 1", 600, 1000)
    e.launch("a", 10, 20, 300, stream=1)
    e.launch("b", 15, 100, 200, stream=2)
    e.launch(NCCL, 16, 50, 700, stream=3)
    e.launch("c", 610, 650, 900, tid=2)
    e.launch("d", 620, 660, 950, device=1)
    e.copy(8, 77, 630, 700, 710)
    path = e.write(tmp_path / "o.sqlite")
    c = summarize(path)
    expected = oracle(path)
    assert c.totals.as_dict() == expected["totals"]
    assert [s.metrics.as_dict() for s in c.steps] == expected["steps"]


def test_nccl_collectives_and_overlap_with_compute(tmp_path: Path) -> None:
    e = Export()
    e.range("step 0", 0, 1000)
    e.launch(NCCL, 1, 100, 300, stream=3)
    e.launch("ncclDevKernel_SendRecv(ncclDevKernelArgsStorage<4096>)", 2, 500, 550, stream=3)
    e.launch("gemm", 3, 200, 400, stream=1)
    e.launch("gemm", 4, 250, 260, stream=2)
    e.launch("gemm", 5, 120, 130, device=1)  # another device: no NCCL there
    c = census_of(e, tmp_path)
    assert c.nccl_overlap_ns == 100  # [200, 300) on device 0
    assert c.steps[0].nccl_overlap_ns == 100
    assert [(s.collective, s.count, s.time_ns) for s in c.collectives] == [
        ("AllReduce", 1, 200),
        ("SendRecv", 1, 50),
    ]


def test_step_names_with_invalid_utf8_still_match(tmp_path: Path) -> None:
    import sqlite3

    e = Export()
    e.range("step-placeholder", 0, 100)
    e.launch("k", 1, 10, 20)
    path = e.write(tmp_path / "t.sqlite")
    with sqlite3.connect(path) as conn:
        conn.execute("UPDATE NVTX_EVENTS SET text = CAST(? AS TEXT)", (b"step \xff 0",))
    c = summarize(path)
    assert [s.name for s in c.steps] == ["step \ufffd 0"]
    assert c.steps[0].metrics.kernel_count == 1


def test_gpu_work_issued_by_a_call_that_is_no_launch_is_still_linked(tmp_path: Path) -> None:
    e = Export()
    e.range("step 0", 0, 100)
    e.range("step 1", 200, 300)
    corr = e.api("cuSomeLibraryCall_v2", 210, 215)  # neither a launch, a memcpy nor a memset
    e.kernel("library_kernel", 220, 260, corr=corr)
    e.launch("k", 1, 10, 20)
    c = census_of(e, tmp_path)
    assert [s.metrics.kernel_count for s in c.steps] == [1, 1]
    assert not c.sliced
    path = tmp_path / "t.sqlite"
    assert [s.metrics.as_dict() for s in c.steps] == oracle(path)["steps"]

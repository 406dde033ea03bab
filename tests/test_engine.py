"""The engine reads an export in batches and in parallel ranges; whatever the split, the census
is exactly the one a single batch in a single process gives."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from census.definitions import DEFAULT_STEPS_REGEX
from census.load.finish import compute_census
from census.load.intervals import INT_NULL, StepIndex, covered_ns, sums_per_code, sweep, unique
from census.load.profile import load_profile
from census.metrics import METRIC_KEYS
from census.model.census import Census
from census.sources.samples import sample_path
from tests.helpers.cli import started
from tests.helpers.exports import real_exports, unpacked
from tests.helpers.files import DATA, scratch_folder
from tests.nsysdb import Export
from tests.oracle import _union, oracle

WHOLE_FILE = 1 << 40
SPLITS = [(1, 7), (2, 50), (3, 13), (2, 1)]


def census_record(path: Path, workers: int, batch_rows: int) -> tuple[dict, list[str]]:
    stages: list[str] = []
    profile = load_profile(
        path, DEFAULT_STEPS_REGEX, 0, lambda s, *_: stages.append(s), workers, batch_rows
    )
    return compute_census(profile).to_record(), stages


@pytest.mark.parametrize("path", real_exports(), ids=lambda p: p.parent.name + "/" + p.name)
@pytest.mark.parametrize(("workers", "batch_rows"), SPLITS)
def test_real_exports_split_any_way_give_the_same_census(
    path: Path, workers: int, batch_rows: int
) -> None:
    whole, _ = census_record(path, 1, WHOLE_FILE)
    split, stages = census_record(path, workers, batch_rows)
    assert split == whole
    # nsys writes kernels in start order: the batched sweep, not the fallback, was compared
    assert not any("not in start order" in s for s in stages)


def test_results_mapped_back_from_spill_files_fold_the_same(monkeypatch) -> None:
    """A worker's large arrays come back as read-only mapped files (census.load.pool): here
    every array does, and folding the ranges still gives the single process's census."""
    from census.load import pool

    path = sample_path("eager") / "capture.sqlite"
    whole, _ = census_record(path, 1, WHOLE_FILE)
    monkeypatch.setattr(pool, "SPILL_BYTES", 0)
    split, _ = census_record(path, 2, 97)
    assert split == whole


def test_sums_past_int64_come_back_from_workers_exactly(tmp_path: Path, monkeypatch) -> None:
    """A kernel of 2^60 ns makes its step's sums Python ints in the worker that reads it; they
    travel back pickled (object arrays cannot be mapped from a spill file) and add up exactly."""
    from census.load import pool

    e = Export()
    e.range("step 0", 0, 1 << 62)
    for i in range(6):
        start = 100 * (i + 1)
        e.launch("gemm_kernel", start - 50, start, start + (1 << 60) + 5 if i == 2 else start + 10)
    path = e.write(tmp_path / "long.sqlite")
    whole, _ = census_record(path, 1, WHOLE_FILE)
    monkeypatch.setattr(pool, "SPILL_BYTES", 0)
    split, _ = census_record(path, 2, 3)
    assert split == whole
    step = Census.from_record(whole).steps[0]  # back from the record's JSON types exactly
    assert step.metrics.kernel_time_ns == (1 << 60) + 5 + 5 * 10


def test_ddp_rank_capture_split(tmp_path: Path) -> None:
    import lzma

    path = tmp_path / "rank0.sqlite"
    path.write_bytes(
        lzma.decompress((Path(__file__).parent / "data/ddp/rank0.sqlite.xz").read_bytes())
    )
    assert census_record(path, 2, 9)[0] == census_record(path, 1, WHOLE_FILE)[0]


NAMES = ["gemm_kernel", "triton_poi_fused_add_0", "ncclDevKernel_AllReduce", "reduce_kernel"]
interval = st.tuples(
    st.sampled_from(NAMES),
    st.integers(0, 3000),  # kernel start
    st.integers(-5, 400),  # duration (zero and negative ones included)
    st.integers(0, 1),  # device
    st.integers(0, 200),  # launch precedes the kernel by this much
)


def build(kernels, copies, step_lengths, in_start_order: bool) -> Path:
    e = Export()
    t = 0
    for i, length in enumerate(step_lengths):
        e.range(f"step {i}", t, t + length)
        t += length + 40
    for name, start, dur, dev, lead in kernels:
        e.launch(name, max(0, start - lead), start, start + dur, device=dev)
    for kind, nbytes, start, dur in copies:
        e.copy(kind, nbytes, max(0, start - 10), start, start + dur)
    if in_start_order:
        e.kernels.sort(key=lambda k: k["start"])
        e.memcpy.sort(key=lambda k: k["start"])
    path = scratch_folder() / "e.sqlite"
    return e.write(path)


copy = st.tuples(
    st.sampled_from([1, 8]), st.integers(0, 1 << 20), st.integers(0, 3000), st.integers(0, 300)
)
SETTINGS = settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@SETTINGS
@given(
    st.lists(interval, max_size=30),
    st.lists(copy, max_size=6),
    st.lists(st.integers(1, 900), max_size=4),
    st.sampled_from([(1, 1), (1, 3), (2, 2), (3, 5)]),
)
def test_sorted_exports_batched_and_parallel(kernels, copies, steps, split) -> None:
    path = build(kernels, copies, steps, in_start_order=True)
    whole, _ = census_record(path, 1, WHOLE_FILE)
    parts, stages = census_record(path, *split)
    assert parts == whole
    assert not any("not in start order" in s for s in stages)
    expected = oracle(path)
    assert whole["totals"] == expected["totals"]


@SETTINGS
@given(st.lists(interval, min_size=2, max_size=25), st.lists(st.integers(1, 900), max_size=3))
def test_unsorted_exports_fall_back_to_one_batch(kernels, steps) -> None:
    path = build(kernels, [], steps, in_start_order=False)
    assert census_record(path, 2, 3)[0] == census_record(path, 1, WHOLE_FILE)[0]


# -- intervals, against brute force ------------------------------------------------------------
spans = st.lists(st.tuples(st.integers(0, 3), st.integers(0, 500), st.integers(1, 80)), max_size=40)


@given(spans, st.integers(0, 500))
def test_sweep_carries_the_union_across_batches(rows, cut) -> None:
    rows = sorted(rows, key=lambda r: r[1])
    first = [r for r in rows if r[1] < cut]
    second = [r for r in rows if r[1] >= cut]
    high: dict[int, int] = {}
    total: dict[int, int] = {}
    for batch in (first, second):
        code = np.array([r[0] for r in batch], np.int64)
        start = np.array([r[1] for r in batch], np.int64)
        end = start + np.array([r[2] for r in batch], np.int64)
        swept = sweep(code, start, end, lambda c: np.array([high.get(x, INT_NULL) for x in c]))
        for c, added, top in zip(swept.codes, swept.added_ns, swept.high, strict=True):
            total[int(c)] = total.get(int(c), 0) + int(added)
            high[int(c)] = int(top)
    for c in {r[0] for r in rows}:
        assert total[c] == _union([(s, s + d) for k, s, d in rows if k == c])


@given(spans, st.lists(st.tuples(st.integers(0, 600), st.integers(0, 300)), max_size=6))
def test_covered_ns_is_the_clipped_union(rows, windows) -> None:
    ivs = sorted((s, s + d) for _, s, d in rows)
    merged: list[list[int]] = []
    for s, e in ivs:
        if merged and s <= merged[-1][1]:
            merged[-1][1] = max(merged[-1][1], e)
        else:
            merged.append([s, e])
    lo = np.array([m[0] for m in merged], np.int64)
    hi = np.array([m[1] for m in merged], np.int64)
    a = np.array([w[0] for w in windows], np.int64)
    b = a + np.array([w[1] for w in windows], np.int64)
    got = covered_ns(lo, hi, a, b).tolist()
    want = [
        sum(max(0, min(e, wb) - max(s, wa)) for s, e in merged) for wa, wb in zip(a, b, strict=True)
    ]
    assert got == want


@settings(max_examples=300, deadline=None)
@given(st.sampled_from(["int8", "int16", "int32", "int64", "uint8", "uint32", "uint64", "bool"]),
       st.lists(st.integers(0, 2**64 - 1), max_size=40), st.booleans())  # fmt: skip
def test_unique_is_numpys_unique_for_every_integer_dtype(dtype, raw, square) -> None:
    """intervals.unique (np.unique without the import of numpy.ma) on any integer dtype, its
    extremes included, empty, repeated, and 2-D: np.unique's values, dtype and shape."""
    values = np.array(raw, np.uint64).astype(dtype)  # wraps: every bit pattern of the dtype
    if square and len(values) >= 4:
        values = values[:4].reshape(2, 2)
    got, want = unique(values), np.unique(values)
    assert got.dtype == want.dtype and got.shape == want.shape
    assert np.array_equal(got, want)


def test_step_at_takes_the_latest_started_step_if_still_open() -> None:
    index = StepIndex.build([(0, 7, 0, 100), (1, 7, 50, 60), (2, 8, 0, 10)])
    proc = np.array([7, 7, 7, 7, 8, 8, 9, 7], np.int64)
    t = np.array([10, 55, 70, 100, 10, 11, 5, INT_NULL], np.int64)
    # at 70 step 1 (started last, at 50) has ended: no step, though step 0 still runs
    assert index.step_at(proc, t).tolist() == [0, 1, -1, -1, 2, -1, -1, -1]


def test_exact_sums_never_overflow() -> None:
    big = np.array([2**62, 2**62, 2**62, 5], np.int64)
    assert sums_per_code(np.array([0, 0, 0, 1]), 2, big) == [3 * 2**62, 5]


# Printed by `scripts/gpu_check.sh engine` on the H200 for the captures it made (one process).
ENGINE_TOTALS = {
    "eager": {"kernel_count": 4940, "non_nccl_union_ns": 99237720, "launch_api_count": 4940,
              "launch_api_time_ns": 34684681, "d2d_count": 20, "d2d_bytes": 335544320},
    "compiled": {"kernel_count": 4500, "non_nccl_union_ns": 86568601, "launch_api_count": 4500,
                 "launch_api_time_ns": 34425822, "d2d_count": 20, "d2d_bytes": 335544320},
}  # fmt: skip


@pytest.mark.parametrize("name", sorted(ENGINE_TOTALS))
def test_fresh_h200_captures_exact_and_as_defined(name: str) -> None:
    path = unpacked(DATA / "engine" / f"{name}.sqlite.xz")
    census = compute_census(load_profile(path, DEFAULT_STEPS_REGEX, 0, None, 2, 64))
    for key, value in ENGINE_TOTALS[name].items():
        assert getattr(census.totals, key) == value
    expected = oracle(path)
    assert census.totals.as_dict() == expected["totals"]
    assert [s.metrics.as_dict() for s in census.steps] == expected["steps"]
    assert census.step_count == 20


# -- worker processes --------------------------------------------------------------------------
def _die(conn, shared, job, tick):
    import os

    os._exit(9)  # as a worker killed for memory would


def test_a_worker_that_dies_fails_the_pass_instead_of_hanging(tmp_path: Path) -> None:
    from concurrent.futures.process import BrokenProcessPool

    from census.load.pool import Runner
    from census.sources.readonly import open_readonly

    path = sample_path("eager") / "capture.sqlite"
    runner = Runner(open_readonly(path), path, 2, lambda *a: None)
    with pytest.raises(BrokenProcessPool):
        runner.map(_die, None, [1, 2, 3], 3, "dying")


INTERRUPTED = """
import sys, time
from pathlib import Path
from census.load.pool import Runner
from census.sources.readonly import open_readonly

def nap(conn, shared, job, tick):
    time.sleep(60)

path = Path(sys.argv[1])
print("started", flush=True)
Runner(open_readonly(path), path, 2, lambda *a: None).map(nap, None, [1, 2, 3, 4], 4, "napping")
"""


def test_ctrl_c_stops_the_workers_at_once(tmp_path: Path) -> None:
    import os
    import signal
    import subprocess
    import sys
    import time

    script = tmp_path / "nap.py"
    script.write_text(INTERRUPTED)
    path = sample_path("eager") / "capture.sqlite"
    command = [sys.executable, str(script), str(path)]
    with started(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True,
                 cwd=Path(__file__).parent.parent) as proc:  # fmt: skip
        assert proc.stdout.readline().strip() == b"started"
        time.sleep(1.0)  # the workers are asleep in their jobs
        os.killpg(proc.pid, signal.SIGINT)
        t0 = time.monotonic()
        _, err = proc.communicate(timeout=20)
    assert proc.returncode != 0
    assert time.monotonic() - t0 < 10
    assert b"KeyboardInterrupt" in err
    time.sleep(0.5)
    with pytest.raises(ProcessLookupError):
        os.killpg(proc.pid, 0)  # no process of its group is left


def _random_runs(rng: np.random.Generator) -> list:
    """Up to 4 runs of (process code, start, end) sorted by start, with many ties."""
    runs = []
    for _ in range(int(rng.integers(0, 5))):
        start = np.sort(rng.integers(0, 30, int(rng.integers(0, 40))))
        runs.append((rng.integers(0, 3, len(start)).astype(np.uint8), start,
                     start + rng.integers(0, 9, len(start))))  # fmt: skip
    return runs


def test_memory_runs_merge_as_a_stable_sort() -> None:
    """census.load.memory._merged (each job's busy intervals sorted by start, merged by
    searching) equals a stable sort of the runs' concatenation, ties in starts included."""
    from census.load.memory import _merged

    rng = np.random.default_rng(5)
    for _ in range(200):
        runs = _random_runs(rng)
        code, start, end = _merged(runs, np.uint8)
        whole = [np.concatenate([r[i] for r in runs] or [np.zeros(0, np.int64)]) for i in range(3)]
        order = np.argsort(whole[1], kind="stable")
        assert start.tolist() == whole[1][order].tolist()
        assert end.tolist() == whole[2][order].tolist()
        assert code.tolist() == whole[0][order].tolist() and code.dtype == np.uint8


@pytest.mark.parametrize("block", [1, 3, 4096])
def test_spilled_memory_runs_read_a_window_as_the_merged_runs(tmp_path, monkeypatch, block):
    """A window of the memory pass's runs written to files (census.load.memory.SpilledBusy)
    equals the same window of the runs merged in memory: bounds before, inside, on ties and
    past the intervals, open ends, empty runs, several runs in one file, and blocks of starts
    (a bound searched in one) of 1, 3 and the real 4,096."""
    from census.load import memory
    from census.load.memory import SpilledBusy, SpilledRun, _merged

    monkeypatch.setattr(memory, "BLOCK", block)
    rng = np.random.default_rng(6)
    procs = np.array([11, 22, 33], np.int64)
    for trial in range(150):
        runs = _random_runs(rng)
        folder = tmp_path / str(trial)
        folder.mkdir()
        spilled = SpilledBusy([SpilledRun.of(str(folder), *run) for run in runs], procs)
        merged = _merged(runs, np.uint8)
        for _ in range(6):
            lo, hi = sorted(rng.integers(-2, 33, 2).tolist())
            for after, before in ((lo, hi), (None, hi), (lo, None), (None, None)):
                got = spilled.window(after, before)
                keep = np.ones(len(merged[1]), bool)
                if after is not None:
                    keep &= merged[1] >= after
                if before is not None:
                    keep &= merged[1] < before
                assert got.start.tolist() == merged[1][keep].tolist()
                assert got.end.tolist() == merged[2][keep].tolist()
                assert got.code.tolist() == merged[0][keep].tolist()
                assert got.code.dtype == np.uint8
                assert [got.key(c) for c in got.code[:3].tolist()] == [
                    int(procs[c]) for c in merged[0][keep][:3].tolist()
                ]


def test_touching_searches_a_batch_s_ranges_only() -> None:
    """StepIndex.touching (searched among the ranges a batch can reach) equals its definition:
    a row [start, end] is kept when some range of its process has start_ns <= end and
    end_ns >= start; overlapping, nested and tied ranges, rows before, between and after
    them, rows of no length and rows that end before they start."""
    rng = np.random.default_rng(4)
    for trial in range(400):
        grid = 1 + 9 * (trial % 2)  # every other trial on a coarse grid: many ties
        n = int(rng.integers(1, 40))
        starts = rng.integers(0, 200, n) * 10
        ranges = [(i, 7, int(s), int(s + rng.integers(0, 30) * grid)) for i, s in
                  enumerate(starts)]  # fmt: skip
        index = StepIndex.build(ranges)
        m = int(rng.integers(1, 200))
        lo = int(rng.integers(-10, 200)) * 10
        start = lo + rng.integers(0, int(rng.integers(1, 80)), m) * grid
        end = start + rng.integers(-2, 20, m) * grid
        want = [any(s0 <= e and e0 >= s for _, _, s0, e0 in ranges)
                for s, e in zip(start.tolist(), end.tolist(), strict=True)]  # fmt: skip
        assert index.touching(7, start, end).tolist() == want
        assert not index.touching(8, start, end).any()


def test_keeping_filters_as_touching_does_from_the_holes() -> None:
    """StepIndex.keeping, on intervals sorted by start (none ending before it starts), keeps
    exactly what touching keeps, and says None (keep all) exactly where that is all of them:
    ranges overlapping, abutting, apart, with the intervals before, between and after them."""
    rng = np.random.default_rng(6)
    whole = 0
    for trial in range(800):
        n = int(rng.integers(1, 30))
        gap = int(rng.integers(0, 3)) * (1 + 40 * (trial % 3 == 0))  # holes: none, small, large
        length = rng.integers(1, 400, n)
        starts = np.cumsum(length + gap) - length - gap + int(rng.integers(0, 500))
        ends = starts + length + rng.integers(-1, 2, n) * (rng.random(n) < 0.2) * 50
        ranges = [
            (i, 7, int(s), int(max(s, e)))
            for i, (s, e) in enumerate(zip(starts, ends, strict=True))
        ]
        index = StepIndex.build(ranges)
        m = int(rng.integers(1, 100))
        lo = int(rng.integers(-300, int(starts[-1]) + 200))
        start = np.sort(lo + rng.integers(0, int(rng.integers(1, 3000)), m))
        end = start + rng.integers(0, 100, m) * (rng.random(m) < 0.7)
        got = index.keeping(7, start, end)
        want = index.touching(7, start, end)
        if got is None:
            whole += 1
            assert want.all()
        else:
            assert got.tolist() == want.tolist() and not want.all()
    assert 50 < whole < 750  # both ways taken
    # one instant between two ranges, and one at each end of the hole
    index = StepIndex.build([(0, 7, 0, 10), (1, 7, 20, 30)])
    assert index.keeping(7, np.array([15]), np.array([15])).tolist() == [False]
    assert index.keeping(7, np.array([10, 15]), np.array([10, 20])) is None
    assert index.keeping(7, np.array([-5, 11, 31]), np.array([-1, 19, 40])).tolist() == [False] * 3
    assert index.keeping(8, np.array([0]), np.array([5])).tolist() == [False]  # no ranges


def test_timeline_union_is_the_union_of_the_intervals() -> None:
    """timeline.union: the covered set as sorted, disjoint intervals (touching ones joined), a
    zero-length interval kept where nothing covers or ends at it; the input as given when already so."""
    from census.load.timeline import union

    rng = np.random.default_rng(8)
    for trial in range(400):
        n = int(rng.integers(1, 40))
        start = rng.integers(0, 300, n) if trial % 2 else np.cumsum(rng.integers(0, 30, n))
        end = start + rng.integers(0, 25, n) * (rng.random(n) < 0.8)
        s, e = union(start, end)
        assert (s[1:] > e[:-1]).all() and (e >= s).all()
        cover = {t for a, b in zip(start, end, strict=True) for t in range(a, b)}
        assert {t for a, b in zip(s, e, strict=True) for t in range(a, b)} == cover
        ends = {int(b) for a, b in zip(start, end, strict=True) if b > a} | cover  # touching
        points = {int(a) for a, b in zip(start, end, strict=True) if a == b and a not in ends}
        assert points <= {int(a) for a, b in zip(s, e, strict=True) if a == b}
    s, e = np.array([0, 3, 9]), np.array([2, 5, 9])
    assert union(s, e)[0] is s  # already sorted and disjoint: no copy


def test_the_step_table_holds_the_accumulators_own_sums() -> None:
    """A step's figure goes from its accumulator to the Census uncopied: the step table's
    column of each summed key is a view of the sums of the pass's accumulator that declares it
    (CopySums' for h2d_count; the derived keys are computed from them)."""
    import numpy as np

    path = sample_path("eager") / "capture.sqlite"
    profile = load_profile(path, DEFAULT_STEPS_REGEX, 0, lambda *_: None)
    steps = compute_census(profile).steps
    sums = {name: getattr(acc, "sums", acc).values
            for acc in profile.aggregates.per_key for name in getattr(acc, "NAMES", ())}  # fmt: skip
    summed = [k for k in METRIC_KEYS if k in sums]
    # 12 of the 18: the launch calls' three and the non-NCCL union are their accumulators'
    # finished tables (summed over APIs, stacked over devices), two are derived
    assert "h2d_count" in summed and len(summed) == len(METRIC_KEYS) - 6
    for key in (*summed, "gpu_busy_ns"):
        assert np.shares_memory(steps.steps.columns[key], sums[key])
    assert steps.column("h2d_count").tolist() == [s.metrics.h2d_count for s in steps]

"""Kernels by operation (#56) on real Kineto traces: every kernel's operation equal to a
brute-force computation of the definition, the rows adding up to each step's kernels exactly,
and the eager-vs-compiled Operations table of the H200 pair."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from census.compare.op_match import match_ops, operations_rows, ops_sentences
from census.findings.op_ranges import (
    attribute_launches,
    innermost,
    normalize_names,
    normalize_op_name,
)
from census.findings.ops import OpKey
from tests.helpers.files import DATA
from tests.helpers.kineto_ops import Trace, brute_op, ns, profiler_steps, read_trace
from tests.helpers.kineto_ops import trace_table as _table

KINETO = DATA / "kineto"
PAIR = {side: KINETO / f"h200_{side}_3steps.kineto.json.gz" for side in ("eager", "compiled")}


def _kernel_ops(t: Trace) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    lo = attribute_launches(t.launch_start_ns, t.launch_thread, t.ranges)
    has = t.kernel_launch >= 0
    at = np.where(has, t.kernel_launch, 0)
    pick = [np.where(has, col[at], -1) for col in (lo.op, lo.node, lo.forward)]
    return pick[0], pick[1], pick[2]


@pytest.mark.parametrize("side", ["eager", "compiled"])
def test_every_kernels_operation_is_the_innermost_aten_op(side: str) -> None:
    t = read_trace(PAIR[side])
    op, node, _ = _kernel_ops(t)
    expected_op, expected_node = brute_op(PAIR[side])
    assert op.tolist() == expected_op
    assert node.tolist() == expected_node
    # the traces' own facts: every kernel has its launch; compiled Triton kernels have no op
    assert len(op) == {"eager": 861, "compiled": 732}[side] and (t.kernel_launch >= 0).all()
    triton = np.array([n.startswith("triton_") for n in t.kernel_name])
    assert (op[triton] == -1).all() and (op[~triton] >= 0).all()
    assert triton.sum() == {"eager": 0, "compiled": 453}[side]


def test_backward_work_names_its_forward_op() -> None:
    t = read_trace(PAIR["eager"])
    op, node, forward = _kernel_ops(t)
    names = t.ranges.names
    name = [names[t.ranges.name_id[i]] if i >= 0 else None for i in op]
    fwd = [names[t.ranges.name_id[i]] if i >= 0 else None for i in forward]
    ln = {f for n, f in zip(name, fwd, strict=True) if n == "aten::native_layer_norm_backward"}
    assert ln == {"aten::layer_norm"}
    # the forward op holds the backward node's sequence number and encloses the forward range
    # that made the node (the last of that number): not an earlier aten::copy_ that peeked it
    seq, start, end = t.ranges.sequence, t.ranges.start_ns, t.ranges.end_ns
    for n, f in {(int(a), int(b)) for a, b in zip(node, forward, strict=True) if a >= 0}:
        same = [i for i in range(len(seq)) if seq[i] == seq[n] and not t.ranges.backward[i]]
        last = max(same, key=lambda i: (start[i], -end[i], i))
        holding = [i for i in same if start[i] <= start[last] < end[i] or i == last]
        assert f == min(holding, key=lambda i: (start[i], -end[i], i))


@pytest.mark.parametrize("side", ["eager", "compiled"])
def test_rows_add_up_to_the_kernels_exactly(side: str) -> None:
    t = read_trace(PAIR[side])
    # these traces hold no step ranges: the whole capture is one window
    table = _table(t, np.zeros(len(t.kernels), dtype=np.int64), 1)
    assert table.keys[-1] is None
    assert int(table.kernel_count.sum()) == len(t.kernels)
    assert int(table.kernel_time_ns.sum()) == sum(ns(k["dur"]) for k in t.kernels)
    assert table.total_count.tolist() == table.kernel_count[:, 0].tolist()
    assert table.total_time_ns.tolist() == table.kernel_time_ns[:, 0].tolist()
    # no CUDA graphs here: every kernel has a launch call of its own
    assert table.launch_count[:, 0].tolist() == table.kernel_count[:, 0].tolist()


def test_rows_add_up_per_step_on_a_trace_with_profiler_steps() -> None:
    path = (
        KINETO / "hta_nccl_parser_config__nccl_data.json.gz"
    )  # HTA's (MIT), copied with its licence
    t = read_trace(path)
    steps, step = profiler_steps(path, t)
    launch_at = np.where(t.kernel_launch >= 0, t.launch_start_ns[t.kernel_launch], -1)
    table = _table(t, step, len(steps))
    for i, (s, e) in enumerate(steps):
        mine = [k for k, at in zip(t.kernels, launch_at, strict=True) if s <= at < e and at >= 0]
        assert int(table.kernel_count[:, i].sum()) == len(mine)
        assert int(table.kernel_time_ns[:, i].sum()) == sum(ns(k["dur"]) for k in mine)
    assert len(steps) == 3 and int(table.total_count.sum()) == len(t.kernels) == 2700
    attributed = int(table.kernel_count[:-1].sum())
    assert 0 < attributed < int(table.kernel_count.sum())  # NCCL kernels have no aten op


def test_eager_vs_compiled_operations_table(capsys: pytest.CaptureFixture[str]) -> None:
    eager, compiled = (read_trace(PAIR[s]) for s in ("eager", "compiled"))
    one = [np.zeros(len(t.kernels), dtype=np.int64) for t in (eager, compiled)]
    matches = match_ops(_table(eager, one[0], 1), _table(compiled, one[1], 1))
    assert sum(m.a_count for m in matches) == 861 and sum(m.b_count for m in matches) == 732
    assert sum(m.a_time_ns for m in matches) == 17_018_173
    assert sum(m.b_time_ns for m in matches) == 13_582_049
    deltas = [abs(m.per_step("time_ns")[2]) for m in matches]
    assert deltas == sorted(deltas, reverse=True)
    top = matches[0]
    assert top.a_keys == (OpKey("copy_", backward=True),)
    assert (top.a_count, top.b_count, top.a_time_ns, top.b_time_ns) == (180, 63, 1_655_439, 352_157)
    gemm = next(m for m in matches if m.a_keys == (OpKey("mm", backward=True),))
    assert gemm.b_keys == gemm.a_keys and gemm.stayed and (gemm.a_count, gemm.b_count) == (96, 96)
    sentences = ops_sentences(matches, unit="")
    assert sentences[0].startswith("copy_ (backward): 180 kernels (1.66 ms) became 63 ")
    assert sentences[-1].startswith("stayed the same (15 operations")
    with capsys.disabled():
        print("\nOperations, eager -> compiled (H200, whole 3-step capture)")
        for r in operations_rows(matches):
            (ca, cb, _), (ta, tb, dt) = r["kernels"], r["time_ns"]  # type: ignore[misc]
            print(f"{r['a_ops'][:60]:60} | {r['b_ops'][:60]:60} | {ca:4.0f} {cb:4.0f} "
                  f"| {ta / 1e3:8.1f} {tb / 1e3:8.1f} {dt / 1e3:+8.1f} us")  # fmt: skip
        print("\n".join(sentences))


def test_names_are_cut_at_the_first_comma() -> None:
    assert normalize_op_name("aten::mm, seq = 12, op_id = 40") == "aten::mm"
    names, ids = normalize_names(["aten::mm, seq = 1", "aten::add", "aten::mm, seq = 2"])
    assert names == ("aten::mm", "aten::add") and ids.tolist() == [0, 1, 0]


def _brute_innermost(s: list[int], e: list[int], h: list[int], t: int, th: int) -> int:
    inside = [i for i in range(len(s)) if h[i] == th and s[i] <= t < e[i]]
    return max(inside, key=lambda i: (s[i], -e[i], i)) if inside else -1


times = st.integers(min_value=-(2**62), max_value=2**62)
small = st.integers(min_value=0, max_value=40)


@given(
    st.lists(st.tuples(small, small, st.integers(0, 2)), max_size=30),
    st.lists(st.tuples(st.integers(-2, 45), st.integers(0, 3)), max_size=20),
    st.sampled_from([0, 2**61, -(2**62)]),
)
def test_innermost_equals_brute_force(
    spans: list[tuple[int, int, int]], points: list[tuple[int, int]], shift: int
) -> None:
    """Any intervals (nested, crossing, empty, equal), also at times far apart (int64 keys)."""
    s = [a + shift for a, _, _ in spans]
    e = [a + b + shift for a, b, _ in spans]
    h = [c for _, _, c in spans]
    got = innermost(*(np.array(x, dtype=np.int64) for x in (s, e, h)),
                    np.array([p + shift for p, _ in points], dtype=np.int64),
                    np.array([q for _, q in points], dtype=np.int64))  # fmt: skip
    assert got.tolist() == [_brute_innermost(s, e, h, p + shift, q) for p, q in points]


@given(st.lists(st.tuples(st.integers(0, 3), st.integers(1, 5)), min_size=1, max_size=25),
       st.lists(st.integers(0, 400), max_size=20))  # fmt: skip
def test_innermost_on_nested_ranges(shape: list[tuple[int, int]], points: list[int]) -> None:
    """Ranges built as a call tree (each opens inside the last open one or after it closes)."""
    s, e, stack, clock = [], [], [], 0
    for pops, length in shape:
        for _ in range(min(pops, len(stack))):
            e[stack.pop()] = clock = clock + 1
        s.append(clock)
        e.append(0)
        stack.append(len(s) - 1)
        clock += length
    while stack:
        e[stack.pop()] = clock = clock + 1
    h = [0] * len(s)
    got = innermost(np.array(s), np.array(e), np.array(h), np.array(points, dtype=np.int64),
                    np.zeros(len(points), dtype=np.int64))  # fmt: skip
    assert got.tolist() == [_brute_innermost(s, e, h, p, 0) for p in points]


@given(
    st.lists(st.tuples(small, small, st.integers(0, 2)), max_size=30),
    st.lists(st.tuples(st.integers(-2, 45), st.integers(0, 3)), max_size=20),
    st.integers(1, 4),
)
def test_innermost_in_chunks_equals_brute_force(
    spans: list[tuple[int, int, int]], points: list[tuple[int, int]], chunk: int
) -> None:
    """The instants answered a few at a time (QUERY_CHUNK, bounding the memory at 10^6
    kernels) give the same intervals: those open across chunks carried, crossing ones too."""
    import census.findings.op_ranges as op_ranges

    s = [a for a, _, _ in spans]
    e = [a + b for a, b, _ in spans]
    h = [c for _, _, c in spans]
    saved, op_ranges.QUERY_CHUNK = op_ranges.QUERY_CHUNK, chunk
    try:
        got = innermost(*(np.array(x, dtype=np.int64) for x in (s, e, h)),
                        np.array([p for p, _ in points], dtype=np.int64),
                        np.array([q for _, q in points], dtype=np.int64))  # fmt: skip
    finally:
        op_ranges.QUERY_CHUNK = saved
    assert got.tolist() == [_brute_innermost(s, e, h, p, q) for p, q in points]


def _innermost_peak_bytes(n: int) -> int:
    """tracemalloc's peak while innermost answers n instants, each inside two nested ranges."""
    import tracemalloc

    t = np.arange(n, dtype=np.int64) * 100
    s, e = np.concatenate((t, t + 10)), np.concatenate((t + 90, t + 50))
    tracemalloc.start()
    try:
        got = innermost(s, e, np.zeros(2 * n, np.int64), t + 20, np.zeros(n, np.int64))
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert np.array_equal(got, np.arange(n) + n)  # the inner range
    return peak


def test_innermost_work_memory_grows_with_the_chunk() -> None:
    """#55: census summary's peak on a Kineto trace grew about 540 bytes a kernel, most of it
    innermost's sorted keys and levels over every range and launch (97 MiB at 3x10^5 instants,
    32 MiB at 10^5). Answered by chunks, 2x10^5 more instants add under 16 MiB (their order
    and the ranges' start order only)."""
    small, large = _innermost_peak_bytes(100_000), _innermost_peak_bytes(300_000)
    assert large - small < 16 << 20, (small >> 20, large >> 20)

"""Laws that hold for any export: checked on random nsys-shaped databases (hypothesis)."""

from __future__ import annotations

from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from census.api import summarize
from census.compare.diff import diff_census
from tests.helpers.files import scratch_folder
from tests.nsysdb import Export
from tests.oracle import oracle

NAMES = ["gemm", "triton_poi_fused_add_0", "ncclDevKernel_SendRecv", "reduce_kernel", "copy_kernel"]

kernel = st.tuples(
    st.sampled_from(NAMES),
    st.integers(0, 5000),  # api start
    st.integers(0, 400),  # queue delay
    st.integers(0, 300),  # duration
    st.integers(0, 1),  # device
    st.integers(1, 3),  # thread
    st.integers(1, 2),  # stream
)
steps = st.lists(st.integers(1, 1500), min_size=0, max_size=4)


def build(kernels, step_lengths) -> Path:
    e = Export()
    t = 0
    for i, length in enumerate(step_lengths):
        e.range(f"step {i}", t, t + length)
        t += length + 50
    for name, api, delay, dur, dev, tid, stream in kernels:
        e.launch(name, api, api + delay, api + delay + dur, device=dev, tid=tid, stream=stream)
    path = scratch_folder() / "h.sqlite"
    return e.write(path)


SETTINGS = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@SETTINGS
@given(st.lists(kernel, max_size=25), steps)
def test_census_laws_and_oracle(kernels, step_lengths) -> None:
    path = build(kernels, step_lengths)
    c = summarize(path, use_cache=False)
    t = c.totals
    assert t.nccl_kernel_count + t.non_nccl_kernel_count == t.kernel_count
    assert t.nccl_kernel_time_ns + t.non_nccl_kernel_time_ns == t.kernel_time_ns
    assert t.non_nccl_union_ns <= t.non_nccl_kernel_time_ns
    for key, total in t.as_dict().items():
        if key != "non_nccl_union_ns":  # kernels of two steps may overlap in time: no law there
            assert sum(getattr(s.metrics, key) for s in c.steps) <= total
    for s in c.steps:
        assert s.metrics.non_nccl_union_ns <= s.metrics.non_nccl_kernel_time_ns
        assert 0 <= s.gpu_busy_ns <= s.duration_ns
        assert s.gpu_busy_ns + s.gpu_idle_ns == s.duration_ns
    expected = oracle(path)
    assert t.as_dict() == expected["totals"]
    assert [s.metrics.as_dict() for s in c.steps] == expected["steps"]


@SETTINGS
@given(st.lists(kernel, max_size=15), st.lists(kernel, max_size=15), steps)
def test_diff_is_zero_on_itself_and_antisymmetric(ka, kb, step_lengths) -> None:
    a = summarize(build(ka, step_lengths), use_cache=False)
    b = summarize(build(kb, step_lengths), use_cache=False)
    same = diff_census(a, a)
    assert all(m.delta in (0, None) for m in same.metrics.values())
    assert all(k.bucket == "unchanged" for k in same.kernels)
    ab, ba = diff_census(a, b), diff_census(b, a)
    for key, m in ab.metrics.items():
        other = ba.metrics[key].delta
        assert (m.delta is None and other is None) or m.delta == -other
    flip = {
        "added": "removed",
        "removed": "added",
        "increased": "decreased",
        "decreased": "increased",
        "unchanged": "unchanged",
    }
    buckets = {k.name: k.bucket for k in ba.kernels}
    for k in ab.kernels:
        assert buckets[k.name] == flip[k.bucket]

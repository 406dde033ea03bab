"""GPU spans (issue #27, steps as the GPU ran them): per step and per phase, the earliest start
and latest end of the GPU work launched in it, host_lead_ns and host_ran_ahead. Exact values on
built exports and on the shared H200 captures, checked against the slow reference in
tests/oracle.py, and the same figures whatever the engine's split into workers and batches."""

from __future__ import annotations

import csv
import json
import lzma
import statistics
import tempfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

import census
from census.api import census_view
from census.cli import app
from census.definitions import (
    DEFAULT_PHASES_REGEX,
    DEFAULT_STEPS_REGEX,
    HOST_AHEAD_RULE,
    OUTSIDE_PHASES,
)
from census.load.finish import compute_census
from census.load.profile import load_profile
from census.model.census import Census
from census.render.json_docs import summary_json
from tests.helpers.exports import build_run_ahead, real_exports
from tests.helpers.files import DATA, fixture_file
from tests.nsysdb import Export
from tests.oracle import span_oracle

OUT = OUTSIDE_PHASES
MS = 1_000_000


def spans_of(c: census.Census) -> list[dict]:
    """The census's spans in the oracle's shape."""
    return [
        {"gpu_start_ns": s.gpu_start_ns, "gpu_span_ns": s.gpu_span_ns,
         "phases": {p.name: {"gpu_start_ns": p.gpu_start_ns, "gpu_span_ns": p.gpu_span_ns}
                    for p in s.phases}}
        for s in c.steps
    ]  # fmt: skip


def same_spans(census_spans: list[dict], oracle_spans: list[dict]) -> bool:
    """Equal, but for an "(outside phases)" remainder without GPU work that one side lists (a
    step its phases cover whole keeps a remainder of no time in the census)."""

    def trimmed(steps: list[dict]) -> list[dict]:
        empty = {"gpu_start_ns": None, "gpu_span_ns": None}
        return [{**s, "phases": {n: v for n, v in s["phases"].items()
                                 if not (n == "(outside phases)" and v == empty)}}
                for s in steps]  # fmt: skip

    return trimmed(census_spans) == trimmed(oracle_spans)


def summarize(path: Path, **options) -> census.Census:
    return census.summarize(path, use_cache=False, **options)


# -- (1) a host that runs ahead of its GPU ------------------------------------------------------
def test_host_running_ahead_of_the_gpu(tmp_path: Path) -> None:
    path = build_run_ahead(tmp_path)
    c = summarize(path)
    assert [s.duration_ns for s in c.steps] == [3 * MS] * 5
    assert [s.gpu_start_ns for s in c.steps] == [1000 + 10 * MS * k for k in range(5)]
    assert [s.gpu_span_ns for s in c.steps] == [10 * MS] * 5
    # the GPU ends step k at 1000 + 10(k+1) ms; the host left it at 4k + 3 ms
    leads = [7 * MS + 1000 + 6 * MS * k for k in range(5)]
    assert [s.host_lead_ns for s in c.steps] == leads
    assert [s.gpu_end_ns for s in c.steps] == [1000 + 10 * MS * (k + 1) for k in range(5)]
    timing = c.per_step_timing()
    assert timing["gpu_span_ns"] == 10 * MS and timing["host_lead_ns"] == sum(leads) / 5
    assert timing["step_time_ns"] == 3 * MS
    assert c.host_ran_ahead() is True
    assert spans_of(c) == span_oracle(path)
    doc = summary_json(census_view(c))
    assert doc["host_ran_ahead"] is True
    assert [s["host_lead_ns"] for s in doc["timing"]["steps"]] == leads
    assert doc["timing"]["per_step"]["gpu_span_ns"] == 10 * MS
    assert doc["definitions"]["host_ran_ahead"] == HOST_AHEAD_RULE


def test_a_host_lead_at_the_threshold_is_not_running_ahead(tmp_path: Path) -> None:
    """One step [0, 1000]: GPU work ending at 1100 is a lead of exactly 10% of the step (not
    more than it); at 1101 the host ran ahead. Leads before the step's end are negative."""
    for end, ahead in ((1100, False), (1101, True), (900, False)):
        e = Export()
        e.range("step 0", 0, 1000)
        e.launch("k", 10, 50, end)
        c = summarize(e.write(tmp_path / f"t{end}.sqlite"))
        assert c.steps[0].host_lead_ns == end - 1000
        assert c.host_ran_ahead() is ahead


# -- (2) launches from a second thread inside backward ------------------------------------------
def build_autograd(tmp_path: Path) -> Path:
    """One step [0, 1000] on thread 1 with forward [100, 400] and backward [400, 900] pushed
    there; backward's kernels are launched from thread 2 (autograd) but one, and the last runs
    past the step's end."""
    e = Export()
    e.range("step 0", 0, 1000)
    e.range("forward", 100, 400)
    e.range("backward", 400, 900)
    e.launch("k_fwd", 150, 200, 300)
    e.launch("k_bwd_main", 420, 610, 700)
    e.launch("k_bwd_a", 450, 500, 600, tid=2)
    e.launch("k_bwd_b", 800, 950, 1200, tid=2)
    return e.write(tmp_path / "autograd.sqlite")


def test_backward_spans_the_kernels_launched_from_another_thread(tmp_path: Path) -> None:
    path = build_autograd(tmp_path)
    c = summarize(path)
    (s,) = c.steps
    got = {p.name: (p.gpu_start_ns, p.gpu_span_ns) for p in s.phases}
    # backward: [500, 1200] with thread 2's kernels; thread 1's alone would be [610, 700]
    assert got == {"forward": (200, 100), "backward": (500, 700), OUT: (None, None)}
    assert (s.gpu_start_ns, s.gpu_span_ns, s.host_lead_ns) == (200, 1000, 200)
    assert spans_of(c) == span_oracle(path)
    per = c.per_phase()
    assert (per["forward"]["gpu_span_ns"], per["backward"]["gpu_span_ns"]) == (100, 700)
    assert per[OUT]["gpu_span_ns"] is None  # no GPU work: no span, not a span of 0
    without = summarize(path, phases="")
    assert (without.steps[0].gpu_start_ns, without.steps[0].gpu_span_ns) == (200, 1000)


def test_per_phase_span_is_the_mean_over_the_steps_where_the_phase_has_gpu_work(
    tmp_path: Path,
) -> None:
    """Three steps: forward launches 100 ns and 300 ns of work in steps 0 and 1, nothing in step
    2 (an empty forward range); backward appears in step 0 only. The other phase keys count a
    phase's absence as 0; the span averages over the steps where it has GPU work."""
    e = Export()
    for k in range(3):
        e.range(f"step {k}", 1000 * k, 1000 * k + 900)
        e.range("forward", 1000 * k + 100, 1000 * k + 400)
    e.range("backward", 400, 800)
    e.launch("f0", 150, 200, 300)
    e.launch("f1", 1150, 1200, 1500)
    e.launch("b0", 500, 510, 530)
    c = summarize(e.write(tmp_path / "means.sqlite"))
    per = c.per_phase()
    assert per["forward"]["gpu_span_ns"] == 200  # (100 + 300) / 2
    assert per["forward"]["kernel_count"] == 2 / 3
    assert per["backward"]["gpu_span_ns"] == 20 and per["backward"]["kernel_count"] == 1 / 3
    assert [s.gpu_span_ns for s in c.steps] == [330, 300, None]  # step 0: [200, 530]
    assert c.per_step_timing()["gpu_span_ns"] == 315


# -- (3) graph launches ---------------------------------------------------------------------------
def test_graph_launch_kernels_share_the_call(tmp_path: Path) -> None:
    """A cudaGraphLaunch call per step; its kernels share the call's correlationId (traced with
    --cuda-graph-trace=node), on two streams."""
    e = Export()
    e.range("step 0", 0, 1000)
    e.range("step 1", 1000, 2000)
    for k, (a, b, c_) in enumerate(((200, 300, 460), (1500, 1550, 2400))):
        corr = e.api("cudaGraphLaunch_v10000", 100 + 1000 * k, 110 + 1000 * k)
        e.kernel("g1", a, a + 100, corr=corr)
        e.kernel("g2", b, b + 150, corr=corr, stream=8)
        e.kernel("g3", c_, c_ + 40, corr=corr)
    path = e.write(tmp_path / "graph.sqlite")
    c = summarize(path)
    assert [s.metrics.graph_launch_count for s in c.steps] == [1, 1]
    assert [s.metrics.kernel_count for s in c.steps] == [3, 3]
    assert [(s.gpu_start_ns, s.gpu_span_ns) for s in c.steps] == [(200, 300), (1500, 940)]
    assert [s.host_lead_ns for s in c.steps] == [-500, 440]
    assert spans_of(c) == span_oracle(path)


# -- (4) no GPU work: null, never 0 ---------------------------------------------------------------
def test_a_step_without_gpu_work_has_no_span(tmp_path: Path) -> None:
    e = Export()
    e.range("step 0", 0, 1000)
    e.range("step 1", 1000, 2000)
    e.launch("k", 10, 100, 400)
    e.api("cudaStreamSynchronize_v3020", 1100, 1200)  # a call, but no GPU work
    path = e.write(tmp_path / "empty.sqlite")
    c = summarize(path)
    s0, s1 = c.steps
    assert (s0.gpu_start_ns, s0.gpu_span_ns, s0.host_lead_ns) == (100, 300, -600)
    assert (s1.gpu_start_ns, s1.gpu_span_ns, s1.host_lead_ns, s1.gpu_end_ns) == (None,) * 4
    assert c.per_step_timing()["gpu_span_ns"] == 300  # over the step that launched work
    doc = json.loads(CliRunner().invoke(app, ["summary", str(path), "--json"]).stdout)
    assert doc["timing"]["steps"][1]["gpu_span_ns"] is None
    assert doc["timing"]["steps"][1]["gpu_start_ns"] is None
    assert doc["timing"]["steps"][1]["host_lead_ns"] is None
    assert doc["host_ran_ahead"] is False
    frame = census.frames.steps(c)
    assert frame["gpu_span_ns"].isna().tolist() == [False, True]
    assert str(frame["gpu_span_ns"].dtype) == "Int64" and frame["gpu_span_ns"][0] == 300
    assert spans_of(c) == span_oracle(path)


def test_no_gpu_work_in_any_step_and_no_steps(tmp_path: Path) -> None:
    e = Export()
    e.range("step 0", 0, 1000)
    e.launch("k", 2000, 2100, 2200)  # after the step
    c = summarize(e.write(tmp_path / "none.sqlite"))
    assert c.steps[0].gpu_span_ns is None and c.host_ran_ahead() is None
    assert c.per_step_timing()["gpu_span_ns"] is None
    assert c.per_step_timing()["host_lead_ns"] is None
    mock = summarize(fixture_file("nsysai_mock.sqlite"))
    assert (
        mock.host_ran_ahead() is None and summary_json(census_view(mock))["host_ran_ahead"] is None
    )


# -- (5) memcpys and memsets ------------------------------------------------------------------
def test_memcpys_and_memsets_count_in_the_span(tmp_path: Path) -> None:
    e = Export()
    e.range("step 0", 0, 1000)
    e.range("forward", 0, 500)
    e.set(4096, 20, 40, 60)  # a memset first, in forward
    e.launch("k", 50, 100, 200)
    e.copy(2, 1 << 20, 600, 900, 1500)  # a device-to-host copy last, outside phases
    e.range("step 1", 2000, 3000)
    e.copy(8, 64, 2100, 2200, 2250)  # only a copy
    path = e.write(tmp_path / "copies.sqlite")
    c = summarize(path)
    s0, s1 = c.steps
    assert (s0.gpu_start_ns, s0.gpu_span_ns, s0.host_lead_ns) == (40, 1460, 500)
    assert (s1.gpu_start_ns, s1.gpu_span_ns) == (2200, 50)
    phases = {p.name: (p.gpu_start_ns, p.gpu_span_ns) for p in s0.phases}
    assert phases == {"forward": (40, 160), OUT: (900, 600)}
    assert spans_of(c) == span_oracle(path)


def test_ops_without_a_duration_are_left_out(tmp_path: Path) -> None:
    e = Export()
    e.range("step 0", 0, 1000)
    e.launch("k", 10, 100, 200)
    e.launch("broken", 20, 300, 250)  # a negative duration
    e.launch("unfinished", 30, 50, 60)
    e.kernels[-1]["end"] = None
    e.launch("instant", 40, 500, 500)  # zero length: it still starts and ends at 500
    path = e.write(tmp_path / "bad.sqlite")
    c = summarize(path)
    assert (c.steps[0].gpu_start_ns, c.steps[0].gpu_span_ns) == (100, 400)
    assert spans_of(c) == span_oracle(path)


# -- (6) the engine's split does not matter -------------------------------------------------------
def build_mixed(tmp_path: Path) -> Path:
    """Twelve steps with phases, launches from two threads, copies and memsets, and a GPU that
    falls further behind each step (12.6 µs of work per 10 µs): enough rows for small batches
    and several workers to cut steps apart."""
    e = Export()
    gpu = 0
    for k in range(12):
        t = 10_000 * k
        e.range(f"step {k}", t, t + 6000)
        e.range("forward", t + 100, t + 2000)
        e.range("backward", t + 2000, t + 5000)
        for i in range(6):
            at = t + 150 + 800 * i
            begin = max(at + 30, gpu)
            e.launch(f"k{i % 3}", at, begin, begin + 2000 + 37 * i, tid=1 + (i >= 3))
            gpu = begin + 2000 + 37 * i
        e.copy(8, 1024, t + 5200, max(t + 5300, gpu), max(t + 5300, gpu) + 90)
        e.set(64, t + 5500, t + 5600, t + 5650)
    e.kernels.sort(key=lambda r: r["start"])  # as nsys writes them
    return e.write(tmp_path / "mixed.sqlite")


def record(path: Path, workers: int, batch_rows: int) -> dict:
    profile = load_profile(path, DEFAULT_STEPS_REGEX, 0, None, workers, batch_rows,
                           DEFAULT_PHASES_REGEX)  # fmt: skip
    return compute_census(profile).to_record()


@pytest.mark.parametrize(("workers", "batch_rows"), [(2, 1), (3, 5), (2, 7), (3, 2)])
def test_workers_and_batches_give_the_single_process_spans(
    tmp_path: Path, workers: int, batch_rows: int
) -> None:
    path = build_mixed(tmp_path)
    whole = record(path, 1, 1 << 40)
    split = record(path, workers, batch_rows)
    assert split == whole
    c = Census.from_record(split)
    assert spans_of(c) == span_oracle(path)
    assert all(s.gpu_span_ns is not None for s in c.steps)
    assert c.host_ran_ahead() is True


# -- against the oracle, on any export ------------------------------------------------------------
@settings(
    max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@example(phases=[(1000, 300)], calls=[])  # a phase that covers step 1 whole
@given(
    phases=st.lists(st.tuples(st.integers(0, 1200), st.integers(0, 400)), max_size=4),
    calls=st.lists(st.tuples(st.integers(-50, 1350), st.integers(0, 900), st.integers(-3, 300),
                             st.integers(0, 2)), max_size=20),
)  # fmt: skip
def test_spans_agree_with_the_oracle_on_any_export(tmp_path: Path, phases, calls) -> None:
    e = Export()
    e.range("step 0", 0, 1000)
    e.range("step 1", 1000, 1300)
    for i, (start, length) in enumerate(phases):
        e.range(("forward", "backward", "optimizer")[i % 3], start, start + length)
    for t, delay, run, kind in calls:
        start = t + 5 + delay
        if kind == 0:
            e.launch("k", t, start, start + run, tid=1 + t % 2)
        elif kind == 1:
            e.copy(8, 64, t, start, start + run)
        else:
            e.set(64, t, start, start + run)
    with tempfile.TemporaryDirectory(dir=tmp_path) as folder:  # a fresh file for every example
        path = e.write(Path(folder) / "any.sqlite")
        assert same_spans(spans_of(summarize(path)), span_oracle(path))
        assert same_spans(
            spans_of(summarize(path, phases="")), span_oracle(path, phases_regex=None)
        )


# -- (7) real captures ----------------------------------------------------------------------------
@pytest.mark.parametrize("path", real_exports(), ids=lambda p: p.parent.name + "/" + p.name)
def test_real_exports_agree_with_the_oracle(path: Path) -> None:
    c = summarize(path)
    assert spans_of(c) == span_oracle(path)
    if c.steps:
        # the bundled samples (the GPU-bound demo, no sync in a step) ran ahead; the other H200
        # captures sync at the end of each step: their host never ran ahead
        assert c.host_ran_ahead() is ("samples" in path.parts)
        assert all(s.gpu_span_ns is not None for s in c.steps)
    else:
        assert c.host_ran_ahead() is None


def nsys_projection(csv_path: Path) -> dict[tuple[str, str | None], tuple[int, int, int]]:
    """nsys's nvtx_gpu_proj_trace rows: (step, phase or None) -> (start, duration, GPU ops)."""
    out: dict[tuple[str, str | None], tuple[int, int, int]] = {}
    step = ""
    for row in csv.DictReader(csv_path.read_text(encoding="utf-8").splitlines()):
        name = row["Name"].split(":", 1)[1]  # the NVTX domain first
        step = name if name.startswith("step") else step
        key = (step, None if name == step else name)
        out[key] = tuple(int(row[c]) for c in ("Projected Start (ns)", "Projected Duration (ns)",
                                                "NumGPUOps"))  # fmt: skip
    return out


@pytest.mark.parametrize("name", ["ra-eager", "ra-compiled"])
def test_h200_captures_of_a_host_running_ahead(tmp_path: Path, name: str) -> None:
    """examples/gpu_bound.py on the H200 under nsys 2025.3.1: no sync in the step, so the host
    enqueues 5-6 ms steps while the GPU takes 45-47 ms each. The GPU spans are nsys's own
    projections of the ranges (nvtx_gpu_proj_trace), to the nanosecond, except backward: nsys
    projects only the work launched from the range's thread (one op), census takes autograd's
    thread's too."""
    packed = DATA / "runahead" / f"{name}.sqlite.xz"
    if not packed.exists():
        pytest.skip(f"{packed} is absent")
    path = tmp_path / f"{name}.sqlite"
    path.write_bytes(lzma.decompress(packed.read_bytes()))
    c = summarize(path)
    nsys = nsys_projection(DATA / "runahead" / f"{name}.proj.csv")
    assert len(c.steps) == 12
    for s in c.steps:
        assert (s.gpu_start_ns, s.gpu_span_ns) == nsys[(s.name, None)][:2]
        phases = {p.name: p for p in s.phases}
        for phase in ("forward", "optimizer"):
            p = phases[phase]
            assert (p.gpu_start_ns, p.gpu_span_ns) == nsys[(s.name, phase)][:2]
        backward = phases["backward"]
        assert nsys[(s.name, "backward")][2] == 1 and backward.metrics.kernel_count > 50
        assert backward.gpu_span_ns > 20 * MS > 1000 * nsys[(s.name, "backward")][1]
    assert c.host_ran_ahead() is True
    leads = [s.host_lead_ns for s in c.steps]
    assert leads == sorted(leads[:8]) + leads[8:]  # the lead grows until the queue is full
    assert statistics.median(leads) > 250 * MS
    timing = c.per_step_timing()
    assert timing["gpu_span_ns"] > 2 * timing["step_time_ns"]
    assert spans_of(c) == span_oracle(path)


@pytest.mark.fixtures
def test_shared_h200_eager_capture_exact_spans() -> None:
    c = summarize(fixture_file("h200_eager_3steps.sqlite"))
    assert [s.gpu_start_ns for s in c.steps] == [11812689, 27855965, 41936224]
    assert [s.gpu_span_ns for s in c.steps] == [15595473, 13731239, 13356074]
    assert [s.host_lead_ns for s in c.steps] == [-5675, -19285, -2765]
    first = {p.name: (p.gpu_start_ns, p.gpu_span_ns) for p in c.steps[0].phases}
    assert first["backward"] == (18882274, 6131611)
    assert c.host_ran_ahead() is False


@pytest.mark.fixtures
def test_summary_json_carries_the_spans() -> None:
    c = summarize(fixture_file("h200_compiled_3steps.sqlite"))
    doc = summary_json(census_view(c))
    assert doc["host_ran_ahead"] is False
    new = {"gpu_start_ns", "gpu_span_ns", "host_lead_ns"}
    for s in doc["timing"]["steps"]:
        assert s["step_time_ns"] == s["gpu_busy_ns"] + s["gpu_idle_ns"]
        assert new <= set(s)
    assert all({"gpu_start_ns", "gpu_span_ns"} <= set(p) for s in doc["steps"] for p in s["phases"])
    assert set(doc["per_phase"]["forward"]) >= {"gpu_span_ns", "duration_ns", "gpu_busy_ns"}


def test_cache_round_trip_keeps_the_spans(tmp_path: Path) -> None:
    path = build_autograd(tmp_path)
    first = census.summarize(path)
    again = census.summarize(path)  # from the cache
    assert spans_of(again) == spans_of(first)
    assert first.host_ran_ahead() is True and again.host_ran_ahead() is True
    assert again.per_phase() == first.per_phase()
    assert summary_json(census_view(again)) == summary_json(census_view(first))

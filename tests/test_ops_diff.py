"""`census diff` operation by operation (#56): the Operations table of the H200 eager-vs-compiled
Kineto pair equal to op_match's rows from OpTables built here from the traces alone
(tests/test_ops.py's reading), the waterfall of Δ kernel time adding up to the total exactly,
the honesty lines first, and no table where a side has no op ranges."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import census
from census.api import diff_view
from census.compare.op_diff import diff_ops, table_rows, total_scaled_ns, waterfall_bars
from census.compare.op_match import change_sentence, changed, match_ops, operations_rows
from census.definitions import OUTSIDE_PHASES
from census.findings.ops import OpKey, OpTable
from census.metrics import KERNEL_TIME_NS
from census.render import render
from census.render.charts import ops_waterfall
from tests.helpers.files import DATA
from tests.helpers.kineto_ops import profiler_steps, read_trace, trace_table
from tests.nsysdb import Export

KINETO = DATA / "kineto"
PAIR = {side: KINETO / f"h200_{side}_3steps.kineto.json.gz" for side in ("eager", "compiled")}


def _whole(side: str) -> OpTable:
    t = read_trace(PAIR[side])
    return trace_table(t, np.zeros(len(t.kernels), dtype=np.int64), 1)


@pytest.fixture(scope="module")
def pair() -> census.CensusDiff:
    return census.diff(str(PAIR["eager"]), str(PAIR["compiled"]))


def test_operations_table_is_op_match_of_the_traces(pair: census.CensusDiff) -> None:
    """The engine's operations (the Kineto reader, census/load/ops.py) against OpTables built
    here from the traces' JSON alone: the same rows, the same integer sums."""
    expected = match_ops(_whole("eager"), _whole("compiled"))
    assert pair.ops is not None and pair.ops.missing is None and not pair.ops.phases
    assert operations_rows(list(pair.ops.rows)) == operations_rows(expected)
    sums = [(m.a_keys, m.b_keys, m.a_count, m.b_count, m.a_launches, m.b_launches, m.a_time_ns,
             m.b_time_ns) for m in pair.ops.rows]  # fmt: skip
    assert sums == [(m.a_keys, m.b_keys, m.a_count, m.b_count, m.a_launches, m.b_launches,
                     m.a_time_ns, m.b_time_ns) for m in expected]  # fmt: skip
    # the JSON document carries the same rows, integer sums included
    doc = json.loads(render(diff_view(pair), "json"))["ops"]
    assert doc["missing"] is None and doc["steps"] == {"a": 1, "b": 1}
    assert [(r["sums"]["a"]["kernel_count"], r["sums"]["b"]["kernel_time_ns"])
            for r in doc["rows"]] == [(m.a_count, m.b_time_ns) for m in expected]  # fmt: skip
    assert doc["rows"][0]["a_ops"] == [{"op": "aten::copy_", "fused": False, "backward": True}]


def test_terminal_operations_table_fits_80_columns(pair: census.CensusDiff) -> None:
    lines = render(diff_view(pair), "terminal", width=80).splitlines()
    assert max(len(line) for line in lines) <= 80
    start = lines.index("Operations (whole capture, by |Δ time|)")
    table = lines[start : start + 30]
    rows = [line for line in table if line.startswith("│ copy_ (backward) ")]
    assert rows and "180 → 63" in rows[0] and "1.66 ms" in rows[0] and "-1.30 ms" in rows[0]
    assert any(line.startswith("│ unattributed ") and "0 → 0" in line for line in table)
    print("\n".join(lines[start : start + 28]))


def test_explanation_names_the_top_changes_after_the_honesty_line(
    pair: census.CensusDiff,
) -> None:
    why = census.explain(pair)
    assert why == diff_view(pair).explanation
    # the traces have no step ranges: that comes first, as it does without operations
    assert why[0].startswith("not directly comparable: ")
    expected = match_ops(_whole("eager"), _whole("compiled"))
    top = [change_sentence(m, "") for m in changed(expected)[:3]]
    assert top[0].startswith("copy_ (backward): 180 kernels (1.66 ms) became 63 Triton kernels")
    assert all(s in why for s in top)
    assert why.index(top[0]) < why.index(top[1]) < why.index(top[2])
    stayed = [s for s in why if s.startswith("stayed the same (15 operations, same kernels): ")]
    assert len(stayed) == 1 and why[-1] == stayed[0]


def test_waterfall_adds_up_to_the_total_kernel_time_change(pair: census.CensusDiff) -> None:
    ops = pair.ops
    bars = waterfall_bars(ops)
    total = getattr(pair.b.totals, KERNEL_TIME_NS) - getattr(pair.a.totals, KERNEL_TIME_NS)
    assert total == 13_582_049 - 17_018_173
    assert sum(b.scaled_ns for b in bars) == total_scaled_ns(ops) == total
    assert bars[-1].label == "unattributed" and bars[-1].scaled_ns == 0
    assert bars[-2].label == "8 other operations"  # 21 groups: 12 drawn, 8 summed, unattributed
    (chart,) = ops_waterfall(pair)
    (trace,) = chart.figure.data
    assert list(trace.measure) == ["relative"] * len(bars) + ["total"]
    assert list(trace.y[:-1]) == [b.scaled_ns / 1e6 for b in bars]
    assert "Δ kernel time by operation group" in render(diff_view(pair), "html")


def _steps(t: OpTable, pick: list[int]) -> OpTable:
    """The table over some of its steps (the same rows)."""
    cols = {f: getattr(t, f)[:, pick] for f in ("kernel_count", "launch_count", "kernel_time_ns")}
    return replace(t, **cols)


@pytest.fixture(scope="module")
def hta() -> OpTable:
    path = KINETO / "hta_nccl_parser_config__nccl_data.json.gz"
    t = read_trace(path)
    steps, step = profiler_steps(path, t)
    return trace_table(t, step, len(steps))


@given(st.lists(st.integers(0, 2), min_size=1, max_size=3),
       st.lists(st.integers(0, 2), min_size=1, max_size=3), st.integers(0, 25))  # fmt: skip
def test_waterfall_is_exact_over_unequal_step_counts(
    hta: OpTable, a_steps: list[int], b_steps: list[int], top: int
) -> None:
    """Per-step means of sides with different step counts: the bars (integers scaled by
    a_steps · b_steps) add up to B's kernel time · A's steps − A's · B's steps exactly."""
    a, b = _steps(hta, a_steps), _steps(hta, b_steps)
    ops = diff_ops(a, b, ("A", "B"), per_step=True)
    exact = int(b.kernel_time_ns.sum()) * len(a_steps) - int(a.kernel_time_ns.sum()) * len(b_steps)
    assert sum(bar.scaled_ns for bar in waterfall_bars(ops, top)) == exact
    assert ops.scale == len(a_steps) * len(b_steps)
    # the tables' rows add up too, with the rest summed and the unattributed last
    rows = table_rows(ops.rows, top)
    assert sum(m.a_time_ns for _, _, m in rows) == int(a.kernel_time_ns.sum())
    assert rows[-1][0] == "unattributed"


def test_no_table_without_op_ranges() -> None:
    """nsys exports captured without op ranges: one line, no table of zeros, in every format."""
    d = census.diff("sample:eager", "sample:compiled", labels=("eager", "compiled"))
    assert d.ops is not None and d.ops.rows == () and d.ops.phases == {}
    line = ("no operation ranges in eager or compiled: capture with `census capture --ops` "
            "or a torch.profiler trace")  # fmt: skip
    assert d.ops.missing == line
    view = diff_view(d)
    text = render(view, "terminal", width=80)
    assert line in " ".join(text.split()) and "Operations" not in text
    assert json.loads(render(view, "json"))["ops"] == {
        "missing": line,
        "steps": None,
        "rows": [],
        "phases": {},
    }
    markdown = render(view, "markdown")
    assert line.replace("_", "\\_") in markdown and "Operations" not in markdown
    assert "Operations" not in render(view, "html")
    assert ops_waterfall(d) == [] and census.explain(d) == census.explain(replace(d, ops=None))


def test_one_side_without_op_ranges_is_named() -> None:
    d = census.diff(str(PAIR["eager"]), "sample:compiled", labels=("kineto", "nsys"))
    assert d.ops is not None and d.ops.rows == ()
    assert d.ops.missing == (
        "no operation ranges in nsys: capture with `census capture --ops` or a torch.profiler trace"
    )
    assert "Operations (" not in render(diff_view(d), "markdown")
    assert diff_ops(None, _whole("eager"), ("A", "B"), True).missing.startswith(
        "no operation ranges in A: "
    )


def _export(path: Path, compiled: bool, steps: int) -> Path:
    """Steps of a forward phase (a linear: its mm: one GEMM) then an add and a mul: two eager kernels
    under their aten ranges, or (compiled) one Inductor kernel launched outside any."""
    e = Export()
    for s in range(steps):
        t0 = 1_000 + 10_000 * s
        e.range(f"step {s}", t0, t0 + 9_000)
        e.range("forward", t0 + 50, t0 + 950)
        e.range(f"aten::linear, seq = {s}, op_id = 1", t0 + 100, t0 + 900)
        e.range(f"aten::mm, seq = {s}, op_id = 2", t0 + 200, t0 + 800)
        e.launch("sm90_xmma_gemm", t0 + 300, t0 + 1_000, t0 + 1_400)
        if compiled:
            e.launch("triton_poi_fused_add_mul_0", t0 + 5_000, t0 + 5_100, t0 + 5_130)
            continue
        e.range("aten::add, op_id = 3", t0 + 5_000, t0 + 5_050)
        e.launch("vectorized_elementwise_kernel", t0 + 5_010, t0 + 5_100, t0 + 5_140)
        e.range("aten::mul, op_id = 4", t0 + 5_200, t0 + 5_250)
        e.launch("vectorized_elementwise_kernel", t0 + 5_210, t0 + 5_300, t0 + 5_330)
    return e.write(path)


def test_operations_split_by_phase(tmp_path: Path) -> None:
    """Both sides with phases: one table per phase, each row per-step means over each side's
    steps (2 and 3 here), the phases' sums adding up to the steps' rows."""
    a = _export(tmp_path / "eager.sqlite", compiled=False, steps=2)
    b = _export(tmp_path / "compiled.sqlite", compiled=True, steps=3)
    d = census.diff(a, b, labels=("eager", "compiled"), phases=r"^forward$")
    assert list(d.ops.phases) == ["forward", OUTSIDE_PHASES]
    linear, outside = d.ops.phases.values()
    assert [(m.a_keys, m.b_keys, m.stayed) for m in linear if m.a_count] == [
        ((OpKey("mm"),), (OpKey("mm"),), True)
    ]
    fused = next(m for m in outside if m.b_count)
    assert fused.a_keys == (OpKey("add"), OpKey("mul"))
    assert fused.b_keys == (OpKey("add + mul", fused=True),)
    assert (fused.a_count, fused.b_count, fused.a_time_ns, fused.b_time_ns) == (4, 3, 140, 90)
    assert fused.per_step("time_ns") == (70.0, 30.0, -40.0)
    for side in "ab":  # the phases' rows add up to the steps'
        for f in ("count", "time_ns"):
            whole = sum(getattr(m, f"{side}_{f}") for m in d.ops.rows)
            assert sum(getattr(m, f"{side}_{f}") for p in (linear, outside) for m in p) == whole
    text = render(diff_view(d), "terminal", width=80)
    assert "Operations: forward (per step, by |Δ time|)" in text
    assert f"Operations: {OUTSIDE_PHASES} (per step, by |Δ time|)" in text
    assert "│ add, mul " in text and "│ → add + mul " in text
    why = census.explain(d)
    fused_line = (
        "add, mul: 2 kernels (70 ns/step) became 1 Triton kernels (30 ns/step), -40 ns/step"
    )
    said = next(i for i, line in enumerate(why) if line.startswith(fused_line))
    # what makes the sides not comparable, then the verdict (within noise here) come first
    assert why[0].startswith("not directly comparable: different numbers of steps (2 and 3)")
    assert why[1].startswith("compiled and eager are within noise") and said > 1
    doc = json.loads(render(diff_view(d), "json"))["ops"]
    assert doc["steps"] == {"a": 2, "b": 3} and list(doc["phases"]) == list(d.ops.phases)

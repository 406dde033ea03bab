"""Operations on real nsys exports with op ranges (#56): the demo, eager and compiled, captured
on an H100 with `census capture --ops` (nsys's --pytorch=autograd-nvtx; tests/data/nsys_ops).
Each kernel's operation is computed here from the export with SQL alone (its launching call by
correlationId, the innermost `aten::` NVTX range around the call's start on the call's thread),
not with census's code."""

from __future__ import annotations

import json
import shutil
import sqlite3
from collections import Counter
from pathlib import Path

import pytest

import census
from census.findings.op_ranges import normalize_op_name
from tests.helpers.exports import capture_folder

DATA = Path(__file__).parent / "data" / "nsys_ops"


@pytest.fixture(scope="module")
def captures(tmp_path_factory) -> Path:
    """The two capture folders as census capture left them (export, run.json, Inductor's map)."""
    root = tmp_path_factory.mktemp("nsys_ops")
    for side in ("eager", "compiled"):
        capture_folder(root / side, DATA / f"d-{side}-nsys.sqlite.xz",
                       DATA / f"d-{side}-nsys.run.json")  # fmt: skip
    shutil.copy(DATA / "inductor_map.json", root / "compiled" / "inductor_map.json")
    return root


def oracle_ops(export: Path) -> Counter[str | None]:
    """Kernels per innermost aten op (None: no aten range around the launch), from SQL."""
    conn = sqlite3.connect(f"file:{export}?mode=ro", uri=True)
    ranges = conn.execute(
        """SELECT n.start, n."end", n.globalTid, coalesce(n.text, s.value) FROM NVTX_EVENTS n
           LEFT JOIN StringIds s ON n.textId = s.id
           WHERE coalesce(n.text, s.value) LIKE 'aten::%' AND n."end" IS NOT NULL"""
    ).fetchall()
    by_thread: dict[int, list[tuple[int, int, str]]] = {}
    for start, end, tid, text in ranges:
        by_thread.setdefault(tid, []).append((start, end, normalize_op_name(text)))
    launches = conn.execute(
        """SELECT r.start, r.globalTid FROM CUPTI_ACTIVITY_KIND_KERNEL k
           JOIN CUPTI_ACTIVITY_KIND_RUNTIME r ON r.correlationId = k.correlationId
             AND r.globalTid >> 24 = k.globalPid >> 24"""
    ).fetchall()
    out: Counter[str | None] = Counter()
    for at, tid in launches:
        around = [(s, -(e - s), n) for s, e, n in by_thread.get(tid, ()) if s <= at < e]
        out[max(around)[2] if around else None] += 1
    conn.close()
    return out


def test_every_eager_kernels_operation_equals_the_oracle(captures: Path) -> None:
    export = captures / "eager" / "capture.sqlite"
    c = census.summarize(captures / "eager")
    ops = c.ops
    got: Counter[str | None] = Counter()
    for op, n in zip(ops.op, ops.total_kernel_count.tolist(), strict=True):
        got[op] += n
    assert +got == +oracle_ops(export)
    assert sum(got.values()) == c.totals.kernel_count == 1235
    per_step = ops.kernel_count.sum(axis=0).tolist()
    assert per_step == c.steps.column("kernel_count").tolist() == [247] * 5


def test_the_engines_calls_of_a_node_make_its_work_backward(captures: Path) -> None:
    """nsys names the engine's call `autograd::engine::evaluate_function: AddmmBackward0, op_id
    = N` (no seq); the bias gradients' sums run inside it after `AddmmBackward0, seq = N`
    ends. They are backward work (they were counted as forward, and then matched nothing)."""
    ops = census.summarize(captures / "eager").ops
    sums = [(b, n) for op, b, n in zip(ops.op, ops.backward, ops.total_kernel_count.tolist(),
                                       strict=True) if op == "aten::sum"]  # fmt: skip
    assert sums == [(True, 80)]


def test_the_diff_matches_every_eager_operation(captures: Path) -> None:
    """Every operation of eager has its compiled group and the reverse: before, `sum` and `cat
    (backward)` were only in eager and `stack + transpose (backward)` only in compiled."""
    rows = census.diff(captures / "eager", captures / "compiled").ops.rows
    assert [m for m in rows if not m.a_keys or not m.b_keys] == []
    assert sum(m.a_count for m in rows) == 1235 and sum(m.b_count for m in rows) == 1125


def test_idle_by_range_has_one_row_per_operation(captures: Path) -> None:
    """The op ranges' idle time adds up under their normalised names (`aten::addmm`, not one
    row per `aten::addmm, op_id = N`); the ranges' sum is what it was (5,430,177 and
    3,148,124 ns over the steps, 653 and 286 rows before)."""
    for side, rows, total, addmm in (("eager", 41, 5430177, 1071669),
                                     ("compiled", 51, 3148124, 357825)):  # fmt: skip
        c = census.summarize(captures / side, use_cache=False)
        names = [r.range for r in c.idle_by_range]
        assert len(names) == len(set(names)) == rows
        assert not [n for n in names if "op_id =" in n or "seq =" in n]
        assert sum(r.idle_ns for r in c.idle_by_range) == total
        assert dict((r.range, r.idle_ns) for r in c.idle_by_range)["aten::addmm"] == addmm
    assert "Torch-Compiled Region: 0/0" in names


def test_summary_json_has_ops_per_phase_adding_up_to_its_kernels(captures: Path) -> None:
    from census import api
    from census.render import json_docs, json_rows

    view = api.census_view(census.summarize(captures / "eager"))
    whole = json_docs.summary_json(view, 5)
    assert json_rows.dumps(json_docs.summary_json(view, 5, rows_as_text=True)) == \
        json.dumps(whole)  # fmt: skip
    phases = [p for s in whole["steps"] for p in s["phases"]]
    assert [p["name"] for p in phases[:3]] == ["forward", "backward", "optimizer"]
    assert len(phases) == 20
    for p in phases:
        sums = sum(e["kernel_count"] for e in p["ops"]), sum(e["kernel_time_ns"] for e in p["ops"])
        assert sums == (p["kernel_count"], p["kernel_time_ns"])
    assert sum(sum(e["kernel_count"] for e in p["ops"]) for p in phases) == 1235


def test_idle_by_range_equals_the_slow_reference(captures: Path) -> None:
    from tests.oracle import idle_by_range_oracle

    for side in ("eager", "compiled"):
        c = census.summarize(captures / side)
        want = idle_by_range_oracle(captures / side / "capture.sqlite")
        assert {r.range: r.idle_ns for r in c.idle_by_range} == {k: v for k, v in want.items() if v}

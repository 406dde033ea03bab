"""Operations in the engine (#56): a Census's kernels by operation, from a Kineto trace's export
and from an nsys-shaped export with emit_nvtx's op ranges, equal to an independent computation
of the definition, adding up to every step's kernels exactly; the record codec carries them."""

from __future__ import annotations

import json
import shutil
from collections import Counter
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from typer.testing import CliRunner

import census
from census import api
from census.cli import app
from census.definitions.triton_names import decode_triton
from census.findings.ops import op_table
from census.render import json_docs, json_rows
from census.store.codec import dump_record, load_record
from tests.helpers.files import DATA
from tests.helpers.kineto_ops import LAUNCH_CATS, brute_op, ns, read_events
from tests.nsysdb import Export

KINETO = DATA / "kineto"
PAIR = {side: KINETO / f"h200_{side}_3steps.kineto.json.gz" for side in ("eager", "compiled")}


def _rows(c: census.Census) -> dict[tuple[str | None, bool], tuple[int, int]]:
    ops = c.ops
    assert ops is not None
    cols = zip(ops.op, ops.backward, ops.total_kernel_count, ops.total_kernel_time_ns, strict=True)
    return {(op, back): (int(n), int(t)) for op, back, n, t in cols if n}


def _expected(path: Path, step_of=None) -> Counter:
    """(op, backward[, step]) -> [count, time] from the trace's events, by brute force: a Triton
    kernel's group from its name, any other kernel's innermost aten op around its launch."""
    events = read_events(path)
    kernels = [e for e in events if e.get("ph") == "X" and e.get("cat") == "kernel"]
    ops = [e for e in events if e.get("ph") == "X" and e.get("cat") == "cpu_op"]
    op_of, node_of = brute_op(path)
    count: Counter = Counter()
    time: Counter = Counter()
    for k, op, node in zip(kernels, op_of, node_of, strict=True):
        decoded = decode_triton(k["name"])
        if decoded:
            name = " + ".join(o.removeprefix("aten::") for o in decoded[1]) or k["name"]
        else:
            name = ops[op]["name"].split(",")[0] if op >= 0 else None
        key = (name, node >= 0 and name is not None)
        if step_of is not None:
            key = (*key, step_of(k))
        count[key] += 1
        time[key] += ns(k["dur"])
    return {key: (count[key], time[key]) for key in count}


@pytest.mark.parametrize("side", ["eager", "compiled"])
def test_every_kernels_operation_equals_the_definition(side: str) -> None:
    c = census.summarize(PAIR[side])
    assert _rows(c) == _expected(PAIR[side])
    ops = c.ops
    assert ops.op[-1] is None  # the unattributed row, last
    assert int(ops.total_kernel_count.sum()) == c.totals.kernel_count
    assert int(ops.total_kernel_time_ns.sum()) == c.totals.kernel_time_ns
    assert c.totals.kernel_count == {"eager": 861, "compiled": 732}[side]
    assert sum(ops.fused) == {"eager": 0, "compiled": 23}[side]


def test_rows_add_up_to_every_step_exactly() -> None:
    path = KINETO / "hta_nccl_parser_config__nccl_data.json.gz"
    c = census.summarize(path)
    ops = c.ops
    assert ops.kernel_count.shape == (len(ops), 3) and len(c.steps) == 3
    assert ops.kernel_count.sum(axis=0).tolist() == c.steps.column("kernel_count").tolist()
    assert ops.kernel_time_ns.sum(axis=0).tolist() == c.steps.column("kernel_time_ns").tolist()
    assert int(ops.total_kernel_count.sum()) == c.totals.kernel_count == 2700
    # each (op, step) cell equals the brute force's, the step by the launch's ProfilerStep
    events = read_events(path)
    steps = sorted((ns(e["ts"]), ns(e["ts"]) + ns(e["dur"])) for e in events
                   if e.get("cat") == "user_annotation" and e["name"].startswith("ProfilerStep#"))  # fmt: skip
    calls = {e["args"]["correlation"]: ns(e["ts"]) for e in events
             if e.get("cat") in ("cuda_runtime", "cuda_driver") and "correlation" in e.get("args", {})}  # fmt: skip

    def step_of(k: dict) -> int:
        at = calls[k["args"]["correlation"]]
        return next(i for i, (s, e) in enumerate(steps) if s <= at <= e)

    got = {(op, back, s): (int(ops.kernel_count[r, s]), int(ops.kernel_time_ns[r, s]))
           for r, (op, back) in enumerate(zip(ops.op, ops.backward, strict=True))
           for s in range(3) if ops.kernel_count[r, s]}  # fmt: skip
    assert got == _expected(path, step_of)
    assert ops.op[-1] is None and int(ops.total_kernel_count[-1]) > 0  # NCCL: no aten op


def test_the_codec_and_op_table_carry_the_operations() -> None:
    c = census.summarize(PAIR["eager"])
    back = load_record(b"".join(dump_record(c)))
    assert back.ops == c.ops and back.ops is not c.ops
    table = op_table(back)
    assert table is not None and table.keys[-1] is None
    assert table.total_count.tolist() == c.ops.total_kernel_count.tolist()
    mm = table.keys.index(next(k for k in table.keys if k and k.label == "mm (backward)"))
    assert c.ops.op[mm] == "aten::mm" and c.ops.backward[mm]


def _emit_nvtx_export(path: Path, with_ops: bool = True) -> Path:
    """Two steps of one forward mm, its backward and one Triton kernel, op ranges written as
    emit_nvtx writes them (forward thread 1, the autograd engine's thread 2)."""
    e = Export()
    for s, t0 in enumerate((1_000, 11_000)):
        e.range(f"step {s}", t0, t0 + 9_000)
        if with_ops:
            e.range(f"aten::linear, seq = {10 + s}, op_id = 1", t0 + 100, t0 + 900)
            e.range(f"aten::mm, seq = {10 + s}, op_id = 2, sizes = [[4, 4], [4, 4]]",
                    t0 + 200, t0 + 800)  # fmt: skip
            e.range(f"autograd::engine::evaluate_function: MmBackward0, seq = {10 + s}",
                    t0 + 3_000, t0 + 4_000, tid=2)  # fmt: skip
            e.range(f"MmBackward0, seq = {10 + s}, op_id = 5", t0 + 3_100, t0 + 3_900, tid=2)
            e.range("aten::mm, op_id = 6", t0 + 3_200, t0 + 3_500, tid=2)
        e.launch("sm90_xmma_gemm", t0 + 300, t0 + 1_000, t0 + 1_400)  # forward mm
        e.launch("sm90_xmma_gemm", t0 + 3_300, t0 + 4_100, t0 + 4_600, tid=2)  # backward mm
        e.launch("triton_poi_fused_add_mul_0", t0 + 5_000, t0 + 5_100, t0 + 5_130)
    e.launch("cleanup_kernel", 30_000, 30_100, 30_111)  # in no step
    return e.write(path)


def test_emit_nvtx_ranges_in_an_nsys_export(tmp_path: Path) -> None:
    c = census.summarize(_emit_nvtx_export(tmp_path / "ops.sqlite"))
    ops = c.ops
    assert ops.op == ("add + mul", "aten::mm", "aten::mm", None)
    assert ops.backward == (False, False, True, False)
    assert ops.fused == (True, False, False, False)
    assert ops.forward[2] == ("linear",)  # the backward node's forward op, by seq
    assert ops.kernel_count.tolist() == [[1, 1], [1, 1], [1, 1], [0, 0]]
    assert ops.kernel_time_ns.tolist() == [[30, 30], [400, 400], [500, 500], [0, 0]]
    assert ops.total_kernel_count.tolist() == [2, 2, 2, 1]
    assert ops.total_kernel_time_ns.tolist() == [60, 800, 1000, 11]
    assert ops.kernel_count.sum(axis=0).tolist() == c.steps.column("kernel_count").tolist()


def test_the_inductor_map_beside_the_export_decides_the_fused_group(tmp_path: Path) -> None:
    """The map a capture keeps (inductor_map.json) names what the kernel fused, beyond what its
    cut-short name lists: the engine groups by it."""
    export = _emit_nvtx_export(tmp_path / "ops.sqlite")
    (tmp_path / "inductor_map.json").write_text(
        json.dumps(
            {"triton_poi_fused_add_mul_0": ["aten::native_layer_norm", "aten::add", "aten::mul"]}
        )
    )
    ops = census.summarize(export).ops
    fused = [
        (op, int(n))
        for op, f, n in zip(ops.op, ops.fused, ops.total_kernel_count, strict=True)
        if f
    ]
    assert fused == [("native_layer_norm + add + mul", 2)]  # without the map: "add + mul"


def test_no_op_ranges_no_operations(tmp_path: Path) -> None:
    c = census.summarize(_emit_nvtx_export(tmp_path / "plain.sqlite", with_ops=False))
    assert c.ops is None and op_table(c) is None
    assert c.totals.kernel_count == 7


def test_phases_split_the_operations(tmp_path: Path) -> None:
    path = _emit_nvtx_export(tmp_path / "ops.sqlite")
    c = census.summarize(path, phases=r"^aten::linear")
    ops = c.ops
    assert ops.phase_kernel_count.shape[1] == len(c.steps.phases) == 4
    assert ops.phase_kernel_count.sum(axis=0).tolist() == \
        c.steps.phase_column("kernel_count").tolist()  # fmt: skip
    assert ops.kernel_count.tolist() == [[1, 1], [1, 1], [1, 1], [0, 0]]
    assert np.array_equal(ops.phase_kernel_time_ns.sum(axis=0),
                          c.steps.phase_column("kernel_time_ns"))  # fmt: skip


def _summary_json(path: Path | str, *args: str) -> dict:
    r = CliRunner().invoke(app, ["summary", str(path), "--json", *args])
    assert r.exit_code == 0, r.output
    return json.loads(r.stdout)


def _entry_sums(entries: list[dict]) -> tuple[int, int]:
    return sum(e["kernel_count"] for e in entries), sum(e["kernel_time_ns"] for e in entries)


def test_summary_json_ops_add_up_over_the_capture_and_each_step() -> None:
    doc = _summary_json(KINETO / "hta_nccl_parser_config__nccl_data.json.gz")
    keys = {"op", "fused", "backward", "forward", "kernel_count", "kernel_time_ns", "launch_count"}
    assert all(set(e) == keys for e in doc["ops"])
    totals = doc["totals"]
    assert _entry_sums(doc["ops"]) == (totals["kernel_count"], totals["kernel_time_ns"])
    assert doc["ops"][-1]["op"] is None and all(e["op"] for e in doc["ops"][:-1])
    times = [e["kernel_time_ns"] for e in doc["ops"][:-1]]
    assert times == sorted(times, reverse=True)
    conv = next(e for e in doc["ops"] if e["op"] == "aten::convolution_backward")
    assert conv["backward"] and conv["forward"] == ["conv2d"] and not conv["fused"]
    assert len(doc["steps"]) == 3
    for step in doc["steps"]:
        assert _entry_sums(step["ops"]) == (step["kernel_count"], step["kernel_time_ns"])
        assert all(e["kernel_count"] > 0 for e in step["ops"])


def test_summary_json_names_a_fused_group_and_has_no_ops_without_op_ranges(
    tmp_path: Path,
) -> None:
    doc = _summary_json(PAIR["compiled"])
    fused = [e for e in doc["ops"] if e["fused"]]
    assert len(fused) == 23 and not any(e["op"].startswith("aten::") for e in fused)
    group = "_to_copy + add + native_layer_norm_backward + transpose + view"
    assert any(e["op"] == group and e["backward"] and e["kernel_count"] == 9 for e in fused)
    assert _entry_sums(doc["ops"]) == (732, doc["totals"]["kernel_time_ns"])
    plain = _summary_json(_emit_nvtx_export(tmp_path / "plain.sqlite", with_ops=False))
    assert "ops" not in plain and all("ops" not in s for s in plain["steps"])


def test_rows_as_text_carry_the_steps_operations(tmp_path: Path) -> None:
    for path in (KINETO / "hta_nccl_parser_config__nccl_data.json.gz",
                 _emit_nvtx_export(tmp_path / "ops.sqlite")):  # fmt: skip
        c = census.summarize(path, use_cache=False)
        view = api.census_view(c)
        whole = json_docs.summary_json(view, 5)
        assert json_rows.dumps(json_docs.summary_json(view, 5, rows_as_text=True)) == json.dumps(
            whole
        )
        assert "ops" in whole["steps"][0]


def test_summary_ops_table_terminal_and_markdown(tmp_path: Path) -> None:
    path = _emit_nvtx_export(tmp_path / "ops.sqlite")
    r = CliRunner().invoke(app, ["summary", str(path), "--ops"], env={"COLUMNS": "160"})
    assert r.exit_code == 0, r.output
    assert "Top 15 operations by kernel time (per step, mean)" in r.stdout
    lines = [line for line in r.stdout.splitlines() if "mm (backward)" in line]
    assert len(lines) == 1 and "500 ns" in lines[0] and "53.8%" in lines[0]
    r = CliRunner().invoke(app, ["summary", str(path), "--ops", "--format", "markdown"])
    assert "| mm (backward) | 1 | 1 | 500 ns | 53.8% |" in r.stdout
    assert "| mm | 1 | 1 | 400 ns | 43.0% |" in r.stdout
    assert "| add + mul | 1 | 1 | 30 ns | 3.2% |" in r.stdout
    plain = _emit_nvtx_export(tmp_path / "plain.sqlite", with_ops=False)
    r = CliRunner().invoke(app, ["summary", str(plain), "--ops", "--format", "markdown"])
    assert r.exit_code == 0 and "no operation ranges in this profile" in r.stdout
    r = CliRunner().invoke(app, ["summary", str(path)])
    assert "operations by kernel time" not in r.stdout  # only asked for


def test_ops_frame_equals_the_summary_json() -> None:
    path = KINETO / "hta_nccl_parser_config__nccl_data.json.gz"
    frame = census.frames.ops(path)
    doc = _summary_json(path)
    got = frame[["op", "kernel_count", "kernel_time_ns", "launch_count"]].to_dict("records")
    want = [{k: e[k] for k in ("op", "kernel_count", "kernel_time_ns", "launch_count")}
            for e in doc["ops"]]  # fmt: skip
    assert [{**g, "op": None if g["op"] is pd.NA else g["op"]} for g in got] == want
    mean = frame["per_step_kernel_count"].sum()
    assert mean == doc["per_step"]["kernel_count"]
    assert census.frames.ops("sample:eager").empty


def test_the_kineto_export_holds_the_cpu_ops_that_can_answer() -> None:
    import sqlite3

    from census.sources.kineto.export import export_kineto

    events = read_events(PAIR["eager"])
    ops = [e for e in events if e.get("ph") == "X" and e.get("cat") == "cpu_op"]
    kernel_corr = {e["args"]["correlation"] for e in events
                   if e.get("ph") == "X" and e.get("cat") == "kernel"}  # fmt: skip
    launches = [(e["tid"], ns(e["ts"])) for e in events
                if e.get("ph") == "X" and e.get("cat") in LAUNCH_CATS
                and e.get("args", {}).get("correlation") in kernel_corr]  # fmt: skip
    conn = sqlite3.connect(export_kineto(PAIR["eager"]))
    try:
        rows = conn.execute(
            "SELECT o.start, o.end, s.value, o.sequence, o.backward FROM KINETO_OP_RANGES o "
            "JOIN StringIds s ON s.id = o.nameId ORDER BY o.rowid"
        ).fetchall()
    finally:
        conn.close()
    prefix = "autograd::engine::evaluate_function: "
    every = [(ns(e["ts"]), ns(e["ts"]) + ns(e["dur"]), e["name"], e["args"].get("Sequence number"),
              int(int(e["args"].get("Fwd thread id", 0)) > 0 or e["name"].startswith(prefix)),
              e["tid"]) for e in ops]  # fmt: skip
    # kept: a forward range with a sequence number, or one holding a launch on its thread
    want = [r[:5] for r in every if (r[3] is not None and not r[4])
            or any(t == r[5] and r[0] <= at < r[1] for t, at in launches)]  # fmt: skip
    assert rows == want and (len(rows), len(every)) == (2730, 7182)
    assert sum(r[4] for r in rows) == 594  # of 1,446 backward ranges, those holding a launch


def test_kernels_without_a_launching_call_are_unattributed(tmp_path: Path) -> None:
    e = Export()
    e.range("step 0", 0, 10_000)
    e.range("aten::mm, seq = 1", 100, 900)
    e.launch("sm90_gemm", 200, 1_000, 1_400)
    e.launch("triton_poi_fused_add_0", 300, 1_500, 1_600)
    e.kernels.append(dict(e.kernels[0], correlationId=None, start=2_000, end=2_100))
    c = census.summarize(e.write(tmp_path / "calls.sqlite"))
    assert (c.ops.op, c.ops.total_kernel_count.tolist()) == (("add", "aten::mm", None), [1, 1, 1])
    assert c.ops.kernel_count.tolist() == [[1], [1], [0]]  # the NULL correlationId: no step
    e.omit.add("CUPTI_ACTIVITY_KIND_RUNTIME")  # no calls at all: only the Triton group named
    c = census.summarize(e.write(tmp_path / "no-calls.sqlite"))
    assert (c.ops.op, c.ops.total_kernel_count.tolist()) == (("add", None), [1, 2])


def test_a_rank_folders_operations_are_its_ranks_side_by_side(tmp_path: Path) -> None:
    run = tmp_path / "run"
    run.mkdir()
    _emit_nvtx_export(run / "rank0.sqlite")
    _emit_nvtx_export(run / "rank1.sqlite")
    c = census.summarize(run, ranks=True)
    assert c.ops.op == ("add + mul", "aten::mm", "aten::mm", None) and len(c.steps) == 4
    assert c.ops.kernel_count.tolist() == [[1, 1, 1, 1], [1, 1, 1, 1], [1, 1, 1, 1], [0] * 4]
    assert c.ops.total_kernel_count.tolist() == [4, 4, 4, 2]  # each rank's kernel in no step
    assert c.ops.forward[2] == ("linear",)
    for fmt in ("table", "markdown"):  # a rank folder's rendering takes --ops too
        r = CliRunner().invoke(app, ["summary", str(run), "--ranks", "--ops", "--format", fmt])
        assert r.exit_code == 0 and "operations by kernel time (per step, mean)" in r.stdout
    mixed = tmp_path / "mixed"  # one rank without op ranges
    mixed.mkdir()
    _emit_nvtx_export(mixed / "rank0.sqlite")
    _emit_nvtx_export(mixed / "rank1.sqlite", with_ops=False)
    assert census.summarize(mixed, ranks=True).ops is None


def test_a_rank_folders_diff_has_its_ranks_operations(tmp_path: Path) -> None:
    """`census diff RANKFOLDER_A RANKFOLDER_B`: the ranks' operations merged (merge_ops), each
    rank's steps counted, not "no operation ranges"."""
    for side in ("a", "b"):
        folder = tmp_path / side
        folder.mkdir()
        for rank in range(2):
            _emit_nvtx_export(folder / f"rank{rank}.sqlite")
        (folder / "run.json").write_text(json.dumps({"ranks": {"0": "rank0.sqlite",
                                                               "1": "rank1.sqlite"}}))  # fmt: skip
    r = CliRunner().invoke(app, ["diff", str(tmp_path / "a"), str(tmp_path / "b"), "--format",
                                 "json"])  # fmt: skip
    assert r.exit_code == 0, r.output
    ops = json.loads(r.stdout)["ops"]
    assert ops["missing"] is None and ops["steps"] == {"a": 4, "b": 4}
    got = [
        ([k["op"] for k in row["a_ops"]], row["sums"]["a"]["kernel_count"]) for row in ops["rows"]
    ]
    assert sorted(got, key=str) == sorted([(["add + mul"], 4), (["aten::mm"], 4), (["aten::mm"], 4),
                                           ([None], 0)], key=str)  # fmt: skip


def test_a_torch_capture_folders_inductor_map_is_read_and_keys_the_cache(tmp_path: Path) -> None:
    """`census capture --profiler torch` of a compiled run: the trace's export lies in the cache
    folder, the map beside the trace in the capture folder. It decides the fused group, and a
    map written after a census was cached makes a new census (its identity is in the key)."""
    folder = tmp_path / "capture"
    folder.mkdir()
    shutil.copy(KINETO / "h200_compiled_3steps.kineto.json.gz", folder / "capture.pt.trace.json.gz")
    kernel = "triton_poi_fused_gelu_gelu_backward_view_2"  # 12 kernels in the trace

    def fused(c: census.Census) -> dict[str, int]:
        o = c.ops
        return {o.op[r]: int(o.total_kernel_count[r]) for r in range(len(o)) if o.fused[r]}

    before = fused(census.summarize(folder))
    assert "mul + erf" not in before and before["gelu + gelu_backward + view"] == 12
    (folder / "inductor_map.json").write_text(json.dumps({kernel: ["aten::mul", "aten::erf"]}))
    for trace in (folder, folder / "capture.pt.trace.json.gz"):
        after = fused(census.summarize(trace))
        assert after["mul + erf"] == 12 and "gelu + gelu_backward + view" not in after

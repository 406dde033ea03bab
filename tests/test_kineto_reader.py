"""census.sources.kineto on real Kineto traces (tests/data/kineto: the H200 eager and compiled
demo traces, HTA's 2-rank NCCL and Triton samples, TraceLens's B200 rank 0), held to an
independent reading written here: Python's json with `parse_float=str` and Decimal arithmetic,
event by event, none of census's code."""

from __future__ import annotations

import gzip
import json
import re
import shutil
from collections import defaultdict
from pathlib import Path

import numpy as np
import pytest

from census.sources.kineto import is_kineto, read_kineto
from census.sources.kineto.links import launch_index, step_of, step_ranges
from tests.helpers.kineto_oracle import CATEGORIES, KINETO, ns, oracle_events

TRACES = sorted(p.name for p in KINETO.glob("*.json.gz"))
NCCL = "hta_nccl_parser_config__nccl_data.json.gz"


def oracle_tables(name: str) -> dict[str, dict]:
    """Per table: count, sums of start and duration ns, per copy kind counts and bytes."""
    _, events = oracle_events(name)
    out: dict[str, dict] = defaultdict(lambda: defaultdict(int))
    for e in events:
        t = out[CATEGORIES[e["cat"]]]
        t["count"] += 1
        t["start_ns"] += ns(e["ts"])
        t["dur_ns"] += ns(e["dur"])
        if e["cat"] == "gpu_memcpy":
            kind = e["name"].split()[1]
            t[f"{kind}_count"] += 1
            t[f"{kind}_bytes"] += e["args"]["bytes"]
        if e["cat"] in ("gpu_memcpy", "gpu_memset"):
            t["bytes"] += e["args"]["bytes"]
    return out


@pytest.mark.parametrize("name", TRACES)
def test_tables_equal_an_independent_reading(name: str) -> None:
    trace = read_kineto(KINETO / name)
    expected = oracle_tables(name)
    assert set(trace.tables) == set(expected)
    kinds = {1: "HtoD", 2: "DtoH", 8: "DtoD"}
    for table, want in expected.items():
        cols = trace.tables[table]
        got = {"count": len(cols["start_ns"]), "start_ns": sum(cols["start_ns"].tolist()),
               "dur_ns": int((cols["end_ns"] - cols["start_ns"]).sum())}  # fmt: skip
        if table == "memcpys":
            for code, kind in kinds.items():
                mine = cols["copy_kind"] == code
                if mine.any():
                    got[f"{kind}_count"] = int(mine.sum())
                    got[f"{kind}_bytes"] = int(cols["bytes"][mine].sum())
        if table in ("memcpys", "memsets"):
            got["bytes"] = int(cols["bytes"].sum())
        assert got == dict(want), table
    assert trace.notes == []


def test_times_are_the_decimal_text_not_a_double() -> None:
    """A double's rounding puts a quarter of a real trace's times 1 ns off (HTA's NCCL trace:
    its starts; the H200 trace: its ends, ts + dur); census's are the decimal text's, exactly."""
    _, events = oracle_events("hta_nccl_parser_config__nccl_data.json.gz")
    kernels = [e for e in events if e["cat"] == "kernel"]
    exact = np.array([ns(e["ts"]) for e in kernels])
    via_float = np.array([round(float(e["ts"]) * 1000) for e in kernels])
    assert (exact != via_float).sum() > len(kernels) // 5
    got = read_kineto(KINETO / "hta_nccl_parser_config__nccl_data.json.gz").tables["kernels"]
    assert np.array_equal(got["start_ns"], exact)  # in the file's order

    _, events = oracle_events("h200_eager_3steps.kineto.json.gz")
    kernels = [e for e in events if e["cat"] == "kernel"]
    exact = np.array([ns(e["ts"]) + ns(e["dur"]) for e in kernels])
    via_float = np.array([round((float(e["ts"]) + float(e["dur"])) * 1000) for e in kernels])
    assert (exact != via_float).sum() > len(kernels) // 5
    got = read_kineto(KINETO / "h200_eager_3steps.kineto.json.gz").tables["kernels"]
    assert np.array_equal(got["end_ns"], exact)


@pytest.mark.parametrize("name", TRACES)
def test_launching_calls_joined_by_correlation(name: str) -> None:
    _, events = oracle_events(name)
    calls = {
        e["args"]["correlation"]: e for e in events if e["cat"] in ("cuda_runtime", "cuda_driver")
    }
    trace = read_kineto(KINETO / name)
    for cat, table in (("kernel", "kernels"), ("gpu_memcpy", "memcpys"), ("gpu_memset", "memsets")):
        gpu = [e for e in events if e["cat"] == cat]
        linked = [e for e in gpu if e["args"].get("correlation") in calls]
        want = (len(linked), sum(ns(calls[e["args"]["correlation"]]["ts"]) for e in linked),
                sum(ns(e["dur"]) for e in linked))  # fmt: skip
        if table not in trace.tables:
            assert want == (0, 0, 0)
            continue
        index = launch_index(trace, table)
        has = index >= 0
        cols, api = trace.tables[table], trace.tables["api_calls"]
        got = (int(has.sum()), sum(api["start_ns"][index[has]].tolist()),
               int((cols["end_ns"] - cols["start_ns"])[has].sum()))  # fmt: skip
        assert got == want, table


def oracle_steps(name: str) -> list[tuple[str, int, int]]:
    """Per ProfilerStep#N / `step N` host range: kernels whose launching call starts inside
    it on the same process, and their time."""
    _, events = oracle_events(name)
    steps = [e for e in events if e["cat"] == "user_annotation"
             and re.match(r"^(step\b|ProfilerStep#)", e["name"])]  # fmt: skip
    calls = {
        e["args"]["correlation"]: e for e in events if e["cat"] in ("cuda_runtime", "cuda_driver")
    }
    out = []
    for s in sorted(steps, key=lambda e: ns(e["ts"])):
        lo, hi = ns(s["ts"]), ns(s["ts"]) + ns(s["dur"])
        mine = [k for k in events if k["cat"] == "kernel"
                and (c := calls.get(k["args"]["correlation"])) is not None
                and c["pid"] == s["pid"] and lo <= ns(c["ts"]) < hi]  # fmt: skip
        out.append((s["name"], len(mine), sum(ns(k["dur"]) for k in mine)))
    return out


@pytest.mark.parametrize("name", ["hta_nccl_parser_config__nccl_data.json.gz",
                                  "hta_triton_example__triton_example.json.gz"])  # fmt: skip
def test_kernels_per_profiler_step(name: str) -> None:
    """HTA's Triton sample writes its ProfilerStep#1 under another pid than its calls (3100453,
    1670242): by the definition (same process) the step holds none of its work."""
    want = oracle_steps(name)
    assert want and all(count for _, count, _ in want) == ("nccl" in name)
    trace = read_kineto(KINETO / name)
    steps = step_ranges(trace)
    step = step_of(trace, "kernels", steps)
    k = trace.tables["kernels"]
    got = [(trace.strings[steps["name"][i]], int((step == i).sum()),
            int((k["end_ns"] - k["start_ns"])[step == i].sum())) for i in range(len(steps["name"]))]  # fmt: skip
    assert got == want


def test_gpu_annotations_are_never_steps(tmp_path: Path) -> None:
    """HTA's NCCL trace has `ProfilerStep#N` on the host only; a copy whose GPU annotations are
    renamed `ProfilerStep#9` still has three steps."""
    doc, _ = oracle_events("hta_nccl_parser_config__nccl_data.json.gz")
    for e in doc["traceEvents"]:
        if e.get("cat") == "gpu_user_annotation":
            e["name"] = "ProfilerStep#9"
    path = tmp_path / "renamed.json"
    path.write_text(json.dumps(doc))
    steps = step_ranges(read_kineto(path))
    assert len(steps["name"]) == 3


def test_rank_and_world_size() -> None:
    assert (read_kineto(KINETO / NCCL).rank, read_kineto(KINETO / NCCL).world_size) == (
        0,
        2,
    )
    tracelens = read_kineto(KINETO / "tracelens_b200__eager_trace.json.gz")
    assert (tracelens.rank, tracelens.world_size) == (0, 8)
    assert read_kineto(KINETO / "h200_eager_3steps.kineto.json.gz").rank is None


def test_recognised_by_content_not_name(tmp_path: Path) -> None:
    odd = tmp_path / "capture.bin"
    shutil.copy(KINETO / "hta_triton_example__triton_example.json.gz", odd)
    plain = tmp_path / "trace.sqlite"
    plain.write_bytes(
        gzip.decompress((KINETO / "hta_triton_example__triton_example.json.gz").read_bytes())
    )
    assert is_kineto(odd) and is_kineto(plain)
    assert len(read_kineto(odd).tables["kernels"]["start_ns"]) == 1
    assert read_kineto(plain).tables["kernels"]["start_ns"].tolist() == [ns("2413669097444.592")]
    nsys = tmp_path / "export.json.gz"
    nsys.write_bytes(b"SQLite format 3\x00" + bytes(100))
    assert not is_kineto(nsys)


def test_tids_written_as_strings(tmp_path: Path) -> None:
    """Older torch versions write a GPU event's tid as `stream 7` and some pids as strings."""
    doc, _ = oracle_events("hta_triton_example__triton_example.json.gz")
    for e in doc["traceEvents"]:
        if e.get("cat") == "kernel":
            e["tid"], e["pid"] = "stream 7", "0"
            del e["args"]["stream"]
    path = tmp_path / "old.json"
    path.write_text(json.dumps(doc))
    trace = read_kineto(path)
    k = trace.tables["kernels"]
    assert (k["pid"].tolist(), k["device"].tolist()) == ([0], [0])
    assert k["stream"].tolist() == [trace.labels["stream 7"]] and k["stream"][0] < 0


def test_batches_cut_anywhere_read_the_same(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Batches of a few hundred bytes (every cut tried, many inside an event: args holding a
    list of objects, a name holding `}, {`) give the same tables as the usual batches."""
    from census.sources.kineto import stream

    text = gzip.decompress((KINETO / "h200_compiled_3steps.kineto.json.gz").read_bytes()).decode()
    nested = ', "nested": [' + ", ".join(f'{{"k": {i}}}' for i in range(40)) + "]"
    text = text.replace('"correlation": 23,', '"correlation": 23' + nested + ",", 1)
    text = text.replace('"name": "cuLaunchKernel"', '"name": "cuLaunch}, {Kernel"', 1)
    path = tmp_path / "nested.json"
    path.write_text(text)
    usual = read_kineto(path)
    monkeypatch.setattr(stream, "BATCH_BYTES", 300)
    monkeypatch.setattr(stream, "TRIED_CUTS", 4)
    small = read_kineto(path)
    assert "cuLaunch}, {Kernel" in usual.strings
    for table, cols in usual.tables.items():
        for name, col in cols.items():
            mine = small.tables[table][name]
            if name == "name":  # ids are numbered as names come: compare the names
                col, mine = [usual.strings[i] for i in col], [small.strings[i] for i in mine]
            assert np.array_equal(mine, col), (table, name)
    assert len(usual.tables["kernels"]["start_ns"]) == 732


def test_strings_texts_follow_ids_across_batches() -> None:
    """Names grown batch by batch (a list name as its text): `texts` reads an id column as the
    table does, without copying it per batch (the export's annotation text, #55)."""
    from census.sources.kineto.tables import Strings

    strings = Strings()
    first = strings.column(["b", "a", "b"])
    second = strings.column([["x", 1], "c", "a"])
    assert strings.table() == ["a", "b", "['x', 1]", "c"]
    assert first.tolist() == [1, 0, 1] and second.tolist() == [2, 3, 0]
    assert strings.texts(np.concatenate([first, second])) == ["b", "a", "b", "['x', 1]", "c", "a"]
    strings.table().append("not kept")  # the table handed out is a copy
    assert strings.table() == ["a", "b", "['x', 1]", "c"]


@pytest.mark.parametrize("devices", [1, 40])
def test_objects_after_the_events(tmp_path: Path, devices: int) -> None:
    """torch 2.0 writes `distributedInfo` (an object) after the events, as HTA's
    execution_trace sample does (`  ],\n  "distributedInfo": {"rank": 0},`): a closing brace
    followed by a comma past the events' end is no event's end. With 40 objects after the
    array, more than TRIED_CUTS candidate braces lie beyond it."""
    kernel = ('{"ph": "X", "cat": "kernel", "name": "k", "pid": 0, "tid": 7, '
              '"ts": 1689360788459.677, "dur": 1.5, "args": {"device": 0, "stream": 7, '
              '"correlation": 5}}')  # fmt: skip
    call = ('{"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 9, '
            '"tid": 9, "ts": 1689360788450.001, "dur": 3, "args": {"correlation": 5}}')  # fmt: skip
    gpus = ", ".join(f'{{"id": {i}, "name": "A100"}}' for i in range(devices))
    path = tmp_path / "tail.json"
    path.write_text(f'{{\n  "schemaVersion": 1,\n  "traceEvents": [\n  {kernel},\n  {call}\n  ],\n'
                    f'  "distributedInfo": {{"rank": 3, "world_size": 4}},\n'
                    f'  "deviceProperties": [{gpus}],\n  "traceName": "t.json"\n}}\n')  # fmt: skip
    trace = read_kineto(path)
    assert trace.tables["kernels"]["start_ns"].tolist() == [1689360788459677]
    assert trace.tables["kernels"]["end_ns"].tolist() == [1689360788461177]
    assert (trace.rank, trace.world_size) == (3, 4)

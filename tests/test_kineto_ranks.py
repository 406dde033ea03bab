"""A folder of per-rank PyTorch profiler traces read as a rank folder (#55), on real traces
(tests/data/kineto_ranks: HTA's ranks 0 and 1 of a 128-rank NCCL job; HTA's 2-rank NCCL sample,
rank 0, in tests/data/kineto), held to an independent reading written here (Python's json with
the times' text, tests/helpers/kineto_oracle.py): the ranks, their kernels and NCCL kernels, the
NCCL wait/transfer split on one host, and what is said where it cannot be made."""

from __future__ import annotations

import json
import shutil
import sqlite3
from collections import defaultdict
from pathlib import Path

import pytest
from typer.testing import CliRunner

from census.api import Options, summarize, summarize_ranks
from census.cli import app
from census.findings.nccl_ranks import split_ranks, unmatched_line
from census.sources.kineto.export import export_kineto
from tests.helpers.exports import rank_folder
from tests.helpers.files import DATA
from tests.helpers.kineto_oracle import KINETO, ns, oracle_events

RANKS = DATA / "kineto_ranks"
PAIR = ("hta_trace_filter__sampled_rank-0.json.gz", "hta_trace_filter__sampled_rank-1.json.gz")
NCCL = KINETO / "hta_nccl_parser_config__nccl_data.json.gz"  # rank 0 of 2
runner = CliRunner()


def _folder(tmp_path: Path, names: tuple[str, str] = PAIR) -> Path:
    """The pair in a folder of its own, under `names`."""
    folder = tmp_path / "ranks"
    folder.mkdir(parents=True)
    for source, name in zip(PAIR, names, strict=True):
        shutil.copy(RANKS / source, folder / name)
    return folder


def _refused(tmp_path: Path, files: dict[str, Path | None]) -> tuple[Path, str]:
    """(the folder holding `files`, name -> trace copied, or None: an empty SQLite database; what
    `census summary` of it said), once it exited 1."""
    folder = tmp_path / "refused"
    folder.mkdir()
    for name, source in files.items():
        if source is None:
            sqlite3.connect(folder / name).close()
        else:
            shutil.copy(source, folder / name)
    result = runner.invoke(app, ["summary", str(folder)])
    assert result.exit_code == 1
    return folder, result.output


def _oracle(name: str) -> dict:
    """The rank's kernels (count, time) and NCCL kernels (name with `nccl`, any case: (start,
    end) ns, in start order)."""
    _, events = oracle_events(RANKS / name)
    kernels = [e for e in events if e["cat"] == "kernel"]
    nccl = sorted((ns(e["ts"]), ns(e["ts"]) + ns(e["dur"])) for e in kernels
                  if "nccl" in e["name"].lower())  # fmt: skip
    return {"kernels": len(kernels), "kernel_ns": sum(ns(e["dur"]) for e in kernels),
            "nccl": nccl}  # fmt: skip


def _split(ranks: list[list[tuple[int, int]]]) -> list[tuple[int, int, int]]:
    """Each rank's (wait, transfer, last arrivals) by the definitions (docs/definitions.md):
    occurrence k of a collective is its k-th kernel on every rank (all SendRecv here)."""
    out = []
    for mine in ranks:
        wait = transfer = last_count = 0
        for k, (start, end) in enumerate(mine):
            last = max(r[k][0] for r in ranks)
            wait += min(end, last) - start
            transfer += end - min(end, last)
            last_count += start == last
        out.append((wait, transfer, last_count))
    return out


def test_a_folder_of_rank_traces_is_a_rank_folder(tmp_path: Path) -> None:
    folder = _folder(tmp_path)
    merged, labels, ranks, _ = summarize_ranks(folder, Options())
    oracle = [_oracle(name) for name in PAIR]
    assert labels == ["rank0", "rank1"]  # distributedInfo.rank, not the file names
    assert [c.source.path for c in ranks] == [str(folder / name) for name in PAIR]
    assert [c.totals.kernel_count for c in ranks] == [o["kernels"] for o in oracle]  # 1154, 1104
    assert merged.totals.kernel_count == 1154 + 1104
    assert [c.totals.kernel_time_ns for c in ranks] == [o["kernel_ns"] for o in oracle]
    assert [c.totals.nccl_kernel_count for c in ranks] == [len(o["nccl"]) for o in oracle]
    assert [c.totals.nccl_kernel_time_ns for c in ranks] == [
        sum(end - start for start, end in o["nccl"]) for o in oracle
    ]
    assert merged.source.tracer == "torch.profiler (Kineto)" and merged.source.nsys_version is None
    assert merged.warnings[0] == (
        "ranks 2-127 of 128 have no trace in the folder: the figures are those of the 2 ranks read"
    )


def test_the_nccl_split_on_one_host_equals_the_definitions(tmp_path: Path) -> None:
    """Named as tensorboard_trace_handler names them (`{host}_{pid}.{ms}.pt.trace.json.gz`):
    both on host nodeA, one clock (ts since the epoch), so the split is made."""
    names = ("nodeA_4037.1682725897235.pt.trace.json.gz",
             "nodeA_4045.1682725897236.pt.trace.json.gz")  # fmt: skip
    merged, _, _, hosts = summarize_ranks(_folder(tmp_path, names), Options())
    assert hosts == ["nodeA", "nodeA"]
    view = split_ranks(merged)
    assert view is not None and view.matched and view.occurrences == 10
    expected = _split([_oracle(name)["nccl"] for name in PAIR])
    got = [(r.wait_ns, r.transfer_ns, r.last_arrivals) for r in view.ranks]
    assert got == expected
    assert [r.wait_ns + r.transfer_ns for r in view.ranks] == [
        sum(end - start for start, end in _oracle(name)["nccl"]) for name in PAIR
    ]


def test_ranks_on_two_hosts_are_not_matched_and_it_is_said(tmp_path: Path) -> None:
    names = ("nodeA_4037.1682725897235.pt.trace.json.gz",
             "nodeB_4045.1682725897236.pt.trace.json.gz")  # fmt: skip
    view = split_ranks(summarize_ranks(_folder(tmp_path, names), Options())[0])
    assert view is not None and not view.matched and view.hosts == ("nodeA", "nodeB")
    assert [r.wait_ns for r in view.ranks] == [None, None]
    assert unmatched_line(view) == (
        "ranks on 2 hosts (nodeA, nodeB): their clocks differ, so NCCL kernels are not matched "
        "across ranks and no wait is split"
    )


def test_traces_that_do_not_say_their_host_are_not_matched_and_it_is_said(tmp_path: Path) -> None:
    result = runner.invoke(app, ["summary", str(_folder(tmp_path)), "--json"])
    assert result.exit_code == 0, result.output
    doc = json.loads(result.stdout)
    said = doc["nccl_ranks"]
    assert said["matched"] is False and said["hosts_unknown"] == ["rank0", "rank1"]
    assert said["waited_for"] is None and said["straggler"] is None
    view = split_ranks(summarize_ranks(_folder(tmp_path / "again"), Options())[0])
    assert view is not None and unmatched_line(view) == (
        "the traces of rank0, rank1 do not say their host (no host_name, and not named by "
        "tensorboard_trace_handler `HOST_PID.TIME.pt.trace.json`): ranks are matched only on one "
        "host's clock, so NCCL kernels are not matched across ranks and no wait is split"
    )


def test_the_clock_origin_is_the_traces_base_time() -> None:
    """HTA's NCCL sample counts its ts from baseTimeNanoseconds (written after its events);
    the sampled pair, older, from the epoch."""
    doc, _ = oracle_events(NCCL)
    for trace, origin in ((NCCL, doc["baseTimeNanoseconds"]), (RANKS / PAIR[0], 0)):
        conn = sqlite3.connect(export_kineto(trace))
        meta = dict(conn.execute("SELECT name, value FROM META_DATA_EXPORT").fetchall())
        conn.close()
        assert meta["KINETO_CLOCK_ORIGIN_NS"] == str(origin)
    assert doc["baseTimeNanoseconds"] == 1711964646000000000


def test_a_folder_mixing_traces_and_exports_is_one_line(tmp_path: Path) -> None:
    folder, said = _refused(tmp_path, {"rank0.json.gz": NCCL, "rank1.sqlite": None})
    assert said == (
        f"Error: {folder}: holds both nsys exports (rank1.sqlite) and PyTorch profiler traces "
        "(rank0.json.gz): a rank folder holds one kind, one file per rank; give a folder of one "
        "kind, or name one file\n"
    )


def test_two_traces_of_one_rank_are_one_line(tmp_path: Path) -> None:
    folder, said = _refused(tmp_path, {"a.json.gz": NCCL, "b.json.gz": NCCL})
    assert said == (
        f"Error: {folder}: rank 0 has 2 traces (a.json.gz, b.json.gz): a rank folder holds one "
        "trace per rank\n"
    )


def test_traces_of_different_world_sizes_are_one_line(tmp_path: Path) -> None:
    # rank 0 of 2, rank 1 of 128
    folder, said = _refused(tmp_path, {"a.json.gz": NCCL, "b.json.gz": RANKS / PAIR[1]})
    assert said == (
        f"Error: {folder}: the traces say different world sizes (2, 128): not the ranks of one "
        "run\n"
    )


def test_gpu_events_launched_before_the_profiler_are_one_line() -> None:
    """HTA's rank 0 of 16: GPU events whose correlation no API call in the trace has count in
    the totals and in no step, said once with their number."""
    name = RANKS / "hta_negative_queue_length_values_check__rank0.json.gz"
    _, events = oracle_events(name)
    calls = {
        e["args"]["correlation"] for e in events if e["cat"] in ("cuda_runtime", "cuda_driver")
    }
    gpu: dict[str, list[int]] = defaultdict(lambda: [0, 0])
    for e in events:
        if e["cat"] in ("kernel", "gpu_memcpy", "gpu_memset"):
            gpu[e["cat"]][0] += 1
            gpu[e["cat"]][1] += e["args"].get("correlation") not in calls
    kernels, copies = gpu["kernel"], [sum(x) for x in zip(gpu["gpu_memcpy"], gpu["gpu_memset"],
                                                          strict=True)]  # fmt: skip
    census = summarize(name)
    assert census.totals.kernel_count == kernels[0]
    assert sum(census.steps.column("kernel_count").tolist()) == kernels[0] - kernels[1]
    said = [w for w in census.warnings if "before the profiler" in w]
    assert said == [
        f"{kernels[1] + copies[1]:,} of {kernels[0] + copies[0]:,} GPU events ({kernels[1]:,} "
        f"kernels, {copies[1]:,} copies and memsets) were launched before the profiler started "
        "(their launching call is not in the trace): they count in the totals and in no step"
    ]
    assert (kernels[1], copies[1]) == (705, 167)


def test_the_source_is_the_users_trace_not_its_export(tmp_path: Path) -> None:
    trace = tmp_path / "mine.json.gz"
    shutil.copy(NCCL, trace)
    result = runner.invoke(app, ["summary", str(trace), "--json"])
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["source"]["path"] == str(trace)
    assert summarize(trace).source.path == str(trace)
    assert summarize(trace, use_cache=False).source.path == str(trace)


def test_summary_and_dashboard_take_a_folder_of_traces(tmp_path: Path) -> None:
    folder = _folder(tmp_path)
    said = runner.invoke(app, ["summary", str(folder)])
    assert said.exit_code == 0, said.output
    assert "warning: ranks 2-127 of 128 have no trace in the folder" in said.output
    page = tmp_path / "d.html"
    drawn = runner.invoke(app, ["dashboard", str(folder), "--html", str(page)])
    assert drawn.exit_code == 0, drawn.output
    html = page.read_text()
    assert "rank1" in html and "do not say their host" in html


def test_traces_that_name_no_rank_are_ranks_only_with_the_ranks_option(tmp_path: Path) -> None:
    """The H200 demo traces have no distributedInfo: refused as a rank folder unless --ranks,
    which takes them by the rank number in their names, as exports."""
    folder, said = _refused(tmp_path, {
        "a_rank10.json.gz": KINETO / "h200_eager_3steps.kineto.json.gz",
        "b_rank2.json.gz": KINETO / "h200_compiled_3steps.kineto.json.gz"})  # fmt: skip
    assert said == (
        f"Error: {folder}: 2 PyTorch profiler traces, and a_rank10.json.gz, b_rank2.json.gz name "
        "no rank (no distributedInfo.rank): pass --ranks to read them as the ranks of one run, "
        "or give one trace\n"
    )
    _, labels, ranks, _ = summarize_ranks(folder, Options(ranks=True))
    assert labels == ["b_rank2", "a_rank10"]
    counts = [sum(e["cat"] == "kernel" for e in oracle_events(KINETO / name)[1])
              for name in ("h200_compiled_3steps.kineto.json.gz", "h200_eager_3steps.kineto.json.gz")]  # fmt: skip
    assert [c.totals.kernel_count for c in ranks] == counts


def test_a_diff_of_a_folder_of_traces_with_itself_is_zero(tmp_path: Path) -> None:
    a, b = _folder(tmp_path / "a"), _folder(tmp_path / "b")
    result = runner.invoke(app, ["diff", str(a), str(b), "--format", "json"])
    assert result.exit_code == 0, result.output
    metrics = json.loads(result.stdout)["metrics"]
    assert all(m["delta"] == 0 for m in metrics.values() if m.get("delta") is not None)
    merged = summarize_ranks(a, Options())[0]
    assert metrics["kernel_count"]["a"] == merged.per_step()["kernel_count"]


@pytest.mark.fixtures
def test_a_capture_folder_whose_run_json_names_its_ranks_keeps_them_beside_a_trace(
    tmp_path: Path,
) -> None:
    """A census capture's run.json says which files are its ranks: a trace beside them (say,
    one the training script wrote there) is not a rank, and the folder is not refused."""
    folder = rank_folder(tmp_path, "h200_eager_3steps.sqlite", "h200_compiled_3steps.sqlite")
    shutil.copy(NCCL, folder / "prof.json.gz")
    _, labels, ranks, _ = summarize_ranks(folder, Options())
    assert labels == ["rank0", "rank1"]
    assert [Path(c.source.path).name for c in ranks] == ["rank0.sqlite", "rank1.sqlite"]


def test_a_rank_written_after_the_events_is_read(tmp_path: Path) -> None:
    """HTA's execution-trace sample writes `"distributedInfo": {"rank": 0}` after its events:
    the trace is read whole (the stream once took that object for the events' end and refused
    the file) and its rank comes from its export; HTA's trace_compare base says rank 1 first."""
    after = RANKS / "hta_execution_trace__benchmark_simple_add_trace.json.gz"
    doc, events = oracle_events(after)
    assert list(doc)[-2:] == ["distributedInfo", "traceName"]
    assert summarize(after).totals.kernel_count == sum(e["cat"] == "kernel" for e in events) == 4
    folder = tmp_path / "ranks"
    folder.mkdir()
    shutil.copy(after, folder / "x.json.gz")
    shutil.copy(RANKS / "hta_trace_compare__base.json.gz", folder / "y.json.gz")
    _, labels, ranks, _ = summarize_ranks(folder, Options())
    assert labels == ["rank0", "rank1"]
    assert [Path(c.source.path).name for c in ranks] == ["x.json.gz", "y.json.gz"]

"""The distributed view through the whole CLI (#46): each rank's NCCL time split into wait and
transfer in `census summary` (JSON, terminal, markdown) of a report holding several ranks and of
a rank folder, the straggler named, unmatched collectives and several hosts said, and the diff's
sentence; against the brute force of tests/helpers/nccl.py on the real 2-GPU fixtures, and exact
on built exports of 8 and 16 ranks."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

from census.api import summarize
from census.cli import app
from census.findings.nccl_ranks import split_ranks
from tests.helpers.files import fixture_file
from tests.helpers.nccl import brute_force, read_nccl_kernels
from tests.nsysdb import Export

runner = CliRunner()
FIXTURES = ("nsysai_mfu_2gpu_before.sqlite", "nsysai_mfu_2gpu_after.sqlite")
ALL_REDUCE = "ncclDevKernel_AllReduce_Sum_f32_RING_LL(ncclDevKernelArgsStorage<4096>)"
ALL_GATHER = "ncclDevKernel_AllGather_RING_LL(ncclDevKernelArgsStorage<4096>)"
STEP_NS, DELAY_NS, STEPS = 1_000_000, 5_000, 4


def run(*args: str) -> str:
    result = runner.invoke(app, list(args))
    assert result.exit_code == 0, result.output
    return result.stdout


def summary_json(path: Path) -> dict:
    return json.loads(run("summary", str(path), "--json"))


# -- the real 2-GPU fixtures ----------------------------------------------------------------
@pytest.mark.fixtures
@pytest.mark.parametrize("name", FIXTURES)
def test_the_real_fixtures_split_as_the_brute_force(name: str) -> None:
    path = fixture_file(name)
    want = brute_force(read_nccl_kernels(path))
    doc = summary_json(path)
    assert [r["rank"] for r in doc["ranks"]] == ["rank 0", "rank 1"]
    for r, rank in enumerate(doc["ranks"]):
        nccl = rank["summary"]["nccl"]
        assert nccl["wait_ns"] == sum(want["wait"][r])
        assert nccl["transfer_ns"] == sum(want["transfer"][r])
        assert nccl["last_arrivals"] == want["last_count"][r]
        assert nccl["caused_wait_ns"] == want["caused"][r]
        assert nccl["wait_ns"] + nccl["transfer_ns"] == nccl["time_ns"]
        assert nccl["unmatched_ns"] == 0
        assert nccl["exposed_ns"] == nccl["time_ns"]  # no compute overlaps NCCL in these slices
    split = doc["nccl_ranks"]
    rank, count, caused = want["straggler"]
    assert split["straggler"] == {"rank": f"rank {rank}", "last_arrivals": count,
                                  "caused_wait_ns": caused}  # fmt: skip
    assert split["occurrences"] == want["occurrences"] and split["unmatched"] == []
    assert [list(v.values()) for v in split["waited_for"].values()] == want["waited_for"]
    assert sum(r["summary"]["totals"]["kernel_count"] for r in doc["ranks"]) == doc["totals"][
        "kernel_count"]  # fmt: skip


@pytest.mark.fixtures
def test_the_real_report_names_the_straggler_and_who_made_the_others_wait() -> None:
    after = str(fixture_file(FIXTURES[1]))
    shown = run("summary", after)
    assert "straggler: rank 1, last to arrive in 16 of 31 matched collectives, making the" in shown
    one = " ".join(run("summary", after, "--format", "markdown").split())
    assert ("straggler: rank 1, last to arrive in 16 of 31 matched collectives, making the others "
            "wait 4.27 ms; but rank 0 made the others wait longer: 18.22 ms in its 15 last "
            "arrivals") in one  # fmt: skip
    assert "| rank 1 | 1 | 1,794 | 23.75 ms | 18.22 ms | 5.53 ms | 23.75 ms | 16 |" in one


@pytest.mark.fixtures
def test_the_real_pair_says_who_waited_for_whom() -> None:
    before, after = (str(fixture_file(n)) for n in FIXTURES)
    lines = run("diff", before, after, "--format", "markdown").splitlines()
    assert ("- rank 1's NCCL time +15.52 ms is waiting for rank 0 (wait +15.74 ms, transfer "
            "-217.1 µs)") in lines  # fmt: skip
    assert ("- rank 0's NCCL time -7.18 ms is less waiting for rank 1 (wait -6.63 ms, transfer "
            "-551.9 µs)") in lines  # fmt: skip


# -- built reports of 8 and 16 ranks ----------------------------------------------------------
def jitter_ns(rank: int, k: int) -> int:
    return (rank * 737 + k * 311) % DELAY_NS


def late_ns(rank: int, k: int, straggler: int) -> int:
    """How late rank `rank` starts step k's AllReduce."""
    return DELAY_NS if rank == straggler else jitter_ns(rank, k)


def build_report(path: Path, ranks: int, straggler: int, short: int | None = None) -> Path:
    """One report of `ranks` processes (pid r + 1 on GPU r), STEPS steps each, a phase
    `backward` holding the AllReduce: rank r's starts `late_ns` after the step's base and ends
    DELAY_NS + 1000 + r after it; a compute kernel overlaps its last 200 ns less r. With
    `short`: every rank launches an AllGather in each step, rank `short` one fewer."""
    e = Export()
    launches = []  # (kernel start, name, api start, end, pid, device)
    for r in range(ranks):
        pid = r + 1
        for k in range(STEPS):
            base = (k + 1) * STEP_NS
            e.range(f"step {k}", base - 500, base + STEP_NS // 2, pid)
            e.range("backward", base - 400, base + STEP_NS // 2 - 100, pid)
            end = base + DELAY_NS + 1000 + r
            launches.append((base + late_ns(r, k, straggler), ALL_REDUCE, base - 300, end, pid, r))
            launches.append((end - 200 + r, "gemm_kernel", base - 250, end + 5000, pid, r))
            if short is not None and not (r == short and k == 0):
                start = base + 20_000 + 10 * r
                launches.append((start, ALL_GATHER, base - 200, start + 3000, pid, r))
    for start, name, api, end, pid, dev in sorted(launches):
        e.launch(name, api, start, end, pid=pid, device=dev)
    return e.write(path)


@pytest.mark.parametrize(("ranks", "straggler"), [(8, 5), (16, 0), (16, 15)])
def test_an_injected_straggler_is_named_and_every_wait_is_exact(
    tmp_path: Path, ranks: int, straggler: int
) -> None:
    path = build_report(tmp_path / "report.sqlite", ranks, straggler)
    doc = summary_json(path)
    others = [r for r in range(ranks) if r != straggler]
    caused = sum(DELAY_NS - jitter_ns(r, k) for r in others for k in range(STEPS))
    assert doc["nccl_ranks"]["straggler"] == {"rank": f"rank {straggler}",
                                              "last_arrivals": STEPS, "caused_wait_ns": caused}  # fmt: skip
    assert doc["nccl_ranks"]["matched"] and doc["nccl_ranks"]["unmatched"] == []
    for r, rank in enumerate(doc["ranks"]):
        nccl = rank["summary"]["nccl"]
        assert (rank["pid"], rank["gpus"], rank["summary"]["step_count"]) == (r + 1, [r], STEPS)
        waits = [DELAY_NS - late_ns(r, k, straggler) for k in range(STEPS)]
        times = [DELAY_NS + 1000 + r - late_ns(r, k, straggler) for k in range(STEPS)]
        assert [s["wait_ns"] for s in nccl["steps"]] == waits
        assert [s["transfer_ns"] for s in nccl["steps"]] == [1000 + r] * STEPS
        assert [s["nccl_time_ns"] for s in nccl["steps"]] == times
        assert [s["last_arrivals"] for s in nccl["steps"]] == [int(r == straggler)] * STEPS
        assert [s["exposed_ns"] for s in nccl["steps"]] == [t - (200 - r) for t in times]
        for step in nccl["steps"]:  # the AllReduce and the compute kernel: launched in backward
            backward = {p["name"]: p for p in step["phases"]}["backward"]
            assert {k: backward[k] for k in backward if k != "name"} == {
                k: step[k] for k in backward if k != "name"}  # fmt: skip
        assert (nccl["wait_ns"], nccl["transfer_ns"]) == (sum(waits), (1000 + r) * STEPS)
        assert nccl["per_step"]["wait_ns"] == sum(waits) / STEPS
        assert nccl["caused_wait_ns"] == (caused if r == straggler else 0)


@pytest.mark.parametrize("ranks", [8, 16])
def test_wait_and_transfer_add_up_to_the_census_nccl_time_on_every_step(
    tmp_path: Path, ranks: int
) -> None:
    census = summarize(build_report(tmp_path / "r.sqlite", ranks, 3, short=6), use_cache=False)
    split = split_ranks(census)
    assert split is not None
    nccl = census.steps.column("nccl_kernel_time_ns")
    assert (split.steps["nccl_time_ns"] == nccl).all()
    unmatched = split.steps["nccl_time_ns"] - split.steps["wait_ns"] - split.steps["transfer_ns"]
    gather = [3000 if not (i == 0 and r == 6) else 0
              for r in range(ranks) for i in range(STEPS)]  # fmt: skip
    rows = np.concatenate([row.step_rows for row in split.ranks])
    assert unmatched[rows].tolist() == gather  # the AllGathers, not split
    for row in split.ranks:
        assert row.wait_ns + row.transfer_ns + row.unmatched_ns == row.nccl_time_ns
        assert row.nccl_time_ns == sum(nccl[row.step_rows].tolist())


def test_unequal_collective_counts_are_said(tmp_path: Path) -> None:
    path = build_report(tmp_path / "r.sqlite", 8, 3, short=6)
    doc = summary_json(path)
    counts = {f"rank {r}": STEPS - (r == 6) for r in range(8)}
    assert doc["nccl_ranks"]["unmatched"] == [{"collective": "AllGather", "counts": counts}]
    assert doc["nccl_ranks"]["straggler"]["rank"] == "rank 3"
    text = " ".join(run("summary", str(path), "--format", "markdown").split())
    assert ("not matched (the ranks launched different numbers, so their time is not split into "
            "wait and transfer): AllGather (rank 0 4, rank 1 4, rank 2 4, rank 3 4, rank 4 4, "
            "rank 5 4, rank 6 3, rank 7 4)") in text  # fmt: skip


# -- rank folders ---------------------------------------------------------------------------
# each rank's nsys session starts its trace clock elsewhere: rank r's zero lies r x 1.3 s after
# rank 0's on the wall clock, and each records that start (utcEpochNs, systemClockNs)
UTC0_NS, SESSION_SHIFT_NS = 1_780_000_000_000_000_000, 1_300_000_017


def rank_folder(tmp_path: Path, hosts: list[str], straggler: int = 1,
                sessions: bool = True) -> Path:  # fmt: skip
    """One export per rank (the 8-rank report's processes, each alone, each its own nsys
    session: its times moved by its session's start), with a run.json that maps ranks to exports
    and places them on `hosts`. `sessions` False: no export records its session's start."""
    folder = tmp_path / "cap"
    folder.mkdir()
    for r in range(len(hosts)):
        d = r * SESSION_SHIFT_NS  # rank r's clock reads d less than rank 0's at one instant
        e = Export(session=(UTC0_NS + d + 7 * r, 7 * r) if sessions else None)
        for k in range(STEPS):
            base = (k + 1) * STEP_NS - d
            e.range(f"step {k}", base - 500, base + STEP_NS // 2)
            end = base + DELAY_NS + 1000 + r
            e.launch(ALL_REDUCE, base - 300, base + late_ns(r, k, straggler), end, device=r)
        e.write(folder / f"rank{r}.sqlite")
    record = {"ranks": {str(r): f"rank{r}.sqlite" for r in range(len(hosts))},
              "rank_places": {str(r): {"host": h} for r, h in enumerate(hosts)}}  # fmt: skip
    (folder / "run.json").write_text(json.dumps(record), "utf-8")
    return folder


def test_a_rank_folder_on_one_host_is_split(tmp_path: Path) -> None:
    doc = summary_json(rank_folder(tmp_path, ["node-a"] * 4))
    caused = sum(DELAY_NS - jitter_ns(r, k) for r in (0, 2, 3) for k in range(STEPS))
    assert doc["nccl_ranks"]["straggler"] == {"rank": "rank1", "last_arrivals": STEPS,
                                              "caused_wait_ns": caused}  # fmt: skip
    for r, rank in enumerate(doc["ranks"]):
        nccl = rank["summary"]["nccl"]
        assert [s["name"] for s in nccl["steps"]] == [f"step {k}" for k in range(STEPS)]
        assert [s["wait_ns"] for s in nccl["steps"]] == [
            DELAY_NS - late_ns(r, k, 1) for k in range(STEPS)]  # fmt: skip
        assert nccl["collectives"][0]["collective"] == "AllReduce"  # its own summary's, kept


def test_a_rank_folder_without_session_clocks_is_not_matched(tmp_path: Path) -> None:
    """Exports of separate sessions that do not record their clock's start (nsys before
    systemClockNs) cannot be set on one clock: nothing matched, and said."""
    folder = rank_folder(tmp_path, ["node-a"] * 4, sessions=False)
    doc = summary_json(folder)
    assert doc["nccl_ranks"]["matched"] is False
    assert doc["nccl_ranks"]["one_clock"] is False
    assert doc["nccl_ranks"]["hosts"] == [] and doc["nccl_ranks"]["straggler"] is None
    for rank in doc["ranks"]:
        nccl = rank["summary"]["nccl"]
        assert (nccl["wait_ns"], nccl["transfer_ns"], nccl["last_arrivals"]) == (None,) * 3
    text = " ".join(run("summary", str(folder)).split())
    assert "their times cannot be set on one clock, so NCCL kernels are not matched" in text


def test_a_rank_folder_on_two_hosts_is_not_matched(tmp_path: Path) -> None:
    folder = rank_folder(tmp_path, ["node-a", "node-a", "node-b", "node-b"])
    doc = summary_json(folder)
    assert doc["nccl_ranks"]["matched"] is False
    assert doc["nccl_ranks"]["hosts"] == ["node-a", "node-b"]
    assert doc["nccl_ranks"]["straggler"] is None
    for rank in doc["ranks"]:
        nccl = rank["summary"]["nccl"]
        assert (nccl["wait_ns"], nccl["transfer_ns"], nccl["last_arrivals"]) == (None,) * 3
        assert nccl["unmatched_ns"] == nccl["time_ns"] > 0
    text = " ".join(run("summary", str(folder)).split())
    assert ("ranks on 2 hosts (node-a, node-b): their clocks differ, so NCCL kernels are not "
            "matched across ranks and no wait is split") in text  # fmt: skip


def test_one_process_gains_nothing_and_the_record_is_cached(tmp_path: Path) -> None:
    e = Export()
    e.range("step 0", 0, 100_000)
    e.launch(ALL_REDUCE, 10, 100, 5000)
    path = e.write(tmp_path / "one.sqlite")
    doc = summary_json(path)
    assert "ranks" not in doc and "nccl_ranks" not in doc
    assert "Ranks" not in run("summary", str(path))
    report = build_report(tmp_path / "r.sqlite", 8, 2)
    first, again = summarize(report), summarize(report)  # the second from the cache
    assert again.nccl == first.nccl and again.nccl is not first.nccl
    assert split_ranks(again).straggler == split_ranks(first).straggler


def test_the_dashboard_draws_each_rank_s_compute_transfer_and_wait(tmp_path: Path) -> None:
    path = build_report(tmp_path / "r.sqlite", 8, 5)
    page = tmp_path / "page.html"
    run("dashboard", str(path), "--html", str(page))
    text = page.read_text("utf-8")
    assert "Ranks: compute, NCCL transfer and NCCL wait (per step, ms)" in text
    assert "<h2>Ranks: NCCL time = wait + transfer (per step)</h2>" in text
    assert "straggler: rank 5, last to arrive in 4 of 4 matched collectives" in text

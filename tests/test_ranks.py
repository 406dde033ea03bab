"""Multi-rank capture folders: per-rank census, merged aggregate, spread; on real exports."""

from __future__ import annotations

import json
from pathlib import Path

from typer.testing import CliRunner

from census.api import Options, summarize, summarize_ranks
from census.census import rank_spread
from census.cli import app
from census.compare.diff import diff_census
from census.sources.ranks import rank_files
from tests.helpers.exports import rank_folder

runner = CliRunner()


def test_rank_files_order_by_number(tmp_path: Path) -> None:
    for n in (10, 2, 0):
        (tmp_path / f"rank{n}.sqlite").write_bytes(b"")
    assert [label for label, _ in rank_files(tmp_path, declared=True)] == [
        "rank0",
        "rank2",
        "rank10",
    ]


def test_merge_equals_the_sum_of_ranks(tmp_path: Path) -> None:
    folder = rank_folder(tmp_path, "h200_eager_3steps.sqlite", "h200_compiled_3steps.sqlite")
    merged, labels, ranks = summarize_ranks(folder, Options())
    assert labels == ["rank0", "rank1"]
    assert merged.totals.kernel_count == 861 + 732
    assert merged.totals.d2d_bytes == 352321536 + 50331648
    assert merged.step_count == 6 and merged.steps[0].name == "rank0: step 0"
    assert merged.per_step()["kernel_count"] == (861 + 732) / 6
    assert {k.name: k.count for k in merged.kernels}[
        "nvjet_sm90_tst_256x128_64x4_1x2_h_bz_coopA_NNT"
    ] == 96
    assert summarize(folder) == merged
    spread = rank_spread(labels, ranks)
    assert spread["step_time_ns"].max_rank == "rank0"
    assert spread["non_nccl_union_ns"].min == 13561734 / 3
    assert spread["non_nccl_union_ns"].max == 16929824 / 3


def test_nccl_ranks_and_diff_of_folders(tmp_path: Path) -> None:
    a = rank_folder(
        tmp_path / "a", "nsysai_mfu_2gpu_before.sqlite", "nsysai_mfu_2gpu_before.sqlite"
    )
    b = rank_folder(tmp_path / "b", "nsysai_mfu_2gpu_after.sqlite", "nsysai_mfu_2gpu_after.sqlite")
    ma, mb = summarize(a), summarize(b)
    assert [(c.collective, c.count) for c in ma.collectives] == [("SendRecv", 132)]
    d = diff_census(ma, mb, ("before", "after"))
    assert d.metrics["nccl_kernel_count"].delta == 2 * (62 - 66)
    r = runner.invoke(app, ["summary", str(a), "--json"])
    assert r.exit_code == 0, r.output
    doc = json.loads(r.stdout)
    assert [x["rank"] for x in doc["ranks"]] == ["rank0", "rank1"]
    assert doc["spread"]["nccl_kernel_time_ns"]["max"] == 25401752
    assert doc["nccl"]["collectives"][0]["collective"] == "SendRecv"
    r = runner.invoke(app, ["summary", str(a)])
    assert r.exit_code == 0 and "Spread over ranks" in r.stdout


def test_ranks_parse_in_a_process_pool(tmp_path: Path) -> None:
    folder = rank_folder(tmp_path, "h200_eager_3steps.sqlite", "nsysai_mock.sqlite")
    pooled = summarize_ranks(folder, Options(), workers=2)[2]
    serial = summarize_ranks(folder, Options(), workers=1)[2]
    assert pooled == serial

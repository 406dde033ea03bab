"""Multi-rank capture folders: per-rank census, merged aggregate, spread; on real exports."""

from __future__ import annotations

import json
import sqlite3
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from census.api import Options, summarize, summarize_ranks
from census.cli import app
from census.compare.diff import diff_census
from census.findings.spread import rank_spread
from census.sources.ranks import rank_files
from tests.helpers.exports import rank_folder
from tests.helpers.files import fixture_file
from tests.helpers.reaper import reaped

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
    merged, labels, ranks, hosts = summarize_ranks(folder, Options())
    assert labels == ["rank0", "rank1"]
    assert hosts == ["vm", "vm"]  # TARGET_INFO_SYSTEM_ENV's Hostname of each export
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


# A rank's links are resolved once: a rank is a file, never a rank folder again


def loop_folder(tmp_path: Path, *targets: str) -> Path:
    """A rank folder: a real rank0 export and rank1, rank2, ... links to `targets`."""
    folder = tmp_path / "dir"
    folder.mkdir()
    (folder / "rank0.sqlite").write_bytes(fixture_file("nsysai_mock.sqlite").read_bytes())
    for i, target in enumerate(targets, 1):
        (folder / f"rank{i}.sqlite").symlink_to(target)
    return folder


@pytest.mark.skipif(sys.platform != "linux", reason="tests/helpers/reaper.py is Linux's")
def test_links_that_loop_end_at_once_in_one_line_and_leave_no_process(tmp_path: Path) -> None:
    """The issue's case: each link was read as a rank folder, a pool started at every level
    (122 processes in 1.2 s, never finishing)."""
    folder = loop_folder(tmp_path, ".", ".")
    run = reaped([sys.executable, "-m", "census", "summary", str(folder), "--ranks"], timeout=30)
    assert run.code == 1 and run.left == [], run.stderr[-2000:]
    assert run.lines == [f"Error: {folder}/rank1.sqlite: a symbolic link to {folder}, the rank "
                         "folder itself: a loop; a rank folder holds one export per rank "
                         "(.sqlite files)"]  # fmt: skip


@pytest.mark.parametrize(
    ("target", "says"),
    [
        ("..", "a symbolic link to {tmp}, a folder above the rank folder: a loop; a rank folder "
               "holds one export per rank (.sqlite files)"),
        ("{out}", "a symbolic link to a folder out of the rank folder's tree ({out}); a rank "
                  "folder holds one export per rank (.sqlite files)"),
        ("sub", "a folder, not an export; a rank folder holds one export per rank (.sqlite files)"),
        ("rank1.sqlite", "Too many levels of symbolic links: not an export census can read"),
        ("gone.sqlite", "No such file or directory: not an export census can read"),
    ],
)  # fmt: skip
def test_a_rank_that_is_not_a_file_is_refused_in_one_line(tmp_path: Path, target: str,
                                                          says: str) -> None:  # fmt: skip
    out = tmp_path / "elsewhere"
    (out / "x").mkdir(parents=True)
    (out / "x" / "rank9.sqlite").write_bytes(b"")  # what reading the folder out there would find
    folder = loop_folder(tmp_path, target.format(out=out))
    (folder / "sub").mkdir()
    r = runner.invoke(app, ["summary", str(folder), "--ranks", "--json"])
    assert r.exit_code == 1
    assert r.stderr == f"Error: {folder}/rank1.sqlite: {says.format(tmp=tmp_path, out=out)}\n"


def test_a_rank_linked_to_a_file_anywhere_is_read(tmp_path: Path) -> None:
    folder = loop_folder(tmp_path, str(fixture_file("nsysai_mock.sqlite")))
    merged, labels, _, _ = summarize_ranks(folder, Options(ranks=True))
    assert labels == ["rank0", "rank1"] and merged.totals.kernel_count > 0


def test_a_census_capture_whose_run_json_names_a_loop_is_refused(tmp_path: Path) -> None:
    folder = loop_folder(tmp_path, ".")
    (folder / "run.json").write_text(json.dumps({"ranks": {"0": "rank0.sqlite",
                                                           "1": "rank1.sqlite"}}))  # fmt: skip
    r = runner.invoke(app, ["summary", str(folder), "--json"])
    assert r.exit_code == 1 and "rank1.sqlite: a symbolic link to" in r.stderr
    assert r.stderr.count("\n") == 1


def test_a_rank_is_never_read_as_a_rank_folder(tmp_path: Path) -> None:
    """Whatever a rank's path has become since its links were checked, reading it starts no
    rank pool of its own: a folder of exports is one the user must name a file of."""
    from census.api import _summarize_rank
    from census.errors import InputError

    folder = rank_folder(tmp_path, "nsysai_mock.sqlite", "nsysai_mock.sqlite")
    with pytest.raises(InputError, match="holds several exports"):
        _summarize_rank(folder, Options(), None)


def test_each_export_is_opened_once_for_its_place(tmp_path: Path, monkeypatch) -> None:
    """A rank's host and clock origin come from one opening of its export (hundreds of exports
    on a shared file system: no second and third pass over them)."""
    import census.sources.readonly as readonly
    from census.sources.ranks import rank_files, rank_places

    folder = rank_folder(tmp_path, "h200_eager_3steps.sqlite", "nsysai_mfu_2gpu_after.sqlite")
    exports = [p for _, p in rank_files(folder, True)]
    opened: list[Path] = []
    real = readonly.open_readonly
    monkeypatch.setattr(readonly, "open_readonly",
                        lambda p, *a, **k: opened.append(p) or real(p, *a, **k))  # fmt: skip
    hosts, clocks = rank_places(folder, exports)
    assert sorted(opened) == sorted(exports)
    assert hosts == ["vm", "modal"]  # each export's TARGET_INFO_SYSTEM_ENV Hostname
    start = "SELECT utcEpochNs - systemClockNs FROM TARGET_INFO_SESSION_START_TIME"
    with sqlite3.connect(f"file:{exports[1]}?mode=ro", uri=True) as conn:
        origin = conn.execute(start).fetchone()[0]
    assert clocks == [None, origin]  # nsys 2025.3.2 records no systemClockNs; 2025.5 does

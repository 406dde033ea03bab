"""Rank folders on Dask (#25): a LocalCluster of two worker processes reads real exports and
gives the process pool's census exactly, fills the cache a later summary reads, and a missing
Dask or an unreachable scheduler is one line and exit 2."""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from census.api import Options, summarize_ranks
from census.cli import app
from census.load import scheduler as rank_scheduler
from tests.helpers.exports import rank_folder
from tests.helpers.files import DATA

pytest.importorskip("distributed", reason="the Dask tests need pip install 'torch-census[dask]'")
pytestmark = pytest.mark.fixtures

runner = CliRunner()
RANKS = ("h200_eager_3steps.sqlite", "h200_compiled_3steps.sqlite",
         "nsysai_mfu_2gpu_before.sqlite", "nsysai_mock.sqlite")  # fmt: skip


@pytest.fixture(scope="module")
def workers_cache(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("workers-cache")


@pytest.fixture(scope="module")
def scheduler(workers_cache: Path):
    """The address of a cluster of two worker processes, one thread each, with a cache folder
    of their own (this process's is a new one per test)."""
    from distributed import LocalCluster

    with LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None,
                      env={"CENSUS_CACHE_DIR": str(workers_cache)}) as cluster:  # fmt: skip
        yield cluster.scheduler_address


def test_a_cluster_gives_the_pools_census(tmp_path: Path, scheduler: str) -> None:
    folder = rank_folder(tmp_path, *RANKS)
    said: list[str] = []
    on_dask = summarize_ranks(folder, Options(scheduler=scheduler), lambda s, *_: said.append(s))
    pooled = summarize_ranks(folder, Options(), workers=2)
    assert on_dask == pooled  # the merged Census, the labels, each rank's Census, the hosts
    named = [str(folder / f"rank{i}.sqlite") for i in range(4)]
    assert [c.source.path for c in on_dask[2]] == named
    assert said[0] == f"4 ranks on Dask scheduler {scheduler}"
    assert said[-1] == f"4 ranks on Dask scheduler {scheduler}: 4 done"
    args = ["summary", str(folder), "--json"]
    on_cli = runner.invoke(app, [*args, "--scheduler", scheduler])
    assert on_cli.exit_code == 0, on_cli.output
    assert on_cli.stdout == runner.invoke(app, args).stdout
    assert [r["rank"] for r in json.loads(on_cli.stdout)["ranks"]] == [f"rank{i}" for i in range(4)]


def test_a_folder_of_traces_on_a_cluster_gives_the_pools_census(tmp_path: Path,
                                                                scheduler: str) -> None:  # fmt: skip
    """HTA's ranks 0 and 1 (#55): each worker exports its rank's trace into its own cache."""
    folder = tmp_path / "traces"
    folder.mkdir()
    names = ("hta_trace_filter__sampled_rank-0.json.gz", "hta_trace_filter__sampled_rank-1.json.gz")
    for name in names:
        shutil.copy(DATA / "kineto_ranks" / name, folder / name)
    on_dask = summarize_ranks(folder, Options(scheduler=scheduler))
    assert on_dask == summarize_ranks(folder, Options(), workers=2)
    assert on_dask[1] == ["rank0", "rank1"]
    assert [c.source.path for c in on_dask[2]] == [str(folder / name) for name in names]
    assert [c.totals.kernel_count for c in on_dask[2]] == [1154, 1104]


def test_a_diff_of_rank_folders_takes_the_scheduler_from_the_environment(
    tmp_path: Path, scheduler: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    a = rank_folder(tmp_path / "a", *RANKS[:2])
    b = rank_folder(tmp_path / "b", *reversed(RANKS[:2]))
    args = ["diff", str(a), str(b), "--format", "json"]
    monkeypatch.delenv(rank_scheduler.SCHEDULER_ENV, raising=False)
    pooled = runner.invoke(app, args)
    monkeypatch.setenv(rank_scheduler.SCHEDULER_ENV, scheduler)
    monkeypatch.setattr(rank_scheduler, "map_processes", _no_pool)
    on_dask = runner.invoke(app, args)
    assert on_dask.exit_code == 0, on_dask.output
    assert on_dask.stdout == pooled.stdout
    assert json.loads(on_dask.stdout)["metrics"]["kernel_count"]["delta"] == 0


def test_workers_fill_the_cache_a_later_summary_reads(
    tmp_path: Path, scheduler: str, workers_cache: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Two workers write the caches of different exports at once, each atomically: one entry
    per export, no `.part` left, and the pool then reads them without computing."""
    folder = rank_folder(tmp_path, *RANKS)
    on_dask = summarize_ranks(folder, Options(scheduler=scheduler))
    entries = sorted((workers_cache / "census").iterdir())
    assert len(entries) >= len(RANKS) and not [e for e in entries if e.suffix != ".json"]
    monkeypatch.setenv("CENSUS_CACHE_DIR", str(workers_cache))
    monkeypatch.setattr("census.load.finish.compute_census", _no_compute)
    assert summarize_ranks(folder, Options(), workers=1) == on_dask


def test_an_unreachable_scheduler_is_one_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    folder = rank_folder(tmp_path, *RANKS[:2])
    monkeypatch.setattr(rank_scheduler, "CONNECT_S", 1)
    r = runner.invoke(app, ["summary", str(folder), "--scheduler", "tcp://127.0.0.1:1"])
    assert r.exit_code == 2
    assert r.stderr == (
        "Error: cannot reach the Dask scheduler at tcp://127.0.0.1:1 (Timed out trying to connect "
        "to tcp://127.0.0.1:1 after 1 s): start one (`dask scheduler`) or fix --scheduler / "
        "$DASK_SCHEDULER_ADDRESS\n"
    )


def test_without_dask_the_error_names_the_extra(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    folder = rank_folder(tmp_path, *RANKS[:2])
    monkeypatch.setitem(sys.modules, "distributed", None)  # `import distributed` fails
    monkeypatch.setenv(rank_scheduler.SCHEDULER_ENV, "tcp://scheduler:8786")
    r = runner.invoke(app, ["diff", str(folder), str(folder)])
    assert r.exit_code == 2
    assert r.stderr == (
        "Error: --scheduler tcp://scheduler:8786: Dask is not installed; pip install "
        "'torch-census[dask]' (or leave out --scheduler and $DASK_SCHEDULER_ADDRESS to read the ranks "
        "in a process pool)\n"
    )


def test_the_scheduler_is_the_option_then_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(rank_scheduler.SCHEDULER_ENV, "tcp://env:8786")
    assert rank_scheduler.scheduler_address(None) == "tcp://env:8786"
    assert rank_scheduler.scheduler_address("tcp://given:8786") == "tcp://given:8786"
    # --scheduler '': the pool, whatever the env
    assert rank_scheduler.scheduler_address("") is None
    monkeypatch.delenv(rank_scheduler.SCHEDULER_ENV)
    assert rank_scheduler.scheduler_address(None) is None


def _no_pool(*args, **kwargs):
    raise AssertionError("the ranks were read in the process pool, not on Dask")


def _no_compute(*args, **kwargs):
    raise AssertionError("computed, not read from the workers' cache")


@pytest.mark.parametrize("address", ["notanaddress", "tcp://localhost"])
def test_a_malformed_address_is_one_line_at_once(tmp_path: Path, address: str) -> None:
    """No port (#58): one line and exit 2 before connecting; it printed that line, then waited
    20 s for the failed client's destructor and printed its traceback (a process of its own:
    the destructor runs at its exit)."""
    import subprocess
    import time

    folder = rank_folder(tmp_path, *RANKS[:2])
    began = time.monotonic()
    done = subprocess.run([sys.executable, "-m", "census", "summary", str(folder), "--scheduler",
                           address], capture_output=True, text=True, timeout=120)  # fmt: skip
    assert time.monotonic() - began < 15  # 24 s before the change
    assert done.returncode == 2
    host = address.removeprefix("tcp://")
    assert done.stderr == (
        f"Error: --scheduler {address}: not a Dask scheduler's address (missing port number in "
        f"address '{host}'); give tcp://HOST:PORT (a scheduler listens on port 8786 by default)\n"
    )

"""`census ab` on jobs of several nodes, simulated on one machine with real processes
(tests/helpers/cluster.py): each node in Linux namespaces of its own, named `nodeK`, the nodes past
the first with an empty /tmp of their own (a node's local disk). Launched as torchrun across
nodes, srun and mpirun launch them (each rank told its place only by that launcher's variables).

The experiment folder lies outside /tmp (every node sees it), as docs/cluster.md asks; hidden
from the second node (--hide), the arm ends in one line naming that node's ranks. The steps run
on the virtual clock of tests/helpers/sleep_train.py, so every figure is exact.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.helpers.cli import census_process
from tests.helpers.disks import skip_if_hidden
from tests.helpers.files import REPO, SLEEP_TRAIN

CLUSTER = str(REPO / "tests" / "helpers" / "cluster.py")
MS = 1_000_000
SHARED_ROOT = Path("/var/tmp")  # outside /tmp: the folder every simulated node sees


@pytest.fixture(scope="module", autouse=True)
def _nodes_possible() -> None:
    skip_if_hidden("/tmp")  # nodes past the first see a new /tmp
    check = subprocess.run([sys.executable, CLUSTER, "--check"], check=False, timeout=60)
    if check.returncode != 0:
        pytest.skip("this machine cannot make a node's namespaces (unshare --uts --mount and a "
                    "tmpfs need root): the multi-node tests need them")  # fmt: skip


@pytest.fixture
def shared() -> Iterator[Path]:
    """A folder every simulated node sees (not under /tmp, which nodes past the first hide)."""
    if not SHARED_ROOT.is_dir():
        pytest.skip(f"{SHARED_ROOT} is absent: no folder outside /tmp for the simulated nodes")
    folder = Path(tempfile.mkdtemp(prefix="census-nodes-", dir=SHARED_ROOT))
    yield folder
    shutil.rmtree(folder, ignore_errors=True)


def job(how: str, *train: str, nodes: int = 2, per_node: int = 2, hide: str = "") -> str:
    """A command line of a job of `nodes` x `per_node` ranks of sleep_train.py, launched `how`."""
    program = [SLEEP_TRAIN] if how == "torchrun" else [sys.executable, SLEEP_TRAIN]
    hidden = ["--hide", hide] if hide else []
    return " ".join([sys.executable, CLUSTER, "--how", how, "--nodes", str(nodes), "--per-node",
                     str(per_node), *hidden, "--", *program, "--fake-clock", "--record",
                     "--steps", "50", *train])  # fmt: skip


def ab(shared: Path, a: str, b: str, *args: str) -> subprocess.CompletedProcess:
    return census_process("ab", "exp", "-o", str(shared), "--no-capture", "--arms", "4",
                          "--warmup", "1", "--active", "4", "--a", a, "--b", b, *args,
                          capture_output=True, text=True)  # fmt: skip


def test_torchrun_across_nodes_and_srun_with_gloo(shared: Path) -> None:
    """2 nodes x 2 ranks, a gloo all-reduce each step: side A launched as torchrun on each node
    (`--nnodes 2 --node-rank K`), side B as srun launches its tasks; B's forward is 1 ms longer."""
    pytest.importorskip("torch", reason="gloo ranks need torch")
    r = ab(shared, job("torchrun", "--dist", "--ms", "2"), job("srun", "--dist", "--ms", "3"),
           "--json")  # fmt: skip
    assert r.returncode == 0, r.stderr
    doc = json.loads(r.stdout)
    assert doc["verdict"] == "slower"
    assert doc["delta_median_ns"] == pytest.approx(1.5 * MS, rel=1e-12)
    for arm in doc["arms"]:
        launcher = "torchrun" if arm["side"] == "a" else "Slurm"
        places = [(p["rank"], p["host"], p["local_rank"], p["node"], p["launcher"])
                  for p in arm["ranks"]]  # fmt: skip
        # the node: torchrun's GROUP_RANK, Slurm's SLURM_NODEID
        assert places == [(0, "node0", 0, 0, launcher), (1, "node0", 1, 0, launcher),
                          (2, "node1", 0, 1, launcher), (3, "node1", 1, 1, launcher)]  # fmt: skip
        step = 3 * MS if arm["side"] == "a" else 4_500_000
        assert arm["step_time_ns"] == [step] * 4  # census.steps ended each loop after 5 steps
        assert arm["phase_time_ns"]["forward"] == [step * 2 // 3] * 4
        assert arm["counts"] == {"eager_region": [4, 8, 12, 16], "rank1_only": [0, 4, 0, 0]}
        assert arm["values"] == {"loss": [1.5, None, 3.5, 4.5]}  # rank 0's, tensors read after
        assert len({p["pid"] for p in arm["ranks"]}) == 4
    rows = doc["ranks"]
    assert [(row["rank"], row["host"]) for row in rows] == [(0, "node0"), (1, "node0"),
                                                           (2, "node1"), (3, "node1")]  # fmt: skip
    assert rows[2]["b"]["counts"] == {"eager_region": [12, 12], "rank1_only": [0, 0]}
    assert "each rank timed its steps on its own host's clock" in " ".join(doc["explanation"])


def test_a_node_that_does_not_see_the_experiment_folder(shared: Path) -> None:
    """The second node's ranks cannot write their records: the training goes on (no traceback,
    exit 0), and census ab stops with one line naming those ranks, their host and the cause."""
    times = shared / "records" / "arm.json"
    times.parent.mkdir()
    env = {"CENSUS_STEP_TIMES": str(times), "CENSUS_WARMUP": "1", "CENSUS_ACTIVE": "4",
           "CENSUS_RUN": "arm"}  # fmt: skip
    run = subprocess.run(job("srun", "--barrier", "--ms", "2", hide=str(shared)).split(),
                         env={**_environ(), **env}, capture_output=True, text=True, timeout=120,
                         check=False)  # fmt: skip
    assert run.returncode == 0, run.stderr
    assert "Traceback" not in run.stderr and run.stdout.count("sleep_train: done") == 4
    lines = sorted(ln for ln in run.stderr.splitlines() if ln.startswith("census:"))
    assert lines == [
        f"census: rank {r} of 4 on node1 could not write its step-times record: No such file or "
        f"directory: {times}.rank{r}; every node must see the experiment folder (census ab -o); "
        "the training goes on" for r in (2, 3)
    ]  # fmt: skip
    assert sorted(p.name for p in times.parent.iterdir()) == ["arm.json.rank0", "arm.json.rank1"]

    r = ab(shared, job("srun", "--barrier", hide=str(shared)), job("srun", "--barrier"))
    assert r.returncode == 4, r.stderr
    assert r.stderr.splitlines()[-1] == (
        "Error: arm 0 (A, the discarded warm arm): ranks 2, 3 of 4 wrote no step-times record: "
        "on node1 (ranks 2, 3) census.steps could not write it (No such file or directory): "
        "every node must see the experiment folder: give -o a folder on a filesystem that every "
        "node shares (docs/cluster.md)"
    )
    assert "Traceback" not in r.stderr
    assert sorted(p.name for p in shared.iterdir()) == ["records"]  # no experiment left


def test_sixteen_ranks_on_four_nodes(shared: Path) -> None:
    """4 nodes x 4 ranks launched as mpirun does, meeting each step at a socket barrier; on side
    B the ranks of node2 take 1 ms more: census names the host, and every rank's record is read."""
    slow = ("--slow-host", "node2", "--slow-ms", "1")
    r = ab(shared, job("mpirun", "--barrier", "--ms", "2", nodes=4, per_node=4),
           job("mpirun", "--barrier", "--ms", "2", *slow, nodes=4, per_node=4), "--json")  # fmt: skip
    assert r.returncode == 0, r.stderr
    doc = json.loads(r.stdout)
    assert doc["verdict"] == "slower" and doc["delta_median_ns"] == pytest.approx(MS, rel=1e-12)
    for arm in doc["arms"]:
        assert [(p["rank"], p["host"], p["local_rank"]) for p in arm["ranks"]] == [
            (rank, f"node{rank // 4}", rank % 4) for rank in range(16)]  # fmt: skip
        assert {p["launcher"] for p in arm["ranks"]} == {"Open MPI"}
        assert arm["counts"]["eager_region"] == [4 * (1 + rank) for rank in range(16)]
        # census's own time on the arm (reading and checking 16 records, merging them)
        assert 0 < arm["census_ns"] < arm["wall_ns"] / 10
    rows = doc["ranks"]
    assert [row["host"] for row in rows] == [f"node{rank // 4}" for rank in range(16)]
    assert [row["b"]["median_ns"] for row in rows] == [3 * MS] * 8 + [4 * MS] * 4 + [3 * MS] * 4
    said = doc["explanation"]
    assert "B: the slowest ranks of each measured arm ran on node2 in 2 of 2 (an arm's step is " \
           "its slowest rank's)" in said  # fmt: skip
    assert "A: ranks of several hosts tied for the slowest in every measured arm (2)" in said
    assert "recompilations not counted: torch._dynamo was not loaded on any rank" in said


def _environ() -> dict[str, str]:
    return dict(os.environ)


# -- census capture across nodes: each rank's nsys export by the same rank detection ----------
def capture_job(shared: Path, how: str) -> list[str]:
    """A capture's command: a job of 2 nodes x 2 ranks of sleep_train.py (which a stand-in nsys
    does not run: it copies a real export as each rank's), launched by a command named `how`."""
    bin_ = shared / "bin"
    if not bin_.exists():
        bin_.mkdir()
        subprocess.run([sys.executable, CLUSTER, "--launchers", str(bin_)], check=True)
    program = [SLEEP_TRAIN] if how == "torchrun" else [sys.executable, SLEEP_TRAIN]
    return [str(bin_ / how), *program, "--ms", "1", "--steps", "3"]


@pytest.mark.parametrize("how", ["torchrun", "srun", "mpirun"])
def test_a_capture_across_nodes_has_every_ranks_export(
    shared: Path, how: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    from typer.testing import CliRunner

    from census.cli import app
    from tests.helpers.files import FAKE_NSYS, fixture_file

    if how == "torchrun":
        pytest.importorskip("torch", reason="torchrun needs torch")
    export = fixture_file("h200_eager_3steps.sqlite")
    monkeypatch.setenv("FAKE_NSYS_MODE", "copy")
    monkeypatch.setenv("FAKE_NSYS_SQLITE", str(export))
    monkeypatch.setenv("CENSUS_CACHE_DIR", str(shared / "cache"))  # every node sees it
    monkeypatch.setattr("census.load.finish.compute_census", _not_here)  # computed on the ranks
    args = ["capture", "job", "-o", str(shared), "--nsys", FAKE_NSYS, "--summarize-on-ranks"]
    r = CliRunner().invoke(app, [*args, "--", *capture_job(shared, how)])
    assert r.exit_code == 0, r.output
    folder = shared / "job"
    assert sorted(p.name for p in shared.iterdir()) == ["bin", "cache", "job"]
    assert sorted(p.name for p in folder.iterdir()) == [
        f"rank{r}.{ext}" for r in range(4) for ext in ("nsys-rep", "sqlite")] + ["run.json"]  # fmt: skip
    info = json.loads((folder / "run.json").read_text())
    assert info["world_size"] == 4
    assert info["ranks"] == {str(r): f"rank{r}.sqlite" for r in range(4)}
    assert info["hosts"] == {"node0": [0, 1], "node1": [2, 3]}
    launcher = {"torchrun": "torchrun", "srun": "Slurm", "mpirun": "Open MPI"}[how]
    for rank, place in info["rank_places"].items():
        assert (place["host"], place["local_rank"], place["launcher"]) == (
            f"node{int(rank) // 2}", int(rank) % 2, launcher)  # fmt: skip
        assert [g["name"] for g in place["gpus"]] == ["NVIDIA H200"]  # what the export's nsys saw
    assert "Spread over ranks" in r.stdout  # read from the caches the ranks wrote


def test_a_capture_node_that_does_not_see_the_folder(shared: Path) -> None:
    """The second node's ranks cannot write into the capture folder: they run their program
    without nsys (the first node's ranks are not left waiting), and the capture fails with one
    line naming them, their host and the cause, leaving no folder."""
    from tests.helpers.files import FAKE_NSYS, fixture_file

    out = shared / "out"
    env = {"FAKE_NSYS_MODE": "copy", "CLUSTER_HIDE": str(out),
           "FAKE_NSYS_SQLITE": str(fixture_file("h200_eager_3steps.sqlite"))}  # fmt: skip
    r = subprocess.run([sys.executable, "-m", "census", "capture", "job", "-o", str(out),
                        "--nsys", FAKE_NSYS, "--", *capture_job(shared, "srun")],
                       env={**os.environ, **env}, capture_output=True, text=True, timeout=120,
                       check=False)  # fmt: skip
    assert r.returncode == 4, r.stderr
    assert r.stderr.splitlines()[-1] == (
        "Error: ranks 2, 3 of 4 left no nsys export in the capture folder: on node1 (ranks 2, 3) "
        "the rank could not write into it (No such file or directory): every node must see the "
        "capture folder: give -o a folder on a filesystem that every node shares "
        "(docs/cluster.md)"
    )
    assert "Traceback" not in r.stderr and r.stderr.count("sleep_train: done") == 2  # node1's ran
    assert list(out.iterdir()) == []


def _not_here(*args, **kwargs):
    raise AssertionError("a rank's census was computed by census capture, not on its rank")

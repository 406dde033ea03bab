"""census.capture.launcher: a process's rank from any launcher's variables (one precedence, a note
where launchers disagree), and launcher command lines split for per-rank wrapping."""

from __future__ import annotations

import sys

import pytest

from census.capture.launcher import RankEnv, rank_env, split_launcher
from census.errors import UsageError

TORCHRUN = {"RANK": "5", "WORLD_SIZE": "16", "LOCAL_RANK": "5", "GROUP_RANK": "0"}
SLURM = {"SLURM_PROCID": "5", "SLURM_NTASKS": "16", "SLURM_LOCALID": "5", "SLURM_NODEID": "0"}
OMPI = {"OMPI_COMM_WORLD_RANK": "9", "OMPI_COMM_WORLD_SIZE": "16",
        "OMPI_COMM_WORLD_LOCAL_RANK": "1"}  # fmt: skip
PMI = {"PMI_RANK": "3", "PMI_SIZE": "4", "MPI_LOCALRANKID": "3"}


@pytest.mark.parametrize(
    ("env", "expected"),
    [
        ({}, RankEnv()),
        (TORCHRUN, RankEnv(5, 16, 5, 0, "torchrun")),
        (SLURM, RankEnv(5, 16, 5, 0, "Slurm")),
        (OMPI, RankEnv(9, 16, 1, None, "Open MPI")),
        (PMI, RankEnv(3, 4, 3, None, "PMI")),
        # one srun task per rank, the script setting RANK from it: they agree
        ({**SLURM, **TORCHRUN}, RankEnv(5, 16, 5, 0, "torchrun")),
        # srun starts one torchrun agent per node (2 nodes of 8): Slurm names the node
        ({"RANK": "13", "WORLD_SIZE": "16", "LOCAL_RANK": "5", "GROUP_RANK": "1",
          "SLURM_PROCID": "1", "SLURM_NTASKS": "2", "SLURM_NODEID": "1"},
         RankEnv(13, 16, 5, 1, "torchrun")),
        # an agent per node without a node variable: rank // (world / agents)
        ({**OMPI, "SLURM_PROCID": "1", "SLURM_NTASKS": "2"}, RankEnv(9, 16, 1, None, "Open MPI")),
        # a half-set or damaged launcher is no launcher
        ({"RANK": "3"}, RankEnv()),
        ({"RANK": "x", "WORLD_SIZE": "2", **PMI}, RankEnv(3, 4, 3, None, "PMI")),
        ({"RANK": "4", "WORLD_SIZE": "4"}, RankEnv()),  # a rank past the world
        ({"RANK": "0", "WORLD_SIZE": "1"}, RankEnv(0, 1, None, None, "torchrun")),
    ],
)  # fmt: skip
def test_the_rank_comes_from_the_first_launcher_in_precedence(env, expected) -> None:
    assert rank_env(env) == expected


def test_launchers_that_disagree_are_a_note() -> None:
    env = rank_env({**TORCHRUN, "SLURM_PROCID": "0", "SLURM_NTASKS": "16"})
    assert (env.rank, env.world, env.launcher) == (5, 16, "torchrun")
    assert env.note == ("SLURM_PROCID/SLURM_NTASKS (Slurm) say rank 0 of 16, RANK/WORLD_SIZE "
                        "(torchrun) rank 5 of 16: census takes torchrun's (launchers in order: "
                        "torchrun, Open MPI, PMI, Slurm)")  # fmt: skip
    # an agent-per-node reading whose node is not this rank's: a note too
    env = rank_env({**OMPI, "SLURM_PROCID": "0", "SLURM_NTASKS": "2"})
    assert env.note is not None and env.note.startswith("SLURM_PROCID/SLURM_NTASKS (Slurm) say")


def test_launcher_commands_are_split_where_each_rank_begins() -> None:
    py = sys.executable
    torchrun = split_launcher(("torchrun", "--nnodes", "2", "--nproc-per-node=8", "train.py", "-x"))
    assert torchrun is not None and torchrun.kind == "torchrun" and torchrun.world_size == 16
    assert torchrun.launcher == ("torchrun", "--nnodes", "2", "--nproc-per-node=8")
    assert torchrun.program == (py, "train.py", "-x")
    nested = split_launcher(("srun", "-N", "2", "torchrun", "--nproc_per_node", "4", "t.py"))
    assert nested is not None and nested.kind == "torchrun" and nested.world_size == 4
    assert nested.launcher == ("srun", "-N", "2", "torchrun", "--nproc_per_node", "4")
    module = split_launcher(("python3", "-m", "torch.distributed.run", "--nnodes", "1:2",
                             "--nproc-per-node", "2", "t.py"))  # fmt: skip
    assert module is not None and module.world_size is None  # an elastic range: unknown
    srun = split_launcher(("srun", "--ntasks-per-node", "8", "python3", "train.py"))
    assert srun is not None and (srun.kind, srun.program) == ("srun", ("python3", "train.py"))
    mpi = split_launcher(("mpirun", "-np", "16", "-x", "NCCL_DEBUG", "./train.py", "--lr", "1"))
    assert mpi is not None and mpi.kind == "mpirun"
    assert mpi.launcher == ("mpirun", "-np", "16", "-x", "NCCL_DEBUG")
    assert split_launcher(("python", "train.py")) is None
    assert split_launcher(()) is None
    with pytest.raises(UsageError, match="where the rank runs Python"):
        split_launcher(("srun", "-n", "2", "./a.out"))
    with pytest.raises(UsageError, match=r"\.py training script"):
        split_launcher(("torchrun", "--nproc-per-node", "2", "-m", "mod"))

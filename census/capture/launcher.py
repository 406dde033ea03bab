"""Launchers: which rank this process is, from any launcher's environment; and a launcher's
command line split so that each rank it starts runs under census's per-rank wrapper.

## The rank of this process (rank_env)
Every launcher names a process's rank in variables of its own. census reads them in this order,
PRECEDENCE, and takes the first launcher whose rank and world size are both set, whole numbers,
the rank below the world size:

| launcher                   | rank, world                                | local rank, node        |
| -------------------------- | ------------------------------------------ | ----------------------- |
| torchrun, DeepSpeed, accel | RANK, WORLD_SIZE                           | LOCAL_RANK, GROUP_RANK  |
| Open MPI (mpirun)          | OMPI_COMM_WORLD_RANK, OMPI_COMM_WORLD_SIZE | OMPI_COMM_WORLD_LOCAL_RANK |
| MPICH, Intel MPI (PMI)     | PMI_RANK, PMI_SIZE                         | MPI_LOCALRANKID         |
| Slurm (srun)               | SLURM_PROCID, SLURM_NTASKS                 | SLURM_LOCALID, SLURM_NODEID |

torchrun comes first because srun or mpirun start one torchrun agent per node, whose own
variables then name the node's agent, not the rank; MPI comes before Slurm because an mpirun
inside a Slurm allocation inherits the allocation's variables. Without any, the process is rank 0
of 1. Another launcher whose variables are set and name a different rank or world is a note
(`RankEnv.note`, kept in the record and said by census ab), unless they describe the node the
process runs on, as an agent per node does: its rank the node's index (the chosen launcher's
node variable, else rank // (world / its world)) and its world the number of nodes.
"""

from __future__ import annotations

import json
import os
import re
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from census.errors import UsageError


@dataclass(frozen=True)
class LauncherVars:
    """The names of a launcher's variables: its rank, world size, local rank, node index (None: it
    has none) and ranks on this node."""

    name: str
    rank: str
    world: str
    local_rank: str
    node: str | None
    local_world: str  # the ranks on this node


PRECEDENCE = (
    LauncherVars("torchrun", "RANK", "WORLD_SIZE", "LOCAL_RANK", "GROUP_RANK", "LOCAL_WORLD_SIZE"),
    LauncherVars("Open MPI", "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE",
                 "OMPI_COMM_WORLD_LOCAL_RANK", None, "OMPI_COMM_WORLD_LOCAL_SIZE"),
    LauncherVars("PMI", "PMI_RANK", "PMI_SIZE", "MPI_LOCALRANKID", None, "MPI_LOCALNRANKS"),
    LauncherVars("Slurm", "SLURM_PROCID", "SLURM_NTASKS", "SLURM_LOCALID", "SLURM_NODEID",
                 "SLURM_NTASKS_PER_NODE"),
)  # fmt: skip


@dataclass(frozen=True)
class RankEnv:
    """This process's place in its job, as its launcher says (module docstring)."""

    rank: int = 0
    world: int = 1
    local_rank: int | None = None
    node: int | None = None  # the node's index in the job, where the launcher says it
    launcher: str | None = None  # PRECEDENCE's name; None: no launcher
    note: str | None = None  # another launcher's variables disagree (module docstring)
    local_world: int | None = None  # the ranks on this node, where the launcher says it


def _whole(env: Mapping[str, str], name: str | None) -> int | None:
    value = env.get(name or "", "").strip()
    return int(value) if value.isascii() and value.isdigit() else None


def _said(env: Mapping[str, str], v: LauncherVars) -> tuple[int, int] | None:
    """(rank, world) as `v`'s variables say them; None unless both are set and make sense."""
    rank, world = _whole(env, v.rank), _whole(env, v.world)
    if rank is None or world is None or world < 1 or rank >= world:
        return None
    return rank, world


def rank_env(env: Mapping[str, str] | None = None) -> RankEnv:
    """This process's rank, world, local rank and node (module docstring); rank 0 of 1 where no
    launcher says otherwise."""
    env = os.environ if env is None else env
    found = [(v, said) for v in PRECEDENCE if (said := _said(env, v)) is not None]
    if not found:
        return RankEnv()
    chosen, (rank, world) = found[0]
    node = _whole(env, chosen.node)
    notes = [_disagree(chosen, rank, world, node, other, said)
             for other, said in found[1:]]  # fmt: skip
    note = next((n for n in notes if n), None)
    return RankEnv(rank, world, _whole(env, chosen.local_rank), node, chosen.name, note,
                   _whole(env, chosen.local_world))  # fmt: skip


def _disagree(
    chosen: LauncherVars, rank: int, world: int, node: int | None, other: LauncherVars,
    said: tuple[int, int],
) -> str | None:  # fmt: skip
    """The note when `other`'s (rank, world) is neither this rank's nor this rank's node's."""
    r, w = said
    if (r, w) == (rank, world):
        return None
    if w < world and world % w == 0 and r == (node if node is not None else rank // (world // w)):
        return None  # one `other` process per node (an agent): it names the node
    return (f"{other.rank}/{other.world} ({other.name}) say rank {r} of {w}, "
            f"{chosen.rank}/{chosen.world} ({chosen.name}) rank {rank} of {world}: census "
            f"takes {chosen.name}'s (launchers in order: "
            f"{', '.join(v.name for v in PRECEDENCE)})")  # fmt: skip


# Open MPI's mpirun passes the variables this MCA parameter names (else only those given `-x`)
OMPI_FORWARD = "OMPI_MCA_mca_base_env_list"


def forwarded(env: dict[str, str], base: Mapping[str, str] | None = None) -> dict[str, str]:
    """`env` (what census sets for a program) with Open MPI told to pass its CENSUS_* variables
    to the ranks, beside any list already in `base` (the environment census runs in)."""
    base = os.environ if base is None else base
    ours = ";".join(name for name in env if name.startswith("CENSUS_"))
    given = base.get(OMPI_FORWARD, "")
    return {**env, OMPI_FORWARD: f"{given};{ours}" if given and ours else given or ours}


# -- launcher command lines ----------------------------------------------------------------
TORCHRUN = "torchrun"
MPI_LAUNCHERS = ("mpirun", "mpiexec", "orterun", "prterun")
SLURM_LAUNCHERS = ("srun",)
_PYTHON = re.compile(r"python[0-9.]*")


@dataclass(frozen=True)
class Launch:
    """A launcher's command split where each rank's own command begins: `launcher` (which may
    hold an outer launcher, `srun ... torchrun ...`), then `program`, one rank's command. `kind`
    names the innermost launcher; under torchrun `program` starts with the Python it runs the
    script with, which torchrun must not add again (`--no-python` is put after its arguments)."""

    launcher: tuple[str, ...]
    program: tuple[str, ...]
    kind: str  # "torchrun", "srun" or "mpirun"
    world_size: int | None  # torchrun's --nproc-per-node times --nnodes, where given


def _name(arg: str) -> str:
    return Path(arg).name


def _torchrun_at(command: tuple[str, ...], i: int) -> int | None:
    """Where torchrun's own arguments begin when it starts at `i` (`torchrun`, or `python -m
    torch.distributed.run`); None when no torchrun starts there."""
    if _name(command[i]) == TORCHRUN:
        return i + 1
    if _PYTHON.fullmatch(_name(command[i])) and command[i + 1 : i + 3] == (
        "-m", "torch.distributed.run"):  # fmt: skip
        return i + 3
    return None


def split_launcher(command: tuple[str, ...]) -> Launch | None:
    """The command split for per-rank wrapping (Launch); None when it starts no launcher census
    knows (torchrun, srun, mpirun/mpiexec); a UsageError when one rank's command cannot be found
    in it."""
    if not command:
        return None
    outer = _name(command[0])
    if outer not in SLURM_LAUNCHERS + MPI_LAUNCHERS and _torchrun_at(command, 0) is None:
        return None
    for i in range(len(command)):
        start = _torchrun_at(command, i)
        if start is not None:
            return _split_torchrun(command, i, start)
    if outer not in SLURM_LAUNCHERS + MPI_LAUNCHERS:
        return None
    kind = "srun" if outer in SLURM_LAUNCHERS else "mpirun"
    # the first argument that is a Python or a .py script: one rank's command from there on
    program = next((i for i in range(1, len(command))
                    if _PYTHON.fullmatch(_name(command[i])) or command[i].endswith(".py")
                    or command[i] == sys.executable), None)  # fmt: skip
    if program is None:
        raise UsageError(f"census capture wraps each rank of {outer} only where the rank runs "
                         f"Python: give `{outer} ... python train.py ...`")  # fmt: skip
    return Launch(command[:program], command[program:], kind, None)


def _split_torchrun(command: tuple[str, ...], at: int, start: int) -> Launch:
    script = next((i for i in range(start, len(command)) if command[i].endswith(".py")), None)
    if script is None:
        raise UsageError("census capture wraps torchrun ranks only for a .py training script")
    launcher = command[:script]
    per_node, nodes = _flag(launcher, "nproc-per-node"), _flag(launcher, "nnodes") or "1"
    whole = per_node is not None and per_node.isdigit() and nodes.isdigit()
    world = int(per_node) * int(nodes) if whole else None  # type: ignore[union-attr]
    return Launch(launcher, (sys.executable, *command[script:]), TORCHRUN, world)


def _flag(args: tuple[str, ...], name: str) -> str | None:
    """torchrun's `--NAME V` or `--NAME=V` (either spelling, `-` or `_`); None when absent."""
    value = None
    spellings = {f"--{name}", f"--{name.replace('-', '_')}"}
    for i, arg in enumerate(args):
        flag, eq, rest = arg.partition("=")
        if flag in spellings:
            value = rest if eq else (args[i + 1] if i + 1 < len(args) else None)
    return value


def per_rank_command(launch: Launch, per_rank: list[str]) -> list[str]:
    """The launcher's command with `per_rank` (a wrapper, then nsys, then the rank's program) as
    each rank's command; torchrun is told not to add a Python of its own."""
    if launch.kind == TORCHRUN:
        return [*launch.launcher, "--no-python", *per_rank]
    return [*launch.launcher, *per_rank]


# -- a rank's place, written for census capture (census.capture.per_rank reads it back) ------
PLACE = ".rank{rank}.json"  # in the capture's work folder, read and removed by read_places
# The line a rank prints when its node cannot write into the capture folder
CANNOT_WRITE = "census: rank {rank} of {world} on {host} cannot write into the capture folder"


def write_place(work: Path, env: RankEnv, host: str) -> str | None:
    """Write this rank's place in the job to WORK/PLACE, atomically; why it could not, else None."""
    place = {"rank": env.rank, "world_size": env.world, "local_rank": env.local_rank,
             "node": env.node, "host": host, "pid": os.getpid(), "launcher": env.launcher,
             "launcher_note": env.note,
             "visible_devices": os.environ.get("CUDA_VISIBLE_DEVICES")}  # fmt: skip
    target = work / PLACE.format(rank=env.rank)
    part = target.with_name(f"{target.name}.{os.getpid()}.part")
    try:
        part.write_text(json.dumps(place), encoding="utf-8")
        os.replace(part, target)
    except OSError as exc:
        return str(exc.strerror or exc).replace(":", ",")
    return None

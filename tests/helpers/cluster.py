"""A job of several nodes on one machine, started as a cluster's launcher would start it.

python cluster.py --nodes 2 --per-node 2 --how torchrun|srun|mpirun [--hide DIR] -- PROGRAM...

Node k runs in Linux namespaces of its own (`unshare`): its host name is `nodeK` (a UTS
namespace), and every node past the first sees an empty /tmp of its own (a tmpfs in a mount
namespace: a node's local disk, as census's temporary folder on the first node is not on the
others); with --hide DIR, an empty DIR too (an experiment folder on a disk that node does not
see). The network is the machine's: the ranks meet on 127.0.0.1.

- torchrun: each node runs `python -m torch.distributed.run --nnodes N --node-rank k
  --nproc-per-node M --master-addr 127.0.0.1 --master-port P PROGRAM` (PROGRAM: a .py script
  and its arguments), as `srun torchrun ...` does with one agent per node.
- srun: each node starts M processes of PROGRAM with Slurm's variables (SLURM_PROCID,
  SLURM_NTASKS, SLURM_LOCALID, SLURM_NODEID, SLURM_NNODES), as srun does with one task a rank.
- mpirun: likewise with Open MPI's (OMPI_COMM_WORLD_RANK, _SIZE, _LOCAL_RANK, _LOCAL_SIZE).

Every rank also gets MASTER_ADDR and MASTER_PORT (for gloo) and CLUSTER_BARRIER_PORT (for
sleep_train.py's --barrier). The job's exit status is the first failing node's. `--check` only
says whether this machine can make such namespaces (exit 0), for tests to skip otherwise.

`--launchers DIR` writes DIR/torchrun, DIR/srun and DIR/mpirun: each runs this job its way, with
the rest of its command line as PROGRAM, so that census sees a launcher by its name (census
capture wraps each rank where the launcher's own arguments end); $CLUSTER_NODES,
$CLUSTER_PER_NODE and $CLUSTER_HIDE (a folder) set the job. CLUSTER_PRIVATE_TMP=0 keeps the
machine's /tmp on every node (where a tool the ranks run lives under /tmp, as the GPU machine's
nsys kit does).
"""

from __future__ import annotations

import argparse
import os
import shlex
import socket
import subprocess
import sys

HOW = ("torchrun", "srun", "mpirun")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def node_command(k: int, hide: list[str], command: list[str]) -> list[str]:
    """`command` run as node k: in its own UTS namespace named nodeK, and past the first node in
    a mount namespace with a private /tmp and the hidden folders emptied."""
    setup = [f"hostname node{k}"]
    if k > 0 and os.environ.get("CLUSTER_PRIVATE_TMP", "1") != "0":
        setup += ["mount -t tmpfs -o size=64m cluster-tmp /tmp"]
        setup += [f"mount -t tmpfs -o size=1m cluster-hidden {shlex.quote(d)}" for d in hide]
    script = " && ".join(setup) + ' && exec "$@"'
    return ["unshare", "--uts", "--mount", "--propagation", "private", "sh", "-c", script,
            "node", *command]  # fmt: skip


def rank_env(how: str, k: int, local: int, nodes: int, per_node: int) -> dict[str, str]:
    rank, world = k * per_node + local, nodes * per_node
    if how == "srun":
        return {"SLURM_PROCID": str(rank), "SLURM_NTASKS": str(world), "SLURM_LOCALID": str(local),
                "SLURM_NODEID": str(k), "SLURM_NNODES": str(nodes)}  # fmt: skip
    return {"OMPI_COMM_WORLD_RANK": str(rank), "OMPI_COMM_WORLD_SIZE": str(world),
            "OMPI_COMM_WORLD_LOCAL_RANK": str(local),
            "OMPI_COMM_WORLD_LOCAL_SIZE": str(per_node)}  # fmt: skip


def node_main(args: argparse.Namespace) -> int:
    """Inside node k: its M ranks (srun, mpirun), waited for; the first failure's status."""
    procs = []
    for local in range(args.per_node):
        env = {**os.environ, **rank_env(args.how, args.node, local, args.nodes, args.per_node)}
        procs.append(subprocess.Popen(args.command, env=env))
    codes = [p.wait() for p in procs]
    return next((c for c in codes if c), 0)


def job_main(args: argparse.Namespace) -> int:
    env = {**os.environ, "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(free_port()),
           "CLUSTER_BARRIER_PORT": str(free_port())}  # fmt: skip
    procs = []
    for k in range(args.nodes):
        if args.how == "torchrun":
            inner = [sys.executable, "-m", "torch.distributed.run", "--nnodes", str(args.nodes),
                     "--node-rank", str(k), "--nproc-per-node", str(args.per_node),
                     "--master-addr", "127.0.0.1", "--master-port", env["MASTER_PORT"],
                     *args.command]  # fmt: skip
        else:
            inner = [sys.executable, __file__, "--node", str(k), "--nodes", str(args.nodes),
                     "--per-node", str(args.per_node), "--how", args.how, "--", *args.command]  # fmt: skip
        procs.append(subprocess.Popen(node_command(k, args.hide, inner), env=env))
    codes = [p.wait() for p in procs]
    return next((c for c in codes if c), 0)


def can_make_nodes() -> bool:
    """Whether this machine lets a process make the namespaces a node needs (root, unshare)."""
    probe = node_command(1, [], ["true"])
    try:
        return subprocess.run(probe, capture_output=True, timeout=30, check=False).returncode == 0
    except (OSError, subprocess.SubprocessError):
        return False


def write_launchers(folder: str) -> None:
    for how in HOW:
        path = os.path.join(folder, how)
        with open(path, "w", encoding="utf-8") as fh:
            fh.write(f"""#!/bin/sh
exec {shlex.quote(sys.executable)} {shlex.quote(__file__)} --how {how} \\
  --nodes "${{CLUSTER_NODES:-2}}" --per-node "${{CLUSTER_PER_NODE:-2}}" \\
  ${{CLUSTER_HIDE:+--hide "$CLUSTER_HIDE"}} -- "$@"
""")
        os.chmod(path, 0o755)


def main() -> int:
    p = argparse.ArgumentParser()
    p.add_argument("--nodes", type=int, default=2)
    p.add_argument("--per-node", type=int, default=2)
    p.add_argument("--how", choices=HOW, default="torchrun")
    p.add_argument("--hide", action="append", default=[], help="a folder nodes past the first miss")
    p.add_argument("--node", type=int, help=argparse.SUPPRESS)  # inside node k (srun, mpirun)
    p.add_argument("--check", action="store_true")
    p.add_argument("--launchers", help="write torchrun, srun and mpirun into this folder")
    p.add_argument("command", nargs=argparse.REMAINDER)
    args = p.parse_args()
    if args.check:
        return 0 if can_make_nodes() else 1
    if args.launchers:
        write_launchers(args.launchers)
        return 0
    args.command = args.command[1:] if args.command[:1] == ["--"] else args.command
    return node_main(args) if args.node is not None else job_main(args)


if __name__ == "__main__":
    sys.exit(main())

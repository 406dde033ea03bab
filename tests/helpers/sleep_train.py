"""A CPU stand-in for a training loop: each step sleeps, inside census.steps and census.phase.

python sleep_train.py --ms 2 [--steps 30] [--counter FILE --fail-on-run N] [--no-census]
    [--dist | --barrier] [--fake-clock] [--skew MS] [--record] [--spin] [--hog-on-runs 1,3]
    [--arm-noise MS] [--slow-host HOST --slow-ms MS]

Step i on rank r (0 without --dist): forward takes ms (+ skew when i + r is odd), backward
ms / 2 (+ skew / 2 on rank 1). --fake-clock spends that time on a virtual clock census reads instead
of sleeping, so the step times are exact. --dist joins a gloo process group (under
torchrun, srun or mpirun: the rank and world from their variables, as a training script reads
them) and all-reduces a one-element tensor each step; --barrier meets every rank each step
through a socket instead (tests/helpers/cluster.py's CLUSTER_BARRIER_PORT), with no torch to
import. --slow-host makes the forward of every rank on that host (its host name) MS longer.
--record calls census.record("loss",
i + 0.5 + 100 r) in every step but those with i % 3 == 2 (after a first value the step's last
one replaces), census.count("eager_region", 1 + r) each step, census.count("rank1_only") on rank
1, and census.count("outside", 1000) before the loop, where it counts nothing.
"""

from __future__ import annotations

import argparse
import atexit
import os
import random
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import census


def _args() -> argparse.Namespace:
    p = argparse.ArgumentParser()
    p.add_argument("--ms", type=float, default=2.0)
    p.add_argument("--steps", type=int, default=12)
    p.add_argument("--counter", help="a file counting runs (for --fail-on-run)")
    p.add_argument("--fail-on-run", type=int, default=0, help="exit 3 on this run (1 = first)")
    p.add_argument("--no-census", action="store_true", help="a loop without census.steps")
    p.add_argument("--dist", action="store_true", help="gloo, an all_reduce a step (torchrun)")
    p.add_argument("--barrier", action="store_true", help="a socket barrier a step, no torch")
    p.add_argument("--slow-host", default="", help="the host whose ranks' forward is slower")
    p.add_argument("--slow-ms", type=float, default=0.0)
    p.add_argument("--fake-clock", action="store_true", help="a virtual clock instead of sleeps")
    p.add_argument("--skew", type=float, default=0.0, help="ms more on some ranks' steps")
    p.add_argument("--record", action="store_true", help="census.record and census.count")
    p.add_argument("--spin", action="store_true", help="busy-wait the time (CPU-bound steps)")
    p.add_argument("--arm-noise", type=float, default=0.0,
                   help="with --counter: ms more in every forward of run k, drawn once per run "
                   "as abs(gauss(0, ARM_NOISE)) from random.Random(k) (arm_offset_ms)")  # fmt: skip
    p.add_argument(
        "--hog-on-runs",
        default="",
        help="with --counter: on these runs (1,3) start "
        "two CPU hogs beside the loop, outside the arm's process group (other processes, as "
        "a neighbour's would be); killed when the loop's process exits",
    )
    return p.parse_args()


def arm_offset_ms(run: int, noise_ms: float) -> float:
    """The forward's extra time in run `run` under --arm-noise (tests recompute it)."""
    return abs(random.Random(run).gauss(0.0, noise_ms)) if noise_ms else 0.0


def _count_run(args: argparse.Namespace) -> int:
    path = Path(args.counter)
    run = int(path.read_text() or 0) + 1 if path.exists() else 1
    path.write_text(str(run))
    if str(run) in args.hog_on_runs.split(","):
        for _ in range(2):
            hog = subprocess.Popen([sys.executable, "-c", "while True: pass"],
                                   start_new_session=True)  # fmt: skip
            atexit.register(hog.kill)
        time.sleep(0.3)  # the hogs running before the window opens
    if run == args.fail_on_run:
        print(f"sleep_train: failing on run {run} as asked", flush=True)
        sys.exit(3)
    return run


def _spin(ms: float) -> None:
    end = time.perf_counter() + ms / 1000
    while time.perf_counter() < end:
        pass


def _spend(virtual: bool, spin: bool = False):
    if spin:
        return _spin
    if not virtual:
        return lambda ms: time.sleep(ms / 1000)
    now = [10**12]
    time.perf_counter_ns = lambda: now[0]

    def spend(ms: float) -> None:
        now[0] += round(ms * 1_000_000)

    return spend


def _record(i: int, rank: int, torch: Any) -> None:
    if i % 3 != 2:
        census.record("loss", -1.0)  # replaced: the step's last value wins
        value = i + 0.5 + 100 * rank
        census.record("loss", value if torch is None else torch.tensor(value))
    census.count("eager_region", 1 + rank)
    if rank == 1:
        census.count("rank1_only")


# a training script's own reading of its launcher's variables (census reads them its own way)
RANK_VARS = (("RANK", "WORLD_SIZE"), ("OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE"),
             ("PMI_RANK", "PMI_SIZE"), ("SLURM_PROCID", "SLURM_NTASKS"))  # fmt: skip


def rank_and_world() -> tuple[int, int]:
    for rank, world in RANK_VARS:
        if rank in os.environ:
            return int(os.environ[rank]), int(os.environ[world])
    return 0, 1


class Barrier:
    """Every rank meets each step: rank 0 takes a byte from each other rank, then answers all."""

    def __init__(self, rank: int, world: int) -> None:
        port = int(os.environ["CLUSTER_BARRIER_PORT"])
        self.rank, self.peers = rank, []
        if rank == 0:
            server = socket.create_server(("127.0.0.1", port))
            self.peers = [server.accept()[0] for _ in range(world - 1)]
            server.close()
            return
        deadline = time.monotonic() + 60
        while True:
            try:
                self.peers = [socket.create_connection(("127.0.0.1", port))]
                return
            except OSError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.05)

    def __call__(self) -> None:
        for peer in self.peers:
            if self.rank == 0:
                peer.recv(1)
            else:
                peer.sendall(b"x")
        for peer in self.peers:
            if self.rank == 0:
                peer.sendall(b"x")
            else:
                peer.recv(1)


def main() -> None:
    args = _args()
    offset = arm_offset_ms(_count_run(args), args.arm_noise) if args.counter else 0.0
    torch, dist, rank, barrier = None, None, 0, None
    if args.dist:
        import torch
        import torch.distributed as dist

        rank, world = rank_and_world()
        dist.init_process_group("gloo", rank=rank, world_size=world)
    elif args.barrier:
        rank, world = rank_and_world()
        barrier = Barrier(rank, world)
    if args.slow_host and socket.gethostname() == args.slow_host:
        offset += args.slow_ms
    spend = _spend(args.fake_clock, args.spin)
    census.count("outside", 1000)
    loop = range(args.steps) if args.no_census else census.steps(range(args.steps))
    for i in loop:
        with census.phase("forward"):
            spend(args.ms + offset + (args.skew if (i + rank) % 2 else 0))
        with census.phase("backward"):
            spend(args.ms / 2 + (args.skew / 2 if rank == 1 else 0))
        if dist is not None:
            dist.all_reduce(torch.ones(1))
        if barrier is not None:
            barrier()
        if args.record:
            _record(i, rank, torch)
    if dist is not None:
        dist.destroy_process_group()
    print("sleep_train: done")


if __name__ == "__main__":
    main()

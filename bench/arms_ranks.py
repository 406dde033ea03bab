"""census's own time per arm of several ranks: `census ab` on a job of NODES x PER_NODE ranks
simulated on this machine (tests/helpers/cluster.py: each node in namespaces of its own; the
ranks meet at a socket barrier each step), reading each arm's `wall_ns` (the arm's processes,
start to end) and `census_ns` (census reading, checking and merging the arm's records) from
ab.json.

    python bench/arms_ranks.py --nodes 4 --per-node 4 --steps 20 --arms 8

Needs root for the namespaces (unshare); prints one row per arm and the largest share.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
CLUSTER = REPO / "tests" / "helpers" / "cluster.py"
TRAIN = REPO / "tests" / "helpers" / "sleep_train.py"


def main() -> int:
    p = argparse.ArgumentParser()
    p.add_argument("--nodes", type=int, default=4)
    p.add_argument("--per-node", type=int, default=4)
    p.add_argument("--steps", type=int, default=20)
    p.add_argument("--arms", type=int, default=8)
    p.add_argument("--ms", type=float, default=5.0, help="each step's forward, slept")
    args = p.parse_args()
    if subprocess.run([sys.executable, str(CLUSTER), "--check"], check=False).returncode:
        print("this machine cannot make the nodes' namespaces (needs root)", file=sys.stderr)
        return 1
    job = [sys.executable, str(CLUSTER), "--how", "mpirun", "--nodes", str(args.nodes),
           "--per-node", str(args.per_node), "--", sys.executable, str(TRAIN), "--barrier",
           "--ms", str(args.ms), "--record", "--steps", str(args.steps + 2)]  # fmt: skip
    command = " ".join(job)
    with tempfile.TemporaryDirectory(dir="/var/tmp") as out:
        run = subprocess.run([sys.executable, "-m", "census", "ab", "bench", "-o", out,
                              "--no-capture", "--arms", str(args.arms), "--warmup", "2",
                              "--active", str(args.steps), "--a", command, "--b", command],
                             capture_output=True, text=True, check=False)  # fmt: skip
        if run.returncode:
            print(run.stderr, file=sys.stderr)
            return run.returncode
        arms = json.loads((Path(out) / "bench" / "ab.json").read_text())["arms"]
    ranks = args.nodes * args.per_node
    print(f"{ranks} ranks ({args.nodes} nodes x {args.per_node}), {args.steps} steps an arm")
    print("| arm | side | ranks | arm wall | census | census / arm |\n|---|---|---|---|---|---|")
    shares = []
    for arm in arms:
        share = arm["census_ns"] / arm["wall_ns"]
        shares.append(share)
        print(f"| {arm['index']} | {arm['side']} | {len(arm['ranks'])} | "
              f"{arm['wall_ns'] / 1e9:.3f} s | {arm['census_ns'] / 1e6:.2f} ms | {share:.3%} |")  # fmt: skip
    print(f"largest share {max(shares):.3%}, median {sorted(shares)[len(shares) // 2]:.3%}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

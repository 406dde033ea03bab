"""A CPU stand-in for a training loop: each step sleeps, inside census.steps and census.phase.

python sleep_train.py --ms 2 [--steps 30] [--counter FILE --fail-on-run N] [--no-census]
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import census


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--ms", type=float, default=2.0)
    p.add_argument("--steps", type=int, default=12)
    p.add_argument("--counter", help="a file counting runs (for --fail-on-run)")
    p.add_argument("--fail-on-run", type=int, default=0, help="exit 3 on this run (1 = first)")
    p.add_argument("--no-census", action="store_true", help="a loop without census.steps")
    args = p.parse_args()
    if args.counter:
        path = Path(args.counter)
        run = int(path.read_text() or 0) + 1 if path.exists() else 1
        path.write_text(str(run))
        if run == args.fail_on_run:
            print(f"sleep_train: failing on run {run} as asked", flush=True)
            sys.exit(3)
    loop = range(args.steps) if args.no_census else census.steps(range(args.steps))
    for _ in loop:
        with census.phase("forward"):
            time.sleep(args.ms / 1000)
        with census.phase("backward"):
            time.sleep(args.ms / 2000)
    print("sleep_train: done")


if __name__ == "__main__":
    main()

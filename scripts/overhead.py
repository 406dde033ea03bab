"""What census's instrumentation costs the demo workload, measured like an A/B experiment.

Side A runs the demo's loop plain (no census.steps, no phases); side B runs it inside
census.steps with timing on ($CENSUS_STEP_TIMES: a CUDA event per step and phase boundary, NVTX
ranges) and census.phase. Both measure the same thing: the wall time of the measured steps
between two synchronizes around them, divided by the steps. Arms run warm + ABBA BAAB, and the
block model of census.compare.stats gives the difference with its 95% interval.

    python scripts/overhead.py --mode eager --arms 8 --steps 20 [--out overhead.json]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

from census.capture.arms import arm_order
from census.compare.stats import analyze
from census.model import Arm


def run_arm(mode: str, plain: bool, warmup: int, steps: int, tmp: Path, index: int) -> int:
    window = tmp / f"window{index}.json"
    cmd = [sys.executable, "-m", "census.capture.demo.train", "--mode", mode,
           "--warmup", str(warmup), "--steps", str(steps), "--window-out", str(window)]  # fmt: skip
    env = dict(os.environ)
    if plain:
        cmd.append("--plain")
    else:
        env["CENSUS_STEP_TIMES"] = str(tmp / f"steps{index}.json")
    subprocess.run(cmd, env=env, check=True, capture_output=True)
    doc = json.loads(window.read_text())
    return round(doc["window_ns"] / doc["steps"])


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--mode", default="eager")
    p.add_argument("--arms", type=int, default=8)
    p.add_argument("--warmup", type=int, default=5)
    p.add_argument("--steps", type=int, default=20)
    p.add_argument("--out")
    args = p.parse_args()
    arms = []
    with tempfile.TemporaryDirectory() as tmp:
        for i, side in enumerate(arm_order(args.arms)):
            per_step = run_arm(args.mode, side == "a", args.warmup, args.steps, Path(tmp), i)
            arms.append(Arm(side, i, i == 0, (per_step,)))
            label = "plain" if side == "a" else "census"
            print(f"arm {i} {label}: {per_step / 1e6:.3f} ms/step", flush=True)
    st = analyze(arms)
    base = st.a.median_of_arm_medians_ns
    result = {
        "plain_ms": base / 1e6,
        "census_ms": st.b.median_of_arm_medians_ns / 1e6,
        "delta_ms": st.delta_median_ns / 1e6,
        "delta_pct": st.delta_pct,
        "ci95_pct": [100 * x / base for x in st.ci95_ns],
        "verdict": st.verdict,
        "pairs_ms": [p.delta_ns / 1e6 for p in st.pairs],
    }
    print(json.dumps(result, indent=1))
    if args.out:
        Path(args.out).write_text(json.dumps({**result, "arms": [a.step_time_ns for a in arms]}))


if __name__ == "__main__":
    main()

"""Benchmark: what census adds to each step of a timed run (`census ab` arms, calibration).

A timed step here is a step of census.steps with $CENSUS_STEP_TIMES set, whose body runs three
census.phase blocks, one census.record and one census.count; the bare step is the same loop body
without census (a plain `for` over the same range). The body itself does nothing, so the
difference is census's own cost. A step's period is measured from the start of one body to the
start of the next (what census does at a step's end and the next one's start falls inside it);
the window's opening and closing, outside every step, are not. Each clock runs in a fresh
process: the host clock (torch not imported), then, when torch sees a GPU, CUDA events (the
recorded value a 0-dim tensor on the GPU, as a loss is). Bare and timed loops alternate
--repeat times; the table shows medians, and each clock's cost as a share of a 10 ms step,
which census keeps under 1% (the exit status is 1 when a clock is over).

    python bench/timing_cost.py [--steps 20000] [--cuda-steps 2000] [--repeat 5]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))

STEP_NS = 10_000_000  # the step the cost is a share of
BUDGET = 0.01  # of that step


def period_ns(steps: int, value: object, timed: bool) -> float:
    """The mean time from one body's start to the next one's, over `steps` steps."""
    import census

    starts = [0] * steps
    clock = time.perf_counter_ns
    if not timed:
        for i in range(steps):
            starts[i] = clock()
        return (starts[-1] - starts[0]) / (steps - 1)
    for i in census.steps(range(steps), warmup=0, active=steps):
        starts[i] = clock()
        with census.phase("forward"):
            pass
        with census.phase("backward"):
            pass
        with census.phase("optimizer"):
            pass
        census.record("loss", value)
        census.count("eager_region")
    return (starts[-1] - starts[0]) / (steps - 1)


def measure_clock(clock: str, steps: int, repeat: int) -> dict:
    """In this process: medians of the bare and the timed period, alternating."""
    value: object = 0.5
    if clock == "cuda_events":
        import torch

        value = torch.zeros((), device="cuda")
    bare, timed = [], []
    with tempfile.TemporaryDirectory() as tmp:
        os.environ["CENSUS_STEP_TIMES"] = str(Path(tmp) / "times.json")
        for _ in range(repeat):
            bare.append(period_ns(steps, value, timed=False))
            timed.append(period_ns(steps, value, timed=True))
        written = json.loads((Path(tmp) / "times.json").read_text())["clock"]
    if written != clock:
        raise SystemExit(f"timing_cost: asked for the {clock} clock, census timed by {written}")
    return {"clock": clock, "steps": steps, "bare_ns": statistics.median(bare),
            "timed_ns": statistics.median(timed)}  # fmt: skip


def has_gpu() -> bool:
    probe = "import torch, sys; sys.exit(0 if torch.cuda.is_available() else 1)"
    return subprocess.run([sys.executable, "-c", probe], capture_output=True).returncode == 0


def run_clock(clock: str, steps: int, repeat: int) -> dict:
    cmd = [sys.executable, __file__, "--one", clock, "--steps", str(steps), "--repeat",
           str(repeat)]  # fmt: skip
    out = subprocess.run(cmd, capture_output=True, text=True, check=False)
    if out.returncode != 0:
        raise SystemExit(f"timing_cost: the {clock} run failed:\n{out.stderr[-2000:]}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def format_table(rows: list[dict]) -> str:
    lines = ["| clock | steps | timed step | bare step | census per step | share of a 10 ms step |",
             "| --- | ---: | ---: | ---: | ---: | ---: |"]  # fmt: skip
    for r in rows:
        cost = r["timed_ns"] - r["bare_ns"]
        lines.append(f"| {r['clock']} | {r['steps']:,} | {r['timed_ns']:,.0f} ns | "
                     f"{r['bare_ns']:,.0f} ns | {cost:,.0f} ns | {cost / STEP_NS:.3%} |")  # fmt: skip
    lines.append(f"\nmachine: {os.cpu_count()} cores, Python {sys.version.split()[0]}; medians of "
                 "alternating runs; a step: census.steps + 3 phases + record + count")  # fmt: skip
    return "\n".join(lines)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--steps", type=int, default=20_000, help="steps per host-clock loop")
    p.add_argument("--cuda-steps", type=int, default=2_000, help="steps per CUDA-events loop")
    p.add_argument("--repeat", type=int, default=5)
    p.add_argument("--one", choices=("host", "cuda_events"), help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.one:
        print(json.dumps(measure_clock(args.one, args.steps, args.repeat)))
        return
    rows = [run_clock("host", args.steps, args.repeat)]
    if has_gpu():
        rows.append(run_clock("cuda_events", args.cuda_steps, args.repeat))
    print(format_table(rows))
    over = [r["clock"] for r in rows if r["timed_ns"] - r["bare_ns"] > BUDGET * STEP_NS]
    if over:
        print(f"over the budget of {BUDGET:.0%} of a 10 ms step: {', '.join(over)}")
        sys.exit(1)


if __name__ == "__main__":
    main()

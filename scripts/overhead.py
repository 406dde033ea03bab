"""What census's step timing costs the demo workload, measured on the GPU.

One process builds the demo model and warms it up; then blocks of steps alternate between the
plain loop (no census.steps, no phases) and the same loop inside census.steps with timing on
($CENSUS_STEP_TIMES: NVTX ranges, a CUDA event per step and phase boundary, census.phase), in a
warm block + ABBA BAAB order. Each block's time is taken between two synchronizes around its
steps, the same way for both sides; the block model of census.compare.ab.stats gives the difference
with its 95% interval. Blocks in one process remove the process-to-process spread that would
otherwise hide a cost of well under 1%. A second measurement times the instrumentation alone
(empty steps) on the host.

    python scripts/overhead.py --blocks 16 --steps 20 [--out overhead.json]
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import tempfile
import time
from pathlib import Path

import torch

import census
from census.capture.arms import arm_order
from census.capture.demo.train import build, train_step
from census.compare.ab.stats import analyze
from census.model.ab import Arm


def workload():
    torch.manual_seed(0)
    model = build(1024, 4, heads=16).cuda()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4, foreach=True)
    x = torch.randn(8, 512, 1024, device="cuda")
    target = torch.randn_like(x)
    scratch = torch.empty(4 * 1024 * 1024, device="cuda")

    def step(phase) -> None:
        train_step(model, opt, x, target, scratch, phase)

    return step


def block(step, timed: bool, n: int) -> int:
    """Per-step wall time of n steps, between a synchronize before the first and after the last."""
    loop = census.steps(range(n), warmup=0, active=n) if timed else range(n)
    phase = census.phase if timed else (lambda _name: contextlib.nullcontext())
    t0 = t1 = 0
    for i in loop:
        if i == 0:
            torch.cuda.synchronize()
            t0 = time.perf_counter_ns()
        step(phase)
        if i == n - 1:
            torch.cuda.synchronize()
            t1 = time.perf_counter_ns()
    return round((t1 - t0) / n)


def record_cost_ns(n: int = 5000) -> dict[str, float]:
    """Host time of one Event.record(): torch's default, and with a stream object in hand."""
    events = [torch.cuda.Event(enable_timing=True) for _ in range(n)]
    stream = torch.cuda.current_stream()
    for ev in events:
        ev.record()
    torch.cuda.synchronize()
    out = {}
    for label, arg in (("record()", None), ("record(stream)", stream)):
        t0 = time.perf_counter_ns()
        for ev in events:
            ev.record(arg)
        out[label] = (time.perf_counter_ns() - t0) / n
        torch.cuda.synchronize()
    return out


def host_cost_ns(n: int = 5000) -> tuple[float, float]:
    """Host time per empty step inside the window: plain loop, and census.steps with timing
    and three phases (the clock stops at the last step, before the record is read)."""
    t0 = time.perf_counter_ns()
    for _ in range(n):
        pass
    plain = (time.perf_counter_ns() - t0) / n
    t0 = t1 = time.perf_counter_ns()
    for i in census.steps(range(n), warmup=0, active=n):
        if i == 0:
            t0 = time.perf_counter_ns()
        for name in ("forward", "backward", "optimizer"):
            with census.phase(name):
                pass
        if i == n - 1:
            t1 = time.perf_counter_ns()
    return plain, (t1 - t0) / (n - 1)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--blocks", type=int, default=16)
    p.add_argument("--steps", type=int, default=20)
    p.add_argument("--out")
    args = p.parse_args()
    step = workload()
    arms = []
    with tempfile.TemporaryDirectory() as tmp:
        os.environ["CENSUS_STEP_TIMES"] = str(Path(tmp) / "steps.json")
        block(step, False, 10)  # compile cuBLAS plans, fill the allocator
        for i, side in enumerate(arm_order(args.blocks)):
            per_step = block(step, side == "b", args.steps)
            arms.append(Arm(side, i, i == 0, (per_step,)))
            print(f"block {i} {'census' if side == 'b' else 'plain'}: {per_step / 1e6:.3f} ms/step")
        plain_host, census_host = host_cost_ns()
        records = record_cost_ns()
    st = analyze(arms)
    base = st.a.median_of_arm_medians_ns
    result = {
        "plain_ms_per_step": base / 1e6,
        "census_ms_per_step": st.b.median_of_arm_medians_ns / 1e6,
        "delta_us_per_step": st.delta_median_ns / 1e3,
        "delta_pct": st.delta_pct,
        "ci95_pct": [100 * x / base for x in st.ci95_ns],
        "verdict": st.verdict,
        "host_ns_per_empty_step": {"plain": plain_host, "census_steps_and_3_phases": census_host},
        "host_ns_per_event_record": records,
    }
    print(json.dumps(result, indent=1))
    if args.out:
        Path(args.out).write_text(json.dumps({**result, "blocks": [a.step_time_ns for a in arms]}))


if __name__ == "__main__":
    main()

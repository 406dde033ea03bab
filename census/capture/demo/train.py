"""A small transformer training loop (bf16 autocast, AdamW), eager or torch.compile.

At its defaults (4 layers, d_model 1024, batch 16 x 1024 tokens) a step is GPU-bound on an H200
(about 15 ms eager, 13.4 ms compiled): fresh processes agree to tens of microseconds, so
`census ab --demo eager,compiled` settles compile's gain in 8 arms. At batch 8 x 512 it was
launch-bound and its processes' steps spread by milliseconds.

Run: python -m census.capture.demo.train --mode compiled --warmup 5 --steps 3
Each measured step is an NVTX range `step N` inside the CUDA profiler capture range, with
`forward`, `backward` and `optimizer` ranges (census.phase) inside it and one 16 MiB
device-to-device copy. `--plain` runs the same loop without census (no census.steps, no phases),
and `--window-out PATH` writes the measured steps' wall time, taken between two synchronizes
around them, so that census's own cost can be measured against the plain loop.

`--ddp` wraps the model in DistributedDataParallel under any launcher census knows (torchrun,
srun, mpirun: the rank, world and local rank from census.capture.launcher; MASTER_ADDR and
MASTER_PORT as torch.distributed's env:// wants them), each rank on GPU local rank % the GPUs it
sees, over NCCL (`--backend gloo` lets several ranks share one GPU). `--straggler-rank R
--straggler-ms MS` makes rank R sleep MS on the host in its forward each step: a known
straggler, whose peers wait for it in the gradients' all-reduce.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import time

import torch
from torch import nn

import census
from census.capture.launcher import rank_env


class Block(nn.Module):
    """One pre-norm transformer block: causal self-attention (SDPA) and a 4x GELU MLP."""

    def __init__(self, d: int, heads: int) -> None:
        super().__init__()
        self.ln1 = nn.LayerNorm(d)
        self.qkv = nn.Linear(d, 3 * d)
        self.proj = nn.Linear(d, d)
        self.ln2 = nn.LayerNorm(d)
        self.mlp = nn.Sequential(nn.Linear(d, 4 * d), nn.GELU(), nn.Linear(4 * d, d))
        self.heads = heads

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """`x` (batch, tokens, d) through attention and the MLP, each added to its input."""
        b, t, d = x.shape
        q, k, v = self.qkv(self.ln1(x)).view(b, t, 3, self.heads, d // self.heads).unbind(2)
        att = nn.functional.scaled_dot_product_attention(
            q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2), is_causal=True
        )
        x = x + self.proj(att.transpose(1, 2).reshape(b, t, d))
        return x + self.mlp(self.ln2(x))


def build(d: int, layers: int, heads: int) -> nn.Module:
    """`layers` Blocks of width `d` with `heads` attention heads, in sequence."""
    return nn.Sequential(*(Block(d, heads) for _ in range(layers)))


def train_step(step_fn, opt, x, target, scratch, phase, sleep_s: float = 0.0) -> torch.Tensor:
    """One step of the demo, each phase inside `phase(name)` (census.phase, or a no-op); a
    straggler's host sleeps `sleep_s` at the start of its forward."""
    with phase("forward"), torch.autocast("cuda", dtype=torch.bfloat16):
        if sleep_s:
            time.sleep(sleep_s)
        loss = nn.functional.mse_loss(step_fn(x).float(), target)
    with phase("backward"):
        loss.backward()
    with phase("optimizer"):
        opt.step()
        opt.zero_grad(set_to_none=True)
        n = min(scratch.numel(), x.numel())  # 16 MiB, or all of a smaller input
        scratch[:n].copy_(x.view(-1)[:n])  # the device-to-device copy
    return loss


def parse(argv: list[str] | None) -> argparse.Namespace:
    """The demo's command line (module docstring)."""
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--mode", choices=("eager", "compiled"), default="eager")
    p.add_argument("--warmup", type=int, default=None)
    p.add_argument("--steps", type=int, default=None)
    p.add_argument("--d-model", type=int, default=1024)
    p.add_argument("--layers", type=int, default=4)
    p.add_argument("--batch", type=int, default=16)
    p.add_argument("--seq", type=int, default=1024)
    p.add_argument(
        "--ddp", action="store_true", help="DistributedDataParallel (torchrun, srun, mpirun)"
    )
    p.add_argument("--backend", choices=("nccl", "gloo"), default="nccl")
    p.add_argument("--straggler-rank", type=int, default=None)
    p.add_argument("--straggler-ms", type=float, default=0.0)
    p.add_argument("--plain", action="store_true", help="the same loop without census")
    p.add_argument("--window-out", help="write the measured steps' wall time here (JSON)")
    return p.parse_args(argv)


def main(argv: list[str] | None = None) -> None:
    """Train the demo model for warm-up plus measured steps, inside census.steps unless --plain, and
    print the last loss."""
    args = parse(argv)
    if not torch.cuda.is_available():
        raise SystemExit("census demo workload: no CUDA GPU visible to torch")
    torch.manual_seed(0)
    place = rank_env()
    dev = torch.device("cuda", (place.local_rank or 0) % torch.cuda.device_count())
    torch.cuda.set_device(dev)
    model = build(args.d_model, args.layers, heads=args.d_model // 64).to(dev)
    if args.ddp:
        import torch.distributed as dist

        nccl = {"device_id": dev} if args.backend == "nccl" else {}
        dist.init_process_group(args.backend, rank=place.rank, world_size=place.world, **nccl)
        model = nn.parallel.DistributedDataParallel(model, device_ids=[dev.index])
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4, fused=False, foreach=True)
    step_fn = torch.compile(model) if args.mode == "compiled" else model
    straggler = args.straggler_rank is not None and args.straggler_rank == place.rank
    sleep_s = args.straggler_ms / 1000 if straggler else 0.0
    x = torch.randn(args.batch, args.seq, args.d_model, device=dev)
    target = torch.randn_like(x)
    scratch = torch.empty(4 * 1024 * 1024, device=dev)  # 16 MiB of float32
    warmup = 5 if args.warmup is None else args.warmup
    active = 3 if args.steps is None else args.steps
    loop = range(warmup + active)
    steps = loop if args.plain else census.steps(loop, warmup=warmup, active=active)
    phase = (lambda _name: contextlib.nullcontext()) if args.plain else census.phase
    window = [0, 0]
    for i in steps:
        if i == warmup:
            torch.cuda.synchronize()
            window[0] = time.perf_counter_ns()
        loss = train_step(step_fn, opt, x, target, scratch, phase, sleep_s)
        if not args.plain:
            census.record("loss", loss)  # read when the window closes: no sync in the step
        if i == warmup + active - 1:
            torch.cuda.synchronize()
            window[1] = time.perf_counter_ns()
    if args.window_out:
        with open(args.window_out, "w", encoding="utf-8") as fh:
            json.dump({"window_ns": window[1] - window[0], "steps": active}, fh)
    torch.cuda.synchronize()
    print(f"census demo: {args.mode}, {warmup} warm-up + {active} steps, loss {loss.item():.4f}")
    if args.ddp:
        torch.distributed.destroy_process_group()


if __name__ == "__main__":
    main()

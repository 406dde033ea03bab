"""A GPU-bound training loop with no per-step sync, as most loops that log every N steps are.

    census capture runahead --warmup 5 --active 12 --calibrate -- python examples/gpu_bound.py
    census capture runahead-compiled --warmup 5 --active 12 --calibrate -- \
        python examples/gpu_bound.py --compile

Four MLP blocks (d 4096, hidden 16384) over 8192 tokens in bf16 autocast with AdamW: about 50 ms
of GPU work per step on an H200. Nothing reads a GPU value inside the loop, so the host runs ahead
of the GPU until the launch queue fills and then blocks inside launch calls: the NVTX ranges of
the steps and phases time the host's enqueueing, not the GPU's work (see "Reading the output").
"""

from __future__ import annotations

import argparse
import os

import torch
from torch import nn

import census


def build(dim: int, blocks: int) -> nn.Module:
    layers: list[nn.Module] = []
    for _ in range(blocks):
        layers += [nn.LayerNorm(dim), nn.Linear(dim, 4 * dim), nn.GELU(), nn.Linear(4 * dim, dim)]
    return nn.Sequential(*layers)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--compile", action="store_true")
    parser.add_argument("--dim", type=int, default=4096)
    parser.add_argument("--blocks", type=int, default=4)
    parser.add_argument("--tokens", type=int, default=8192)
    args = parser.parse_args()
    torch.manual_seed(0)
    model = build(args.dim, args.blocks).cuda()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4, fused=True)
    forward = torch.compile(model) if args.compile else model
    x = torch.randn(args.tokens, args.dim, device="cuda")
    target = torch.randn(args.tokens, args.dim, device="cuda")
    total = int(os.environ.get("CENSUS_WARMUP", 5)) + int(os.environ.get("CENSUS_ACTIVE", 12))
    for _ in census.steps(range(total)):
        with census.phase("forward"), torch.autocast("cuda", dtype=torch.bfloat16):
            loss = nn.functional.mse_loss(forward(x).float(), target)
        with census.phase("backward"):
            loss.backward()
        with census.phase("optimizer"):
            opt.step()
            opt.zero_grad(set_to_none=True)
    torch.cuda.synchronize()
    print(f"gpu_bound: done, loss {loss.item():.5f}")


if __name__ == "__main__":
    main()

"""A training loop whose steps copy between host and device, as a data loader and a logging
`.item()` do: the known host<->device traffic that census's h2d/d2h counts are checked against.

    census capture copies --warmup 3 --active 10 -- python examples/host_copies.py

Each step: the batch is made on the host and copied to the GPU (two H2D copies: inputs from
pinned memory, `non_blocking=True`, and targets from pageable memory), a small MLP runs forward
and backward, the optimizer steps, and the loss is read back with `.item()` (one D2H copy of 4
bytes, a synchronization), and every 2nd step a 16-value slice of the output too (`.cpu()`, one
D2H copy of 64 bytes). Phases: `data` (the H2D copies), `forward`, `backward`, `optimizer`,
`log` (the D2H reads).
"""

from __future__ import annotations

import argparse

import torch
from torch import nn

import census


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--steps", type=int, default=13)
    p.add_argument("--batch", type=int, default=256)
    p.add_argument("--width", type=int, default=1024)
    args = p.parse_args()
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(args.width, args.width), nn.GELU(),
                          nn.Linear(args.width, args.width)).cuda()  # fmt: skip
    opt = torch.optim.SGD(model.parameters(), lr=1e-3)
    for i in census.steps(range(args.steps)):
        with census.phase("data"):
            x = torch.randn(args.batch, args.width).pin_memory().cuda(non_blocking=True)
            y = torch.randn(args.batch, args.width).cuda()
        with census.phase("forward"):
            out = model(x)
            loss = (out - y).square().mean()
        with census.phase("backward"):
            loss.backward()
        with census.phase("optimizer"):
            opt.step()
            opt.zero_grad(set_to_none=True)
        with census.phase("log"):
            value = loss.item()
            if i % 2 == 0:
                head = out[0, :16].float().cpu()
    print(f"host_copies: done, loss {value:.4f}, head {head.sum().item():.4f}")


if __name__ == "__main__":
    main()

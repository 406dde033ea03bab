"""A small training loop fed by a DataLoader of worker processes (forked, no exec).

    census capture loader --warmup 3 --active 5 -- python examples/loader_loop.py --workers 2

The batches are made on the host by `--workers` worker processes (a synthetic dataset: each item
a seeded random vector and target), pinned, copied to the GPU (host-to-device copies) and trained
on by an MLP with AdamW. Each measured step is census.steps' `step N` range around one batch of
the loader, with `forward`, `backward` and `optimizer` phases (census.phase). For nsys's
`--trace-fork-before-exec=true`, which traces the forked workers too.
"""

from __future__ import annotations

import argparse

import torch
from torch import nn
from torch.utils.data import DataLoader, Dataset

import census


class Synthetic(Dataset):
    """`n` items, each a random vector of width `d` and its target, seeded by the index."""

    def __init__(self, n: int, d: int) -> None:
        self.n, self.d = n, d

    def __len__(self) -> int:
        return self.n

    def __getitem__(self, i: int) -> tuple[torch.Tensor, torch.Tensor]:
        g = torch.Generator().manual_seed(i)
        return torch.randn(self.d, generator=g), torch.randn(self.d, generator=g)


def main() -> None:
    """Train for warm-up plus measured batches of the loader, inside census.steps."""
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--d", type=int, default=512)
    p.add_argument("--batch", type=int, default=64)
    p.add_argument("--workers", type=int, default=2)
    p.add_argument("--warmup", type=int, default=3)
    p.add_argument("--steps", type=int, default=5)
    args = p.parse_args()
    if not torch.cuda.is_available():
        raise SystemExit("loader_loop: no CUDA GPU visible to torch")
    torch.manual_seed(0)
    d = args.d
    model = nn.Sequential(nn.Linear(d, 4 * d), nn.GELU(), nn.Linear(4 * d, d)).cuda()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4, foreach=True)
    data = Synthetic(args.batch * (args.warmup + args.steps), d)
    loader = DataLoader(data, batch_size=args.batch, num_workers=args.workers, pin_memory=True)
    loss = None
    for x, y in census.steps(loader, warmup=args.warmup, active=args.steps):
        with census.phase("forward"):
            x, y = x.cuda(non_blocking=True), y.cuda(non_blocking=True)
            loss = nn.functional.mse_loss(model(x), y)
        with census.phase("backward"):
            loss.backward()
        with census.phase("optimizer"):
            opt.step()
            opt.zero_grad(set_to_none=True)
    torch.cuda.synchronize()
    print(f"loader_loop: {args.workers} workers, {len(loader)} batches, loss {loss.item():.5f}")


if __name__ == "__main__":
    main()

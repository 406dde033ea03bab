"""Data-parallel ranks that share one GPU, for `census ab` under torchrun on a one-GPU machine.

    census ab tr --a "torchrun --nproc-per-node 2 examples/ranks_one_gpu.py" \
                 --b "torchrun --nproc-per-node 2 examples/ranks_one_gpu.py --width 3072"

NCCL refuses two ranks on one GPU, so the ranks join a gloo group: each computes its forward and
backward on the GPU, then the gradients are averaged through gloo on the host (copied out and
back, as DDP's gloo backend would) before the optimizer step. Every rank records its loss and
counts its all-reduces (census.record, census.count); census merges the ranks' records per arm.
"""

import argparse

import torch
import torch.distributed as dist
from torch import nn

import census


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--width", type=int, default=2048)
    p.add_argument("--steps", type=int, default=30)
    args = p.parse_args()
    dist.init_process_group("gloo")
    rank = dist.get_rank()
    torch.manual_seed(0)  # the same model on every rank; each rank its own data
    model = nn.Sequential(nn.Linear(1024, args.width), nn.GELU(), nn.Linear(args.width, 1024))
    model = model.cuda()
    opt = torch.optim.SGD(model.parameters(), lr=1e-3)
    gen = torch.Generator(device="cuda").manual_seed(1 + rank)
    x = torch.randn(512, 1024, device="cuda", generator=gen)
    for _ in census.steps(range(args.steps)):
        with census.phase("forward"):
            loss = model(x).square().mean()
            census.record("loss", loss)
        with census.phase("backward"):
            loss.backward()
        with census.phase("allreduce"):
            for param in model.parameters():
                host = param.grad.cpu()
                dist.all_reduce(host)
                param.grad.copy_(host / dist.get_world_size())
                census.count("allreduce")
        with census.phase("optimizer"):
            opt.step()
            opt.zero_grad()
    torch.cuda.synchronize()
    dist.destroy_process_group()
    if rank == 0:
        print(f"ranks_one_gpu: done, loss {loss.item():.5f}")


if __name__ == "__main__":
    main()

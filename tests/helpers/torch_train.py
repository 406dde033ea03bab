"""A tiny CPU training loop marked with census (tests/test_torch_capture.py): census.steps with
phases forward, backward and optimizer, for `census capture --profiler torch`, alone or as
each rank of a gloo torchrun (--dist). With --torch-when-captured, torch is imported only in a
run census captures with torch.profiler ($CENSUS_PROFILER): `census ab`'s uncaptured arms then
run the same loop of phases without torch, in a fraction of the time."""

from __future__ import annotations

import argparse
import os

import census


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--steps", type=int, default=8)
    parser.add_argument("--dist", action="store_true")
    parser.add_argument("--torch-when-captured", action="store_true")
    args = parser.parse_args()
    if args.torch_when_captured and os.environ.get("CENSUS_PROFILER") != "torch":
        for _ in census.steps(range(args.steps)):
            for name in ("forward", "backward", "optimizer"):
                with census.phase(name):
                    sum(range(1000))
        return
    import torch

    torch.manual_seed(0)
    torch.set_num_threads(1)
    model = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.ReLU(), torch.nn.Linear(32, 1))
    if args.dist:
        torch.distributed.init_process_group("gloo")
        model = torch.nn.parallel.DistributedDataParallel(model)
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    x, y = torch.randn(8, 16), torch.randn(8, 1)
    for _ in census.steps(range(args.steps)):
        with census.phase("forward"):
            loss = torch.nn.functional.mse_loss(model(x), y)
        with census.phase("backward"):
            loss.backward()
        with census.phase("optimizer"):
            opt.step()
            opt.zero_grad()
    if args.dist:
        torch.distributed.destroy_process_group()


if __name__ == "__main__":
    main()

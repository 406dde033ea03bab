"""A user's own training script, instrumented for census with two lines.

    census capture mine --warmup 3 --active 5 -- python examples/user_train.py

`census.steps` wraps each measured step in an NVTX range `step N` and opens the capture range
after the warm-up; `--warmup/--active` reach it through the environment.
"""

import torch
from torch import nn

import census


def main() -> None:
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(2048, 4096), nn.ReLU(), nn.Linear(4096, 2048)).cuda()
    opt = torch.optim.SGD(model.parameters(), lr=1e-3)
    x = torch.randn(256, 2048, device="cuda")
    for _ in census.steps(range(10)):
        loss = model(x).square().mean()
        loss.backward()
        opt.step()
        opt.zero_grad()
    torch.cuda.synchronize()
    print(f"user_train: done, loss {loss.item():.5f}")


if __name__ == "__main__":
    main()

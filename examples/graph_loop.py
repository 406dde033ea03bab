"""A small training loop whose forward, backward and optimizer step replay CUDA graphs.

    census capture graphs --warmup 3 --active 5 -- python examples/graph_loop.py

The model (an MLP with its MSE loss) goes through torch.cuda.make_graphed_callables: its forward
and its backward are each one CUDA graph, replayed every step (the parameters' gradients are then
accumulated eagerly, one kernel each). The optimizer step (SGD with momentum, foreach), the
zeroing of the gradients and one device-to-device copy of the input (a memcpy node) are captured
into a third graph with torch.cuda.graph. Each measured step is census.steps' `step N` range, with
`forward`, `backward` and `optimizer` phases (census.phase) around the three replays, so a capture
with `--cuda-graph-trace=node` sees each graph's kernels and one with `--cuda-graph-trace=graph`
sees each replay as one row.
"""

from __future__ import annotations

import argparse

import torch
from torch import nn

import census


class Loss(nn.Module):
    """An MLP of `layers` Linear + GELU blocks of width `d` and its mean squared error to `y`."""

    def __init__(self, d: int, layers: int) -> None:
        super().__init__()
        self.net = nn.Sequential(*(m for _ in range(layers) for m in (nn.Linear(d, d), nn.GELU())))

    def forward(self, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        """The loss of the MLP's output of `x` against `y` (a 0-d tensor)."""
        return nn.functional.mse_loss(self.net(x), y)


def parse() -> argparse.Namespace:
    """The loop's command line (module docstring)."""
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--d", type=int, default=512)
    p.add_argument("--layers", type=int, default=4)
    p.add_argument("--batch", type=int, default=256)
    p.add_argument("--warmup", type=int, default=None)
    p.add_argument("--steps", type=int, default=None)
    return p.parse_args()


def optimizer_graph(opt: torch.optim.Optimizer, scratch, x) -> torch.cuda.CUDAGraph:
    """The optimizer step, the gradients' zeroing and a copy of `x` into `scratch`, captured once
    (after two eager steps on a side stream, which create the momentum buffers)."""
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        for _ in range(2):
            opt.step()
            opt.zero_grad(set_to_none=False)
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        opt.step()
        opt.zero_grad(set_to_none=False)
        scratch.copy_(x)
    return graph


def main() -> None:
    """Build the graphs, then run warm-up plus measured steps inside census.steps."""
    args = parse()
    if not torch.cuda.is_available():
        raise SystemExit("graph_loop: no CUDA GPU visible to torch")
    torch.manual_seed(0)
    dev = torch.device("cuda")
    x = torch.randn(args.batch, args.d, device=dev)
    y = torch.randn(args.batch, args.d, device=dev)
    scratch = torch.empty_like(x)
    model = Loss(args.d, args.layers).to(dev)
    graphed = torch.cuda.make_graphed_callables(model, (x, y))
    opt = torch.optim.SGD(model.parameters(), lr=1e-3, momentum=0.9, foreach=True)
    for param in model.parameters():  # gradients at fixed addresses, added into in place
        param.grad = torch.zeros_like(param)
    graphed(x, y).backward()
    opt_graph = optimizer_graph(opt, scratch, x)
    warmup = 3 if args.warmup is None else args.warmup
    active = 5 if args.steps is None else args.steps
    loss = None
    for _ in census.steps(range(warmup + active), warmup=warmup, active=active):
        with census.phase("forward"):
            loss = graphed(x, y)
        with census.phase("backward"):
            loss.backward()
        with census.phase("optimizer"):
            opt_graph.replay()
    torch.cuda.synchronize()
    print(f"graph_loop: {warmup} warm-up + {active} steps, loss {loss.item():.5f}")


if __name__ == "__main__":
    main()

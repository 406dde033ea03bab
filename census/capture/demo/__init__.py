"""The built-in workload: a small transformer trained eagerly or under torch.compile."""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

from census.errors import UsageError

DEMO_MODES = ("eager", "compiled")
DDP_MODES = ("ddp-eager", "ddp-compiled")


def demo_command(mode: str, warmup: int, steps: int, nproc: int = 2) -> tuple[str, ...]:
    """The built-in workload; ddp-* modes run it on `nproc` GPUs through torchrun and NCCL."""
    if mode in DDP_MODES:
        script = str(Path(__file__).parent / "train.py")
        launcher = shutil.which("torchrun")
        head = (launcher,) if launcher else (sys.executable, "-m", "torch.distributed.run")
        return (*head, "--nproc-per-node", str(nproc), script, "--ddp",
                "--mode", mode.removeprefix("ddp-"), "--warmup", str(warmup), "--steps", str(steps))  # fmt: skip
    if mode not in DEMO_MODES:
        raise UsageError(f"--demo {mode!r}: choose eager, compiled, ddp-eager or ddp-compiled")
    return (sys.executable, "-m", "census.capture.demo.train", "--mode", mode,
            "--warmup", str(warmup), "--steps", str(steps))  # fmt: skip

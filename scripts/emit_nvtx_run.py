"""Run a Python script or module inside torch.autograd.profiler.emit_nvtx(): every aten op and
autograd node becomes an NVTX range (`aten::mm, seq = 12, op_id = 40`), as `census capture --ops`
asks of nsys versions without their own PyTorch option. Used by scripts/gpu_probe_ops.sh.

    python scripts/emit_nvtx_run.py examples/hf_moe.py --compile
    python scripts/emit_nvtx_run.py -m census.capture.demo.train --mode eager
"""

from __future__ import annotations

import runpy
import sys

import torch


def main() -> None:
    """Run argv[1:] (a script, or `-m module`) with emit_nvtx on."""
    args = sys.argv[1:]
    module = args[0] == "-m"
    target = args[1] if module else args[0]
    sys.argv = [target, *args[2 if module else 1 :]]
    with torch.autograd.profiler.emit_nvtx():
        if module:
            runpy.run_module(target, run_name="__main__", alter_sys=True)
        else:
            runpy.run_path(target, run_name="__main__")


if __name__ == "__main__":
    main()

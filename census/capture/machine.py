"""The machine a capture ran on, for its run.json (census.capture.run.run_info): GPU model and
driver, CUDA, torch and nsys versions, each asked of the program that knows it (probe)."""

from __future__ import annotations

import contextlib
import functools
import json
import subprocess
import sys


def probe(cmd: list[str], timeout: float = 30.0) -> str | None:
    """`cmd`'s stdout, stripped, when it ran and exited 0; None otherwise."""
    with contextlib.suppress(OSError, subprocess.SubprocessError):
        out = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, check=False)
        if out.returncode == 0:
            return out.stdout.strip()
    return None


@functools.lru_cache(maxsize=4)  # asked once a process: census ab's second capture waits less
def environment_info(nsys: str) -> dict:
    """GPU model and driver, CUDA and torch versions, nsys version: None where unknown (torch's
    asked of a fresh Python, seconds: once per process and nsys; run_info copies the dict)."""
    gpu = probe(["nvidia-smi", "--query-gpu=name,driver_version", "--format=csv,noheader"])
    torch_info = probe(
        [
            sys.executable,
            "-c",
            "import torch, json; print(json.dumps([torch.__version__, torch.version.cuda]))",
        ],
    )
    torch_version, cuda_version = json.loads(torch_info) if torch_info else (None, None)
    gpus = [ln.split(",")[0].strip() for ln in gpu.splitlines()] if gpu else []
    driver = gpu.splitlines()[0].split(",")[1].strip() if gpu and "," in gpu else None
    nsys_version = probe([nsys, "--version"])
    return {
        "gpus": gpus,
        "driver_version": driver,
        "cuda_version": cuda_version,
        "torch_version": torch_version,
        "nsys_version": nsys_version,
    }

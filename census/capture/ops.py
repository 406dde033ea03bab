"""`census capture --ops` (#56): who records the captured run's op ranges, and what census.steps
is told. nsys's own PyTorch option (NSYS_PYTORCH, Nsight Systems 2024 and later) enters
torch.autograd.profiler.emit_nvtx for the whole program, without the script's help; where the
nsys found lacks it (2022.4), and on every rank under a launcher (each rank's nsys is started by
census.cli.on_rank), census.steps enters it around the measured steps ($CENSUS_OPS). Only the
captured run is told: its calibration run never (ops_env), `census ab`'s arms never
(census.capture.steps.op_ranges_asked reads $CENSUS_OPS in the captured run alone).
"""

from __future__ import annotations

import functools
import subprocess

from census.capture.steps import ENV_OPS, OPS_EMIT_NVTX

NSYS_PYTORCH = "--pytorch=autograd-nvtx"


@functools.cache
def nsys_pytorch(nsys: str) -> bool:
    """Whether `nsys profile` takes NSYS_PYTORCH: its help names `--pytorch` and `autograd-nvtx`
    (nsys 2022.4 has neither); False where the help cannot be read."""
    try:
        out = subprocess.run([nsys, "profile", "--help"], capture_output=True, text=True,
                             timeout=60, check=False)  # fmt: skip
    except (OSError, subprocess.SubprocessError):
        return False
    text = out.stdout + out.stderr
    return "--pytorch" in text and "autograd-nvtx" in text


def op_ranges(asked: bool, nsys: str, several_ranks: bool) -> str | None:
    """Who records the captured run's op ranges when `asked` (--ops): NSYS_PYTORCH where `nsys`
    has it and one process runs, else census.steps (OPS_EMIT_NVTX); None when not asked."""
    if not asked:
        return None
    return NSYS_PYTORCH if not several_ranks and nsys_pytorch(nsys) else OPS_EMIT_NVTX


def ops_env(ops: str | None, run: str) -> dict[str, str]:
    """$CENSUS_OPS for a program census runs (`run`: capture, calibration): emit_nvtx for the
    captured run when census.steps records its op ranges, else empty: census decides, whatever
    the program would inherit."""
    return {ENV_OPS: OPS_EMIT_NVTX if ops == OPS_EMIT_NVTX and run == "capture" else ""}

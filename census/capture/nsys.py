"""Finding nsys: the one executable every nsys capture and every `.nsys-rep` export runs; for a
capture, where it is missing and torch is installed, the error says `--profiler torch`."""

from __future__ import annotations

import importlib.util
import os
import shutil
from pathlib import Path

from census.errors import ToolMissingError

NSYS_INSTALL_HINT = (
    "install Nsight Systems (https://developer.nvidia.com/nsight-systems; on Debian the "
    "`nsight-systems` package in non-free)"
)


def find_nsys(explicit: str | None = None, option: str | None = "--nsys") -> str:
    """The nsys executable: `explicit` (the command's `option`), then $CENSUS_NSYS, then PATH.
    The error names `option` only where the command takes one (None: $CENSUS_NSYS alone, as
    for a `.nsys-rep` given to summary, diff or dashboard)."""
    where = f"pass its path with {option} / $CENSUS_NSYS" if option else "set $CENSUS_NSYS to it"
    candidate = explicit or os.environ.get("CENSUS_NSYS")
    if candidate:
        if Path(candidate).is_file() and os.access(candidate, os.X_OK):
            return candidate
        found = shutil.which(candidate)
        if found:
            return found
        raise ToolMissingError(f"nsys not found at {candidate}: {NSYS_INSTALL_HINT} or {where}")
    found = shutil.which("nsys")
    if not found:
        raise ToolMissingError(f"nsys not found on PATH: {NSYS_INSTALL_HINT} or {where}")
    return found


TORCH_HINT = "or capture without nsys: census capture --profiler torch (torch is installed here)"


def find_nsys_to_capture(explicit: str | None = None) -> str:
    """find_nsys for a capture: where nsys is missing and torch is installed, its one-line error
    also says that torch.profiler can capture (`--profiler torch`)."""
    try:
        return find_nsys(explicit)
    except ToolMissingError as exc:
        if not torch_installed():
            raise
        raise ToolMissingError(f"{exc}; {TORCH_HINT}") from None


def torch_installed() -> bool:
    """Whether census's Python can import torch (found, not imported)."""
    try:
        return importlib.util.find_spec("torch") is not None
    except (ImportError, ValueError):
        return False

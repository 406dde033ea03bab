"""Finding nsys: the one executable every capture and every `.nsys-rep` export runs."""

from __future__ import annotations

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

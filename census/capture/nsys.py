"""Finding nsys: the one executable every capture and every `.nsys-rep` export runs."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

from census.errors import ToolMissingError

NSYS_INSTALL_HINT = (
    "install Nsight Systems (https://developer.nvidia.com/nsight-systems; on Debian the "
    "`nsight-systems` package in non-free) or pass its path with --nsys / $CENSUS_NSYS"
)


def find_nsys(explicit: str | None = None) -> str:
    """The nsys executable: --nsys, then $CENSUS_NSYS, then PATH."""
    candidate = explicit or os.environ.get("CENSUS_NSYS")
    if candidate:
        if Path(candidate).is_file() and os.access(candidate, os.X_OK):
            return candidate
        found = shutil.which(candidate)
        if found:
            return found
        raise ToolMissingError(f"nsys not found at {candidate}: {NSYS_INSTALL_HINT}")
    found = shutil.which("nsys")
    if not found:
        raise ToolMissingError(f"nsys not found on PATH: {NSYS_INSTALL_HINT}")
    return found

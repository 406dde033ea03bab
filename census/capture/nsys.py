"""Finding nsys, the one executable every nsys capture and every `.nsys-rep` export runs (for a
capture, where it is missing and torch is installed, the error says `--profiler torch`); its
version, and the `nsys export` command census runs (options pinned by version)."""

from __future__ import annotations

import functools
import importlib.util
import os
import re
import shutil
import subprocess
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


# `nsys export` settings to pin from the first version they are proven on (docs/performance.md,
# "what could cut the export"): tables made only where they hold rows (--lazy, a default nsys
# says "is likely to change"), no NVTX payload blobs and no repeated JSON blocks (census reads
# neither; both off by default), no progress bar. None of them makes 2025.3's export faster
# than its defaults do: they keep a later nsys from making it slower. Proven on no version yet
# (no GPU this session): `scripts/gpu_pipeline.sh after` exports one report with them and
# without; once the tables and their rows are the same, EXPORT_PINNED_FROM = (2025, 3).
EXPORT_PINNED_FROM: tuple[int, int] | None = None
EXPORT_PINNED = ("--lazy=true", "--include-blobs=false", "--include-json=false", "--quiet=true")


@functools.lru_cache(maxsize=8)
def nsys_version(nsys: str) -> tuple[int, int] | None:
    """(year, release) of `nsys --version` ("... version 2025.3.1.0" -> (2025, 3)); None when it
    does not say."""
    try:
        out = subprocess.run([nsys, "--version"], capture_output=True, text=True, timeout=60,
                             check=False)  # fmt: skip
    except (OSError, subprocess.SubprocessError):
        return None
    found = re.search(r"version (\d+)\.(\d+)", out.stdout)
    return (int(found[1]), int(found[2])) if found else None


def export_command(nsys: str, report: Path, output: Path) -> list[str]:
    """`nsys export` of `report` to the SQLite file `output` (replaced), with EXPORT_PINNED on
    the versions they are proven on (nsys's version asked only where some are)."""
    pinned = pinned_export_options(nsys_version(nsys)) if EXPORT_PINNED_FROM else ()
    return [nsys, "export", "--type", "sqlite", "--force-overwrite", "true", *pinned,
            "--output", str(output), str(report)]  # fmt: skip


def pinned_export_options(
    version: tuple[int, int] | None, since: tuple[int, int] | None = EXPORT_PINNED_FROM
) -> tuple[str, ...]:
    """EXPORT_PINNED for an nsys of `version` (year, release) from `since` on, else none (an
    unknown version, or `since` None: none)."""
    if version is None or since is None or version < since:
        return ()
    return EXPORT_PINNED

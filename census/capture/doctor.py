"""`census doctor`: can this machine capture? One check a line, each with what to do."""

from __future__ import annotations

import contextlib
import functools
import json
import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

from census.capture.nsys import find_nsys
from census.errors import ToolMissingError


@dataclass(frozen=True)
class Check:
    """One line of `census doctor`: what was checked, whether it passed, and what was found or what
    to do."""

    name: str
    ok: bool
    detail: str


def _run(cmd: list[str], timeout: float = 60.0) -> tuple[int, str]:
    try:
        out = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, check=False)
    except (OSError, subprocess.SubprocessError) as exc:
        return 127, str(exc)
    return out.returncode, (out.stdout + out.stderr).strip()


def run_checks(nsys: str | None, profiles: Path) -> list[Check]:
    """Every check of `census doctor`, in the order it prints them."""
    return [*_check_nsys(nsys), *check_torch(), _check_driver(), _check_profiles(profiles)]


ANALYSIS_WORKS = (
    "Analysis works here: census summary, diff and dashboard read nsys exports (.sqlite) and "
    "torch.profiler traces (.json, .json.gz) on any machine."
)
# What capturing needs, by the check that finds it missing
_NEEDS = {
    "nsys": "nsys (Nsight Systems)",
    "torch": "torch built with CUDA",
    "GPU visible to torch": "a CUDA GPU that torch sees",
    "NVIDIA driver": "the NVIDIA driver",
}


def capture_needs(checks: list[Check]) -> list[str]:
    """What capturing needs that the failed `checks` found missing, in their order."""
    folder = "a folder it can write captures to (-o)"
    needs = [_NEEDS.get(c.name, folder if c.name.endswith(" writable") else c.name)
             for c in checks if not c.ok and c.name != "nsys status -e"]  # fmt: skip
    return list(dict.fromkeys(needs))


def verdict(checks: list[Check]) -> list[str]:
    """The lines `census doctor` prints before its checks when one failed: that analysis works
    here, then what capturing would need."""
    needs = capture_needs(checks)
    if not needs and all(c.ok for c in checks):
        return []
    lacking = f"; it lacks {', '.join(needs)}" if needs else ""
    return [ANALYSIS_WORKS,
            f"Capturing needs nsys, a CUDA GPU and torch with CUDA{lacking} (the checks below "
            "say what to do)."]  # fmt: skip


def _check_nsys(nsys: str | None) -> list[Check]:
    """nsys found and its version, then `nsys status -e` (whether this machine can profile)."""
    try:
        exe = find_nsys(nsys)
    except ToolMissingError as exc:
        return [Check("nsys", False, str(exc))]
    rc, out = _run([exe, "--version"])
    checks = [Check("nsys", rc == 0, f"{exe}: {out.splitlines()[-1] if out else rc}")]
    rc, out = _run([exe, "status", "-e"])
    last = out.splitlines()[-1] if out else f"exit {rc}"
    checks.append(
        Check("nsys status -e", rc == 0, last if rc == 0 else f"{last} (see `nsys status -e`)")
    )
    return checks


def check_torch() -> list[Check]:
    """torch importable in this interpreter, the CUDA it was built for, and the GPU it sees."""
    code = (
        "import json, torch; c = torch.cuda.is_available(); "
        "print(json.dumps([torch.__version__, torch.version.cuda, c, "
        "torch.cuda.get_device_name(0) if c else None]))"
    )
    rc, out = _run([sys.executable, "-c", code])
    if rc != 0:
        return [
            Check(
                "torch",
                False,
                "torch is not importable: install PyTorch for this machine's CUDA (PyTorch's own "
                "instructions), then census into the same environment",
            )
        ]
    import json

    version, cuda, available, name = json.loads(out.splitlines()[-1])
    return [
        Check("torch", True, f"torch {version}, built for CUDA {cuda}"),
        Check("GPU visible to torch", bool(available), name or "no CUDA GPU: check drivers"),
    ]


def _check_driver() -> Check:
    rc, out = _run(["nvidia-smi", "--query-gpu=name,driver_version", "--format=csv,noheader"])
    return Check(
        "NVIDIA driver",
        rc == 0,
        out.splitlines()[0] if rc == 0 and out else "nvidia-smi not found or failed",
    )


def _check_profiles(profiles: Path) -> Check:
    """The captures' folder writable (made when its parent exists)."""
    profiles.mkdir(parents=True, exist_ok=True) if profiles.parent.exists() else None
    writable = profiles.is_dir() and os.access(profiles, os.W_OK)
    return Check(
        f"{profiles}/ writable",
        writable,
        "ok" if writable else "cannot write captures here: use -o",
    )


def cannot_capture(nsys: str | None) -> str | None:
    """Why this machine cannot capture (no nsys, no GPU visible to torch), or None."""
    try:
        find_nsys(nsys)
    except ToolMissingError:
        return "nsys is not installed"
    found = subprocess.run(
        [
            sys.executable,
            "-c",
            "import torch, sys; sys.exit(0 if torch.cuda.is_available() else 1)",
        ],
        capture_output=True,
        check=False,
    )
    return None if found.returncode == 0 else "no CUDA GPU visible to torch"


def probe(cmd: list[str], timeout: float = 30.0) -> str | None:
    """The stripped standard output of `cmd` when it exits 0 within `timeout` s; else None."""
    with contextlib.suppress(OSError, subprocess.SubprocessError):
        out = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, check=False)
        if out.returncode == 0:
            return out.stdout.strip()
    return None


@functools.lru_cache(maxsize=4)  # asked once a process: census ab's second capture waits less
def environment_info(nsys: str | None) -> dict:
    """GPU model and driver, CUDA and torch versions, nsys version (`nsys` None: not asked): None
    where unknown (torch's asked of a fresh Python, seconds: once per process and nsys; run_info
    copies the dict)."""
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
    nsys_version = probe([nsys, "--version"]) if nsys else None
    return {
        "gpus": gpus,
        "driver_version": driver,
        "cuda_version": cuda_version,
        "torch_version": torch_version,
        "nsys_version": nsys_version,
    }

"""Whether a process runs, from /proc (Linux)."""

from __future__ import annotations

from pathlib import Path


def alive(pid: int) -> bool:
    """Whether `pid` runs (a zombie nobody reaped has ended)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except (FileNotFoundError, ProcessLookupError):
        return False
    return stat.rsplit(")", 1)[1].split()[0] not in ("Z", "X")

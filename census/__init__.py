"""census: explain why one PyTorch training run is faster than another, from Nsight Systems.

The training-loop API (`census.step`, `census.steps`) is importable without torch; heavy
modules load lazily so `census --help` stays fast.
"""

from __future__ import annotations

from typing import Any

__version__ = "0.1.0"
CENSUS_VERSION = 1  # version of the JSON contract, bumped on incompatible change

__all__ = ["CENSUS_VERSION", "__version__", "step", "steps"]


def __getattr__(name: str) -> Any:
    if name in ("step", "steps"):
        from census import nvtx

        return getattr(nvtx, name)
    raise AttributeError(name)

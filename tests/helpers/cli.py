"""census run as a user runs it: its own process, its own standard streams."""

from __future__ import annotations

import os
import subprocess
import sys


def census_process(*args: str, **kwargs) -> subprocess.CompletedProcess:
    """`python -m census ARGS` in a process of its own (UTF-8 output), with `kwargs` for
    subprocess.run (where its stdout and stderr go)."""
    env = {**os.environ, "PYTHONIOENCODING": "utf-8"}
    return subprocess.run([sys.executable, "-m", "census", *args], env=env, timeout=120,
                          check=False, **kwargs)  # fmt: skip

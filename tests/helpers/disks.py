"""Small real file systems for the tests of a full disk: a tmpfs mounted at a folder, or one
mounted over /tmp for a single command (a mount namespace of its own), and a disk filled."""

from __future__ import annotations

import contextlib
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest


@contextlib.contextmanager
def small_tmpfs(folder: Path, size: str = "1m") -> Iterator[Path]:
    """A tmpfs of `size` mounted at `folder`; the test is skipped where none can be mounted."""
    folder.mkdir()
    mounted = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(folder)],
                             capture_output=True, text=True, check=False)  # fmt: skip
    if mounted.returncode != 0:
        pytest.skip(f"cannot mount a small tmpfs here ({mounted.stderr.strip() or 'not root'})")
    try:
        yield folder
    finally:
        subprocess.run(["umount", str(folder)], check=True)


def fill(path: Path) -> None:
    """`path` written until its disk is full."""
    with open(path, "ab", buffering=0) as fh, contextlib.suppress(OSError):
        while True:
            fh.write(b"x" * 4096)


def on_small_tmp(command: list[str], size: str = "2m") -> list[str]:
    """`command` run in a mount namespace of its own where /tmp and /var/tmp are one new tmpfs of
    `size`, its working folder: every temporary folder Python would take is on that disk. The
    test is skipped where no such namespace can be made."""
    script = (f"mount -t tmpfs -o size={size} small-tmp /tmp && mount --bind /tmp /var/tmp && "
              'cd /tmp && exec "$@"')  # fmt: skip
    wrapped = ["unshare", "--mount", "--propagation", "private", "sh", "-c", script, "sh"]
    probe = subprocess.run([*wrapped, "true"], capture_output=True, text=True, check=False)
    if probe.returncode != 0:
        pytest.skip(f"cannot make a mount namespace here ({probe.stderr.strip() or 'not root'})")
    return [*wrapped, *command]

"""Small real file systems for the tests of a full disk: a tmpfs mounted at a folder, or one
mounted over /tmp for a single command (a mount namespace of its own), and a disk filled."""

from __future__ import annotations

import contextlib
import subprocess
import sys
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


def skip_if_hidden(*hidden: str) -> None:
    """Skip the test where Python's environment or this checkout lies under one of the folders
    `hidden` (a namespace that mounts a new tmpfs there would hide them from the program it
    runs: a virtual environment or a clone under /tmp)."""
    import census

    repo = Path(census.__file__).resolve().parents[1]
    for place, what in ((Path(sys.prefix).resolve(), "Python's environment"),
                        (repo, "this checkout")):  # fmt: skip
        for folder in hidden:
            if place.is_relative_to(folder):
                pytest.skip(f"{what} lies under {folder} ({place}), which this test hides from "
                            "the programs it runs: put it elsewhere to run it")  # fmt: skip


def on_small_tmp(command: list[str], size: str = "2m") -> list[str]:
    """`command` run in a mount namespace of its own where /tmp and /var/tmp are one new tmpfs of
    `size`, its working folder: every temporary folder Python would take is on that disk. The
    test is skipped where no such namespace can be made, or where it would hide Python or this
    checkout."""
    skip_if_hidden("/tmp", "/var/tmp")
    script = (f"mount -t tmpfs -o size={size} small-tmp /tmp && mount --bind /tmp /var/tmp && "
              'cd /tmp && exec "$@"')  # fmt: skip
    wrapped = ["unshare", "--mount", "--propagation", "private", "sh", "-c", script, "sh"]
    probe = subprocess.run([*wrapped, "true"], capture_output=True, text=True, check=False)
    if probe.returncode != 0:
        pytest.skip(f"cannot make a mount namespace here ({probe.stderr.strip() or 'not root'})")
    return [*wrapped, *command]

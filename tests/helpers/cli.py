"""census run as a user runs it: its own process, its own standard streams, the signals a
terminal sends at their defaults."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
from collections.abc import Iterator


def census_process(*args: str, **kwargs) -> subprocess.CompletedProcess:
    """`python -m census ARGS` in a process of its own (UTF-8 output), with `kwargs` for
    subprocess.run (where its stdout and stderr go)."""
    env = {**os.environ, "PYTHONIOENCODING": "utf-8"}
    return subprocess.run([sys.executable, "-m", "census", *args], env=env, timeout=120,
                          check=False, **kwargs)  # fmt: skip


SENT_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)


def default_signals() -> None:
    """Popen's preexec_fn: Ctrl-C, SIGTERM and SIGHUP at their defaults in the child, as from a
    terminal, whatever the test run inherited (nohup ignores SIGHUP, a shell's `&` SIGINT, and
    an ignored signal stays ignored across exec): a test that sends one tests census, not how
    pytest was started."""
    for signum in SENT_SIGNALS:
        signal.signal(signum, signal.SIG_DFL)


@contextlib.contextmanager
def started(command: list[str], **kwargs) -> Iterator[subprocess.Popen]:
    """`command` running (Popen with `kwargs`), its signals at their defaults; killed if it
    still runs when the test leaves, so that a failed assertion never waits on it."""
    proc = subprocess.Popen(command, preexec_fn=default_signals, **kwargs)
    try:
        yield proc
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.__exit__(None, None, None)  # its pipes closed, the process reaped

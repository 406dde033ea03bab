"""A program run in the background while census runs others (census ab: side A's `nsys export`
while side B's program runs, census.capture.overlap).

It runs in a process group of its own, at a lower CPU priority (NICE: the program in the
foreground is the one being measured, and wins a contended core), with no stdin and its output
in a temporary file (nothing reads a pipe meanwhile, so it never stalls on a full one); only the
file's last TAIL_BYTES are read, for the error. It is a context manager: however the block is
left (an error, Ctrl-C, a foreground program that failed), a background program still running
has its whole group stopped, SIGTERM then SIGKILL after GRACE_S, and is reaped. `join()` waits
for it and, when it failed, raises the ProgramError census.capture.process.run_group raises for
a program run silently: its last line in the message, its output's tail printed after it.
"""

from __future__ import annotations

import contextlib
import os
import shlex
import signal
import subprocess
import tempfile
import time
from typing import IO

from census.capture.process import GRACE_S, REAP_S, TAIL_BYTES, failed, tail_text
from census.errors import CaptureError

NICE = 10  # added to the background program's niceness (0 to 19: lower priority)


class Background:
    """`command` (with `env`) started in the background on entering the block; `what` names it
    in errors ("the export of A's report")."""

    def __init__(self, command: list[str], env: dict[str, str], what: str) -> None:
        self.command, self.env, self.what = command, env, what
        self.proc: subprocess.Popen | None = None
        self._out: IO[bytes] | None = None

    def __enter__(self) -> Background:
        self._out = tempfile.TemporaryFile(prefix="census-background-")
        try:
            self.proc = subprocess.Popen(self.command, env=self.env, stdin=subprocess.DEVNULL,
                                         stdout=self._out, stderr=subprocess.STDOUT,
                                         start_new_session=True)  # fmt: skip
        except OSError as exc:
            self._out.close()
            raise CaptureError(f"{self.what} could not start: {shlex.join(self.command)}: "
                               f"{exc.strerror or exc}", self.command) from None  # fmt: skip
        with contextlib.suppress(OSError):  # its group: whatever it forked already
            os.setpriority(os.PRIO_PGRP, self.proc.pid, os.getpriority(os.PRIO_PROCESS, 0) + NICE)
        return self

    def join(self) -> str:
        """Wait for the program to end; the tail of its output. ProgramError when it failed."""
        assert self.proc is not None and self._out is not None
        if self.proc.returncode is None:  # not reaped yet: wait for its end, keeping its pid
            with contextlib.suppress(ChildProcessError):  # (its group's id) from reuse meanwhile
                os.waitid(os.P_PID, self.proc.pid, os.WEXITED | os.WNOWAIT)
            _signal_group(self.proc.pid, signal.SIGKILL)  # what it left running in its group
        code = self.proc.wait()
        text = tail_text(self._tail())
        if code != 0:
            raise failed(self.command, self.what, code, text, echo=False)
        return text

    def _tail(self) -> bytes:
        assert self._out is not None
        self._out.seek(0, os.SEEK_END)
        self._out.seek(max(0, self._out.tell() - TAIL_BYTES))
        return self._out.read()

    def __exit__(self, *exc: object) -> None:
        try:
            if self.proc is not None:
                self.stop()
        finally:
            if self._out is not None:
                self._out.close()

    def stop(self) -> None:
        """The program's whole group stopped, unless it has ended: SIGTERM, GRACE_S for it to
        exit, then SIGKILL to what is left of the group; reaped."""
        proc = self.proc
        if proc is None or proc.poll() is not None:
            return
        _signal_group(proc.pid, signal.SIGTERM)
        deadline = time.monotonic() + GRACE_S
        while proc.poll() is None and time.monotonic() < deadline:
            time.sleep(0.02)
        _signal_group(proc.pid, signal.SIGKILL)
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.wait(REAP_S)


def _signal_group(pgid: int, signum: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, signum)

"""A command run under resource limits by a process that adopts what the command leaves behind.

Run as a program (`python reaper.py SPEC`), it makes itself a child subreaper (Linux), so that
every process the command started and left running comes back to it as a child, runs the
command with the limits of SPEC set in its preexec_fn, waits 1 s after the command exits, and
prints JSON: the command's exit code, its stderr, and the processes still alive then (which it
then kills). `reaped(...)` is how tests call it.
"""

from __future__ import annotations

import ctypes
import json
import os
import resource
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

PR_SET_CHILD_SUBREAPER = 36  # <linux/prctl.h>
AFTER_S = 1.0  # what is still alive this long after the command exited was left behind


@dataclass(frozen=True)
class Reaped:
    code: int | None  # None: still running after its time (then killed)
    stderr: str
    left: list[str]  # "PID COMMAND" of each process left alive AFTER_S after the command

    @property
    def lines(self) -> list[str]:
        """stderr's lines but census's progress."""
        return [ln for ln in self.stderr.splitlines() if not ln.startswith("census: ")]


def reaped(command: list[str], limits: dict[str, int] | None = None, env: dict | None = None,
           stdout: Path | None = None, timeout: float = 120,
           interrupt: tuple[Path, int] | None = None) -> Reaped:  # fmt: skip
    """`command` run under `limits` (resource.RLIMIT_* names -> bytes) with `env`, its stdout
    into `stdout` (else discarded); killed after `timeout` seconds (then its code is None).
    `interrupt` (FOLDER, SIGNAL): the signal sent to it once something appears in FOLDER."""
    spec = {"command": command, "limits": limits or {}, "env": env or dict(os.environ),
            "stdout": str(stdout) if stdout else os.devnull, "timeout": timeout,
            "interrupt": [str(interrupt[0]), interrupt[1]] if interrupt else None}  # fmt: skip
    out = subprocess.run([sys.executable, __file__, json.dumps(spec)], capture_output=True,
                         text=True, timeout=timeout + 10, check=True)  # fmt: skip
    return Reaped(**json.loads(out.stdout))


def _children() -> list[str]:
    """This process's children that have not ended (zombies reaped on the way)."""
    me, found = str(os.getpid()), []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        name, rest = stat[stat.index("(") + 1 : stat.rindex(")")], stat[stat.rindex(")") + 2 :]
        state, ppid = rest.split()[:2]
        if ppid != me:
            continue
        if state in "ZX":
            os.waitpid(int(entry.name), os.WNOHANG)
        else:
            found.append(f"{entry.name} {name}")
    return found


def _interrupt(proc: subprocess.Popen, folder: Path, signum: int, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while not any(folder.iterdir()) and proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.05)
    time.sleep(0.3)  # the program goes on past the moment it wrote its mark
    proc.send_signal(signum)


def main(spec: dict) -> None:
    libc = ctypes.CDLL(None, use_errno=True)
    assert libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) == 0

    def limit() -> None:
        for name, value in spec["limits"].items():
            resource.setrlimit(getattr(resource, name), (value, value))

    with open(spec["stdout"], "wb") as out:
        proc = subprocess.Popen(spec["command"], stdout=out, stderr=subprocess.PIPE,
                                env=spec["env"], preexec_fn=limit)  # fmt: skip
        if spec["interrupt"]:
            _interrupt(proc, Path(spec["interrupt"][0]), spec["interrupt"][1], spec["timeout"])
        try:
            _, err = proc.communicate(timeout=spec["timeout"])
        except subprocess.TimeoutExpired:
            proc.kill()
            _, err = proc.communicate()
            proc.returncode = None
    time.sleep(AFTER_S)
    left = _children()
    for entry in left:
        os.kill(int(entry.split()[0]), signal.SIGKILL)
    print(json.dumps({"code": proc.returncode, "stderr": err.decode("utf-8", "replace"),
                      "left": left}))  # fmt: skip


if __name__ == "__main__":
    main(json.loads(sys.argv[1]))

"""The arms of an A/B experiment: fresh processes run without nsys, in a fixed order.

One warm arm (side A) runs first and is discarded (it fills the compile caches, the page cache
and the GPU's clocks); then the measured arms run in blocks of four, ABBA BAAB ABBA ... Each arm
is the user's command with $CENSUS_WARMUP, $CENSUS_ACTIVE and $CENSUS_STEP_TIMES set, so that
census.steps() times the measured steps (census.capture.timing) and writes them down.

An arm runs in its own process group, which is stopped however the arm ends (its exit, a failure,
Ctrl-C, a second Ctrl-C, SIGTERM): nothing it started outlives it. Its output is read as it comes
and only its tail is kept, for the error when it fails. Its record is checked field by field
before any number of it is used.
"""

from __future__ import annotations

import contextlib
import json
import os
import selectors
import shlex
import signal
import subprocess
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from census.capture.steps import ENV_ACTIVE, ENV_STEP_TIMES, ENV_WARMUP
from census.errors import CaptureError
from census.model import Arm
from census.paths import owner_tag
from census.units import clip

BLOCKS = (("a", "b", "b", "a"), ("b", "a", "a", "b"))


def arm_order(arms: int) -> list[str]:
    """The side of every arm in run order: the discarded warm arm (A) first, then `arms`
    measured arms in ABBA BAAB blocks."""
    if arms < 4 or arms % 4:
        raise ValueError(f"--arms {arms}: give a multiple of 4 (at least 4)")
    return ["a", *(s for i in range(arms // 4) for s in BLOCKS[i % 2])]


@dataclass(frozen=True)
class ArmsSpec:
    commands: dict[str, tuple[str, ...]]  # side ("a", "b") -> argv
    labels: tuple[str, str]
    arms: int = 8
    warmup: int | None = None
    steps: int | None = None
    env: tuple[tuple[str, str], ...] = ()


class ArmError(CaptureError):
    """An arm failed. Arms run silently, so `details`, the end of its output (real lines), is
    printed after the one-line error."""

    def __init__(self, message: str, command: list[str], tail: str) -> None:
        super().__init__(message, command, tail)
        self.details = tail


def run_arms(spec: ArmsSpec, progress: Callable[[str], None] | None = None) -> list[Arm]:
    """Every arm in run order, the warm one first (discarded)."""
    order = arm_order(spec.arms)
    out = []
    # census-PID-HOST-*, as a pass's spill folder: left by a census killed outright, it is
    # removed by the next pass that spills (census.load.pool)
    with tempfile.TemporaryDirectory(prefix=f"census-{owner_tag()}-") as tmp:
        for index, side in enumerate(order):
            label = spec.labels[0 if side == "a" else 1]
            what = "warm arm (discarded)" if index == 0 else f"arm {index}/{spec.arms}"
            if progress:
                progress(f"{what}: {label}")
            out.append(_run_arm(spec, side, label, index, Path(tmp) / f"arm{index}.json"))
    return out


def _run_arm(spec: ArmsSpec, side: str, label: str, index: int, times: Path) -> Arm:
    command = list(spec.commands[side])
    env = {**os.environ, **dict(spec.env), ENV_STEP_TIMES: str(times)}
    if spec.warmup is not None:
        env[ENV_WARMUP] = str(spec.warmup)
    if spec.steps is not None:
        env[ENV_ACTIVE] = str(spec.steps)
    named = label if label == side.upper() else f"{side.upper()}, {label}"
    what = f"arm {index} ({named}{', the discarded warm arm' if index == 0 else ''})"
    run_silently(command, env, what)
    record = read_record(times, what, command)
    if record is None or not record.get("step_time_ns"):
        raise CaptureError(
            f"{what} recorded no steps: wrap the training loop in census.steps() "
            f"(`for batch in census.steps(loader): ...`): {' '.join(command)}",
            command,
        )
    dynamo = record.get("dynamo") or {}
    return Arm(
        side=side,
        index=index,
        discarded=index == 0,
        step_time_ns=tuple(record["step_time_ns"]),
        peak_allocated_bytes=record.get("peak_allocated_bytes"),
        peak_reserved_bytes=record.get("peak_reserved_bytes"),
        recompiles=dynamo.get("frames_compiled"),
        graph_breaks=dynamo.get("graph_breaks"),
        clock=record["clock"],
    )


# -- the record an arm writes -------------------------------------------------------------------
RECORD_BYTES = 64 << 20  # a million steps' record is about 30 MB
MAX_NS = 1 << 62  # 146 years: beyond it a number is not a time
CLOCKS = ("cuda_events", "host")


def read_record(path: Path, what: str, command: list[str]) -> dict | None:
    """The arm's step-times record (census.capture.timing), checked field by field: None when
    the arm wrote none; a CaptureError naming the arm and the first bad field when it is
    not a record census.steps writes."""
    try:
        size = path.stat().st_size
        if size > RECORD_BYTES:
            raise _bad_record(
                what, command, f"{size:,} bytes, more than a record's {RECORD_BYTES:,}"
            )
        record = json.loads(path.read_bytes())
    except FileNotFoundError:
        return None
    except (OSError, ValueError, RecursionError) as exc:
        raise _bad_record(what, command, f"not JSON ({clip(str(exc), 120)})") from None
    try:
        check_record(record)
    except ValueError as exc:
        raise _bad_record(what, command, str(exc)) from None
    return record


def _bad_record(what: str, command: list[str], why: str) -> CaptureError:
    return CaptureError(f"{what}: its step-times record (${ENV_STEP_TIMES}) is damaged: {why}",
                        command)  # fmt: skip


def check_record(record: Any) -> None:
    """ValueError naming the first field of `record` that census.steps would not have written."""
    if not isinstance(record, dict):
        raise ValueError(f"it is {_shown(record)}, not a JSON object")
    steps = _field(record, "step_time_ns", list)
    if not steps:
        return  # no steps: said as such by the caller
    for i, t in enumerate(steps):
        _count(t, f"step_time_ns[{i}]", positive=True)
    if record.get("clock") not in CLOCKS:
        raise ValueError(f'clock is {_shown(record.get("clock"))}, not "cuda_events" or "host"')
    host = _field(record, "host_step_time_ns", list, optional=True) or []
    for i, t in enumerate(host):
        _count(t, f"host_step_time_ns[{i}]")
    if host and len(host) != len(steps):
        raise ValueError(f"host_step_time_ns has {len(host)} steps, step_time_ns {len(steps)}")
    for name, times in (_field(record, "phase_time_ns", dict, optional=True) or {}).items():
        if not isinstance(times, list) or len(times) != len(steps):
            raise ValueError(f"phase_time_ns[{_shown(name)}] is not a list of {len(steps)} times")
        for i, t in enumerate(times):
            _count(t, f"phase_time_ns[{_shown(name)}][{i}]")
    for key in ("peak_allocated_bytes", "peak_reserved_bytes"):
        if record.get(key) is not None:
            _count(record[key], key)
    dynamo = _field(record, "dynamo", dict, optional=True) or {}
    for key in ("frames_compiled", "graph_breaks"):
        if key in dynamo:
            _count(dynamo[key], f"dynamo.{key}")


def _field(record: dict, key: str, kind: type, optional: bool = False) -> Any:
    value = record.get(key)
    if value is None and (optional or key not in record):
        return None
    if not isinstance(value, kind):
        what = "a JSON list" if kind is list else "a JSON object"
        raise ValueError(f"{key} is {_shown(value)}, not {what}")
    return value


def _count(value: Any, name: str, positive: bool = False) -> None:
    """An integer in [0, 2^62) (above 0 when `positive`): not a boolean, a real, NaN or a text."""
    low = 1 if positive else 0
    if type(value) is not int or not low <= value < MAX_NS:
        kind = "a positive integer" if positive else "an integer, 0 or more"
        raise ValueError(f"{name} is {_shown(value)}, not {kind}")


def _shown(value: Any) -> str:
    """A value as the record spells it (NaN, Infinity, true), clipped."""
    return clip(json.dumps(value), 40)


# -- running one arm ----------------------------------------------------------------------------
TAIL_BYTES = 64 << 10  # of an arm's output kept for its error; the rest is read and dropped
SHOWN_CHARS, SHOWN_LINES = 3000, 40  # of the tail, in the error
CHUNK = 64 << 10
POLL_S = 0.1  # how often a running arm is checked for its exit or a signal
GRACE_S = 3.0  # between SIGTERM to the arm's group and SIGKILL
DRAIN_S = 1.0  # for output still in the pipe once the group is stopped
REAP_S = 10.0  # for the arm's process to be gone after SIGKILL (a GPU context takes a while)


def run_silently(command: list[str], env: dict[str, str], what: str) -> None:
    """Run one arm, its output kept only as a bounded tail; its whole process group is stopped
    however it ends. A failure raises ArmError: one line, and the tail as `details`."""
    tail = bytearray()
    with _signals_recorded() as caught:
        try:
            proc = subprocess.Popen(command, env=env, stdin=subprocess.DEVNULL,
                                    stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                    start_new_session=True)  # fmt: skip
        except OSError as exc:
            raise CaptureError(
                f"{what} could not start: {shlex.join(command)}: {exc.strerror or exc}", command
            ) from None
        assert proc.stdout is not None
        with proc.stdout, selectors.DefaultSelector() as sel:
            sel.register(proc.stdout, selectors.EVENT_READ)
            fd, eof = proc.stdout.fileno(), False
            try:
                eof = _read(fd, sel, tail, lambda: bool(caught) or _exited(proc))
                while eof and not caught and not _exited(proc):  # it closed its output
                    time.sleep(POLL_S / 4)
            finally:
                _stop_group(proc, caught)
                if not eof:  # what it wrote before it was stopped
                    deadline = time.monotonic() + DRAIN_S
                    _read(fd, sel, tail, lambda: time.monotonic() > deadline)
    if proc.returncode != 0:
        text = _tail_text(tail)
        last = next((ln for ln in reversed(text.splitlines()) if ln.strip()), "no output")
        raise ArmError(
            f"{what} failed ({_ended(proc.returncode)}): {' '.join(command)}: {last.strip()}",
            command,
            text,
        )


def _read(fd: int, sel: selectors.BaseSelector, tail: bytearray, until: Callable[[], bool]) -> bool:
    """Append the arm's output to `tail` (keeping its last TAIL_BYTES) until `until()`, or
    until the pipe's end (then True)."""
    while not until():
        if not sel.select(POLL_S):
            continue
        chunk = os.read(fd, CHUNK)
        if not chunk:
            return True
        tail += chunk
        if len(tail) > 2 * TAIL_BYTES:
            del tail[:-TAIL_BYTES]
    return False


def _tail_text(tail: bytearray) -> str:
    """The last lines of the output as text: bytes that are not UTF-8 escaped (`\\xff`); of a
    line a carriage return rewrote (a progress bar), what a terminal showed."""
    whole = bytes(tail[-TAIL_BYTES:]).decode("utf-8", errors="backslashreplace")
    text = whole[-SHOWN_CHARS:]
    lines = [ln.rstrip("\r").rsplit("\r", 1)[-1] for ln in text.split("\n")]
    if len(text) < len(whole) and len(lines) > 1:
        lines = lines[1:]  # the first line is cut
    return "\n".join(lines[-SHOWN_LINES:]).strip("\n")


def _ended(code: int | None) -> str:
    if code is None:
        return "still running after SIGKILL"
    if code < 0:
        with contextlib.suppress(ValueError):
            return f"killed by {signal.Signals(-code).name}"
    return f"exit {code}"


def _exited(proc: subprocess.Popen) -> bool:
    """Whether the arm's process has ended, without reaping it: its pid, the id of its group,
    stays reserved until the group is stopped."""
    if not hasattr(os, "waitid"):
        return proc.poll() is not None
    try:
        flags = os.WEXITED | os.WNOHANG | os.WNOWAIT
        return os.waitid(os.P_PID, proc.pid, flags) is not None
    except ChildProcessError:
        return True


def _stop_group(proc: subprocess.Popen, caught: list[int]) -> None:
    """SIGTERM to the arm's whole group, a moment for its process to exit, then SIGKILL to what
    is left of the group. A signal meanwhile (a second Ctrl-C) cuts the moment short."""
    signals = len(caught)
    _signal_group(proc.pid, signal.SIGTERM)
    deadline = time.monotonic() + GRACE_S
    while not _exited(proc) and len(caught) == signals and time.monotonic() < deadline:
        time.sleep(0.02)
    _signal_group(proc.pid, signal.SIGKILL)
    with contextlib.suppress(subprocess.TimeoutExpired):
        proc.wait(REAP_S)


def _signal_group(pgid: int, signum: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, signum)


INTERRUPTS = tuple(
    getattr(signal, s) for s in ("SIGINT", "SIGTERM", "SIGHUP") if hasattr(signal, s)
)


@contextlib.contextmanager
def _signals_recorded() -> Iterator[list[int]]:
    """While an arm runs, Ctrl-C, SIGTERM and SIGHUP are recorded in the yielded list instead of
    raising, so that no exception can cut the stopping of the arm's group short; the first is
    delivered again once the block is left (a Ctrl-C then raises KeyboardInterrupt). Signals
    census ignores stay ignored; outside the main thread nothing changes."""
    caught: list[int] = []
    if threading.current_thread() is not threading.main_thread():
        yield caught
        return
    previous = {}
    for signum in INTERRUPTS:
        handler = signal.getsignal(signum)
        if handler is not signal.SIG_IGN:
            previous[signum] = handler
            signal.signal(signum, lambda n, _frame: caught.append(n))
    try:
        yield caught
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, signal.SIG_DFL if handler is None else handler)
    if caught:
        signal.raise_signal(caught[0])

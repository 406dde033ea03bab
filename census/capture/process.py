"""Running a program census starts (an A/B arm, nsys, a calibration run) as one process group.

The program runs in its own session, so its whole process group can be stopped however it ends
(its exit, a failure, Ctrl-C, a second Ctrl-C, SIGTERM, SIGHUP): nothing it started outlives it.
What leaves the group (a daemon that forks twice into a session of its own) is reached too, on
Linux: census is a child subreaper while the program runs (PR_SET_CHILD_SUBREAPER), so such
orphans come back to it rather than to init, and it ends every one with the program, known by
the mark in the program's environment (docs/robustness.md says what cannot be reached: another
subreaper between them, another host, an environment replaced).
Its output is read as it comes, shown on stderr as it comes when asked (bytes that are not UTF-8
escaped, `\\xff`), and only its tail is kept, for the error when it fails: census's memory does
not grow with the program's output.
"""

from __future__ import annotations

import codecs
import contextlib
import ctypes
import os
import select
import shlex
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator

from census.errors import CaptureError

TAIL_BYTES = 64 << 10  # of the output kept for the error; the rest is read and dropped
SHOWN_CHARS, SHOWN_LINES = 3000, 40  # of the tail, in the error
CHUNK = 64 << 10
POLL_S = 0.1  # how often a running program is checked for its exit or a signal
GRACE_S = 3.0  # between the first signal to the group and SIGKILL
DRAIN_S = 1.0  # for output still in the pipe once the group is stopped
REAP_S = 10.0  # for the program's process to be gone after SIGKILL (a GPU context takes a while)


class ProgramError(CaptureError):
    """A program census ran failed. `details`, the end of its output (real lines), is printed
    after the one-line error when the program ran silently; empty when its output was shown."""

    def __init__(self, message: str, command: list[str], tail: str, details: str = "") -> None:
        super().__init__(message, command, tail)
        self.details = details


def run_group(
    command: list[str],
    env: dict[str, str],
    what: str,
    echo: bool = False,
    first_signal: int = signal.SIGTERM,
    grace_s: float = GRACE_S,
) -> str:
    """Run `command` in a process group of its own and return the tail of its output (text).

    `echo` shows the output on stderr as it comes (and the program keeps census's stdin);
    otherwise it runs silently, with no stdin. However it ends, its group gets `first_signal`,
    `grace_s` seconds for the program to exit (a second Ctrl-C cuts them short), then SIGKILL.
    A failure raises ProgramError naming `what`; a Ctrl-C, once the group is stopped, raises
    KeyboardInterrupt."""
    with _signals_recorded() as caught, _adopting() as adopted:
        before, mark = (set(_children()) if adopted else set()), _mark()
        try:
            proc = subprocess.Popen(command, env={**env, MARK: mark}, stdout=subprocess.PIPE,
                                    stdin=None if echo else subprocess.DEVNULL,
                                    stderr=subprocess.STDOUT, start_new_session=True)  # fmt: skip
        except OSError as exc:
            raise CaptureError(
                f"{what} could not start: {shlex.join(command)}: {exc.strerror or exc}", command
            ) from None
        assert proc.stdout is not None
        with proc.stdout:
            out = _Output(proc.stdout.fileno(), echo)
            try:
                out.follow(lambda: bool(caught) or _exited(proc))
            finally:
                _stop_group(proc, out, caught, first_signal, grace_s)
                if adopted:
                    end_orphans(mark, {*before, proc.pid})
                out.drain(DRAIN_S)  # what it wrote before it was stopped
    text = out.text()
    if proc.returncode != 0:
        raise failed(command, what, proc.returncode, text, echo)
    return text


def failed(command: list[str], what: str, code: int | None, text: str, echo: bool) -> ProgramError:
    """The error of a program that ended with `code`: its last line of output in the message,
    and (when its output was not shown as it came) the tail `text` printed after it."""
    last = next((ln for ln in reversed(text.splitlines()) if ln.strip()), "no output")
    return ProgramError(f"{what} failed ({_ended(code)}): {' '.join(command)}: {last.strip()}",
                        command, text, "" if echo else text)  # fmt: skip


class _Output:
    """The program's output pipe: read as it comes, its last TAIL_BYTES kept, and each chunk
    shown on stderr when echoed (decoded across chunks, bytes that are not UTF-8 escaped)."""

    def __init__(self, fd: int, echo: bool) -> None:
        self._fd = fd
        self._poll = select.poll()  # no descriptor of its own: nothing here can fail
        self._poll.register(fd, select.POLLIN)
        self._decoder = codecs.getincrementaldecoder("utf-8")("backslashreplace") if echo else None
        self.tail = bytearray()
        self.ended = False  # the pipe's end: every process that held it closed it

    def follow(self, until: Callable[[], bool]) -> None:
        """Read until `until()`; once the pipe has ended, only wait for it."""
        while not until():
            if self.ended:
                time.sleep(POLL_S / 4)
            elif self._poll.poll(POLL_S * 1000):
                self._add(os.read(self._fd, CHUNK))

    def drain(self, seconds: float) -> None:
        """Read what is left in the pipe, for `seconds` at most (a process outside the group may
        hold it open)."""
        deadline = time.monotonic() + seconds
        self.follow(lambda: self.ended or time.monotonic() > deadline)
        if self._decoder:
            self._show(self._decoder.decode(b"", final=True))

    def _add(self, chunk: bytes) -> None:
        self.ended = not chunk
        self.tail += chunk
        if len(self.tail) > 2 * TAIL_BYTES:
            del self.tail[:-TAIL_BYTES]
        if self._decoder and chunk:
            self._show(self._decoder.decode(chunk))

    def _show(self, text: str) -> None:
        try:
            sys.stderr.write(text)
            sys.stderr.flush()
        except (OSError, ValueError):  # a stderr that cannot be written stops only the showing
            self._decoder = None

    def text(self) -> str:
        """The last lines of the output (tail_text)."""
        return tail_text(bytes(self.tail[-TAIL_BYTES:]))


def tail_text(tail: bytes) -> str:
    """The last lines of a program's output `tail`: bytes that are not UTF-8 escaped (`\\xff`);
    of a line a carriage return rewrote (a progress bar), what a terminal showed."""
    whole = tail.decode("utf-8", errors="backslashreplace")
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
    """Whether the program's process has ended, without reaping it: its pid, the id of its
    group, stays reserved until the group is stopped."""
    if not hasattr(os, "waitid"):
        return proc.poll() is not None
    try:
        flags = os.WEXITED | os.WNOHANG | os.WNOWAIT
        return os.waitid(os.P_PID, proc.pid, flags) is not None
    except ChildProcessError:
        return True


def _stop_group(
    proc: subprocess.Popen, out: _Output, caught: list[int], first_signal: int, grace_s: float
) -> None:
    """`first_signal` to the program's whole group, `grace_s` for its process to exit (its
    output still read meanwhile), then SIGKILL to what is left of the group. A signal
    meanwhile (a second Ctrl-C) cuts the grace short, as does a second one that came before the
    stopping began (both arrived within one poll)."""
    signals = len(caught)
    _signal_group(proc.pid, first_signal)
    deadline = time.monotonic() + (0.0 if signals > 1 else grace_s)
    try:
        out.follow(lambda: _exited(proc) or len(caught) != signals or time.monotonic() > deadline)
    finally:
        _signal_group(proc.pid, signal.SIGKILL)
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.wait(REAP_S)


PR_SET_CHILD_SUBREAPER, PR_GET_CHILD_SUBREAPER = 36, 37  # <linux/prctl.h>


@contextlib.contextmanager
def _adopting() -> Iterator[bool]:
    """census a child subreaper while inside (Linux; yields whether it is): a process the
    program leaves behind that leaves its group too (setsid) is adopted by census when its
    parent ends, instead of by init, and so can be ended with the program (end_orphans)."""
    libc, was, zero = _libc(), ctypes.c_int(0), ctypes.c_ulong(0)  # prctl's unsigned longs
    if libc is None or libc.prctl(PR_GET_CHILD_SUBREAPER, ctypes.byref(was), zero, zero, zero):
        yield False
        return
    adopting = was.value != 0 or not libc.prctl(PR_SET_CHILD_SUBREAPER, ctypes.c_ulong(1),
                                                zero, zero, zero)  # fmt: skip
    try:
        yield adopting
    finally:
        if adopting and not was.value:
            libc.prctl(PR_SET_CHILD_SUBREAPER, zero, zero, zero, zero)


def _libc() -> ctypes.CDLL | None:
    if not sys.platform.startswith("linux"):
        return None
    try:
        return ctypes.CDLL(None, use_errno=True)
    except OSError:
        return None


MARK = "CENSUS_PROGRAM"  # in a program's environment, and so in its descendants'


def _mark() -> str:
    return f"{os.getpid()}.{time.monotonic_ns()}"


def end_orphans(mark: str, known: set[int]) -> list[int]:
    """Kill (SIGKILL, with the group each leads) and reap the processes a program left behind
    that census adopted: its children that carry the program's `mark` in their environment,
    but for `known` ones (the program, what was census's child before it) and those census
    started itself (multiprocessing's); those that have ended are reaped. Again until none is
    left (a killed one's children come back to census too), REAP_S at most. Returns their pids."""
    ended: list[int] = []
    deadline = time.monotonic() + REAP_S
    while time.monotonic() < deadline:
        own = _own_children() | known
        orphans = [pid for pid in _children() if pid not in own and _marked(pid, mark)]
        if not orphans:
            break
        for pid in orphans:
            _kill_orphan(pid, deadline)
        ended += orphans
    return ended


def _marked(pid: int, mark: str) -> bool:
    """Whether process `pid` is one of the program's (`mark` in its environment), or has ended
    (a zombie shows none: reaping it is all that is left to do)."""
    try:
        with open(f"/proc/{pid}/environ", "rb") as fh:
            environ = fh.read()
    except OSError:
        return False
    return not environ or f"{MARK}={mark}".encode() in environ.split(b"\0")


def _kill_orphan(pid: int, deadline: float) -> None:
    with contextlib.suppress(OSError):
        if os.getpgid(pid) == pid:  # it leads a group (a daemon's session): all of it
            os.killpg(pid, signal.SIGKILL)
    with contextlib.suppress(OSError):
        os.kill(pid, signal.SIGKILL)
    while time.monotonic() < deadline:  # reaped: its pid is never another process's meanwhile
        try:
            if os.waitpid(pid, os.WNOHANG)[0]:
                return
        except ChildProcessError:
            return
        time.sleep(POLL_S / 10)


def _children() -> list[int]:
    """The processes whose parent is census (any of its threads), from /proc."""
    me, found = os.getpid(), []
    with contextlib.suppress(OSError), os.scandir("/proc") as entries:
        for entry in entries:
            if not entry.name.isdigit():
                continue
            try:
                with open(f"/proc/{entry.name}/stat", "rb") as fh:
                    stat = fh.read()
            except OSError:
                continue
            if int(stat[stat.rindex(b")") + 2 :].split()[1]) == me:  # after the name: state, ppid
                found.append(int(entry.name))
    return found


def _own_children() -> set[int]:
    """The children census started through multiprocessing (its pools' workers, a process
    beside, a forkserver, the resource tracker): never a program's orphans."""
    mp = sys.modules.get("multiprocessing")
    if mp is None:
        return set()
    own = {p.pid for p in mp.active_children()}
    for module, attr in (("forkserver", "_forkserver"), ("resource_tracker", "_resource_tracker")):
        helper = getattr(sys.modules.get(f"multiprocessing.{module}"), attr, None)
        pid = getattr(helper, "_forkserver_pid" if module == "forkserver" else "_pid", None)
        if pid:
            own.add(pid)
    return own


def _signal_group(pgid: int, signum: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, signum)


INTERRUPTS = tuple(
    getattr(signal, s) for s in ("SIGINT", "SIGTERM", "SIGHUP") if hasattr(signal, s)
)


@contextlib.contextmanager
def _signals_recorded() -> Iterator[list[int]]:
    """While a program runs, Ctrl-C, SIGTERM and SIGHUP are recorded in the yielded list instead
    of raising, so that no exception can cut the stopping of its group short; the first is
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

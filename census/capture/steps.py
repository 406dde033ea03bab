"""Step ranges for training loops: NVTX ranges `step N` (domain `census`) and the capture range.

`census.steps(loader, warmup=K, active=N)` leaves the first K steps out of the capture (warm-up,
compilation), starts the CUDA profiler range, wraps the next N steps in NVTX ranges, then stops
the range (under `census capture --profiler torch`, torch.profiler's instead:
census.capture.torch_trace, which also marks the steps and phases for any torch.profiler
running). torch is used only if the training script already imported it. In a program census
runs ($CENSUS_RUN set: `census capture`, its calibration run, `census ab`'s arms) the loop ends
once the measured steps are over, when their number is known (`stop=False` keeps the rest of
the loop); anywhere else the loop runs whole. In the run `census capture --ops` captures, where
nsys has no PyTorch option of its own, torch.autograd.profiler.emit_nvtx is on for the measured
steps ($CENSUS_OPS: op_ranges_asked); never in a calibration run or an A/B arm.

In a timed run ($CENSUS_STEP_TIMES: calibration, `census ab` arms) `census.record(name, value)`
and `census.count(name, n)` called inside a measured step are kept in its record
(census.capture.timing: `values`, `counts`); anywhere else they return at once. Under a launcher
of several ranks (census.capture.launcher: torchrun, srun, mpirun) every rank writes its own
record, to `$CENSUS_STEP_TIMES.rankN`, atomically, with its place in the job (write_record). A
record that cannot be written (a node that does not see the experiment folder) is one line on
stderr (CANNOT_WRITE), never an exception: the training goes on, and census ab names the rank.
"""

from __future__ import annotations

import contextlib
import ctypes
import functools
import json
import os
import socket
import sys
from collections.abc import Iterable, Iterator
from typing import Any, TypeVar

from census.capture.launcher import RankEnv, rank_env
from census.capture.timing import StepTimer
from census.capture.torch_trace import TorchTrace, mark_close, mark_open

DOMAIN = "census"
ENV_WARMUP = "CENSUS_WARMUP"
ENV_ACTIVE = "CENSUS_ACTIVE"
ENV_STEP_TIMES = "CENSUS_STEP_TIMES"  # calibration and A/B arms: write the steps' timing here
ENV_RUN = "CENSUS_RUN"  # set by census for the programs it runs: "capture", "calibration", "arm"
# `census capture --ops` where nsys has no PyTorch option of its own: census.steps records op
# ranges (torch.autograd.profiler.emit_nvtx) around the measured window, in the captured run alone
ENV_OPS = "CENSUS_OPS"
OPS_EMIT_NVTX = "emit_nvtx"
RANK_SUFFIX = ".rank"  # with several ranks, rank N's record is $CENSUS_STEP_TIMES + ".rankN"
# The line a rank prints when it cannot write its record; census ab finds it in the arm's output
# (census.capture.arms) to name the rank's host and the cause.
CANNOT_WRITE = "census: rank {rank} of {world} on {host} could not write its step-times record"
T = TypeVar("T")
# the timer of the measured step running now, for census.phase, census.record and census.count
_ACTIVE: StepTimer | None = None


@functools.cache
def _domain(name: str):
    import nvtx

    return nvtx.get_domain(name)


def _push(message: str, domain: str) -> None:
    d = _domain(domain)
    d.push_range(d.get_event_attributes(message=message))


def _pop(domain: str) -> None:
    _domain(domain).pop_range()


class step:
    """Wrap one training step in an NVTX push/pop range named `step i` (domain `census`), and in
    a torch.profiler range of that name when one is running (census.capture.torch_trace)."""

    __slots__ = ("domain", "mark", "message")

    def __init__(self, i: int, domain: str = DOMAIN) -> None:
        self.message, self.domain, self.mark = f"step {i}", domain, None

    def __enter__(self) -> None:
        _push(self.message, self.domain)
        self.mark = mark_open(self.message)

    def __exit__(self, *exc: object) -> None:
        if self.mark is not None:
            mark_close(self.mark)
            self.mark = None
        _pop(self.domain)


class phase:
    """Wrap one phase of a training step (`forward`, `backward`, `optimizer`) in an NVTX
    push/pop range of that name, inside the step's range (and a torch.profiler range, as
    step's); timed too in a timed step."""

    __slots__ = ("domain", "mark", "name", "timer")

    def __init__(self, name: str, domain: str = DOMAIN) -> None:
        self.name, self.domain, self.timer, self.mark = name, domain, None, None

    def __enter__(self) -> None:
        _push(self.name, self.domain)
        self.mark = mark_open(self.name)
        self.timer = _ACTIVE
        if self.timer is not None:
            self.timer.start_phase(self.name)

    def __exit__(self, *exc: object) -> None:
        if self.timer is not None:
            self.timer.end_phase(self.name)
        if self.mark is not None:
            mark_close(self.mark)
            self.mark = None
        _pop(self.domain)


def _torch_cuda():
    torch = sys.modules.get("torch")
    if torch is not None and torch.cuda.is_available():
        return torch
    return None


def _cudart():
    for name in ("libcudart.so", "libcudart.so.13", "libcudart.so.12"):
        with contextlib.suppress(OSError):
            return ctypes.CDLL(name)
    return None


def profiler_start() -> None:
    """cudaProfilerStart, through torch when it is loaded, else through libcudart."""
    torch = _torch_cuda()
    if torch is not None:
        torch.cuda.synchronize()
        torch.cuda.profiler.start()
        return
    lib = _cudart()
    if lib is not None:
        lib.cudaProfilerStart()


def profiler_stop() -> None:
    """cudaProfilerStop after the GPU has finished its work, through torch when it is loaded, else
    through libcudart (neither: nothing)."""
    torch = _torch_cuda()
    if torch is not None:
        torch.cuda.synchronize()  # the last step's GPU work belongs inside the capture
        torch.cuda.profiler.stop()
        return
    lib = _cudart()
    if lib is not None:
        lib.cudaDeviceSynchronize()
        lib.cudaProfilerStop()


def op_ranges_asked() -> bool:
    """Whether this program is to record op ranges itself: $CENSUS_OPS says emit_nvtx and it is
    the run census captures ($CENSUS_RUN capture), never a calibration run or an A/B arm, whose
    timing they would disturb, whatever the environment they inherit says."""
    return os.environ.get(ENV_OPS) == OPS_EMIT_NVTX and os.environ.get(ENV_RUN) == "capture"


def enter_op_ranges() -> contextlib.AbstractContextManager | None:
    """torch.autograd.profiler.emit_nvtx entered when op_ranges_asked and the script runs torch
    on a GPU (torch is never imported here); the context to exit, else None."""
    torch = _torch_cuda() if op_ranges_asked() else None
    if torch is None:
        return None
    ranges = torch.autograd.profiler.emit_nvtx()
    ranges.__enter__()
    return ranges


def exit_op_ranges(ranges: contextlib.AbstractContextManager | None) -> None:
    """Leave what enter_op_ranges entered (None: nothing)."""
    if ranges is not None:
        ranges.__exit__(None, None, None)


def _window_start(trace: TorchTrace | None) -> contextlib.AbstractContextManager | None:
    """The capture's start: torch.profiler's under `--profiler torch` (`trace`), else the CUDA
    profiler range's (profiler_start) and the op ranges entered where asked (enter_op_ranges,
    whose context is returned)."""
    if trace is not None:
        trace.start()
        return None
    profiler_start()
    return enter_op_ranges()


def _window_stop(trace: TorchTrace | None, ops: contextlib.AbstractContextManager | None) -> None:
    """The capture's stop: torch.profiler's and its trace written, else the op ranges left and
    profiler_stop."""
    if trace is not None:
        trace.stop()
        return
    exit_op_ranges(ops)
    profiler_stop()


def _env_int(name: str, default: int | None) -> int | None:
    value = os.environ.get(name)
    return int(value) if value else default


def steps(
    iterable: Iterable[T],
    warmup: int | None = None,
    active: int | None = None,
    domain: str = DOMAIN,
    stop: bool = True,
) -> Iterator[T]:
    """Yield items; items warmup..warmup+active-1 run inside `step N` ranges and the capture.

    `warmup` and `active` default to $CENSUS_WARMUP and $CENSUS_ACTIVE (set by `census capture`
    and `census ab`), then to 0 and "every remaining step". In a program census runs, the loop
    ends after the measured steps when their number is known, unless `stop` is False. With
    $CENSUS_STEP_TIMES set, the measured steps are timed and the record is written there.
    """
    warmup, active, end = _window(warmup, active, stop)
    times_path = os.environ.get(ENV_STEP_TIMES)
    timer = StepTimer(_torch_cuda()) if times_path else None
    trace = TorchTrace.from_env()  # --profiler torch: torch.profiler records the window
    ops, started, stopped = None, False, False
    try:
        for i, item in enumerate(iterable):
            in_window = i >= warmup and (active is None or i < warmup + active)
            if in_window and not started:
                ops, started = _window_start(trace), True
                if timer:
                    timer.open_window(active)
            if started and not in_window and not stopped:
                _window_stop(trace, ops)
                stopped = True
                if timer:
                    timer.close_window()
            if end is not None and i >= end:
                return  # census runs this program for its measured steps alone
            if not in_window:
                yield item
                continue
            with step(i, domain):
                if timer is None:
                    yield item
                    continue
                _start_timed_step(timer)
                try:
                    yield item
                finally:
                    _end_timed_step(timer)
    finally:
        if started and not stopped:
            _window_stop(trace, ops)
        if timer:
            write_record(timer, times_path)  # type: ignore[arg-type]


def _window(
    warmup: int | None, active: int | None, stop: bool
) -> tuple[int, int | None, int | None]:
    """The warm-up and measured steps (census's variables where not given), and the step at
    which a program census runs ends its loop (None: it runs whole)."""
    warmup = _env_int(ENV_WARMUP, 0) if warmup is None else warmup
    active = _env_int(ENV_ACTIVE, None) if active is None else active
    end = warmup + active if stop and active is not None and os.environ.get(ENV_RUN) else None
    return warmup, active, end


def rank_and_world() -> tuple[int, int]:
    """This process's rank and world size, as its launcher says (census.capture.launcher)."""
    env = rank_env()
    return env.rank, env.world


def record_path(path: str, env: RankEnv) -> str:
    """Where a rank's record goes: `path` for a single process, else `path.rankN`."""
    return f"{path}{RANK_SUFFIX}{env.rank}" if env.world > 1 else path


def write_record(timer: StepTimer, path: str) -> bool:
    """Write the timer's record to record_path, atomically (a whole record or none), with this
    process's place in the job: `rank`, `world_size`, `local_rank`, `node` (its launcher's,
    census.capture.launcher; null where it says none), `host`, `pid`, `launcher` and
    `launcher_note`. Whether it was written: a record that cannot be written is one line on
    stderr (CANNOT_WRITE, `: REASON: PATH; ...`), never an exception, and the training goes on."""
    env = rank_env()
    target = record_path(path, env)
    host = socket.gethostname()
    # a census.record or census.count given what is not a number raises here, as it names the
    # user's call; nothing census does beyond it may stop the training
    record = {**timer.record(), "rank": env.rank, "world_size": env.world,
              "local_rank": env.local_rank, "node": env.node, "host": host, "pid": os.getpid(),
              "launcher": env.launcher, "launcher_note": env.note}  # fmt: skip
    part = f"{target}.{os.getpid()}.part"
    try:
        try:
            with open(part, "w", encoding="utf-8") as fh:
                json.dump(record, fh)
            os.replace(part, target)
        finally:
            with contextlib.suppress(OSError):
                os.unlink(part)
    except (OSError, ValueError) as exc:  # ValueError: a path with a NUL
        why = str(getattr(exc, "strerror", None) or exc).replace(":", ",")
        _say(f"{CANNOT_WRITE.format(rank=env.rank, world=env.world, host=host)}: {why}: "
             f"{target}; every node must see the experiment folder (census ab -o); the training "
             "goes on")  # fmt: skip
        return False
    return True


def _say(line: str) -> None:
    """One line on stderr in one write: lines of ranks that share the pipe do not interleave."""
    with contextlib.suppress(OSError, ValueError, AttributeError):
        sys.stderr.write(" ".join(line.split()) + "\n")
        sys.stderr.flush()


def record(name: str, value: Any) -> None:
    """Keep `value` (a number, or a one-element tensor: a loss, a token count, a gradient norm)
    as this measured step's `name` (the last value a step records wins). A tensor is read only
    once the measured steps are over (no GPU synchronization in the step), and kept detached
    until then. Outside a measured step of a timed run it does nothing."""
    timer = _ACTIVE
    if timer is not None:
        timer.record_value(name, value)


def count(name: str, n: int = 1) -> None:
    """Add `n` to the counter `name` (a region that should stay eager, or run N times a step):
    the run's record keeps each counter's sum over the measured steps (`count(name, 0)` names
    one that should stay at 0). Outside a measured step of a timed run it does nothing."""
    timer = _ACTIVE
    if timer is not None:
        timer.add_count(name, n)


def _start_timed_step(timer: StepTimer) -> None:
    global _ACTIVE
    timer.start_step()
    _ACTIVE = timer


def _end_timed_step(timer: StepTimer) -> None:
    global _ACTIVE
    _ACTIVE = None
    timer.end_step()

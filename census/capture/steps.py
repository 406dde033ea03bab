"""Step ranges for training loops: NVTX ranges `step N` (domain `census`) and the capture range.

`census.steps(loader, warmup=K, active=N)` leaves the first K steps out of the capture (warm-up,
compilation), starts the CUDA profiler range, wraps the next N steps in NVTX ranges, then stops
the range. torch is used only if the training script already imported it.

In a timed run ($CENSUS_STEP_TIMES: calibration, `census ab` arms) `census.record(name, value)`
and `census.count(name, n)` called inside a measured step are kept in its record
(census.capture.timing: `values`, `counts`); anywhere else they return at once. Under torchrun
(RANK set, WORLD_SIZE above 1) every rank writes its own record, to `$CENSUS_STEP_TIMES.rankN`.
"""

from __future__ import annotations

import contextlib
import ctypes
import functools
import json
import os
import sys
from collections.abc import Iterable, Iterator
from typing import Any, TypeVar

from census.capture.timing import StepTimer

DOMAIN = "census"
ENV_WARMUP = "CENSUS_WARMUP"
ENV_ACTIVE = "CENSUS_ACTIVE"
ENV_STEP_TIMES = "CENSUS_STEP_TIMES"  # calibration and A/B arms: write the steps' timing here
RANK_SUFFIX = ".rank"  # under torchrun, rank N's record is $CENSUS_STEP_TIMES + ".rankN"
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
    """Wrap one training step in an NVTX push/pop range named `step i` (domain `census`)."""

    __slots__ = ("domain", "message")

    def __init__(self, i: int, domain: str = DOMAIN) -> None:
        self.message, self.domain = f"step {i}", domain

    def __enter__(self) -> None:
        _push(self.message, self.domain)

    def __exit__(self, *exc: object) -> None:
        _pop(self.domain)


class phase:
    """Wrap one phase of a training step (`forward`, `backward`, `optimizer`) in an NVTX
    push/pop range of that name, inside the step's range; timed too in a timed step."""

    __slots__ = ("domain", "name", "timer")

    def __init__(self, name: str, domain: str = DOMAIN) -> None:
        self.name, self.domain, self.timer = name, domain, None

    def __enter__(self) -> None:
        _push(self.name, self.domain)
        self.timer = _ACTIVE
        if self.timer is not None:
            self.timer.start_phase(self.name)

    def __exit__(self, *exc: object) -> None:
        if self.timer is not None:
            self.timer.end_phase(self.name)
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
    torch = _torch_cuda()
    if torch is not None:
        torch.cuda.synchronize()  # the last step's GPU work belongs inside the capture
        torch.cuda.profiler.stop()
        return
    lib = _cudart()
    if lib is not None:
        lib.cudaDeviceSynchronize()
        lib.cudaProfilerStop()


def _env_int(name: str, default: int | None) -> int | None:
    value = os.environ.get(name)
    return int(value) if value else default


def steps(
    iterable: Iterable[T],
    warmup: int | None = None,
    active: int | None = None,
    domain: str = DOMAIN,
) -> Iterator[T]:
    """Yield items; items warmup..warmup+active-1 run inside `step N` ranges and the capture.

    `warmup` and `active` default to $CENSUS_WARMUP and $CENSUS_ACTIVE (set by `census capture`
    and `census ab`), then to 0 and "every remaining step". With $CENSUS_STEP_TIMES set, the
    measured steps are timed (census.capture.timing) and the record is written there.
    """
    warmup = _env_int(ENV_WARMUP, 0) if warmup is None else warmup
    active = _env_int(ENV_ACTIVE, None) if active is None else active
    times_path = os.environ.get(ENV_STEP_TIMES)
    timer = StepTimer(_torch_cuda()) if times_path else None
    started = stopped = False
    try:
        for i, item in enumerate(iterable):
            in_window = i >= warmup and (active is None or i < warmup + active)
            if in_window and not started:
                profiler_start()
                started = True
                if timer:
                    timer.open_window(active)
            if started and not in_window and not stopped:
                profiler_stop()
                stopped = True
                if timer:
                    timer.close_window()
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
            profiler_stop()
        if timer:
            _write_record(timer, times_path)  # type: ignore[arg-type]


def rank_and_world() -> tuple[int, int]:
    """torchrun's RANK and WORLD_SIZE when RANK is set and WORLD_SIZE is above 1; else 0, 1."""
    rank, world = _env_int("RANK", None), _env_int("WORLD_SIZE", 1) or 1
    return (rank, world) if rank is not None and world > 1 else (0, 1)


def _write_record(timer: StepTimer, path: str) -> None:
    rank, world = rank_and_world()
    record = {**timer.record(), "rank": rank, "world_size": world}
    with open(f"{path}{RANK_SUFFIX}{rank}" if world > 1 else path, "w", encoding="utf-8") as fh:
        json.dump(record, fh)


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

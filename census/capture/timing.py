"""Timing the measured steps of a run without nsys (calibration, `census ab` arms).

Inside the window the cost is a clock read and, with torch on CUDA, one `Event.record()` per
step start and phase boundary (the events are created and first recorded when the window opens,
outside it: creating a CUDA event costs more than recording one); nothing synchronizes until the
window has closed, when the events are read once. Events are recorded on the stream that was
current when the window opened (the training loop's stream). census.record appends to a list and
census.count adds to a dict; what they were given is read only once the window has closed. What
the window ran beside is read when it opens and when it closes, never inside a step. The record:

- `step_time_ns`: per step, the GPU timeline from this step's start event to the next one's (the
  last step: to its end event) when CUDA events were recorded, else the host time of the step's
  body; `clock` says which ("cuda_events" or "host").
- `host_step_time_ns`: per step, the host time of the step's body (what an NVTX step range spans).
- `phase_time_ns`: per census.phase name, its time in each step (0 where it did not run), on the
  same clock as `step_time_ns` (summed when a phase ran more than once in a step).
- `values`: per census.record name, per step, the last value the step recorded, as a float; null
  where the step recorded none, or a NaN or infinite one (JSON has neither). A tensor is kept
  (detached, on its device) until the window has closed and read then: reading it in the step
  would synchronize the GPU there.
- `counts`: per census.count name, the sum of its `n` over the measured steps.
- `env`: what the window ran beside (census.model.ab.ArmEnv), from readings when it opens and closes:
  `cpu_share`: this process's CPU time (user + system, all its threads) / the window's wall time;
  `other_cpu_cores`: (the machine's busy CPU time over the window, /proc/stat's user, nice,
  system, irq and softirq of every CPU, − the CPU time of the arm's own processes) / wall time,
  at least 0: the cores that processes outside the arm kept busy. The arm's own processes are
  those of this process's process group (census ab starts each arm as one): its threads, its
  children (a DataLoader's workers, Inductor's compile workers) and, under torchrun, the other
  ranks when they share it; each counted with the time of the children it reaped (utime + stime
  + cutime + cstime of /proc/PID/stat). Null without /proc/stat. `pgid` and `group_cpu_cores`
  (the group's CPU time / wall time) let the arm's merge take out the other ranks that torchrun
  starts in process groups of their own (census.capture.arms).
  `load1`: the 1-minute load average at close. `gpu_sm_clock_mhz`: the lower of NVML's SM clock
  reads at open and close; `gpu_throttle`: NVML's clock-throttle reasons (THROTTLE_REASONS) seen
  at open or close, in that order; null and [] without torch on CUDA or without NVML (the GPU is
  torch's current device).
- `peak_allocated_bytes`, `peak_reserved_bytes`: torch.cuda.max_memory_allocated/reserved over
  the window (the peaks are reset when it opens); None without CUDA.
- `dynamo`: frames Dynamo compiled and graph breaks it counted inside the window (any compiled
  frame there is a recompilation the measurement paid for); None when torch._dynamo is not loaded.
- `gpu`: torch's current GPU when the window closed: `index` (torch's, among the visible GPUs),
  `uuid` (as NVML spells it, `GPU-...`; null where torch does not say it), `name`, and
  `visible_devices` ($CUDA_VISIBLE_DEVICES, null when unset); None without torch on CUDA.

census.steps adds `rank` and `world_size`: torchrun's RANK and WORLD_SIZE (0 and 1 without).
Peaks, Dynamo's counts and the environment are read when the window closes, so steps run after
it (the loop goes on past `active`) count in none of them.
"""

from __future__ import annotations

import contextlib
import ctypes
import math
import os
import sys
import time
from dataclasses import dataclass
from typing import Any

from census.metrics import STEP_TIME_NS


def _dynamo_counts() -> dict[str, int] | None:
    dynamo = sys.modules.get("torch._dynamo.utils")
    if dynamo is None:
        return None
    counters = dynamo.counters
    return {
        "frames_compiled": int(counters["frames"]["ok"]),
        "graph_breaks": int(sum(counters["graph_break"].values())),
    }


POOL_PER_STEP = 8  # a step start and up to three phases' two boundaries, with room to spare


class StepTimer:
    """The clocks of one run's measured window (module docstring), read once it has closed."""

    def __init__(self, torch: Any | None) -> None:
        self.torch = torch  # torch, when it is loaded and sees a GPU
        self.host: list[tuple[int, int]] = []  # (start, end) of each step's body
        self.starts: list[Any] = []  # a CUDA event at each step's start
        self.end: Any = None  # one CUDA event, recorded again at each step's end
        self.phases: list[tuple[int, str, int, int, Any, Any]] = []  # step, name, host, events
        self.recorded: list[tuple[int, str, Any]] = []  # census.record: step, name, value
        self.counts: dict[str, Any] = {}  # census.count: name -> its n summed
        self.closed: dict[str, Any] | None = None  # what is read when the window closes
        self._open: dict[str, tuple[int, Any]] = {}
        self._pool: list[Any] = []
        self._stream: Any = None  # the stream current when the window opened
        self._dynamo: dict[str, int] | None = None
        self._nvml: tuple[Any, Any] | None = None
        self._opened: Reading | None = None

    def _new_event(self) -> Any:
        ev = self.torch.cuda.Event(enable_timing=True)
        ev.record(self._stream)  # creates the CUDA event now
        return ev

    def _event(self) -> Any:
        if self.torch is None:
            return None
        ev = self._pool.pop() if self._pool else self._new_event()
        ev.record(self._stream)  # a stream object in hand: no current_stream() per record
        return ev

    def open_window(self, steps: int | None = None) -> None:
        """At the first measured step, before its clock starts."""
        if self.torch is not None:
            self._stream = self.torch.cuda.current_stream()
            count = POOL_PER_STEP * (steps or 32)
            self._pool = [self._new_event() for _ in range(count)]
            self.end = self._new_event()
            self._nvml = open_nvml(self.torch)
            self.torch.cuda.synchronize()
            self.torch.cuda.reset_peak_memory_stats()
        self._dynamo = _dynamo_counts()
        self._opened = read_env(self._nvml)  # last: the nearest to the first step

    def close_window(self) -> None:
        """Once the last measured step has ended (on CUDA: once the GPU has run it); again: no-op."""
        if self.closed is not None:
            return
        if self.torch is not None:
            self.torch.cuda.synchronize()
        env = None if self._opened is None else env_between(self._opened, read_env(self._nvml))
        close_nvml(self._nvml)
        self._nvml = None
        self.closed = {**self._memory(), "dynamo": self._dynamo_delta(), "env": env,
                       "gpu": gpu_identity(self.torch)}  # fmt: skip

    def start_step(self) -> None:
        """A step starts: its host time and, on CUDA, an event."""
        self.host.append((time.perf_counter_ns(), 0))
        self.starts.append(self._event())

    def end_step(self) -> None:
        """The current step ends: its host end time, and the end event recorded again."""
        if self.end is not None:
            self.end.record(self._stream)
        self.host[-1] = (self.host[-1][0], time.perf_counter_ns())

    def start_phase(self, name: str) -> None:
        """Phase `name` starts in the current step: its host time and event."""
        self._open[name] = (time.perf_counter_ns(), self._event())

    def end_phase(self, name: str) -> None:
        """Phase `name` ends: its span kept with the current step's index."""
        t0, ev0 = self._open.pop(name)
        self.phases.append((len(self.host) - 1, name, t0, time.perf_counter_ns(), ev0,
                            self._event()))  # fmt: skip

    def record_value(self, name: str, value: Any) -> None:
        """census.record's `value` kept for the current step (a tensor detached)."""
        if type(value) is not float and type(value) is not int:
            detach = getattr(value, "detach", None)  # a tensor: kept without its autograd graph
            value = value if detach is None else detach()
        self.recorded.append((len(self.host) - 1, name, value))

    def add_count(self, name: str, n: int) -> None:
        """census.count's `n` added to `name`'s count."""
        self.counts[name] = self.counts.get(name, 0) + n

    def record(self) -> dict[str, Any]:
        """Everything measured, read once the window has closed (closing it if still open)."""
        self.close_window()
        host = [end - start for start, end in self.host]
        gpu = self.torch is not None and bool(self.starts)
        if gpu:
            bounds = [*self.starts, self.end]
            steps = [_elapsed_ns(bounds[i], bounds[i + 1]) for i in range(len(self.starts))]
        else:
            steps = host
        phases: dict[str, list[int]] = {}
        for step, name, t0, t1, ev0, ev1 in self.phases:
            if name not in phases:
                phases[name] = [0] * len(host)
            phases[name][step] += _elapsed_ns(ev0, ev1) if gpu else t1 - t0
        return {
            "clock": "cuda_events" if gpu else "host",
            STEP_TIME_NS: steps,
            "host_step_time_ns": host,
            "phase_time_ns": phases,
            "values": self._values(len(host)),
            "counts": self._counts(),
            **(self.closed or {}),
        }

    def _values(self, steps: int) -> dict[str, list[float | None]]:
        rows: dict[str, list[Any]] = {}
        for step, name, value in self.recorded:
            if name not in rows:
                rows[name] = [None] * steps
            rows[name][step] = value  # the step's last value wins
        return {
            name: [_number(name, i, v) for i, v in enumerate(row)] for name, row in rows.items()
        }

    def _counts(self) -> dict[str, int]:
        for name, total in self.counts.items():
            if type(total) is not int or total < 0:
                raise ValueError(f"census.count({name!r}, n): its n add up to {total!r}, not a "
                                 "whole number, 0 or more")  # fmt: skip
        return dict(self.counts)

    def _memory(self) -> dict[str, int | None]:
        if self.torch is None:
            return {"peak_allocated_bytes": None, "peak_reserved_bytes": None}
        return {
            "peak_allocated_bytes": int(self.torch.cuda.max_memory_allocated()),
            "peak_reserved_bytes": int(self.torch.cuda.max_memory_reserved()),
        }

    def _dynamo_delta(self) -> dict[str, int] | None:
        now = _dynamo_counts()
        if now is None:
            return None
        before = self._dynamo or {k: 0 for k in now}
        # counters that went down were reset inside the window (torch._dynamo.reset()): what
        # they counted since is all inside it
        return {k: now[k] - before[k] if now[k] >= before[k] else now[k] for k in now}


def _elapsed_ns(start: Any, end: Any) -> int:
    return round(start.elapsed_time(end) * 1_000_000)  # milliseconds, as a float


def _number(name: str, step: int, value: Any) -> float | None:
    """A census.record value as the record keeps it (the module's `values`)."""
    if value is None:
        return None
    try:
        if isinstance(value, str | bytes | bytearray):  # float() would read "0.5"
            raise TypeError
        number = float(value)  # a tensor on a GPU: copied to the host here, once the window closed
    except OverflowError:
        return None
    except (TypeError, ValueError, RuntimeError):
        raise TypeError(f"census.record({name!r}, value) in measured step {step}: "
                        f"{repr(value)[:60]} is not a number (give a Python number or a "
                        "one-element tensor)") from None  # fmt: skip
    return number if math.isfinite(number) else None


# -- what the window ran beside ------------------------------------------------------------
NVML_CLOCK_SM = 1
NVML_SUCCESS = 0
# NVML's clock-throttle reason bits that slow a GPU down (idle, the application clocks' setting
# and "none" are left out: they are not a slowdown of a busy GPU)
THROTTLE_REASONS = {0x4: "sw_power_cap", 0x8: "hw_slowdown", 0x10: "sync_boost",
                    0x20: "sw_thermal", 0x40: "hw_thermal", 0x80: "hw_power_brake",
                    0x100: "display_clock"}  # fmt: skip


@dataclass(frozen=True)
class Reading:
    """One reading, at a window's open or close (the module's `env`)."""

    wall_ns: int  # time.monotonic_ns
    cpu_ns: int  # this process's CPU time, all threads
    busy_ns: int | None  # the machine's busy CPU time since boot; None without /proc/stat
    group_ns: int | None  # the CPU time of this process's process group (group_cpu_ns)
    pgid: int | None  # this process's process group
    load1: float | None
    sm_clock_mhz: int | None
    throttle_bits: int | None


def read_env(nvml: tuple[Any, Any] | None) -> Reading:
    """One Reading, now (read_gpu's SM clock and throttle bits from `nvml`)."""
    sm_clock, bits = read_gpu(nvml)
    try:
        pgid: int | None = os.getpgid(0)
    except (AttributeError, OSError):  # no process groups (Windows)
        pgid = None
    return Reading(time.monotonic_ns(), time.process_time_ns(), machine_busy_ns(),
                   None if pgid is None else group_cpu_ns(pgid), pgid, _load1(), sm_clock,
                   bits)  # fmt: skip


def env_between(start: Reading, end: Reading) -> dict[str, Any]:
    """The record's `env` from the readings at a window's open and close."""
    wall = end.wall_ns - start.wall_ns
    cpu = end.cpu_ns - start.cpu_ns
    busy = None if start.busy_ns is None or end.busy_ns is None else end.busy_ns - start.busy_ns
    own = cpu  # the arm's processes: this one, unless the group's time was read both times
    group = None
    if start.group_ns is not None and end.group_ns is not None:
        own = max(cpu, end.group_ns - start.group_ns)
        group = own / wall if wall > 0 else None
    clocks = [c for c in (start.sm_clock_mhz, end.sm_clock_mhz) if c is not None]
    bits = (start.throttle_bits or 0) | (end.throttle_bits or 0)
    return {
        "cpu_share": cpu / wall if wall > 0 else None,
        "other_cpu_cores": max(0.0, (busy - own) / wall) if wall > 0 and busy is not None else None,
        "load1": end.load1,
        "gpu_sm_clock_mhz": min(clocks) if clocks else None,
        "gpu_throttle": [name for bit, name in THROTTLE_REASONS.items() if bits & bit],
        "pgid": end.pgid,
        "group_cpu_cores": group,
    }


def machine_busy_ns(stat: str = "/proc/stat") -> int | None:
    """Busy CPU time of every CPU since boot: /proc/stat's user, nice, system, irq and softirq
    (guest time is inside user and nice; idle, iowait and steal are not busy); None without."""
    try:
        with open(stat, encoding="ascii") as fh:
            fields = fh.readline().split()
        user, nice, system, _idle, _iowait, irq, softirq = map(int, fields[1:8])
        tick_ns = 1_000_000_000 // os.sysconf("SC_CLK_TCK")
    except (OSError, ValueError):
        return None
    return (user + nice + system + irq + softirq) * tick_ns


def group_cpu_ns(pgid: int, proc: str = "/proc") -> int | None:
    """The CPU time of every process of process group `pgid`, each with the children it reaped:
    utime + stime + cutime + cstime of /proc/PID/stat; None without /proc. A process that ends
    between listing and reading is skipped."""
    try:
        pids = [name for name in os.listdir(proc) if name.isdigit()]
        tick_ns = 1_000_000_000 // os.sysconf("SC_CLK_TCK")
    except (OSError, ValueError):
        return None
    ticks = 0
    for pid in pids:
        try:
            with open(f"{proc}/{pid}/stat", encoding="ascii", errors="replace") as fh:
                # after the command's closing parenthesis: state ppid pgrp ... utime (14th field)
                fields = fh.read().rsplit(")", 1)[1].split()
        except (OSError, IndexError):
            continue
        if int(fields[2]) == pgid:
            ticks += sum(map(int, fields[11:15]))
    return ticks * tick_ns


def _load1() -> float | None:
    try:
        return os.getloadavg()[0]
    except OSError:
        return None


def open_nvml(torch: Any) -> tuple[Any, Any] | None:
    """NVML (libnvidia-ml.so.1, through ctypes) and the handle of torch's current GPU, found by
    its UUID (else, when every GPU is visible, by its index); None where either cannot be had."""
    try:
        lib = ctypes.CDLL("libnvidia-ml.so.1")
        if lib.nvmlInit_v2() != NVML_SUCCESS:
            return None
    except (OSError, AttributeError):
        return None
    handle = ctypes.c_void_p()
    try:
        device = torch.cuda.current_device()
        uuid = _uuid(torch, device) or ""
        found = bool(uuid) and lib.nvmlDeviceGetHandleByUUID(
            uuid.encode(), ctypes.byref(handle)) == NVML_SUCCESS  # fmt: skip
        if not found and "CUDA_VISIBLE_DEVICES" not in os.environ:
            found = lib.nvmlDeviceGetHandleByIndex_v2(
                ctypes.c_uint(device), ctypes.byref(handle)) == NVML_SUCCESS  # fmt: skip
    except (AttributeError, RuntimeError, ctypes.ArgumentError):
        found = False
    if not found:
        close_nvml((lib, None))
        return None
    return lib, handle


def _uuid(torch: Any, device: int) -> str | None:
    """The GPU's UUID as NVML spells it (`GPU-...`, `MIG-...`); None where torch does not say."""
    uuid = str(getattr(torch.cuda.get_device_properties(device), "uuid", "") or "")
    return None if not uuid else uuid if uuid[:4] in ("GPU-", "MIG-") else f"GPU-{uuid}"


def gpu_identity(torch: Any | None) -> dict[str, Any] | None:
    """The record's `gpu` (module docstring); None without torch on CUDA or where it fails."""
    if torch is None:
        return None
    try:
        device = torch.cuda.current_device()
        name = torch.cuda.get_device_name(device)
        uuid = _uuid(torch, device)
    except (AttributeError, RuntimeError, AssertionError):
        return None
    return {"index": int(device), "uuid": uuid, "name": str(name),
            "visible_devices": os.environ.get("CUDA_VISIBLE_DEVICES")}  # fmt: skip


def read_gpu(nvml: tuple[Any, Any] | None) -> tuple[int | None, int | None]:
    """The SM clock (MHz) and the clock-throttle reason bits of NVML's GPU; None each where not
    had."""
    if nvml is None:
        return None, None
    lib, handle = nvml
    clock, bits = ctypes.c_uint(), ctypes.c_ulonglong()
    try:
        ok_clock = lib.nvmlDeviceGetClockInfo(handle, NVML_CLOCK_SM, ctypes.byref(clock))
        # renamed ClocksEventReasons in CUDA 12.2's NVML, which keeps the old name too
        reasons = getattr(lib, "nvmlDeviceGetCurrentClocksThrottleReasons", None)
        ok_bits = (reasons or lib.nvmlDeviceGetCurrentClocksEventReasons)(
            handle, ctypes.byref(bits)) == NVML_SUCCESS  # fmt: skip
    except (AttributeError, ctypes.ArgumentError):
        return None, None
    return (clock.value if ok_clock == NVML_SUCCESS else None), (bits.value if ok_bits else None)


def close_nvml(nvml: tuple[Any, Any] | None) -> None:
    """Shut NVML down (open_nvml's; None: nothing to do)."""
    if nvml is not None:
        with contextlib.suppress(AttributeError):
            nvml[0].nvmlShutdown()

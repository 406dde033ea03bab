"""Timing the measured steps of a run without nsys (calibration, `census ab` arms).

Inside the window the cost is a clock read and, with torch on CUDA, one `Event.record()` per
step start and phase boundary (the events are created and first recorded when the window opens,
outside it: creating a CUDA event costs more than recording one); nothing synchronizes until the
window has closed, when the events are read once. Events are recorded on the stream that was
current when the window opened (the training loop's stream). The record:

- `step_time_ns`: per step, the GPU timeline from this step's start event to the next one's (the
  last step: to its end event) when CUDA events were recorded, else the host time of the step's
  body; `clock` says which ("cuda_events" or "host").
- `host_step_time_ns`: per step, the host time of the step's body (what an NVTX step range spans).
- `phase_time_ns`: per census.phase name, its time in each step (0 where it did not run), on the
  same clock as `step_time_ns` (summed when a phase ran more than once in a step).
- `peak_allocated_bytes`, `peak_reserved_bytes`: torch.cuda.max_memory_allocated/reserved over
  the window (the peaks are reset when it opens); None without CUDA.
- `dynamo`: frames Dynamo compiled and graph breaks it counted inside the window (any compiled
  frame there is a recompilation the measurement paid for); None when torch._dynamo is not loaded.
"""

from __future__ import annotations

import sys
import time
from typing import Any


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
    def __init__(self, torch: Any | None) -> None:
        self.torch = torch  # torch, when it is loaded and sees a GPU
        self.host: list[tuple[int, int]] = []  # (start, end) of each step's body
        self.starts: list[Any] = []  # a CUDA event at each step's start
        self.end: Any = None  # one CUDA event, recorded again at each step's end
        self.phases: list[tuple[int, str, int, int, Any, Any]] = []  # step, name, host, events
        self._open: dict[str, tuple[int, Any]] = {}
        self._pool: list[Any] = []
        self._stream: Any = None  # the stream current when the window opened
        self._dynamo: dict[str, int] | None = None

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
            self.torch.cuda.synchronize()
            self.torch.cuda.reset_peak_memory_stats()
        self._dynamo = _dynamo_counts()

    def start_step(self) -> None:
        self.host.append((time.perf_counter_ns(), 0))
        self.starts.append(self._event())

    def end_step(self) -> None:
        if self.end is not None:
            self.end.record(self._stream)
        self.host[-1] = (self.host[-1][0], time.perf_counter_ns())

    def start_phase(self, name: str) -> None:
        self._open[name] = (time.perf_counter_ns(), self._event())

    def end_phase(self, name: str) -> None:
        t0, ev0 = self._open.pop(name)
        self.phases.append((len(self.host) - 1, name, t0, time.perf_counter_ns(), ev0,
                            self._event()))  # fmt: skip

    def record(self) -> dict[str, Any]:
        """Everything measured, read once the window has closed."""
        host = [end - start for start, end in self.host]
        gpu = self.torch is not None and bool(self.starts)
        if gpu:
            self.torch.cuda.synchronize()
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
            "step_time_ns": steps,
            "host_step_time_ns": host,
            "phase_time_ns": phases,
            **self._memory(),
            "dynamo": self._dynamo_delta(),
        }

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

"""One step of a census and its phases, as objects: what a StepTable (census.model.step_table)
hands out one at a time, and what tests and notebooks build by hand."""

from __future__ import annotations

import math
import operator
from collections.abc import Sequence
from dataclasses import dataclass, field, make_dataclass

from census.metrics import DURATION_NS, GPU_BUSY_NS, IDLE_KEYS, METRIC_KEYS
from census.model.record import Record


def per_step_mean(total: float, steps: int) -> float | None:
    """The mean of a figure over `steps` steps, from its total over them: the one definition of
    a per-step figure (a float: only rendering rounds it). None without steps."""
    return total / steps if steps else None


def percentile(values: Sequence[int | float], q: float) -> float:
    """The q-th percentile by linear interpolation between closest ranks (numpy's default):
    position (n − 1)·q/100 in the sorted values."""
    xs = sorted(values)
    if not xs:
        raise ValueError("percentile of no values")
    pos = (len(xs) - 1) * q / 100
    lo = math.floor(pos)
    hi = min(lo + 1, len(xs) - 1)
    return float(xs[lo] + (xs[hi] - xs[lo]) * (pos - lo))


def _as_dict(self) -> dict[str, int]:
    return self.__dict__.copy()  # the fields, declared in METRIC_KEYS order


# The census keys of a step, a phase or the whole capture: one int field per key of
# census.metrics.METRICS, in its order, 0 by default (made from it: a key is declared once).
Metrics = make_dataclass(
    "Metrics",
    [(key, int, field(default=0)) for key in METRIC_KEYS],
    bases=(Record,),
    frozen=True,
    namespace={"as_dict": _as_dict, "__doc__": "The census keys (census.metrics.METRICS)."},
)
Metrics.__module__ = __name__  # pickled by name, as a class written here would be


@dataclass(frozen=True)
class IdleSplit(Record):
    """Where GPU idle time went (census.load.idle): the parts add up to the idle time."""

    sync_count: int = 0
    sync_time_ns: int = 0
    idle_after_sync_ns: int = 0
    idle_launch_ns: int = 0
    idle_other_ns: int = 0

    def as_dict(self) -> dict[str, int]:
        """Its fields by name."""
        return self.__dict__.copy()  # the fields, declared in IDLE_KEYS order


def idle_values(idle: IdleSplit | None) -> dict[str, int | None]:
    """The idle keys, None each when the split was not computed."""
    return idle.as_dict() if idle is not None else dict.fromkeys(IDLE_KEYS)


@dataclass(frozen=True)
class Phase(Record):
    """One phase of one step (all its ranges in the step together), or the step's remainder."""

    name: str
    duration_ns: int
    metrics: Metrics
    gpu_busy_ns: int
    idle: IdleSplit | None = None  # None: not computed (census --idle)
    # the GPU work launched in the phase's segments of the step: its earliest start, and latest
    # end − that; None when it launched none (not in as_dict: spans do not add up over phases)
    gpu_start_ns: int | None = None
    gpu_span_ns: int | None = None

    def as_dict(self) -> dict[str, int | None]:
        """Its census keys, duration_ns, gpu_busy_ns and idle keys (None each when not split) by
        name."""
        return {**self.metrics.as_dict(), DURATION_NS: self.duration_ns,
                GPU_BUSY_NS: self.gpu_busy_ns, **idle_values(self.idle)}  # fmt: skip


@dataclass(frozen=True)
class Step(Record):
    """One step: an NVTX range matching --steps, its start and end (ns), the census keys of the
    work launched in it, its GPU busy time, its phases and its idle split."""

    name: str
    start_ns: int
    end_ns: int
    metrics: Metrics
    gpu_busy_ns: int
    nccl_overlap_ns: int = 0  # NCCL kernel union ∩ non-NCCL kernel union, per device, summed
    phases: tuple[Phase, ...] = ()  # named phases by first start, then the remainder
    idle: IdleSplit | None = None  # None: not computed (census --idle)
    # the GPU work launched in the step, as the GPU ran it: its earliest start, and latest end −
    # that; None when the step launched none
    gpu_start_ns: int | None = None
    gpu_span_ns: int | None = None

    @property
    def duration_ns(self) -> int:
        """end_ns − start_ns."""
        return self.end_ns - self.start_ns

    @property
    def gpu_idle_ns(self) -> int:
        """The step's time the GPU was not busy: duration_ns − gpu_busy_ns."""
        return self.duration_ns - self.gpu_busy_ns

    @property
    def gpu_end_ns(self) -> int | None:
        """The latest end of the GPU work launched in the step (ns); None when it launched none."""
        return None if self.gpu_start_ns is None else self.gpu_start_ns + self.gpu_span_ns

    @property
    def host_lead_ns(self) -> int | None:
        """How long after the step's range ended its GPU work ended (negative: before)."""
        end = self.gpu_end_ns
        return None if end is None else end - self.end_ns


METRIC_VALUES = operator.attrgetter(*METRIC_KEYS)  # Metrics -> its values in METRIC_KEYS order

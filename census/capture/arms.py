"""The arms of an A/B experiment: fresh processes run without nsys, in a fixed order.

One warm arm (side A) runs first and is discarded (it fills the compile caches, the page cache
and the GPU's clocks); then the measured arms run in blocks of four, ABBA BAAB ABBA ... Each arm
is the user's command with $CENSUS_WARMUP, $CENSUS_ACTIVE and $CENSUS_STEP_TIMES set, so that
census.steps() times the measured steps (census.capture.timing) and writes them down.

An arm runs silently in its own process group (census.capture.process), which is stopped however
the arm ends: nothing it started outlives it, and only the tail of its output is kept, for the
error when it fails. Its record is checked field by field before any number of it is used.
"""

from __future__ import annotations

import json
import os
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from census.capture.process import run_group
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
    active: int | None = None  # measured steps per arm
    env: tuple[tuple[str, str], ...] = ()


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
    if spec.active is not None:
        env[ENV_ACTIVE] = str(spec.active)
    named = label if label == side.upper() else f"{side.upper()}, {label}"
    what = f"arm {index} ({named}{', the discarded warm arm' if index == 0 else ''})"
    run_group(command, env, what)  # silently: a failed arm's tail is printed as lines
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
        phase_time_ns={
            name: tuple(times) for name, times in (record.get("phase_time_ns") or {}).items()
        },
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

"""The arms of an A/B experiment: fresh processes run without nsys, in a fixed order.

One warm arm (side A) runs first and is discarded (it fills the compile caches, the page cache
and the GPU's clocks); then the measured arms run in blocks of four, ABBA BAAB ABBA ... Each arm
is the user's command with $CENSUS_WARMUP, $CENSUS_ACTIVE and $CENSUS_STEP_TIMES set, so that
census.steps() times the measured steps (census.capture.timing) and writes them down.
"""

from __future__ import annotations

import contextlib
import json
import os
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from census.capture.run import run_command
from census.capture.steps import ENV_ACTIVE, ENV_STEP_TIMES, ENV_WARMUP
from census.errors import CaptureError
from census.model import Arm

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


def run_arms(spec: ArmsSpec, progress: Callable[[str], None] | None = None) -> list[Arm]:
    """Every arm in run order, the warm one first (discarded)."""
    order = arm_order(spec.arms)
    out = []
    with tempfile.TemporaryDirectory(prefix="census-arms-") as tmp:
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
    what = f"arm {index} ({label}{', the discarded warm arm' if index == 0 else ''})"
    try:
        run_command(command, env, what, echo=False)
    except CaptureError as exc:
        raise CaptureError(f"{exc}\n{exc.tail.rstrip()}", exc.command, exc.tail) from None
    record = _read_record(times)
    steps = record.get("step_time_ns") if record else None
    if not steps:
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
        step_time_ns=tuple(int(t) for t in steps),
        peak_allocated_bytes=record.get("peak_allocated_bytes"),
        peak_reserved_bytes=record.get("peak_reserved_bytes"),
        recompiles=dynamo.get("frames_compiled"),
        graph_breaks=dynamo.get("graph_breaks"),
        clock=str(record.get("clock", "host")),
    )


def _read_record(path: Path) -> dict | None:
    with contextlib.suppress(OSError, ValueError):
        record = json.loads(path.read_text(encoding="utf-8"))
        if isinstance(record, dict):
            return record
    return None

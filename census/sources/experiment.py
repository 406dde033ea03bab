"""A `census ab` experiment folder read back: its `ab.json` (census.capture.ab writes it) as the
arms, labels and commands it records, each arm checked as the arm's own step-times record was
(its phase times included; an ab.json without them, from before they were kept, reads as arms
without phases). The statistics and the diff of its captures are computed from them later
(census.api)."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from census.capture.ab import RECORD
from census.errors import InputError
from census.model import Arm


@dataclass(frozen=True)
class ExperimentRecord:
    path: Path  # the ab.json read
    labels: tuple[str, str]
    commands: dict[str, list[str]]
    arms: tuple[Arm, ...]  # run order, the discarded warm arm first
    capture_note: str | None  # why there are no captures
    wall_s: float | None

    @property
    def captured(self) -> bool:
        """Whether both sides' capture folders are there."""
        folder = self.path.parent
        return (folder / "a").is_dir() and (folder / "b").is_dir()


def is_experiment(path: Path) -> bool:
    return path.is_dir() and (path / RECORD).is_file()


def read_experiment(folder: Path) -> ExperimentRecord:
    """The record of the experiment in `folder`; an InputError naming its ab.json and the first
    damaged field when it is not census's record."""
    path = folder / RECORD
    try:
        record = json.loads(path.read_text(encoding="utf-8"))
        labels = tuple(str(x) for x in record["labels"])
        arms = tuple(_arm_from(a, i) for i, a in enumerate(record["arms"]))
        commands = {str(k): [str(x) for x in v] for k, v in record["commands"].items()}
    except (OSError, ValueError, KeyError, TypeError, AttributeError, RecursionError) as exc:
        raise not_a_record(path, exc) from None
    if len(labels) != 2:
        raise InputError(f"{path}: not a census experiment record (labels)")
    return ExperimentRecord(path, labels, commands, arms,  # type: ignore[arg-type]
                            record.get("capture"), record.get("wall_s"))  # fmt: skip


def not_a_record(path: Path, why: Exception) -> InputError:
    return InputError(f"{path}: not a census experiment record ({why})")


# check_record's names of the fields ab.json keeps under other names
_AB_FIELD = {"dynamo.frames_compiled": "recompiles", "dynamo.graph_breaks": "graph_breaks"}


def _arm_from(rec: Any, position: int) -> Arm:
    """Arm `position` of ab.json, checked as the arm's own step-times record was
    (census.capture.arms.check_record): a ValueError naming the arm and its first bad field."""
    from census.capture.arms import check_record

    if not isinstance(rec, dict):
        raise ValueError(f"arm {position} is not a JSON object")
    side, index, discarded = rec.get("side"), rec.get("index"), rec.get("discarded")
    if side not in ("a", "b") or type(index) is not int or type(discarded) is not bool:
        raise ValueError(f"arm {position}: its side, index or discarded flag is damaged")
    record = {key: rec.get(key) for key in ("clock", "step_time_ns", "peak_allocated_bytes",
                                            "peak_reserved_bytes", "phase_time_ns")}  # fmt: skip
    dynamo = {"frames_compiled": rec.get("recompiles"), "graph_breaks": rec.get("graph_breaks")}
    record["dynamo"] = {k: v for k, v in dynamo.items() if v is not None}
    try:
        check_record(record)
    except ValueError as exc:
        why = str(exc)
        for name, ours in _AB_FIELD.items():
            if why.startswith(name):
                why = ours + why[len(name) :]
        raise ValueError(f"arm {position}: {why}") from None
    if not record["step_time_ns"]:
        raise ValueError(f"arm {position}: no step times")
    # an ab.json written before the arms' phases were kept has none: no phases, not zeros
    phases = {str(k): tuple(v) for k, v in (record["phase_time_ns"] or {}).items()}
    return Arm(side, index, discarded, tuple(record["step_time_ns"]),
               record["peak_allocated_bytes"], record["peak_reserved_bytes"],
               rec.get("recompiles"), rec.get("graph_breaks"), record["clock"],
               phases)  # fmt: skip

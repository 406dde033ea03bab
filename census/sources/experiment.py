"""A `census ab` experiment folder read back: its `ab.json` (census.capture.ab writes it) as the
arms, labels and commands it records, each arm checked as the arm's own step-times record was
(its phase times, values and env included), its counts (one per rank) and its ranks' figures
too. An ab.json from before a field was kept reads as arms without it: no phases, values or
counts, env None, ranks (); one without "sequential" ran a fixed number of arms. The statistics
and the diff of its captures are computed from them later (census.api)."""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from census.capture.ab import RECORD
from census.errors import InputError
from census.metrics import STEP_TIME_NS
from census.model.ab import Arm, AutoArms, RankRecord


@dataclass(frozen=True)
class ExperimentRecord:
    """What an experiment folder's ab.json records (module docstring), each arm checked."""

    path: Path  # the ab.json read
    labels: tuple[str, str]
    commands: dict[str, list[str]]
    arms: tuple[Arm, ...]  # run order, the discarded warm arm first
    capture_note: str | None  # why there are no captures
    wall_s: float | None
    sequential: AutoArms | None = None  # `--arms auto`: what was asked and how it ended

    @property
    def captured(self) -> bool:
        """Whether both sides' capture folders are there."""
        folder = self.path.parent
        return (folder / "a").is_dir() and (folder / "b").is_dir()


def is_experiment(path: Path) -> bool:
    """Whether `path` is a `census ab` folder: a folder holding ab.json."""
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
    try:
        auto = _auto_from(record.get("sequential"))
    except (ValueError, TypeError) as exc:
        raise not_a_record(path, exc) from None
    return ExperimentRecord(path, labels, commands, arms,  # type: ignore[arg-type]
                            record.get("capture"), record.get("wall_s"), auto)  # fmt: skip


def _auto_from(rec: Any) -> AutoArms | None:
    """ab.json's "sequential" (census.model.ab.AutoArms), checked field by field; None when absent."""
    from census.capture.records import shown

    if rec is None:
        return None
    if not isinstance(rec, dict):
        raise ValueError(f"sequential: {shown(rec)} is not an object")
    max_arms = rec.get("max_arms")
    if type(max_arms) is not int or max_arms < 8 or max_arms % 8:
        raise ValueError(f"sequential.max_arms: {shown(max_arms)} is not a multiple of 8")
    effect = rec.get("min_effect_ns")
    if type(effect) not in (int, float) or not effect > 0 or not math.isfinite(effect):
        raise ValueError(f"sequential.min_effect_ns: {shown(effect)} is not a time above 0")
    given, budget, stop = rec.get("min_effect"), rec.get("budget_s"), rec.get("budget_stop")
    if given is not None and not isinstance(given, str):
        raise ValueError(f"sequential.min_effect: {shown(given)} is not a text")
    if budget is not None and (type(budget) not in (int, float) or not 0 < budget < math.inf):
        raise ValueError(f"sequential.budget_s: {shown(budget)} is not seconds above 0")
    if type(stop) is not bool or (stop and budget is None):
        raise ValueError(f"sequential.budget_stop: {shown(stop)} is not true or false (true "
                         "only with a budget_s)")  # fmt: skip
    return AutoArms(max_arms, float(effect), given, budget, stop)


def not_a_record(path: Path, why: Exception) -> InputError:
    """The InputError for an ab.json at `path` that cannot be read as census's record, and why."""
    return InputError(f"{path}: not a census experiment record ({why})")


# check_record's names of the fields ab.json keeps under other names
_AB_FIELD = {"dynamo.frames_compiled": "recompiles", "dynamo.graph_breaks": "graph_breaks"}


def _arm_from(rec: Any, position: int) -> Arm:
    """Arm `position` of ab.json, checked as the arm's own step-times record was
    (census.capture.records.check_record): a ValueError naming the arm and its first bad field."""
    from census.capture.arms import arm_env

    if not isinstance(rec, dict):
        raise ValueError(f"arm {position} is not a JSON object")
    side, index, discarded = rec.get("side"), rec.get("index"), rec.get("discarded")
    if side not in ("a", "b") or type(index) is not int or type(discarded) is not bool:
        raise ValueError(f"arm {position}: its side, index or discarded flag is damaged")
    try:
        record = _checked_record(rec)
        ranks = _ranks_from(rec.get("ranks"))
        counts = _counts_from(rec.get("counts"), max(len(ranks), 1))
        times = _times(rec)
    except ValueError as exc:
        raise ValueError(f"arm {position}: {exc}") from None
    # fields ab.json did not keep yet when it was written: none, not zeros
    phases = {str(k): tuple(v) for k, v in (record["phase_time_ns"] or {}).items()}
    values = {str(k): tuple(v) for k, v in (record["values"] or {}).items()}
    return Arm(side, index, discarded, tuple(record[STEP_TIME_NS]),
               record["peak_allocated_bytes"], record["peak_reserved_bytes"],
               rec.get("recompiles"), rec.get("graph_breaks"), record["clock"],
               phases, values, counts, arm_env(record["env"]), ranks,
               *times)  # fmt: skip


def _times(rec: dict) -> tuple[int | None, int | None]:
    """The arm's wall_ns and census_ns (None where ab.json did not keep them)."""
    from census.capture.records import check_count

    for key in ("wall_ns", "census_ns"):
        if rec.get(key) is not None:
            check_count(rec[key], key)
    return rec.get("wall_ns"), rec.get("census_ns")


def _checked_record(rec: dict) -> dict:
    """The arm's fields as its step-times record spells them, checked (check_record), with
    ab.json's names in the error."""
    from census.capture.records import check_record

    record = {key: rec.get(key) for key in ("clock", STEP_TIME_NS, "peak_allocated_bytes",
                                            "peak_reserved_bytes", "phase_time_ns", "values",
                                            "env")}  # fmt: skip
    dynamo = {"frames_compiled": rec.get("recompiles"), "graph_breaks": rec.get("graph_breaks")}
    record["dynamo"] = {k: v for k, v in dynamo.items() if v is not None}
    try:
        check_record(record)
    except ValueError as exc:
        why = str(exc)
        for name, ours in _AB_FIELD.items():
            if why.startswith(name):
                why = ours + why[len(name) :]
        raise ValueError(why) from None
    if not record[STEP_TIME_NS]:
        raise ValueError("no step times")
    return record


def _counts_from(counts: Any, ranks: int) -> dict[str, tuple[int, ...]]:
    """ab.json's counts: per name, one sum per rank (census.capture.arms)."""
    from census.capture.records import check_count, shown

    if counts is None:
        return {}
    if not isinstance(counts, dict):
        raise ValueError(f"counts is {shown(counts)}, not a JSON object")
    for name, per_rank in counts.items():
        if not isinstance(per_rank, list) or len(per_rank) != ranks:
            raise ValueError(f"counts[{shown(name)}] is not a list of {ranks} (one per rank)")
        for i, n in enumerate(per_rank):
            check_count(n, f"counts[{shown(name)}][{i}]")
    return {str(name): tuple(per_rank) for name, per_rank in counts.items()}


def _ranks_from(ranks: Any) -> tuple[RankRecord, ...]:
    """ab.json's ranks: each rank's own figures, in rank order; () for a single process."""
    from census.capture.records import shown

    if ranks is None:
        return ()
    if not isinstance(ranks, list):
        raise ValueError(f"ranks is {shown(ranks)}, not a JSON list")
    return tuple(_rank_from(r, i) for i, r in enumerate(ranks))


def _rank_from(rec: Any, rank: int) -> RankRecord:
    from census.capture.arms import arm_env
    from census.capture.records import (
        check_count,
        check_env,
        check_number,
        check_place,
        check_text,
        shown,
    )

    name = f"ranks[{rank}]"
    if not isinstance(rec, dict):
        raise ValueError(f"{name} is {shown(rec)}, not a JSON object")
    if type(rec.get("rank")) is not int or rec["rank"] != rank:
        raise ValueError(f"{name}.rank is {shown(rec.get('rank'))}, not {rank}")
    check_number(rec.get("median_ns"), f"{name}.median_ns", positive=True)
    keys = ("recompiles", "graph_breaks", "peak_allocated_bytes", "peak_reserved_bytes")
    for key in (*keys, "gpu_index"):
        if rec.get(key) is not None:
            check_count(rec[key], f"{name}.{key}")
    if rec.get("env") is not None:
        check_env(rec["env"], f"{name}.env")
    check_place(rec, f"{name}.")
    check_text(rec.get("gpu_uuid"), f"{name}.gpu_uuid")
    place = ("host", "local_rank", "node", "pid", "gpu_index", "gpu_uuid", "launcher",
             "launcher_note")  # fmt: skip
    return RankRecord(rank, float(rec["median_ns"]), *(rec.get(key) for key in keys),
                      env=arm_env(rec.get("env")),
                      **{key: rec.get(key) for key in place})  # fmt: skip

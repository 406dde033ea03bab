"""`census ab`: run an A/B experiment into one folder, and read one back.

The folder (written atomically, like a capture) holds `ab.json` (the arms and what was run) and,
when captured, the capture folders `a/` and `b/`. Reading it back recomputes the statistics from
the arms and the census diff from the captures, so no stale number is stored. `--force` replaces
only an experiment census made: an `ab.json` that is census's record, beside nothing but its
captures `a/` and `b/`.
"""

from __future__ import annotations

import json
import shutil
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from census.compare.experiment import Experiment
from census.errors import InputError, UsageError
from census.model import Arm
from census.paths import check_output_folder, make_work_folder, replace_folder

RECORD = "ab.json"


@dataclass(frozen=True)
class ABSpec:
    name: str
    commands: dict[str, tuple[str, ...]]  # "a", "b" -> argv
    labels: tuple[str, str] = ("A", "B")
    arms: int = 8
    warmup: int | None = None
    steps: int | None = None
    capture: bool = True
    out_dir: Path = Path("profiles")
    nsys: str | None = None
    force: bool = False

    @property
    def folder(self) -> Path:
        return self.out_dir / self.name


def is_experiment(path: Path) -> bool:
    return path.is_dir() and (path / RECORD).is_file()


def run_ab(spec: ABSpec, progress: Callable[[str], None] | None = None) -> Experiment:
    """Arms first (uncaptured), then one capture per side unless told not to or nsys is absent;
    the experiment folder appears only when everything succeeded."""
    from census.capture.arms import ArmsSpec, arm_order, run_arms
    from census.capture.nsys import find_nsys
    from census.errors import ToolMissingError

    _validate(spec)
    try:
        arm_order(spec.arms)
    except ValueError as exc:
        raise UsageError(str(exc)) from None
    started = time.monotonic()
    note, nsys = None if spec.capture else "--no-capture", None
    if spec.capture:
        try:
            nsys = find_nsys(spec.nsys)
        except ToolMissingError:
            note = "nsys is not installed"
    arms = run_arms(
        ArmsSpec(spec.commands, spec.labels, spec.arms, spec.warmup, spec.steps), progress
    )
    work = make_work_folder(spec.out_dir, spec.name)
    try:
        if nsys:
            _capture_sides(spec, nsys, work, progress)
        record = {"labels": list(spec.labels), "commands": {k: list(v) for k, v in
                  spec.commands.items()}, "arms": [_arm_record(a) for a in arms],
                  "capture": note, "wall_s": round(time.monotonic() - started, 1)}  # fmt: skip
        (work / RECORD).write_text(json.dumps(record, indent=1), encoding="utf-8")
        work.chmod(0o755)
        replace_folder(work, spec.folder, spec.force, experiment_foreign)
    finally:
        if work.exists():
            shutil.rmtree(work, ignore_errors=True)
    return load_experiment(spec.folder)


def _validate(spec: ABSpec) -> None:
    from census.capture.run import check_folder_name

    check_folder_name("experiment", spec.name)
    for side in ("a", "b"):
        if not spec.commands.get(side):
            raise UsageError(f"--{side}: give the command of side {side.upper()}")
    check_output_folder(spec.folder, spec.force, experiment_foreign)


def experiment_foreign(folder: Path) -> str | None:
    """Why `folder` is not an experiment census made; None when it is: an ab.json that is
    census's record, and beside it only its captures `a/` and `b/`, each one census made."""
    from census.capture.run import capture_foreign

    try:
        names = sorted(p.name for p in folder.iterdir())
    except NotADirectoryError:
        return "not a folder"
    except OSError as exc:
        return f"cannot read it ({exc.strerror or exc})"
    if not _is_record(folder / RECORD):
        return f"not a census experiment (no census {RECORD} in it)"
    others = [n for n in names if n not in (RECORD, "a", "b")]
    if others:
        return f"it holds files census did not write ({', '.join(others[:3])})"
    for side in ("a", "b"):
        reason = capture_foreign(folder / side) if side in names else None
        if reason:
            return f"{side}/: {reason}"
    return None


def _is_record(path: Path) -> bool:
    """Whether `path` is the ab.json census writes (run_ab)."""
    try:
        record = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return False
    return (isinstance(record, dict) and isinstance(record.get("labels"), list)
            and len(record["labels"]) == 2 and isinstance(record.get("arms"), list)
            and isinstance(record.get("commands"), dict))  # fmt: skip


def _capture_sides(spec: ABSpec, nsys: str, work: Path, progress) -> None:
    from census.capture.run import CaptureSpec, run_capture
    from census.definitions import DEFAULT_STEPS_REGEX
    from census.errors import CaptureError
    from census.load.steps import has_step_ranges

    for side, label in zip(("a", "b"), spec.labels, strict=True):
        if progress:
            progress(f"capture of {label} under nsys")
        command = spec.commands[side]

        def verify(folder: Path, command=command, label=label) -> None:
            if not has_step_ranges(folder, DEFAULT_STEPS_REGEX):
                raise CaptureError(
                    f"the capture of {label} holds no NVTX step ranges", list(command)
                )

        run_capture(CaptureSpec(name=side, command=command, out_dir=work, nsys=nsys,
                                warmup=spec.warmup, steps=spec.steps), verify)  # fmt: skip


def _arm_record(arm: Arm) -> dict:
    return {"side": arm.side, "index": arm.index, "discarded": arm.discarded,
            "step_time_ns": list(arm.step_time_ns), "peak_allocated_bytes":
            arm.peak_allocated_bytes, "peak_reserved_bytes": arm.peak_reserved_bytes,
            "recompiles": arm.recompiles, "graph_breaks": arm.graph_breaks,
            "clock": arm.clock}  # fmt: skip


def load_experiment(folder: Path | str) -> Experiment:
    """The experiment in `folder`: statistics from its arms, the diff of its captures."""
    from census.compare.stats import analyze

    folder = Path(folder)
    path = folder / RECORD
    try:
        record = json.loads(path.read_text(encoding="utf-8"))
        labels = tuple(str(x) for x in record["labels"])
        arms = tuple(_arm_from(a, i) for i, a in enumerate(record["arms"]))
        commands = {str(k): [str(x) for x in v] for k, v in record["commands"].items()}
        stats = analyze(list(arms))
    except (OSError, ValueError, KeyError, TypeError, AttributeError, RecursionError) as exc:
        raise InputError(f"{path}: not a census experiment record ({exc})") from None
    if len(labels) != 2:
        raise InputError(f"{path}: not a census experiment record (labels)")
    diff = None
    if (folder / "a").is_dir() and (folder / "b").is_dir():
        from census.api import Options, summarize_with
        from census.compare.diff import diff_census

        a, b = (summarize_with(folder / side, Options()) for side in ("a", "b"))
        diff = diff_census(a, b, labels)  # type: ignore[arg-type]
    return Experiment(labels, commands, arms, stats, diff,  # type: ignore[arg-type]
                      record.get("capture"), record.get("wall_s"))  # fmt: skip


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
    record = {key: rec.get(key) for key in
              ("clock", "step_time_ns", "peak_allocated_bytes", "peak_reserved_bytes")}  # fmt: skip
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
    return Arm(side, index, discarded, tuple(record["step_time_ns"]),
               record["peak_allocated_bytes"], record["peak_reserved_bytes"],
               rec.get("recompiles"), rec.get("graph_breaks"), record["clock"])  # fmt: skip

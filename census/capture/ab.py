"""`census ab`, its capture stage: run an A/B experiment's arms and its captures into one folder.

The folder (written atomically, like a capture) holds `ab.json` (the arms and what was run) and,
when captured, the capture folders `a/` and `b/`. It is assembled in a hidden folder beside it
from the start, where the arms' ranks write their step-times records: under a launcher of
several nodes the output folder must be on a filesystem that every node sees. Nothing computed
from them is stored: reading it back (census.sources.experiment, census.api.load_experiment)
recomputes the statistics from the arms and the census diff from the captures. `--force`
replaces only an experiment census made: an `ab.json` that is census's record, beside nothing
but its captures `a/` and `b/`. Its disk is checked for room before the first arm; an `ab.json`
that cannot be written once the arms ran (or a machine that runs out before the captures ran)
keeps the arms' record elsewhere (census.capture.keep).
"""

from __future__ import annotations

import json
import shutil
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from census.capture.keep import finish_folder, kept
from census.capture.torch_trace import TORCH, TRACER_NAME
from census.errors import CensusError, UsageError
from census.metrics import STEP_TIME_NS
from census.model.ab import Arm
from census.paths import check_output_folder, make_work_folder

if TYPE_CHECKING:
    from census.capture.arms import ArmRule

RECORD = "ab.json"
RECORDS = "records"  # the arms' step-times records while they run; removed once read


@dataclass(frozen=True)
class ABSpec:
    """What `census ab` runs: each side's command and label, the measured arms (a multiple of 4; the
    most under `--arms auto`), the warm-up and measured steps per arm (None: the script's own),
    whether to capture each side and with which profiler (nsys, or torch: torch.profiler inside
    the program, census.capture.torch_trace), and where its folder goes."""

    name: str
    commands: dict[str, tuple[str, ...]]  # "a", "b" -> argv
    labels: tuple[str, str] = ("A", "B")
    arms: int = 8
    warmup: int | None = None
    active: int | None = None  # measured steps per arm and capture
    capture: bool = True
    out_dir: Path = Path("profiles")
    nsys: str | None = None
    force: bool = False
    needs_gpu: bool = False  # the commands run on a CUDA GPU (the demo): checked before any arm
    profiler: str = "nsys"  # the captures' profiler; the arms run without any

    @property
    def folder(self) -> Path:
        """The experiment's folder: out_dir / name."""
        return self.out_dir / self.name


def run_ab(
    spec: ABSpec,
    progress: Callable[[str], None] | None = None,
    has_steps: Callable[[Path], bool] | None = None,
    rule: ArmRule | None = None,
    read_ahead: Callable[[Path, Path], None] | None = None,
) -> Path:
    """Arms first (uncaptured), then one capture per side (under spec.profiler) unless told not
    to or nsys is its profiler and absent; the experiment folder appears only when everything
    succeeded. `has_steps(capture folder)`:
    whether a side's capture holds step ranges (a later stage reads them); a capture without
    is refused. With `rule`, spec.arms is the most arms and the rule says when to stop;
    `read_ahead(A's capture, where it will lie)`: census.capture.overlap. The folder."""
    from census.capture.arms import ArmsSpec, arm_order, run_arms
    from census.errors import ResourceError

    _validate(spec)
    try:
        arm_order(spec.arms)
    except ValueError as exc:
        raise UsageError(str(exc)) from None
    if spec.needs_gpu:
        _check_gpu()
    started = time.monotonic()
    note, nsys = _capture_tool(spec)
    # assembled in the experiment's output folder from the start: the ranks write their records
    # into it, which every node must see (census.capture.arms)
    work = make_work_folder(spec.out_dir, spec.name, "no arm was run")
    try:
        arms = run_arms(ArmsSpec(spec.commands, spec.labels, spec.arms, spec.warmup, spec.active,
                                 records=work / RECORDS), progress, rule)  # fmt: skip
        record = _record(spec, arms, note, rule)
        what = (f"the experiment's record ({RECORD}: {len(arms)} arms)", "its captures")
        try:
            if note is None:
                _capture_sides(spec, nsys or "nsys", work, progress, has_steps, read_ahead)
        except ResourceError as exc:
            raise _without_captures(exc, work, spec.folder, record, what) from None
        record["wall_s"] = round(time.monotonic() - started, 1)
        text = (RECORD, json.dumps(record, indent=1))
        finish_folder(work, spec.folder, text, what, spec.force, experiment_foreign)
    finally:
        if work.exists():
            shutil.rmtree(work, ignore_errors=True)
    return spec.folder


def _capture_tool(spec: ABSpec) -> tuple[str | None, str | None]:
    """Why the sides are not captured (None: they are), and nsys where it captures them
    (torch.profiler records inside the program: no tool)."""
    from census.capture.nsys import find_nsys, torch_installed
    from census.errors import ToolMissingError

    if not spec.capture:
        return "--no-capture", None
    if spec.profiler == TORCH:
        return None, None
    try:
        return None, find_nsys(spec.nsys)
    except ToolMissingError:
        hint = "; --profiler torch captures without it" if torch_installed() else ""
        return f"nsys is not installed{hint}", None


def _record(spec: ABSpec, arms: list[Arm], note: str | None, rule: ArmRule | None) -> dict:
    """ab.json's record of the arms (its wall_s set once the experiment is over)."""
    record = {"labels": list(spec.labels), "commands": {k: list(v) for k, v in
              spec.commands.items()}, "arms": [_arm_record(a) for a in arms],
              "capture": note, "wall_s": None}  # fmt: skip
    if rule is not None:
        record["sequential"] = asdict(rule.record())
    return record


def _validate(spec: ABSpec) -> None:
    from census.capture.run import check_folder_name

    check_folder_name("experiment", spec.name)
    for side in ("a", "b"):
        if not spec.commands.get(side):
            raise UsageError(f"--{side}: give the command of side {side.upper()}")
    check_output_folder(spec.folder, spec.force, experiment_foreign)


def _check_gpu() -> None:
    """A ToolMissingError naming what is missing (torch, or a GPU it sees) when the arms cannot
    run on a CUDA GPU here: said before any arm runs (the checks of `census doctor`)."""
    from census.capture.doctor import check_torch
    from census.errors import ToolMissingError

    failed = next((c for c in check_torch() if not c.ok), None)
    if failed is not None:
        what = failed.detail if failed.name == "torch" else f"torch sees {failed.detail}"
        raise ToolMissingError(
            f"--demo runs the built-in workload on a CUDA GPU: {what} (`census doctor` "
            "checks this machine); no arm was run"
        )


def experiment_foreign(folder: Path) -> str | None:
    """Why `folder` is not an experiment census made; None when it is: an ab.json that is
    census's record, and beside it only its captures `a/` and `b/`, each one census made."""
    from census.capture.run import capture_foreign, folder_names

    names = folder_names(folder)
    if isinstance(names, str):
        return names
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
    from census.capture.run import json_object

    record = json_object(path)
    return (record is not None and isinstance(record.get("labels"), list)
            and len(record["labels"]) == 2 and isinstance(record.get("arms"), list)
            and isinstance(record.get("commands"), dict))  # fmt: skip


def _without_captures(exc: BaseException, work: Path, folder: Path, record: dict,
                      what: tuple[str, str]) -> CensusError:  # fmt: skip
    """The machine ran out during the captures (a disk that filled during the arms): the arms'
    record kept (census.capture.keep) as an experiment without captures, the captures dropped."""
    for side in ("a", "b"):
        shutil.rmtree(work / side, ignore_errors=True)
    record = {**record, "capture": "the machine ran out during the captures"}
    return kept(exc, work, folder, (RECORD, json.dumps(record, indent=1)), what)


def _capture_sides(
    spec: ABSpec,
    nsys: str,
    work: Path,
    progress: Callable[[str], None] | None,
    has_steps: Callable[[Path], bool] | None,
    read_ahead: Callable[[Path, Path], None] | None = None,
) -> None:
    """One capture per side into `work`: overlapped where they can be (census.capture.overlap:
    A's report exported while B's program runs, A's capture read while B's report is exported,
    `read_ahead(A's capture folder, where the experiment's A will lie)`), else one after the
    other."""
    from census.capture.overlap import can_overlap, capture_overlapped
    from census.capture.run import CaptureSpec, run_capture
    from census.errors import CaptureError

    sides = ("a", "b")
    specs = [CaptureSpec(name=side, command=spec.commands[side], out_dir=work, nsys=nsys,
                         warmup=spec.warmup, active=spec.active, profiler=spec.profiler)
             for side in sides]  # fmt: skip

    def verify(label: str, command: tuple[str, ...]) -> Callable[[Path], None]:
        def check(folder: Path) -> None:
            if has_steps is not None and not has_steps(folder):
                raise CaptureError(f"the capture of {label} holds no step ranges", list(command))

        return check

    checks = [verify(label, s.command) for label, s in zip(spec.labels, specs, strict=True)]
    if can_overlap(specs):
        ahead = None if read_ahead is None else lambda a: read_ahead(a, spec.folder / "a")
        capture_overlapped(specs, spec.labels, checks, ahead, progress)
        return
    for one, label, check in zip(specs, spec.labels, checks, strict=True):
        if progress:
            progress(f"capture of {label} under {TRACER_NAME[spec.profiler]}")
        run_capture(one, check)


def _arm_record(arm: Arm) -> dict:
    """The arm as ab.json keeps it: its fields by name (an ArmEnv or RankRecord as an object),
    read back by census.sources.experiment."""
    return {"side": arm.side, "index": arm.index, "discarded": arm.discarded,
            STEP_TIME_NS: list(arm.step_time_ns), "peak_allocated_bytes":
            arm.peak_allocated_bytes, "peak_reserved_bytes": arm.peak_reserved_bytes,
            "recompiles": arm.recompiles, "graph_breaks": arm.graph_breaks,
            "clock": arm.clock, "phase_time_ns": {name: list(times) for name, times in
                                                  arm.phase_time_ns.items()},
            "values": {name: list(row) for name, row in arm.values.items()},
            "counts": {name: list(per_rank) for name, per_rank in arm.counts.items()},
            "env": None if arm.env is None else asdict(arm.env),
            "ranks": [asdict(r) for r in arm.ranks], "wall_ns": arm.wall_ns,
            "census_ns": arm.census_ns}  # fmt: skip

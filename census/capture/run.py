"""Capture: build the `nsys profile` command (pure, testable) and run it into profiles/NAME/.

A capture is assembled in a hidden `.NAME.partial-PID-HOST-*` folder and renamed into place only
when nsys succeeded, the report was imported and exported, and step ranges were found: an
interrupted or failed capture never leaves a folder that looks finished, and one killed outright
(kill -9) is removed by the next capture or experiment into that folder. Its disk is checked for
room before nsys starts; a run.json that cannot be written once nsys ran is kept elsewhere, the
exports on disk (census.capture.keep). `--force` replaces only a
capture census made: its run.json is census's record and every file in it one census writes.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import json
import os
import re
import shutil
import signal
import socket
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

from census import __version__
from census.capture.doctor import environment_info, probe
from census.capture.inductor import inductor_env, keep_inductor_map
from census.capture.keep import finish_folder
from census.capture.launcher import Launch, forwarded, split_launcher
from census.capture.ops import NSYS_PYTORCH, op_ranges, ops_env
from census.capture.per_rank import (
    check_ranks,
    distributed_profile_command,
    rank_info,
    read_places,
    unwritten,
)
from census.capture.process import ProgramError, run_group
from census.capture.records import read_record
from census.capture.steps import ENV_ACTIVE, ENV_RUN, ENV_STEP_TIMES, ENV_WARMUP, RANK_SUFFIX
from census.capture.torch_trace import TORCH, TRACE_SUFFIX, TRACER_NAME, trace_env, trace_stems
from census.errors import CaptureError, UsageError
from census.metrics import STEP_TIME_NS
from census.paths import check_output_folder, make_work_folder

DEFAULT_TRACE = "cuda,nvtx"
REPORT_STEM = "capture"


@dataclass(frozen=True)
class CaptureSpec:
    """What `census capture` runs: the capture's name (its folder under out_dir), the command, the
    nsys executable and its `-t` list, the warm-up and measured steps (None: the script's own),
    whether to replace a capture, whether to time a calibration run without the profiler first,
    more environment, whether each rank summarizes its own export, and the profiler (nsys, or
    torch: torch.profiler, census.capture.torch_trace)."""

    name: str
    command: tuple[str, ...]
    out_dir: Path = Path("profiles")
    nsys: str = "nsys"
    trace: str = DEFAULT_TRACE
    warmup: int | None = None
    active: int | None = None  # measured steps: census.steps(active=N)
    force: bool = False
    calibrate: bool = False
    env: dict[str, str] = field(default_factory=dict)
    on_ranks: bool = False  # with several ranks, each summarizes its export (census.cli.on_rank)
    profiler: str = "nsys"  # or "torch": torch.profiler inside the program, no nsys
    ops: bool = False  # --ops: op ranges in the captured run (census.capture.ops)

    @property
    def folder(self) -> Path:
        """The capture's folder: out_dir / name."""
        return self.out_dir / self.name


def nsys_profile_command(nsys: str, output_base: Path, command: tuple[str, ...], trace: str,
                         export: bool = True, ops: str | None = None) -> list[str]:  # fmt: skip
    """Flags for this analysis: CUDA + NVTX, graph nodes as kernels, the profiler-API range,
    no CPU sampling or context switches (overhead, nothing to a census); nsys's op ranges: `ops`;
    the SQLite export made by nsys as it ends, unless `export` is False (census exports the
    report itself later: census.capture.overlap)."""
    return [
        nsys,
        "profile",
        f"--trace={trace}",
        *([NSYS_PYTORCH] if ops == NSYS_PYTORCH else []),
        "--cuda-graph-trace=node",
        "--capture-range=cudaProfilerApi",
        "--capture-range-end=stop",
        "--sample=none",
        "--cpuctxsw=none",
        *(["--export=sqlite"] if export else []),
        "--force-overwrite=true",
        f"--output={output_base}",
        *command,
    ]


# NVLink multicast can take a shared host's GPUs down: kept off in every multi-GPU capture.
MULTI_GPU_ENV = {
    "NCCL_NVLS_ENABLE": "0",
    "TORCH_SYMM_MEM_DISABLE_MULTICAST": "1",
    "NVSHMEM_DISABLE_NVLS": "1",
}


def step_env(spec: CaptureSpec, run: str = "capture", work: Path | None = None,
             ops: str | None = None) -> dict[str, str]:  # fmt: skip
    """What census sets for the captured program (or its calibration run, `run`): its steps,
    that census runs it (census.steps then ends the loop after the measured steps), with
    --summarize-on-ranks census's cache folder as this node sees it (each rank caches its census
    there; shared, it reaches the node that asks), Inductor's cache in `work`, $CENSUS_OPS
    (census.capture.ops.ops_env) and Open MPI told to pass them on."""
    from census.paths import cache_dir

    env = {**spec.env, **inductor_env(work), **ops_env(ops, run), ENV_RUN: run}
    if spec.warmup is not None:
        env[ENV_WARMUP] = str(spec.warmup)
    if spec.active is not None:
        env[ENV_ACTIVE] = str(spec.active)
    if spec.on_ranks and "CENSUS_CACHE_DIR" not in os.environ:
        env.setdefault("CENSUS_CACHE_DIR", str(cache_dir().absolute()))
    return forwarded(env)


def check_folder_name(kind: str, name: str) -> None:
    """A capture's or an experiment's name is one plain folder name under the output folder."""
    if not name or "/" in name or name.startswith("."):
        raise UsageError(f"{kind} name {name!r}: use a plain folder name")


def validate_spec(spec: CaptureSpec) -> None:
    """Raise UsageError for a spec that cannot run: a name that is not a plain folder name, no
    command, --summarize-on-ranks without a launcher, or a folder check_capture_folder refuses."""
    check_folder_name("capture", spec.name)
    if not spec.command:
        raise UsageError("give the command to profile after `--`, or --demo eager|compiled")
    if spec.on_ranks and split_launcher(spec.command) is None:
        raise UsageError("--summarize-on-ranks: each rank summarizes its own export under a "
                         "launcher of several ranks; give a torchrun, srun or mpirun command "
                         "after --")  # fmt: skip
    check_capture_folder(spec.folder, spec.force)


def check_capture_folder(folder: Path, force: bool) -> None:
    """Before any work: the folder can be made, and replaced (--force) only when census made it."""
    check_output_folder(folder, force, capture_foreign)


# What census writes into a capture folder (nsys's reports and exports, one per rank or one).
_CAPTURE = r"(capture|rank\d+)\.(nsys-rep|sqlite|qdstrm|pt\.trace\.json\.gz)"
_CAPTURE_FILE = re.compile(_CAPTURE + r"|(run|inductor_map)\.json")


def folder_names(folder: Path) -> list[str] | str:
    """The names in `folder`, sorted; or why they cannot be read (a str)."""
    try:
        return sorted(p.name for p in folder.iterdir())
    except NotADirectoryError:
        return "not a folder"
    except OSError as exc:
        return f"cannot read it ({exc.strerror or exc})"


def capture_foreign(folder: Path) -> str | None:
    """Why `folder` is not a capture census made; None when it is: a run.json that is census's
    record, and no file census does not write."""
    names = folder_names(folder)
    if isinstance(names, str):
        return names
    if not is_capture_record(folder / "run.json"):
        return "not a census capture (no census run.json in it)"
    others = [n for n in names if not _CAPTURE_FILE.fullmatch(n)]
    if others:
        return f"it holds files census did not write ({', '.join(others[:3])})"
    return None


def json_object(path: Path) -> dict | None:
    """The JSON object in `path`; None when it is unreadable, not JSON or not an object."""
    try:
        value = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError, RecursionError):
        return None
    return value if isinstance(value, dict) else None


def is_capture_record(path: Path) -> bool:
    """Whether `path` is the run.json census writes (run_info)."""
    info = json_object(path)
    torch = info is not None and info.get("profiler") == TRACER_NAME[TORCH]  # no nsys command
    return (info is not None and isinstance(info.get("census_version"), str)
            and isinstance(info.get("command"), list)
            and (isinstance(info.get("nsys_command"), list) or torch))  # fmt: skip


def run_capture(spec: CaptureSpec, verify: Callable[[Path], None] | None = None) -> Path:
    """Run the capture; return the finished folder holding its exports (capture.nsys-rep and
    .sqlite, or torch.profiler's capture.pt.trace.json.gz; one per rank) and run.json.

    `verify(folder)` may raise to reject the capture before it is moved into place."""
    validate_spec(spec)
    with capture_work(spec) as work:
        return finish_capture(profile_capture(spec, work), verify)


@contextlib.contextmanager
def capture_work(spec: CaptureSpec) -> Iterator[Path]:
    """The capture's hidden work folder (census.paths.make_work_folder), removed on the way out
    unless finish_capture moved it into place."""
    work = make_work_folder(
        spec.out_dir, spec.name, f"{TRACER_NAME[spec.profiler]} was not started"
    )
    try:
        yield work
    finally:
        if work.exists():
            shutil.rmtree(work, ignore_errors=True)


@dataclass(frozen=True)
class Profiled:
    """A capture whose program ran under nsys in `work`: the nsys command, its output's tail,
    when it started, its calibration, its launcher (None: one process) and who recorded its op
    ranges (census.capture.ops.op_ranges)."""

    spec: CaptureSpec
    work: Path
    cmd: list[str]
    tail: str
    started: dt.datetime
    calibration: dict | None
    launch: Launch | None
    ops: str | None = None


def profile_capture(spec: CaptureSpec, work: Path, export: bool = True) -> Profiled:
    """The calibration run when asked, then the program under `nsys profile` into `work`;
    without `export` (one process only) nsys writes the report alone, for `nsys export` later.
    With spec.profiler "torch" the program runs itself (each rank under its launcher) and
    census.steps records it with torch.profiler (trace_env), each rank writing its own trace."""
    started = dt.datetime.now(dt.timezone.utc)
    calibration = calibrate(spec, work) if spec.calibrate else None
    launch = split_launcher(spec.command)
    torch = spec.profiler == TORCH
    ops = None if torch else op_ranges(spec.ops, spec.nsys, bool(launch))
    env = {**os.environ, **step_env(spec, "capture", work, ops)}
    if torch:
        cmd, env = list(spec.command), {**env, **forwarded(trace_env(work), env)}
    elif launch:
        into = spec.folder.absolute() if spec.on_ranks else None
        cmd = distributed_profile_command(spec.nsys, work.absolute(), launch, spec.trace, into)
    else:
        cmd = nsys_profile_command(spec.nsys, work / REPORT_STEM, spec.command, spec.trace,
                                   export, ops)  # fmt: skip
    env = {**MULTI_GPU_ENV, **env, **MULTI_GPU_ENV} if launch else env
    what = "the program under torch.profiler" if torch else "nsys profile"
    tail = _run_ranks(cmd, env, what, _suffix(spec)) if launch else run_command(cmd, env, what)
    keep_inductor_map(work)  # Inductor's generated code read into its map, then removed
    return Profiled(spec, work, cmd, tail, started, calibration, launch, ops)


def finish_capture(done: Profiled, verify: Callable[[Path], None] | None = None,
                   exported_by: list[str] | None = None) -> Path:  # fmt: skip
    """The capture's exports checked (and `verify(work)` asked), its run.json written (with
    `exported_by`, the `nsys export` command census ran, where nsys did not export it as it
    ended) and its work folder moved into place; the capture's folder."""
    spec, work, cmd, launch = done.spec, done.work, done.cmd, done.launch
    multi, suffix = bool(launch), _suffix(spec)
    stems = (
        trace_stems(work, cmd, multi) if suffix == TRACE_SUFFIX else check_outputs(work, cmd, multi)
    )
    places = read_places(work) if launch else {}
    world = check_ranks(stems, places, launch, done.tail, cmd, suffix) if launch else 1
    if verify:
        verify(work)

    def recorded(command: list[str]) -> list[str]:  # as run in the capture's folder
        return [c.replace(str(work.absolute()), str(spec.folder)).replace(str(work),
                str(spec.folder)) for c in command]  # fmt: skip

    info = run_info(spec, recorded(cmd), done.started, dt.datetime.now(dt.timezone.utc),
                    done.calibration)  # fmt: skip
    info["op_ranges"] = done.ops
    if exported_by is not None:
        info["nsys_export_command"] = recorded(exported_by)
    if launch:
        info.update(rank_info(work, stems, places, world, suffix))
    finish_folder(work, spec.folder, ("run.json", json.dumps(info, indent=2)),
                  ("the capture's record (run.json)", "its exports"), spec.force,
                  capture_foreign)  # fmt: skip
    return spec.folder


def _suffix(spec: CaptureSpec) -> str:
    """The name ending of the files a rank's capture is read from (an export or a trace)."""
    return TRACE_SUFFIX if spec.profiler == TORCH else ".sqlite"


def _run_ranks(cmd: list[str], env: dict[str, str], what: str, suffix: str) -> str:
    """The launcher's run (run_command); when it fails because ranks could not write into the
    capture folder, the one line that names them (census.capture.per_rank.unwritten)."""
    try:
        return run_command(cmd, env, what)
    except ProgramError as exc:
        named = unwritten(exc.tail, cmd, suffix=suffix)
        if named is not None:
            raise named from None
        raise


def check_outputs(work: Path, cmd: list[str], multi: bool = False) -> list[str]:
    """The report stems nsys wrote (`capture`, or `rank0`, `rank1`, ...), each with its .sqlite."""
    reports = sorted(p.stem for p in work.glob("*.nsys-rep"))
    if multi:
        reports = [r for r in reports if r.startswith("rank")]
    elif REPORT_STEM not in reports:
        reports = []
    if not reports:
        if list(work.glob("*.qdstrm")):
            raise CaptureError(
                "nsys wrote only a .qdstrm stream and no report: this nsys install lacks its "
                "importer (QdstrmImporter); use a full Nsight Systems install",
                cmd,
            )
        raise CaptureError(
            "nsys produced no report: did the program reach the capture range "
            "(census.steps / cudaProfilerStart)?",
            cmd,
        )
    missing = [r for r in reports if not (work / f"{r}.sqlite").exists()]
    if missing:
        raise CaptureError(
            f"nsys wrote a report but no SQLite export for {', '.join(missing)} (`--export=sqlite`)",
            cmd,
        )
    return reports


# nsys stops the program and writes its report on SIGINT: the time it is given before SIGKILL
NSYS_GRACE_S = 10.0


def run_command(cmd: list[str], env: dict[str, str], what: str, echo: bool = True) -> str:
    """Run in its own process group (census.capture.process), its output on stderr as it comes
    when `echo`; return the tail of the output. On Ctrl-C, SIGTERM or SIGHUP the whole group
    gets SIGINT and NSYS_GRACE_S to finish (a second Ctrl-C cuts that short), then SIGKILL, and
    the signal is delivered again (Ctrl-C: KeyboardInterrupt); a failure raises CaptureError
    with the output's tail."""
    return run_group(cmd, env, what, echo, signal.SIGINT, NSYS_GRACE_S)


def calibrate(spec: CaptureSpec, work: Path) -> dict:
    """Run the same steps without the profiler; census.steps records each step's wall time."""
    times = work / "calibration.json"
    env = {**os.environ, **step_env(spec, "calibration", work), ENV_STEP_TIMES: str(times)}
    env = {**env, **forwarded({ENV_STEP_TIMES: str(times)}, env)}
    what = f"calibration run (without {TRACER_NAME[spec.profiler]})"
    run_command(list(spec.command), env, what)
    try:
        record = read_record(times, what, list(spec.command))  # checked as an arm's record is
    finally:
        with contextlib.suppress(OSError):
            times.unlink()
        for rank_file in work.glob(times.name + RANK_SUFFIX + "*"):
            with contextlib.suppress(OSError):
                rank_file.unlink()
    if not record or not record.get("host_step_time_ns"):
        raise CaptureError(
            "calibration run recorded no steps: wrap the training loop in census.steps()",
            list(spec.command),
        )
    # host time of each step's body: what the captured NVTX step ranges span; and the GPU's time
    # per step (CUDA events), what GPU spans compare with when the host runs ahead of the GPU
    durations = record["host_step_time_ns"]
    gpu = record[STEP_TIME_NS] if record.get("clock") == "cuda_events" else None
    return {
        "uncaptured_step_time_ns": durations,
        "uncaptured_mean_step_time_ns": _mean(durations),
        "uncaptured_gpu_step_time_ns": gpu,
        "uncaptured_gpu_mean_step_time_ns": _mean(gpu),
    }


def _mean(values: list[int] | None) -> float | None:
    return sum(values) / len(values) if values else None


def run_info(
    spec: CaptureSpec,
    cmd: list[str],
    started: dt.datetime,
    ended: dt.datetime,
    calibration: dict | None,
) -> dict:
    """run.json's record of a capture: the spec, the profiler and the command run (nsys's, or
    the program itself under torch.profiler: `nsys_command` null), its start and end (ISO 8601),
    host, working directory, git commit, versions (environment_info; no nsys version without
    nsys) and calibration."""
    torch = spec.profiler == TORCH
    return {
        "name": spec.name,
        "command": list(spec.command),
        "profiler": TRACER_NAME[spec.profiler],
        "nsys_command": None if torch else cmd,
        "profile_command": cmd,
        "start_time": started.isoformat(),
        "end_time": ended.isoformat(),
        "hostname": socket.gethostname(),
        "cwd": os.getcwd(),
        "git_commit": probe(["git", "rev-parse", "HEAD"], timeout=5),
        "census_version": __version__,
        "warmup": spec.warmup,
        "active": spec.active,
        **environment_info(None if torch else spec.nsys),
        "calibration": calibration,
    }

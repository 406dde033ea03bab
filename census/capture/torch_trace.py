"""torch.profiler in census's captures, both sides of `census capture --profiler torch`.

In the training process (census.capture.steps): census's `step N` and phase ranges are marked
for a Kineto profiler that is running (`record_function`, which a trace writes as
`user_annotation` events; mark_open costs a lookup and an attribute read when none runs, and
nothing where torch was never imported), and with $CENSUS_PROFILER=torch the measured window is
recorded by torch.profiler (TorchTrace: CPU activity, CUDA too where torch sees a GPU, no shapes)
and its chrome trace written gzipped and atomically into $CENSUS_TRACE_DIR, as `capture` +
TRACE_SUFFIX, or `rankN` + TRACE_SUFFIX for rank N of several (with its place in the job, as
census's per-rank wrapper writes it for nsys). Nothing here imports torch: it is used only where
the program already has. A trace that cannot be written is one line on stderr, never an
exception: the training goes on, and the capture names the rank.

In census's process: the environment that asks for it (trace_env) and the traces found in the
capture's work folder (trace_stems).
"""

from __future__ import annotations

import contextlib
import gzip
import os
import shutil
import socket
import sys
from pathlib import Path
from typing import Any

from census.capture.launcher import CANNOT_WRITE, rank_env, write_place
from census.errors import CaptureError

ENV_PROFILER = "CENSUS_PROFILER"  # "torch": census.steps records the window with torch.profiler
ENV_TRACE_DIR = "CENSUS_TRACE_DIR"  # where it writes the trace (the capture's work folder)
TORCH = "torch"
PROFILERS = ("nsys", TORCH)  # census capture --profiler
TRACER_NAME = {"nsys": "nsys", TORCH: "torch.profiler"}  # as census's messages name them
TRACE_SUFFIX = ".pt.trace.json.gz"
NO_TORCH = "census: --profiler torch, but the program has not imported torch: no trace written"
PROFILER_RUNNING = ("census: --profiler torch, but the program runs a torch.profiler of its own "
                    "over the measured steps: no trace written (census's steps are in its trace)")  # fmt: skip


def mark_open(name: str) -> Any:
    """A `record_function` range named `name`, entered, when a Kineto profiler (torch.profiler)
    is running: the handle mark_close takes; else None (emit_nvtx's and emit_itt's profilers
    are not Kineto's: under nsys the NVTX ranges are census's own)."""
    prof = _PROFILER[0] or _profiler_module()
    if prof is None or not prof._is_profiler_enabled:
        return None  # the usual case: an attribute read, no call into torch
    if not _kineto():
        return None
    mark = prof.record_function(name)
    mark.__enter__()
    return mark


# torch.autograd.profiler once the program has imported torch (its flag read at each mark)
_PROFILER: list[Any] = [None]


def _profiler_module() -> Any:
    """torch.autograd.profiler where torch is imported and the module has the flag, kept."""
    prof = sys.modules.get("torch.autograd.profiler")
    if prof is not None and hasattr(prof, "_is_profiler_enabled"):
        _PROFILER[0] = prof
        return prof
    return None


def mark_close(mark: Any) -> None:
    """Close a range mark_open entered (None: nothing)."""
    if mark is not None:
        mark.__exit__(None, None, None)


def _kineto() -> bool:
    """Whether the running profiler is Kineto's (true where this torch cannot say)."""
    torch = sys.modules["torch"]
    try:
        kind = torch._C._autograd._profiler_type()
        return kind == torch._C._profiler.ActiveProfilerType.KINETO
    except AttributeError:
        return True


class TorchTrace:
    """The measured window under torch.profiler (start, stop), its trace written on stop into
    `folder` (trace_path)."""

    __slots__ = ("folder", "prof")

    def __init__(self, folder: str) -> None:
        self.folder, self.prof = folder, None

    @classmethod
    def from_env(cls) -> TorchTrace | None:
        """The trace census asks for ($CENSUS_PROFILER=torch, $CENSUS_TRACE_DIR), else None."""
        folder = os.environ.get(ENV_TRACE_DIR)
        return cls(folder) if os.environ.get(ENV_PROFILER) == TORCH and folder else None

    def start(self) -> None:
        """Start torch.profiler after the GPU has finished the warm-up's work."""
        torch = sys.modules.get("torch")
        if torch is None:
            _say(NO_TORCH)
            return
        prof = _profiler_module()
        if prof is not None and prof._is_profiler_enabled:  # one profiler at a time: the user's
            _say(PROFILER_RUNNING)
            return
        from torch.profiler import ProfilerActivity, profile, supported_activities

        cuda = torch.cuda.is_available() and ProfilerActivity.CUDA in supported_activities()
        if cuda:
            torch.cuda.synchronize()  # the warm-up's GPU work stays out of the trace
        activities = [ProfilerActivity.CPU, *([ProfilerActivity.CUDA] if cuda else [])]
        self.prof = profile(activities=activities, record_shapes=False)
        self.prof.start()

    def stop(self) -> None:
        """Stop it once the GPU has finished the last step's work, and write the trace."""
        prof, self.prof = self.prof, None
        if prof is None:
            return
        torch = sys.modules["torch"]
        if torch.cuda.is_available():
            torch.cuda.synchronize()  # the last step's GPU work belongs inside the trace
        prof.stop()
        write_trace(prof, self.folder)


def trace_path(folder: str, rank: int, world: int) -> Path:
    """Where a process's trace goes: `capture` + TRACE_SUFFIX, `rankN` + TRACE_SUFFIX of several."""
    return Path(folder) / f"{'capture' if world == 1 else f'rank{rank}'}{TRACE_SUFFIX}"


def write_trace(prof: Any, folder: str) -> bool:
    """The profiler's chrome trace, gzipped, written to trace_path atomically (a whole trace or
    none), and with several ranks this rank's place beside it (census.capture.launcher's
    write_place). Whether it was written: one that cannot be is one line on stderr (its
    CANNOT_WRITE, which census capture reads to name the rank), never an exception."""
    env = rank_env()
    target = trace_path(folder, env.rank, env.world)
    plain = target.with_name(f".{target.name}.{os.getpid()}.json")
    part = target.with_name(f".{target.name}.{os.getpid()}.part")
    try:
        try:
            prof.export_chrome_trace(str(plain))
            with plain.open("rb") as src, gzip.open(part, "wb", compresslevel=6) as dst:
                shutil.copyfileobj(src, dst, 1 << 20)
            os.replace(part, target)
        finally:
            for left in (plain, part):
                with contextlib.suppress(OSError):
                    left.unlink()
    except (OSError, RuntimeError) as exc:  # RuntimeError: torch's own write failed
        why = str(getattr(exc, "strerror", None) or exc).replace(":", ",")
        host = socket.gethostname()
        _say(f"{CANNOT_WRITE.format(rank=env.rank, world=env.world, host=host)}: {why}: "
             f"{target}; the training goes on")  # fmt: skip
        return False
    if env.world > 1:
        write_place(Path(folder), env, socket.gethostname())
    return True


def _say(line: str) -> None:
    """One line on stderr in one write: lines of ranks that share the pipe do not interleave."""
    with contextlib.suppress(OSError, ValueError, AttributeError):
        sys.stderr.write(" ".join(line.split()) + "\n")
        sys.stderr.flush()


def trace_env(work: Path) -> dict[str, str]:
    """What census sets for a program it captures with torch.profiler (census.steps reads it)."""
    return {ENV_PROFILER: TORCH, ENV_TRACE_DIR: str(work.absolute())}


def trace_stems(work: Path, cmd: list[str], multi: bool = False) -> list[str]:
    """The traces the program wrote into `work` (`capture`, or `rank0`, `rank1`, ...: their
    names without TRACE_SUFFIX); a CaptureError when there are none."""
    stems = sorted(p.name.removesuffix(TRACE_SUFFIX) for p in work.glob("*" + TRACE_SUFFIX))
    stems = [s for s in stems if s.startswith("rank")] if multi else [
        s for s in stems if s == "capture"]  # fmt: skip
    if not stems:
        raise CaptureError(
            "the program wrote no torch.profiler trace: did it import torch and reach its "
            "measured steps (census.steps)?",
            cmd,
        )
    return stems

"""`census ab`'s two captures with their exports overlapped (#57): side A's report is exported
while side B's program runs, and census reads A's export while B's report is exported.

In order:
1. A's program runs under `nsys profile`, which writes the report alone (no `--export`);
2. `nsys export` of A's report starts in the background (census.capture.background), and B's
   program runs under `nsys profile` meanwhile;
3. `nsys export` of B's report starts in the background; A's export is joined, A's capture
   checked (`verify`) and moved into place, and `read_ahead(A's folder)` asked (census ab:
   census's read of A, cached for the experiment's read-back);
4. B's export is joined, B's capture checked and moved into place.
A failed export fails the experiment as a failed capture does, with its output's tail. However
the step is left (an error, Ctrl-C), every export still running is stopped with its process
group and both work folders are removed. Under a launcher of several ranks (each rank exports
its own report) or with $CENSUS_AB_OVERLAP=0 the sides are captured one after the other, each
exported by nsys as it ends, as before #57.

A's export runs at a lower CPU priority beside B's program: with a core to spare it takes
nothing from B; without one, B's captured steps may be slowed (docs/performance.md says what
was measured).
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable
from pathlib import Path

from census.capture.background import Background
from census.capture.launcher import split_launcher
from census.capture.nsys import export_command
from census.capture.run import (
    REPORT_STEM,
    CaptureSpec,
    Profiled,
    capture_work,
    check_outputs,
    finish_capture,
    profile_capture,
)

OVERLAP_ENV = "CENSUS_AB_OVERLAP"  # "0": the sides captured one after the other, as before #57


def can_overlap(specs: list[CaptureSpec]) -> bool:
    """Whether the captures' exports can be overlapped: nsys's (torch.profiler's traces are
    written by the program), single-process commands, and $CENSUS_AB_OVERLAP not 0."""
    if os.environ.get(OVERLAP_ENV, "").strip() == "0" or any(s.profiler != "nsys" for s in specs):
        return False
    return not any(split_launcher(spec.command) for spec in specs)


def capture_overlapped(specs: list[CaptureSpec], labels: tuple[str, str],
                       verify: list[Callable[[Path], None] | None],
                       read_ahead: Callable[[Path], None] | None = None,
                       progress: Callable[[str], None] | None = None) -> list[Path]:  # fmt: skip
    """The captures of `specs` (A, B), each `verify`d, in the order the module says; their
    folders. `progress(stage)` is told each step, naming the sides by their `labels`."""
    a, b = specs
    with contextlib.ExitStack() as stack:
        if progress:
            progress(f"capture of {labels[0]} under nsys")
        profiled_a = profile_capture(a, stack.enter_context(capture_work(a)), export=False)
        export_a = stack.enter_context(_export(profiled_a, labels[0]))
        if progress:
            progress(f"capture of {labels[1]} under nsys ({labels[0]}'s report exported beside it)")
        profiled_b = profile_capture(b, stack.enter_context(capture_work(b)), export=False)
        export_b = stack.enter_context(_export(profiled_b, labels[1]))
        if progress:
            progress(f"export of {labels[1]}'s report ({labels[0]}'s capture read beside it)")
        export_a.join()
        folder_a = finish_capture(profiled_a, verify[0], export_a.command)
        if read_ahead:
            read_ahead(folder_a)
        export_b.join()
        folders = [folder_a, finish_capture(profiled_b, verify[1], export_b.command)]
    return folders


def _export(done: Profiled, label: str) -> Background:
    """`nsys export` of the capture's report to its SQLite file, to run in the background; the
    error check_outputs gives when nsys wrote no report."""
    report = done.work / f"{REPORT_STEM}.nsys-rep"
    if not report.is_file():
        check_outputs(done.work, done.cmd)  # no report, or only a .qdstrm: it says which
    command = export_command(done.spec.nsys, report, report.with_suffix(".sqlite"))
    return Background(command, dict(os.environ), f"the export of {label}'s report (nsys export)")

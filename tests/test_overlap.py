"""The overlap of `census ab`'s captures (#57) on CPU, with real processes: a program run in the
background (census.capture.background, side A's `nsys export`) beside one run in the foreground
(census.capture.process.run_group, side B's program), joined, stopped with its whole group
however the block is left, its failure reported as a foreground program's is; the `nsys`
command lines each step runs; the export options pinned from the nsys version they were proven
on. The overlapped captures themselves need nsys: scripts/gpu_pipeline.sh after."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from census.capture.background import NICE, Background
from census.capture.nsys import (
    EXPORT_PINNED,
    EXPORT_PINNED_FROM,
    export_command,
    nsys_version,
    pinned_export_options,
)
from census.capture.overlap import can_overlap
from census.capture.process import ProgramError, run_group
from census.capture.run import CaptureSpec, nsys_profile_command
from census.errors import CaptureError
from tests.helpers.alive import alive
from tests.helpers.cli import started

pytestmark = pytest.mark.skipif(sys.platform != "linux", reason="reads processes from /proc")


def gone(pids: list[int], timeout: float = 10.0) -> bool:
    deadline = time.monotonic() + timeout
    while any(alive(p) for p in pids):
        if time.monotonic() > deadline:
            return False
        time.sleep(0.05)
    return True


def python(code: str) -> list[str]:
    return [sys.executable, "-c", textwrap.dedent(code)]


def stamped(path: Path, seconds: float) -> list[str]:
    """A program that writes its start and end times (time.time()) into `path`, `seconds` apart."""
    return python(f"""
        import time
        start = time.time()
        time.sleep({seconds})
        open({str(path)!r}, "w").write(f"{{start}} {{time.time()}}")
    """)


def span(path: Path) -> tuple[float, float]:
    start, end = path.read_text().split()
    return float(start), float(end)


def test_the_background_program_runs_while_the_foreground_one_does(tmp_path: Path) -> None:
    """A's export (2 s here) runs while B's program (1 s) does and is still running when it
    ends: the two overlap, and join() waits for the background one's end."""
    bg, fg = tmp_path / "bg", tmp_path / "fg"
    with Background(stamped(bg, 2.0), dict(os.environ), "the export of A's report") as export:
        run_group(stamped(fg, 1.0), dict(os.environ), "B's program")
        export.join()
        assert bg.exists()
    (bg_start, bg_end), (fg_start, fg_end) = span(bg), span(fg)
    assert fg_start < bg_end and bg_start < fg_end < bg_end


CHILD_AND_SELF = """
    import os, subprocess, sys, time
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    open({marks!r} + f"/{{os.getpid()}}-{{child.pid}}.pids", "w").close()
    time.sleep(60)
"""


def pids_in(marks: Path, timeout: float = 30.0) -> list[int]:
    deadline = time.monotonic() + timeout
    while not any(marks.iterdir()):
        assert time.monotonic() < deadline, "the background program wrote no pids"
        time.sleep(0.05)
    return [int(p) for f in marks.iterdir() for p in f.name.split(".")[0].split("-")]


def test_an_error_in_the_block_stops_the_background_program_and_its_children(
    tmp_path: Path,
) -> None:
    marks = tmp_path / "marks"
    marks.mkdir()
    program = python(CHILD_AND_SELF.format(marks=str(marks)))
    with pytest.raises(ProgramError, match="B's program failed"):
        with Background(program, dict(os.environ), "the export of A's report"):
            pids = pids_in(marks)
            assert all(alive(p) for p in pids)
            run_group(python("import sys; sys.exit(2)"), dict(os.environ), "B's program")
    assert gone(pids)


CTRL_C_SCRIPT = """
import os, sys
from census.capture.background import Background
from census.capture.process import run_group
background = [sys.executable, "-c", {background!r}]
with Background(background, dict(os.environ), "the export of A's report"):
    run_group([sys.executable, "-c", {foreground!r}], dict(os.environ), "B's program")
"""


def test_ctrl_c_during_the_foreground_program_stops_both(tmp_path: Path) -> None:
    """Ctrl-C while B's program runs: B's group is stopped by run_group, then, leaving the block,
    A's export with its child; the program ends as Ctrl-C ends it."""
    marks = tmp_path / "marks"
    marks.mkdir()
    foreground = textwrap.dedent(f"""
        import os, time
        open({str(marks)!r} + f"/{{os.getpid()}}.pid", "w").close()
        time.sleep(60)
    """)
    background = textwrap.dedent(CHILD_AND_SELF.format(marks=str(marks)))
    script = CTRL_C_SCRIPT.format(background=background, foreground=foreground)
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).parents[1])}
    with started([sys.executable, "-c", script], env=env, stderr=subprocess.PIPE) as proc:
        deadline = time.monotonic() + 30
        while len(list(marks.iterdir())) < 2:
            assert time.monotonic() < deadline and proc.poll() is None, "the programs did not start"
            time.sleep(0.05)
        pids = [int(p) for f in marks.iterdir() for p in f.name.split(".")[0].split("-")]
        assert len(pids) == 3 and all(alive(p) for p in pids)
        proc.send_signal(signal.SIGINT)
        assert proc.wait(timeout=30) == -signal.SIGINT  # KeyboardInterrupt, uncaught
    assert gone(pids)


def test_a_failed_background_program_is_reported_as_a_silent_program_s_failure() -> None:
    """Its exit, its command and its last line in the one-line error, its output's tail printed
    after it, as for a failed arm (run_group run silently)."""
    program = python("""
        import sys
        print("Processing events...")
        print("ERROR: cannot import the report", file=sys.stderr)
        sys.exit(3)
    """)
    with Background(program, dict(os.environ), "the export of A's report (nsys export)") as bg:
        with pytest.raises(ProgramError) as caught:
            bg.join()
    error = caught.value
    assert str(error).startswith("the export of A's report (nsys export) failed (exit 3): ")
    assert str(error).endswith(": ERROR: cannot import the report")
    assert error.details == "Processing events...\nERROR: cannot import the report"
    assert error.command == program


def test_a_background_program_that_cannot_start_is_a_capture_error(tmp_path: Path) -> None:
    with pytest.raises(CaptureError, match="the export of A's report could not start"):
        with Background([str(tmp_path / "no-nsys")], dict(os.environ), "the export of A's report"):
            pass


def test_a_background_program_s_output_never_stalls_it(tmp_path: Path) -> None:
    """8 MiB of output, which no one reads while it runs (a pipe would fill at 64 KiB and stall
    it): it ends, and its tail is its last lines."""
    program = python("""
        import sys
        for i in range(8 * 1024):
            sys.stdout.write(("%06d" % i) + "x" * 1017 + "\\n")
        print("done")
    """)
    with Background(program, dict(os.environ), "a loud program") as bg:
        tail = bg.join()
    assert tail.endswith("\ndone") and tail.splitlines()[-2].startswith("008191x")


def test_the_background_program_runs_at_a_lower_cpu_priority(tmp_path: Path) -> None:
    marks = tmp_path / "marks"
    marks.mkdir()
    program = python(CHILD_AND_SELF.format(marks=str(marks)))
    with Background(program, dict(os.environ), "the export of A's report"):
        pids = pids_in(marks)
        own = os.getpriority(os.PRIO_PROCESS, 0)
        assert [os.getpriority(os.PRIO_PROCESS, p) for p in pids] == [min(19, own + NICE)] * 2
    assert gone(pids)


def test_the_overlapped_profile_leaves_the_export_to_census() -> None:
    """Without `export`, nsys profile writes the report alone (census exports it beside B's
    program); with it, as before, nsys exports it to SQLite as it ends."""
    exported = nsys_profile_command("nsys", Path("w/capture"), ("python", "t.py"), "cuda,nvtx")
    alone = nsys_profile_command("nsys", Path("w/capture"), ("python", "t.py"), "cuda,nvtx", False)
    assert [a for a in exported if a != "--export=sqlite"] == alone
    assert "--export=sqlite" in exported and len(exported) == len(alone) + 1


@pytest.mark.parametrize(
    ("version", "since", "pinned"),
    [((2025, 3), (2025, 3), EXPORT_PINNED), ((2026, 1), (2025, 3), EXPORT_PINNED),
     ((2025, 2), (2025, 3), ()), ((2022, 4), (2025, 3), ()), (None, (2025, 3), ()),
     ((2025, 3), None, ())],
)  # fmt: skip
def test_the_export_options_are_pinned_from_the_version_they_were_proven_on(
    version, since, pinned
) -> None:
    assert pinned_export_options(version, since) == pinned


def test_an_export_command_pins_nothing_before_the_options_are_proven() -> None:
    """Until a GPU run proves them (docs/performance.md), `nsys export` runs as before: its
    type, the output replaced, nothing else; and nsys is not asked its version for it."""
    nsys_version.cache_clear()
    cmd = export_command("/no/such/nsys", Path("w/capture.nsys-rep"), Path("w/capture.sqlite"))
    assert EXPORT_PINNED_FROM is None and nsys_version.cache_info().currsize == 0
    assert cmd == ["/no/such/nsys", "export", "--type", "sqlite", "--force-overwrite", "true",
                   "--output", "w/capture.sqlite", "w/capture.nsys-rep"]  # fmt: skip


def test_the_captures_overlap_unless_a_launcher_runs_a_side_or_it_is_turned_off(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    one = CaptureSpec(name="a", command=("python", "train.py"))
    ranks = CaptureSpec(name="b", command=("torchrun", "--nproc-per-node", "2", "train.py"))
    monkeypatch.delenv("CENSUS_AB_OVERLAP", raising=False)
    assert can_overlap([one, one]) and not can_overlap([one, ranks])
    monkeypatch.setenv("CENSUS_AB_OVERLAP", "0")
    assert not can_overlap([one, one])


def test_a_capture_read_ahead_is_the_census_its_experiment_reads_back(tmp_path: Path) -> None:
    """census ab reads A's capture while B's report is exported (census.api.sides.read_ahead):
    cached as the capture where the experiment will lie, so that load_experiment's read of it,
    once the work folder is renamed into place, is the cache's, equal to a fresh read."""
    from census.api import Options, summarize_with
    from census.api.sides import read_ahead
    from census.sources.inductor_map import map_identity
    from census.sources.samples import sample_path
    from census.store.cache import holds_census

    work, folder = tmp_path / ".exp.partial", tmp_path / "exp"
    (work / "a").mkdir(parents=True)
    shutil.copy2(sample_path("eager") / "capture.sqlite", work / "a" / "capture.sqlite")
    read_ahead(work / "a", folder / "a", summarize_with)
    key = [*Options().key(), map_identity(folder / "a")]  # as census.api keys a census
    assert not holds_census(work / "a" / "capture.sqlite", key)
    work.rename(folder)
    assert holds_census(folder / "a" / "capture.sqlite", key)
    cached = summarize_with(folder / "a", Options())
    fresh = summarize_with(folder / "a", Options(), use_cache=False)
    assert cached.totals == fresh.totals and cached.steps == fresh.steps


def test_a_capture_that_cannot_be_read_ahead_is_left_for_the_experiment_s_read(
    tmp_path: Path,
) -> None:
    """Read ahead, a capture whose export is no export raises nothing (nothing is cached):
    load_experiment's read says what is wrong, after the experiment is written, as before."""
    from census.api import Options, summarize_with
    from census.api.sides import read_ahead
    from census.store.cache import holds_census

    (tmp_path / "a").mkdir()
    (tmp_path / "a" / "capture.sqlite").write_text("not a database")
    read_ahead(tmp_path / "a", tmp_path / "exp" / "a", summarize_with)
    assert not holds_census(tmp_path / "a" / "capture.sqlite", Options().key())

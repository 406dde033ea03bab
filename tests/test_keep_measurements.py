"""`census ab` and `census capture` never lose what they measured to a full disk: the output
folder's disk is checked for room before the first arm or nsys (nothing run, nothing left when
it has none), and when the last write fails anyway (a disk that filled during the arms or the
capture), the record goes to a file of its own in the temporary folder, else on standard
output, and the exports stay on disk, each named in the one-line error (exit 73). census runs
as a user runs it, on real small file systems (tmpfs; skipped where none can be mounted), and
no process it started is alive 1 s after it exits (tests/helpers/reaper.py)."""

from __future__ import annotations

import json
import os
import shlex
import shutil
import sys
from pathlib import Path

import pytest

from census.capture.run import capture_foreign
from census.sources.experiment import read_experiment
from tests.helpers.disks import fill, on_small_tmp, small_tmpfs
from tests.helpers.files import FAKE_NSYS, REPO, fixture_file
from tests.helpers.reaper import Reaped, reaped

pytestmark = pytest.mark.skipif(sys.platform != "linux", reason="tmpfs and namespaces are Linux's")

# An arm that writes its step-times record, then fills the disk it is given, so that the disk
# is full once the arms are over: the file it filled is removed first (the next arm needs room
# for its record), and each record is linked beside it (census removing the record it read then
# frees nothing)
FILLING = """
import json, os, sys
disk = sys.argv[1]
if os.path.exists(os.path.join(disk, "fill")):
    os.unlink(os.path.join(disk, "fill"))
record = os.environ["CENSUS_STEP_TIMES"]
with open(record, "w") as fh:
    fh.write(json.dumps({"clock": "host", "step_time_ns": [1000, 1001, 999]}))
os.link(record, os.path.join(disk, f"pin-{os.getpid()}"))
with open(os.path.join(disk, "fill"), "wb", buffering=0) as fh:
    try:
        while True:
            fh.write(b"x" * 4096)
    except OSError:
        pass
"""
ROOM = "census checks for 1.00 MiB of room there before it runs anything"


def run_census(command: list[str], stdout: Path, **env: str) -> Reaped:
    """`command` (census, as a user runs it: this checkout's) with `env`, reaped."""
    environ = {**os.environ, "PYTHONPATH": str(REPO), **env}
    return reaped(command, env=environ, stdout=stdout)


def error_line(run: Reaped, code: int) -> str:
    """The one line of the error (census ab's progress aside); no process left behind."""
    lines = [ln for ln in run.lines if not ln.startswith("census ab: ")]
    assert run.code == code and len(lines) == 1, run.stderr[-3000:]
    assert run.left == []
    return lines[0]


def ab(out: Path, arm: str, *args: object) -> list[str]:
    return [sys.executable, "-m", "census", "ab", "exp", "-o", str(out), "--no-capture", "--arms",
            "4", "--a", arm, "--b", arm, *map(str, args)]  # fmt: skip


def capture(out: Path, *program: str) -> list[str]:
    return [sys.executable, "-m", "census", "capture", "cap", "-o", str(out), "--nsys", FAKE_NSYS,
            "--", *program]  # fmt: skip


def marking(marker: Path) -> list[str]:
    """A program that leaves `marker` behind if it ever runs."""
    return [sys.executable, "-c", f"open({str(marker)!r}, 'w')"]


# No room before the first arm or nsys: nothing runs, nothing is left


@pytest.mark.parametrize("disk_is", ["too small", "full"])
def test_ab_on_a_disk_without_room_runs_no_arm(tmp_path: Path, disk_is: str) -> None:
    marker = tmp_path / "arm-ran"
    size = "512k" if disk_is == "too small" else "2m"
    with small_tmpfs(tmp_path / "disk", size) as disk:
        if disk_is == "full":
            fill(disk / "fill")
        left = sorted(disk.iterdir())
        run = run_census(ab(disk / "prof" / "x", shlex.join(marking(marker))), Path(os.devnull))
        free = "512.00 KiB, 512.00 KiB" if disk_is == "too small" else "2.00 MiB, 0 B"
        assert error_line(run, 73) == (
            f"Error: no space left on the disk at {disk} ({free} free) (writing {disk}/prof/x/exp);"
            f" free space there ({ROOM}: no arm was run)"
        )
        assert not marker.exists()
        assert sorted(disk.iterdir()) == left  # no placeholder, no folder made for it


def test_capture_on_a_disk_without_room_starts_no_nsys(tmp_path: Path) -> None:
    """The stand-in nsys runs the program (crash mode): the program never runs."""
    marker = tmp_path / "program-ran"
    with small_tmpfs(tmp_path / "disk", "512k") as disk:
        run = run_census(capture(disk / "prof", *marking(marker)), Path(os.devnull),
                         FAKE_NSYS_MODE="crash")  # fmt: skip
        assert error_line(run, 73) == (
            f"Error: no space left on the disk at {disk} (512.00 KiB, 512.00 KiB free) (writing "
            f"{disk}/prof/cap); free space there ({ROOM}: nsys was not started)"
        )
        assert not marker.exists() and list(disk.iterdir()) == []


# A disk that fills while the programs run: the record and the exports are kept, and named


def test_ab_keeps_the_arms_when_the_disk_fills_during_them(tmp_path: Path) -> None:
    (tmp_path / "tmp").mkdir()
    with small_tmpfs(tmp_path / "disk", "2m") as disk:
        arm = shlex.join([sys.executable, "-c", FILLING, str(disk)])
        run = run_census(ab(disk / "prof", arm), Path(os.devnull), TMPDIR=str(tmp_path / "tmp"))
        [kept] = (tmp_path / "tmp").iterdir()
        assert kept.name.startswith("census-exp-") and kept.name.endswith(".ab.json")
        assert error_line(run, 73) == (
            f"Error: no space left on the disk at {disk} (2.00 MiB, 0 B free) (writing "
            f"{disk}/prof/exp/ab.json); free space there; the experiment's record (ab.json: 5 "
            f"arms) is kept in {kept}: once there is room, put it at {disk}/prof/exp/ab.json"
        )
        assert list((disk / "prof").iterdir()) == []  # no experiment, no work folder
    folder = tmp_path / "exp"
    folder.mkdir()
    shutil.move(kept, folder / "ab.json")
    record = read_experiment(folder)
    assert [a.side for a in record.arms] == ["a", "a", "b", "b", "a"]
    assert {a.step_time_ns for a in record.arms} == {(1000, 1001, 999)}
    assert record.capture_note == "--no-capture"


def test_ab_prints_the_arms_when_no_file_can_take_them(tmp_path: Path) -> None:
    """/tmp, /var/tmp, the working folder and the home folder all on the disk that filled."""
    arm = shlex.join([sys.executable, "-c", FILLING, "/tmp"])
    stdout = tmp_path / "stdout"
    run = run_census(on_small_tmp(ab(Path("/tmp/prof"), arm)), stdout, HOME="/tmp",
                     TMPDIR="/tmp")  # fmt: skip
    line = error_line(run, 73)
    assert line.startswith(
        "Error: no space left on the disk at /tmp (2.00 MiB, 0 B free) (writing /tmp/prof/exp/"
        "ab.json); free space there; the experiment's record (ab.json: 5 arms) follows on "
        "standard output (no file could take it: "
    )
    assert line.endswith("/tmp: No space left on device)")
    record = json.loads(stdout.read_text())
    assert [a["step_time_ns"] for a in record["arms"]] == [[1000, 1001, 999]] * 5


def test_capture_keeps_its_exports_when_the_disk_fills_during_nsys(tmp_path: Path) -> None:
    export = fixture_file("h200_eager_3steps.sqlite")
    (tmp_path / "tmp").mkdir()
    with small_tmpfs(tmp_path / "disk", "2m") as disk:
        env = {"FAKE_NSYS_MODE": "copy", "FAKE_NSYS_SQLITE": str(export),
               "FAKE_NSYS_FILL": str(disk / "fill"), "TMPDIR": str(tmp_path / "tmp")}  # fmt: skip
        run = run_census(capture(disk / "prof", "true"), Path(os.devnull), **env)
        [kept] = (tmp_path / "tmp").iterdir()
        assert kept.name.startswith("census-cap-") and kept.name.endswith(".run.json")
        folder = disk / "prof" / "cap"
        assert error_line(run, 73) == (
            f"Error: no space left on the disk at {disk} (2.00 MiB, 0 B free) (writing "
            f"{folder}/run.json); free space there; the capture's record (run.json) is kept in "
            f"{kept}, its exports in {folder}: once there is room, put it at {folder}/run.json"
        )
        assert sorted(p.name for p in (disk / "prof").iterdir()) == ["cap"]
        assert sorted(p.name for p in folder.iterdir()) == ["capture.nsys-rep", "capture.sqlite"]
        assert (folder / "capture.sqlite").read_bytes() == export.read_bytes()
        (disk / "fill").unlink()
        shutil.move(kept, folder / "run.json")
        assert capture_foreign(folder) is None  # census's own capture, as if nothing failed


def test_ab_keeps_the_arms_when_the_disk_fills_before_its_captures(tmp_path: Path) -> None:
    """The captures (a stand-in nsys that copies a real export) find no room after the arms:
    the arms are kept, as an experiment without captures."""
    (tmp_path / "tmp").mkdir()
    with small_tmpfs(tmp_path / "disk", "2m") as disk:
        arm = shlex.join([sys.executable, "-c", FILLING, str(disk)])
        command = [a for a in ab(disk / "prof", arm, "--nsys", FAKE_NSYS) if a != "--no-capture"]
        env = {"FAKE_NSYS_MODE": "copy", "TMPDIR": str(tmp_path / "tmp"),
               "FAKE_NSYS_SQLITE": str(fixture_file("h200_eager_3steps.sqlite"))}  # fmt: skip
        run = run_census(command, Path(os.devnull), **env)
        [kept] = (tmp_path / "tmp").iterdir()
        line = error_line(run, 73)
        assert line.startswith(f"Error: no space left on the disk at {disk} (2.00 MiB, 0 B free)")
        assert line.endswith(
            f"({ROOM}: nsys was not started); the experiment's record (ab.json: 5 arms) is kept "
            f"in {kept}: once there is room, put it at {disk}/prof/exp/ab.json"
        )
        assert list((disk / "prof").iterdir()) == []
    folder = tmp_path / "exp"
    folder.mkdir()
    shutil.move(kept, folder / "ab.json")
    record = read_experiment(folder)
    assert (
        len(record.arms) == 5 and record.capture_note == "the machine ran out during the captures"
    )

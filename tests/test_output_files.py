"""Never lose a user's file: every output target is checked before any work, and a report never
replaces an input, a directory or a device; a report through a symbolic link lands in the file it
names; `--force` replaces only census's own folders, never through a link; what a killed census
left behind is removed, and nothing else.

Most tests run census as a real process (`python -m census`), as a user would.
"""

from __future__ import annotations

import hashlib
import json
import os
import shlex
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from typer.testing import CliRunner

from census.cli import app
from census.errors import UsageError
from census.paths import owner_tag
from tests.helpers.exports import small_export
from tests.helpers.files import FAKE_NSYS, fixture_file

runner = CliRunner()


def digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


# An arm that records three steps and ends: what census reads of an arm (its step-times record),
# at a twentieth of a training loop's start-up (these tests are about the folders it goes to)
RECORD = ("import json, os; open(os.environ['CENSUS_STEP_TIMES'], 'w')"
          ".write(json.dumps({'clock': 'host', 'step_time_ns': [1000, 1001, 999]}))")  # fmt: skip
ARM = f"{shlex.quote(sys.executable)} -c {shlex.quote(RECORD)}"


def census(*args: object, cwd: Path | None = None, **env: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "census", *map(str, args)],
        capture_output=True,
        text=True,
        cwd=cwd,
        env={**os.environ, **env},
        timeout=180,
        check=False,
    )


def marking(marker: Path) -> str:
    """An arm or program command that leaves `marker` behind if it ever runs."""
    code = f"open({str(marker)!r}, 'w')"
    return f"{shlex.quote(sys.executable)} -c {shlex.quote(code)}"


def users_folder(path: Path) -> dict[str, str]:
    """A folder of the user's own files (and a copy of what it holds, to compare with later)."""
    path.mkdir(parents=True)
    files = {"mine.sqlite": "my export", "notes.md": "my notes"}
    for name, text in files.items():
        (path / name).write_text(text)
    return files


def holds(path: Path, files: dict[str, str]) -> bool:
    return {p.name: p.read_text() for p in path.iterdir()} == files


def run_ab(out: Path, name: str, *args: object, a: str = ARM, b: str = ARM):
    return census("ab", name, "-o", out, "--no-capture", "--arms", 4, "--a", a, "--b", b, *args)


def fake_capture(out: Path, name: str, *args: object, mode: str = "copy"):
    sqlite = str(fixture_file("h200_eager_3steps.sqlite"))
    return census("capture", name, "-o", out, "--nsys", FAKE_NSYS, *args, "--", "true",
                  FAKE_NSYS_MODE=mode, FAKE_NSYS_SQLITE=sqlite)  # fmt: skip


# A report never replaces an input, a directory or a device


def test_a_report_never_replaces_an_input(export: Path) -> None:
    before = digest(export)
    r = runner.invoke(app, ["dashboard", str(export), "--html", str(export)])
    assert r.exit_code == 2
    assert (
        r.stderr.strip() == f"Error: {export}: is an input of this command; choose another output"
    )
    assert digest(export) == before
    r = runner.invoke(app, ["diff", str(export), str(export), "--html", str(export)])
    assert r.exit_code == 2 and digest(export) == before


def test_a_report_never_replaces_a_directory_or_a_device(export: Path, tmp_path: Path) -> None:
    r = runner.invoke(app, ["dashboard", str(export), "--html", str(tmp_path)])
    assert r.exit_code == 2 and "is a directory" in r.stderr
    r = runner.invoke(app, ["dashboard", str(export), "--html", os.devnull])
    assert r.exit_code == 2 and "not a regular file" in r.stderr
    assert Path(os.devnull).is_char_device()


def test_an_unwritable_target_is_one_line_naming_it(export: Path) -> None:
    target = export / "sub" / "x.html"  # under a regular file: no directory can be made there
    r = runner.invoke(app, ["dashboard", str(export), "--html", str(target)])
    assert r.exit_code == 2
    assert r.stderr.strip() == (
        f"Error: {target}: cannot write there ({export} is not a writable directory)"
    )


# Every output target is checked before any work


@pytest.mark.parametrize("sub", ["somefile", "somefile/sub"])
def test_ab_output_under_a_file_is_refused_before_any_arm(tmp_path: Path, sub: str) -> None:
    (tmp_path / "somefile").write_text("the user's")
    marker = tmp_path / "arm-ran"
    r = run_ab(tmp_path / sub, "exp", a=marking(marker), b=marking(marker))
    assert r.returncode == 2 and not marker.exists()
    assert r.stderr == (
        f"Error: {tmp_path / sub / 'exp'}: cannot write there ({tmp_path / 'somefile'} is not a "
        "writable directory)\n"
    )


@pytest.mark.parametrize("sub", ["somefile", "somefile/sub"])
def test_capture_output_under_a_file_is_refused_before_anything_runs(
    tmp_path: Path, sub: str
) -> None:
    (tmp_path / "somefile").write_text("the user's")
    marker = tmp_path / "program-ran"
    # --calibrate runs the program without nsys first; a missing nsys would be exit 3
    r = census("capture", "c", "-o", tmp_path / sub, "--calibrate", "--nsys", "/no/nsys", "--",
               *shlex.split(marking(marker)))  # fmt: skip
    assert r.returncode == 2 and not marker.exists()
    assert r.stderr == (
        f"Error: {tmp_path / sub / 'c'}: cannot write there ({tmp_path / 'somefile'} is not a "
        "writable directory)\n"
    )


def test_ab_html_target_is_checked_before_any_arm(tmp_path: Path) -> None:
    marker = tmp_path / "arm-ran"
    (tmp_path / "dir.html").mkdir()
    r = run_ab(tmp_path, "exp", "--html", tmp_path / "dir.html", a=marking(marker), b=ARM)
    assert r.returncode == 2 and not marker.exists()
    assert r.stderr == (
        f"Error: {tmp_path / 'dir.html'}: is a directory; census writes reports to regular "
        "files only\n"
    )


def test_ab_name_too_long_is_refused_before_any_arm(tmp_path: Path) -> None:
    marker = tmp_path / "arm-ran"
    r = run_ab(tmp_path, "e" * 300, a=marking(marker), b=ARM)
    assert r.returncode == 2 and not marker.exists()
    assert "name too long (300 bytes; this file system allows 255)" in r.stderr


def test_ab_long_name_that_fits_gets_a_short_work_folder(tmp_path: Path) -> None:
    r = run_ab(tmp_path, "e" * 250)
    assert r.returncode == 0, r.stderr
    assert [p.name for p in tmp_path.iterdir()] == ["e" * 250]


def test_dashboard_default_target_is_checked_before_any_work(tmp_path: Path) -> None:
    export = small_export(tmp_path)
    (tmp_path / "reports").write_text("the user's")
    cache = tmp_path / "cache"
    r = census("dashboard", export, cwd=tmp_path, CENSUS_CACHE_DIR=str(cache))
    assert r.returncode == 2
    assert r.stderr == (
        "Error: reports/ok.html: cannot write there (reports is not a writable directory)\n"
    )
    assert not cache.exists()  # no census was computed (it would have been cached)


def test_demo_report_is_checked_before_any_work(tmp_path: Path) -> None:
    (tmp_path / "somefile").write_text("the user's")
    cache = tmp_path / "cache"
    r = census("demo", "--html", tmp_path / "somefile" / "demo.html", "--nsys", "/no/nsys",
               CENSUS_CACHE_DIR=str(cache))  # fmt: skip
    assert r.returncode == 2 and "somefile is not a writable directory" in r.stderr
    assert not cache.exists()  # the bundled samples were not even unpacked


# Reports through symbolic links


def test_a_report_through_a_link_to_a_file_lands_in_that_file(tmp_path: Path) -> None:
    export = small_export(tmp_path)
    real = tmp_path / "real.html"
    real.write_text("old")
    link = tmp_path / "latest.html"
    link.symlink_to(real)
    r = census("dashboard", export, "--html", link)
    assert r.returncode == 0, r.stderr
    assert link.is_symlink() and os.readlink(link) == str(real)
    assert "<html" in real.read_text()
    assert not [p for p in tmp_path.iterdir() if p.name.endswith(".part")]


def test_a_link_to_standard_output_that_is_a_pipe_is_refused(tmp_path: Path) -> None:
    export = small_export(tmp_path)
    r = census("dashboard", export, "--html", "/proc/self/fd/1")
    assert r.returncode == 2 and r.stdout == ""
    line = r.stderr.strip()
    assert line.startswith("Error: /proc/self/fd/1: is a symbolic link to /proc/")
    assert line.endswith("which is not a regular file; census writes reports to regular files only")
    assert "\n" not in line


def test_a_link_to_standard_output_that_is_a_file_writes_that_file(tmp_path: Path) -> None:
    export = small_export(tmp_path)
    out = tmp_path / "out.html"
    with out.open("w") as stdout:
        r = subprocess.run([sys.executable, "-m", "census", "dashboard", str(export), "--html",
                            "/proc/self/fd/1"], stdout=stdout, stderr=subprocess.PIPE, text=True,
                           check=False)  # fmt: skip
    assert r.returncode == 0, r.stderr
    assert "<html" in out.read_text()


@pytest.mark.parametrize("points_to", ["nowhere/x.html", os.devnull, "."])
def test_a_link_to_anything_but_a_file_is_refused_and_kept(tmp_path: Path, points_to: str) -> None:
    export = small_export(tmp_path)
    link = tmp_path / "report.html"
    link.symlink_to(points_to)
    marker = tmp_path / "arm-ran"
    for args in (["dashboard", export, "--html", link], ["diff", export, export, "--html", link],
                 ["ab", "exp", "-o", tmp_path, "--no-capture", "--a", marking(marker), "--b",
                  ARM, "--html", link]):  # fmt: skip
        r = census(*args)
        assert r.returncode == 2, r.stderr
        assert r.stderr.startswith(f"Error: {link}: is a symbolic link to ")
        assert r.stderr.endswith("which is not a regular file; census writes reports to regular "
                                 "files only\n")  # fmt: skip
    assert link.is_symlink() and os.readlink(link) == points_to and not marker.exists()


# --force replaces only what census made


def test_ab_force_never_deletes_a_users_folder(tmp_path: Path) -> None:
    files = users_folder(tmp_path / "mine")
    r = run_ab(tmp_path, "mine", "--force")
    assert r.returncode == 2
    assert r.stderr == (
        f"Error: {tmp_path / 'mine'}: not a census experiment (no census ab.json in it); --force "
        "replaces only a folder census made: move it away or choose another name\n"
    )
    assert holds(tmp_path / "mine", files)


def test_capture_force_never_deletes_a_users_folder(tmp_path: Path) -> None:
    files = users_folder(tmp_path / "mine")
    r = fake_capture(tmp_path, "mine", "--force")
    assert r.returncode == 2
    assert r.stderr == (
        f"Error: {tmp_path / 'mine'}: not a census capture (no census run.json in it); --force "
        "replaces only a folder census made: move it away or choose another name\n"
    )
    assert holds(tmp_path / "mine", files)


@pytest.mark.parametrize("record", ['{"name": "mine"}', "[1, 2]", "not json", ""])
def test_a_run_json_census_did_not_write_is_not_census_s_own(tmp_path: Path, record: str) -> None:
    files = {**users_folder(tmp_path / "mine"), "run.json": record}
    (tmp_path / "mine" / "run.json").write_text(record)
    r = fake_capture(tmp_path, "mine", "--force")
    assert r.returncode == 2 and "not a census capture (no census run.json in it)" in r.stderr
    assert holds(tmp_path / "mine", files)


def test_force_replaces_census_s_own_folders_but_not_a_users_file_in_them(tmp_path: Path) -> None:
    assert fake_capture(tmp_path, "cap").returncode == 0
    assert fake_capture(tmp_path, "cap", "--force").returncode == 0  # census's own: replaced
    assert run_ab(tmp_path, "exp").returncode == 0
    assert run_ab(tmp_path, "exp", "--force").returncode == 0
    (tmp_path / "cap" / "notes.md").write_text("the user's")
    (tmp_path / "exp" / "plot.png").write_text("the user's")
    r = fake_capture(tmp_path, "cap", "--force")
    assert r.returncode == 2 and r.stderr == (
        f"Error: {tmp_path / 'cap'}: it holds files census did not write (notes.md); --force "
        "replaces only a folder census made: move it away or choose another name\n"
    )
    r = run_ab(tmp_path, "exp", "--force")
    assert r.returncode == 2 and "it holds files census did not write (plot.png)" in r.stderr
    assert (tmp_path / "cap" / "notes.md").read_text() == "the user's"
    assert (tmp_path / "exp" / "plot.png").read_text() == "the user's"
    assert json.loads((tmp_path / "exp" / "ab.json").read_text())["labels"] == ["A", "B"]


def test_force_never_follows_a_symbolic_link(tmp_path: Path) -> None:
    elsewhere = tmp_path / "elsewhere"
    files = users_folder(elsewhere)
    out = tmp_path / "profiles"
    out.mkdir()
    (out / "link").symlink_to(elsewhere)
    expected = (
        f"Error: {out / 'link'}: is a symbolic link to {elsewhere}; census never replaces a link "
        "nor what it points to: remove the link or choose another name\n"
    )
    for force in ([], ["--force"]):
        r = run_ab(out, "link", *force)
        assert (r.returncode, r.stderr) == (2, expected)
        r = fake_capture(out, "link", *force)
        assert (r.returncode, r.stderr) == (2, expected)
    assert (out / "link").is_symlink() and holds(elsewhere, files)


def test_force_never_follows_a_link_even_to_census_s_own_folder(tmp_path: Path) -> None:
    assert fake_capture(tmp_path, "real").returncode == 0
    (tmp_path / "alias").symlink_to(tmp_path / "real")
    r = fake_capture(tmp_path, "alias", "--force")
    assert r.returncode == 2 and "is a symbolic link to" in r.stderr
    assert sorted(p.name for p in (tmp_path / "real").iterdir()) == [
        "capture.nsys-rep", "capture.sqlite", "run.json"]  # fmt: skip


def test_force_on_a_file_refuses(tmp_path: Path) -> None:
    (tmp_path / "exp").write_text("the user's")
    r = run_ab(tmp_path, "exp", "--force")
    assert r.returncode == 2 and r.stderr == (
        f"Error: {tmp_path / 'exp'}: not a folder; --force replaces only a folder census made: "
        "move it away or choose another name\n"
    )
    assert (tmp_path / "exp").read_text() == "the user's"


def test_a_folder_changed_while_census_worked_is_checked_again(tmp_path: Path) -> None:
    from census.capture.run import capture_foreign
    from census.paths import replace_folder

    work, folder = tmp_path / ".cap.partial-x", tmp_path / "cap"
    work.mkdir()
    files = users_folder(folder)  # appeared, or became the user's, during the capture
    with pytest.raises(UsageError, match="not a census capture"):
        replace_folder(work, folder, True, capture_foreign)
    with pytest.raises(UsageError, match="exists: choose another name or pass --force"):
        replace_folder(work, folder, False, capture_foreign)
    assert holds(folder, files)


# What a killed census left behind


def _killed_writing(target: Path) -> Path:
    """Run a process that dies by SIGKILL halfway through writing `target`; its `.part`."""
    code = (
        "import os, signal, sys\n"
        "from pathlib import Path\n"
        "from census.paths import atomic_target\n"
        "with atomic_target(Path(sys.argv[1])) as tmp:\n"
        "    tmp.write_text('half')\n"
        "    os.kill(os.getpid(), signal.SIGKILL)\n"
    )
    before = set(target.parent.iterdir()) if target.parent.exists() else set()
    r = subprocess.run([sys.executable, "-c", code, str(target)], check=False)
    assert r.returncode == -signal.SIGKILL
    (part,) = set(target.parent.iterdir()) - before
    assert part.name.endswith(".part") and not target.exists()
    return part


def _others(folder: Path) -> list[Path]:
    """What census must never remove: a live process's temporary name (this test's own), a
    user's `.part` file, another host's."""
    folder.mkdir(parents=True, exist_ok=True)
    names = [f".x.json.{owner_tag()}.abcdefgh.part", ".mine.part",
             ".x.json.1-00000000.abcdefgh.part"]  # fmt: skip
    for name in names:
        (folder / name).write_text("keep")
    return [folder / n for n in names]


def test_a_killed_cache_write_is_swept_by_the_next_census(tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    export = small_export(tmp_path)
    part = _killed_writing(cache / "census" / "x.json")
    assert part.name.startswith(".x.json.") and part.read_text() == "half"
    keep = _others(cache / "census")
    r = census("summary", export, "--json", CENSUS_CACHE_DIR=str(cache))
    assert r.returncode == 0, r.stderr
    assert not part.exists() and all(p.read_text() == "keep" for p in keep)


def test_a_killed_report_write_is_swept_by_the_next_one(tmp_path: Path) -> None:
    export = small_export(tmp_path)
    part = _killed_writing(tmp_path / "report.html")
    other = _killed_writing(tmp_path / "other.html")  # another target's: left for its own write
    assert census("dashboard", export, "--html", tmp_path / "report.html").returncode == 0
    assert not part.exists() and other.exists()


def _killed_capture(out: Path) -> Path:
    """A capture killed by SIGKILL while its program runs; its hidden work folder."""
    pidfile = out.parent / "program.pid"
    program = (
        f"import os, time; open({str(pidfile)!r}, 'w').write(str(os.getpid())); time.sleep(60)"
    )
    proc = subprocess.Popen(
        [sys.executable, "-m", "census", "capture", "c", "-o", str(out), "--calibrate",
         "--nsys", FAKE_NSYS, "--", sys.executable, "-c", program],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    deadline = time.monotonic() + 60
    while not (pidfile.exists() and pidfile.read_text()) and time.monotonic() < deadline:
        time.sleep(0.05)
    proc.send_signal(signal.SIGKILL)
    proc.wait(timeout=30)
    os.kill(int(pidfile.read_text()), signal.SIGKILL)  # the program census started, orphaned
    (work,) = [p for p in out.iterdir() if p.name.startswith(".c.partial-")]
    assert f".partial-{proc.pid}-" in work.name
    return work


def test_a_killed_capture_s_work_folder_is_swept_by_the_next_run(tmp_path: Path) -> None:
    out = tmp_path / "profiles"
    work = _killed_capture(out)
    live = out / f".d.partial-{owner_tag()}-abcdefgh"  # a running census's (this one)
    users = out / ".mine.partial-notes"  # the user's, whatever its name looks like
    for folder in (live, users):
        folder.mkdir()
        (folder / "f").write_text("keep")
    r = fake_capture(out, "next", mode="fail")  # any later capture or experiment into `out`
    assert r.returncode == 4
    assert not work.exists()
    assert (live / "f").exists() and (users / "f").exists()
    r = run_ab(out, "exp")
    assert r.returncode == 0 and (live / "f").exists() and (users / "f").exists()

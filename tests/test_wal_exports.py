"""Exports in SQLite WAL mode: one whose `-wal` log holds pages is read with its log, from a
private copy (never served stale, never cached, and a warning says so); nothing is made beside
any of them, and read-only folders work."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import sqlite3
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from typer.testing import CliRunner

from census.cli import app
from tests.helpers.exports import small_export
from tests.helpers.files import NO_CENSUS, REPO

runner = CliRunner()


def kernel_count(path: Path) -> int:
    r = runner.invoke(app, ["summary", str(path), "--json"])
    assert r.exit_code == 0, r.output
    return json.loads(r.stdout)["totals"]["kernel_count"]


def listing(folder: Path) -> list[str]:
    return sorted(os.listdir(folder))


def wal_export(folder: Path, log: bool) -> Path:
    """small_export in WAL mode in `folder`; with `log`, a second kernel lives in its `-wal` log
    only (as a writer that did not close cleanly leaves it: no `-shm`)."""
    folder.mkdir()
    source = small_export(folder.parent)
    with contextlib.closing(sqlite3.connect(source)) as conn:
        assert conn.execute("PRAGMA journal_mode=WAL").fetchone() == ("wal",)
    path = folder / "w.sqlite"
    shutil.copy(source, path)
    if log:
        writer = sqlite3.connect(source)
        try:
            writer.execute("PRAGMA wal_autocheckpoint=0")
            writer.execute(
                "INSERT INTO CUPTI_ACTIVITY_KIND_KERNEL SELECT * FROM CUPTI_ACTIVITY_KIND_KERNEL"
            )
            writer.commit()
            shutil.copy(source, path)
            shutil.copy(f"{source}-wal", f"{path}-wal")
        finally:
            writer.close()
    return path


@contextlib.contextmanager
def immutable(folder: Path) -> Iterator[None]:
    """`folder` made immutable (chattr +i): read-only even for root, as tests run."""
    r = subprocess.run(["chattr", "+i", str(folder)], capture_output=True, text=True, check=False)
    if r.returncode != 0:
        pytest.skip(f"chattr +i is not available here: {r.stderr.strip()}")
    try:
        yield
    finally:
        subprocess.run(["chattr", "-i", str(folder)], check=True)


def test_an_export_in_wal_mode_is_never_served_stale(tmp_path: Path) -> None:
    path = small_export(tmp_path)
    with sqlite3.connect(path) as conn:
        conn.execute("PRAGMA journal_mode=WAL")

    def kernels() -> int:
        r = runner.invoke(app, ["summary", str(path), "--json"])
        assert r.exit_code == 0, r.stderr
        return json.loads(r.stdout)["totals"]["kernel_count"]

    assert kernels() == 1
    writer = sqlite3.connect(path)
    try:  # the writer holds its log open: the new rows live in ok.sqlite-wal only
        writer.execute("PRAGMA wal_autocheckpoint=0")
        writer.execute(
            "INSERT INTO CUPTI_ACTIVITY_KIND_KERNEL SELECT * FROM CUPTI_ACTIVITY_KIND_KERNEL"
        )
        writer.commit()
        assert Path(f"{path}-wal").stat().st_size > 0
        assert kernels() == 2
    finally:
        writer.close()


@pytest.mark.parametrize("log", [False, True], ids=["no log", "a log with content"])
def test_a_wal_export_leaves_nothing_beside_it(tmp_path: Path, log: bool) -> None:
    path = wal_export(tmp_path / "in", log)
    before = listing(path.parent)
    assert kernel_count(path) == (2 if log else 1)
    assert listing(path.parent) == before  # no -shm, no -wal made


@pytest.mark.skipif(not shutil.which("chattr"), reason="needs chattr")
@pytest.mark.parametrize("log", [False, True], ids=["no log", "a log with content"])
def test_a_wal_export_in_a_read_only_folder_is_read(tmp_path: Path, log: bool) -> None:
    path = wal_export(tmp_path / "ro", log)
    before = listing(path.parent)
    with immutable(path.parent):
        with pytest.raises(OSError):  # the folder really is read-only
            (path.parent / "probe").touch()
        assert kernel_count(path) == (2 if log else 1)
    assert listing(path.parent) == before


@pytest.mark.skipif(
    os.geteuid() != 0 or not shutil.which("setpriv"), reason="needs root and setpriv"
)
@pytest.mark.parametrize("log", [False, True], ids=["no log", "a log with content"])
def test_a_wal_export_in_a_folder_another_user_cannot_write(tmp_path: Path, log: bool) -> None:
    shared = Path(tempfile.mkdtemp(prefix="census-ro-"))  # traversable by the other user
    try:
        shared.chmod(0o755)
        path = wal_export(shared / "ro", log)
        for p in path.parent.iterdir():
            p.chmod(0o444)
        path.parent.chmod(0o555)
        code = (
            "import sys; sys.path.insert(0, sys.argv[1]); from pathlib import Path\n"
            "from census.sources.readonly import open_readonly\n"
            "conn = open_readonly(Path(sys.argv[2]))\n"
            "print(conn.execute('SELECT count(*) FROM CUPTI_ACTIVITY_KIND_KERNEL').fetchone()[0])"
        )
        r = subprocess.run(
            ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", sys.executable,
             "-I", "-c", code, str(REPO), str(path)],
            capture_output=True, text=True, check=False,
        )  # fmt: skip
        if NO_CENSUS in r.stderr or ("Permission denied" in r.stderr and "sqlite" not in r.stderr):
            pytest.skip(f"the unprivileged user cannot run the checkout: {r.stderr[-200:]}")
        assert r.returncode == 0, r.stderr
        # was: "attempt to write a readonly database" / "unable to open database file"
        assert r.stdout.strip() == ("2" if log else "1")
        assert listing(path.parent) == (["w.sqlite", "w.sqlite-wal"] if log else ["w.sqlite"])
    finally:
        shutil.rmtree(shared)


def test_a_live_log_is_read_from_a_private_copy_that_census_removes(tmp_path: Path) -> None:
    path = small_export(tmp_path)
    with contextlib.closing(sqlite3.connect(path)) as conn:
        conn.execute("PRAGMA journal_mode=WAL")
    writer = sqlite3.connect(path)
    try:  # a writer at work: its log and shared memory beside the export
        writer.execute("PRAGMA wal_autocheckpoint=0")
        writer.execute(
            "INSERT INTO CUPTI_ACTIVITY_KIND_KERNEL SELECT * FROM CUPTI_ACTIVITY_KIND_KERNEL"
        )
        writer.commit()
        before = listing(tmp_path)
        scratch = tmp_path / "tmp"
        scratch.mkdir()
        env = {**os.environ, "TMPDIR": str(scratch), "CENSUS_NO_CACHE": "1"}
        r = subprocess.run([sys.executable, "-m", "census", "summary", str(path), "--json"],
                           capture_output=True, text=True, env=env, timeout=120, check=False)  # fmt: skip
        assert r.returncode == 0, r.stderr
        assert json.loads(r.stdout)["totals"]["kernel_count"] == 2
        assert listing(tmp_path) == [*before, "tmp"]
        assert listing(scratch) == []  # the copy is gone with census
    finally:
        writer.close()


def test_a_copy_is_made_once_per_state_and_named_by_a_note(tmp_path: Path) -> None:
    from census.sources.readonly import open_readonly, wal_note

    path = wal_export(tmp_path / "in", log=True)
    assert wal_note(path) is None
    first = open_readonly(path)
    note = wal_note(path)
    assert note is not None and note.startswith("in SQLite WAL mode with a ")
    second = open_readonly(path)  # the same state: the same copy
    (copy,) = {Path(c.execute("PRAGMA database_list").fetchone()[2]) for c in (first, second)}
    assert copy.parent != path.parent and copy.with_name(f"{copy.name}-wal").exists()
    with contextlib.closing(sqlite3.connect(path)) as writer:  # the log changes: a new copy
        writer.execute("PRAGMA wal_autocheckpoint=0")
        writer.execute("DELETE FROM CUPTI_ACTIVITY_KIND_KERNEL")
        writer.commit()
        third = open_readonly(path)
    assert third.execute("SELECT count(*) FROM CUPTI_ACTIVITY_KIND_KERNEL").fetchone() == (0,)
    assert first.execute("SELECT count(*) FROM CUPTI_ACTIVITY_KIND_KERNEL").fetchone() == (2,)
    assert not copy.exists()  # removed; a connection open on it reads on
    for conn in (first, second, third):
        conn.close()


def test_the_note_names_only_an_export_last_read_with_its_log(tmp_path: Path) -> None:
    from census.sources.readonly import has_live_wal, open_readonly, wal_note

    path = wal_export(tmp_path / "in", log=True)
    with contextlib.closing(open_readonly(path)):
        assert wal_note(path) == (
            f"in SQLite WAL mode with a {Path(f'{path}-wal').stat().st_size:,}-byte log beside it "
            "(a writer at work, or one that did not close cleanly): read with the log, from a "
            "private copy of both"
        )
    with contextlib.closing(sqlite3.connect(path)) as conn:  # the log goes into the file
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    assert not has_live_wal(path)
    with contextlib.closing(open_readonly(path)):
        assert wal_note(path) is None  # read as the file alone now


@pytest.mark.parametrize("fmt", ["json", "table"])
def test_a_summary_read_with_the_log_says_so(tmp_path: Path, fmt: str) -> None:
    path = wal_export(tmp_path / "in", log=True)
    log = Path(f"{path}-wal").stat().st_size
    r = runner.invoke(app, ["summary", str(path), "--format", fmt])
    assert r.exit_code == 0, r.output
    note = (
        f"in SQLite WAL mode with a {log:,}-byte log beside it (a writer at work, or one that did "
        "not close cleanly): read with the log, from a private copy of both"
    )
    assert f"warning: {note}\n" in r.stderr
    why = "a write-ahead log or hot journal beside the file"  # the copy's: read with SQL
    assert (f"warning: read with SQL, not from the file's pages (slower; docs/performance.md): "
            f"CUPTI_ACTIVITY_KIND_KERNEL ({why}); CUPTI_ACTIVITY_KIND_RUNTIME ({why})\n") in r.stderr  # fmt: skip
    if fmt == "json":
        assert note in json.loads(r.stdout)["warnings"]
        assert json.loads(r.stdout)["source"]["read_with_sql"] == {
            "CUPTI_ACTIVITY_KIND_KERNEL": why,
            "CUPTI_ACTIVITY_KIND_RUNTIME": why,
        }
    (tmp_path / "other").mkdir()
    plain = wal_export(tmp_path / "other" / "plain", log=False)
    r = runner.invoke(app, ["summary", str(plain), "--format", fmt])
    assert r.exit_code == 0 and "WAL" not in r.stderr

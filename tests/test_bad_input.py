"""Exports census cannot read, damaged ones and odd ones: a one-line error naming the file and its
exit code, never a traceback, a hang or a wrong answer; or a census with a warning. Inputs stay
byte-identical. Each case is a row of the robustness table in docs/robustness.md."""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import shutil
import sqlite3
import stat
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from census.api import summarize
from census.cli import app
from census.errors import InputError
from tests.helpers.exports import small_export
from tests.helpers.files import FAKE_NSYS, FIXTURES, NO_CENSUS, REPO, fixture_file
from tests.nsysdb import Export

runner = CliRunner()


def sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def cli_error(args: list[str], code: int) -> str:
    r = runner.invoke(app, args)
    assert r.exit_code == code, r.output
    assert "Traceback" not in r.output
    lines = [ln for ln in r.stderr.splitlines() if ln.startswith("Error:")]
    assert len(lines) == 1, r.stderr
    return lines[0]


def one_step_export(path: Path) -> Path:
    """A step with one kernel and one device-to-device copy."""
    e = Export()
    e.range("step 0", 0, 100)
    e.launch("k", 1, 10, 20)
    e.copy(8, 10, 2, 30, 40)
    return e.write(path)


# Files that are not an nsys export


def test_missing_path(tmp_path: Path) -> None:
    p = tmp_path / "nope.sqlite"
    assert cli_error(["summary", str(p)], 1) == f"Error: {p}: no such file"


def test_directory_without_exports(tmp_path: Path) -> None:
    msg = cli_error(["summary", str(tmp_path)], 1)
    assert msg == f"Error: {tmp_path} holds no .sqlite or .nsys-rep export: it is empty"
    # what it holds instead, and the capture folder inside it (was: "a directory with no ...")
    (tmp_path / "notes.txt").write_text("")
    (tmp_path / "eager").mkdir()
    (tmp_path / "eager" / "capture.sqlite").symlink_to(fixture_file("nsysai_mock.sqlite"))
    msg = cli_error(["summary", str(tmp_path)], 1)
    assert msg == (f"Error: {tmp_path} holds no .sqlite or .nsys-rep export: it holds eager/, "
                   f"notes.txt; name the capture folder inside it, {tmp_path / 'eager'}")  # fmt: skip


def test_empty_file(tmp_path: Path) -> None:
    p = tmp_path / "empty.sqlite"
    p.write_bytes(b"")
    assert cli_error(["summary", str(p)], 1) == f"Error: {p}: empty file, not an nsys SQLite export"


def test_random_bytes(tmp_path: Path) -> None:
    p = tmp_path / "noise.sqlite"
    p.write_bytes(os.urandom(4096))
    assert "not a SQLite database nor a PyTorch profiler trace" in cli_error(["summary", str(p)], 1)


@pytest.mark.parametrize("fraction", [0.001, 0.1, 0.5, 0.9, 0.999])
def test_truncated_export(tmp_path: Path, fraction: float) -> None:
    src = fixture_file("h200_eager_3steps.sqlite")
    data = src.read_bytes()
    p = tmp_path / "cut.sqlite"
    p.write_bytes(data[: max(1, int(len(data) * fraction))])
    msg = cli_error(["summary", str(p)], 1)
    assert str(p) in msg and ("truncated" in msg or "not a SQLite" in msg)


def test_plain_sqlite(tmp_path: Path) -> None:
    p = tmp_path / "other.db"
    with sqlite3.connect(p) as conn:
        conn.execute("CREATE TABLE users (id)")
    assert "not an nsys export" in cli_error(["summary", str(p)], 1)


def test_plain_sqlite_is_not_an_nsys_export(tmp_path: Path) -> None:
    import sqlite3

    p = tmp_path / "plain.sqlite"
    with sqlite3.connect(p) as conn:
        conn.execute("CREATE TABLE t (x)")
    with pytest.raises(
        InputError, match=r"plain\.sqlite: a SQLite database but not an nsys export"
    ):
        summarize(p)


def test_qdstrm_only(tmp_path: Path) -> None:
    p = tmp_path / "x.qdstrm"
    p.write_bytes(b"q")
    assert "QdstrmImporter" in cli_error(["summary", str(p)], 1)


def test_a_kineto_trace_is_named_for_what_it_is(tmp_path: Path) -> None:
    """`census summary` reads a Kineto trace (tests/test_kineto_summary.py); one named where an
    nsys export must be opened is named for what it is."""
    from census.sources.readonly import open_readonly

    trace = REPO / "tests" / "data" / "kineto" / "h200_eager_3steps.kineto.json.gz"
    with pytest.raises(InputError) as raised:
        open_readonly(trace)
    assert str(raised.value) == (  # not "census reads Nsight Systems SQLite exports" (#55)
        f"{trace}: a PyTorch profiler (Kineto) trace, not an nsys export: census reads traces "
        "where a capture is named (`census summary TRACE`, a folder of per-rank traces), not "
        "where an nsys SQLite export must be opened"
    )
    plain = tmp_path / "trace.json"
    plain.write_text(json.dumps({"schemaVersion": 1, "traceEvents": []}))
    r = runner.invoke(app, ["summary", str(plain), "--json"])
    assert r.exit_code == 0 and json.loads(r.stdout)["totals"]["kernel_count"] == 0


def test_a_fifo_is_refused_without_reading_it(tmp_path: Path) -> None:
    fifo = tmp_path / "pipe.sqlite"
    os.mkfifo(fifo)
    r = runner.invoke(app, ["summary", str(fifo)])
    assert r.exit_code == 1
    assert r.stderr.strip() == (
        f"Error: {fifo}: not a regular file (a FIFO or a device?), not an nsys export"
    )


# Damaged exports


def test_nulls_in_every_column(tmp_path: Path) -> None:
    p = one_step_export(tmp_path / "nulls.sqlite")
    with sqlite3.connect(p) as conn:
        for table in (
            "CUPTI_ACTIVITY_KIND_KERNEL",
            "CUPTI_ACTIVITY_KIND_RUNTIME",
            "CUPTI_ACTIVITY_KIND_MEMCPY",
            "NVTX_EVENTS",
        ):
            cols = [r[1] for r in conn.execute(f"PRAGMA table_info({table})")]
            conn.execute(
                f"INSERT INTO {table} ({', '.join(cols)}) VALUES ({', '.join('NULL' for _ in cols)})"
            )
        conn.execute("INSERT INTO StringIds (id, value) VALUES (9999, NULL)")
    c = summarize(p)
    assert c.totals.kernel_count == 2  # the all-NULL row is a kernel too
    assert c.totals.kernel_time_ns == 10
    assert c.steps[0].metrics.kernel_count == 1
    assert any("missing or negative duration" in w for w in c.warnings)


@pytest.mark.parametrize(
    ("table", "column", "value", "message"),
    [
        (
            "CUPTI_ACTIVITY_KIND_KERNEL",
            "start",
            "'soon'",
            "KERNEL.start holds values that are not integers",
        ),
        (
            "CUPTI_ACTIVITY_KIND_KERNEL",
            "end",
            "'later'",
            "KERNEL.end holds values that are not integers",
        ),
        (
            "CUPTI_ACTIVITY_KIND_KERNEL",
            "deviceId",
            "0.5",
            "KERNEL.deviceId holds values that are not integers",
        ),
        (
            "CUPTI_ACTIVITY_KIND_RUNTIME",
            "correlationId",
            "x'00ff'",
            "RUNTIME.correlationId holds values",
        ),
        (
            "CUPTI_ACTIVITY_KIND_MEMCPY",
            "end",
            "'x'",
            "MEMCPY.end holds values that are not integers",
        ),
        (
            "CUPTI_ACTIVITY_KIND_KERNEL",
            "start",
            str(1 << 62),
            "KERNEL.start holds timestamps beyond",
        ),
    ],
)
def test_values_of_the_wrong_type_are_a_clear_error(
    tmp_path: Path, table: str, column: str, value: str, message: str
) -> None:
    p = one_step_export(tmp_path / "typed.sqlite")
    with sqlite3.connect(p) as conn:
        conn.execute(f'UPDATE {table} SET "{column}" = {value}')
    err = cli_error(["summary", str(p)], 1)
    assert message in err and str(p) in err and "not a valid nsys export" in err
    assert "\n" not in err.strip()


_SOURCE = None


def _source() -> bytes:
    global _SOURCE
    if _SOURCE is None:
        _SOURCE = fixture_file("h200_compiled_3steps.sqlite").read_bytes()
    return _SOURCE


@settings(
    max_examples=200, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(st.lists(st.tuples(st.integers(0, 434175), st.integers(0, 255)), min_size=1, max_size=8))
def test_fuzz_mutated_exports(tmp_path: Path, edits: list[tuple[int, int]]) -> None:
    data = bytearray(_source())
    for offset, value in edits:
        data[offset % len(data)] = value
    p = tmp_path / "mutant.sqlite"
    p.write_bytes(bytes(data))
    try:
        c = summarize(p, use_cache=False)
    except InputError as exc:
        assert str(exc).startswith(str(p))
        assert "\n" not in str(exc)
    else:
        assert c.totals.kernel_count >= 0


# Views in place of tables


@pytest.mark.parametrize("table", ["CUPTI_ACTIVITY_KIND_KERNEL", "StringIds", "NVTX_EVENTS"])
def test_a_table_that_is_a_view_is_refused_naming_it(tmp_path: Path, table: str) -> None:
    path = small_export(tmp_path)
    with contextlib.closing(sqlite3.connect(path)) as conn:
        conn.execute(f'ALTER TABLE "{table}" RENAME TO stored')
        conn.execute(f'CREATE VIEW "{table}" AS SELECT * FROM stored')
        conn.commit()
    r = runner.invoke(app, ["summary", str(path)])
    assert r.exit_code == 1, r.output  # was: a census of zeros ("no kernels were captured")
    assert r.stderr.strip() == (
        f"Error: {path}: {table} is a view, not a table as nsys writes it: census reads no views; "
        "export the report again, or store the view as a table (CREATE TABLE ... AS SELECT)"
    )


def test_views_are_all_named(tmp_path: Path) -> None:
    path = small_export(tmp_path)
    with contextlib.closing(sqlite3.connect(path)) as conn:
        for table in ("NVTX_EVENTS", "CUPTI_ACTIVITY_KIND_KERNEL"):
            conn.execute(f'ALTER TABLE "{table}" RENAME TO "{table}_stored"')
            conn.execute(f'CREATE VIEW "{table}" AS SELECT * FROM "{table}_stored"')
        conn.commit()
    r = runner.invoke(app, ["summary", str(path)])
    assert r.exit_code == 1
    assert "CUPTI_ACTIVITY_KIND_KERNEL, NVTX_EVENTS are views, not tables as nsys writes them" in (
        r.stderr
    )


# Reports (.nsys-rep) exported on demand


def test_nsys_rep_without_nsys(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    rep = tmp_path / "run.nsys-rep"
    shutil.copy(fixture_file("h200_eager_3steps.nsys-rep"), rep)
    monkeypatch.setenv("PATH", str(tmp_path))
    monkeypatch.delenv("CENSUS_NSYS", raising=False)
    msg = cli_error(["summary", str(rep)], 3)
    assert msg.startswith(  # was: "Error: nsys not found on PATH: ...", without the way round it
        f"Error: {rep}: census reads a report through its SQLite export, which nsys makes: where "
        "nsys is, run `nsys export --type sqlite run.nsys-rep` and give census the run.sqlite it "
        "writes (it can be copied here); or, to export it here: nsys not found on PATH: install "
        "Nsight Systems"
    )


def test_nsys_rep_is_exported_beside_or_into_the_cache(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from census.sources import export

    rep = tmp_path / "run.nsys-rep"
    rep.write_bytes(b"report")
    monkeypatch.setenv("CENSUS_NSYS", FAKE_NSYS)
    monkeypatch.setenv("FAKE_NSYS_MODE", "copy")
    monkeypatch.setenv("FAKE_NSYS_SQLITE", str(fixture_file("h200_eager_3steps.sqlite")))
    assert export.resolve_sqlite(rep) == tmp_path / "run.sqlite"
    assert summarize(rep).totals.kernel_count == 861
    (tmp_path / "run.sqlite").unlink()
    monkeypatch.setattr(export.os, "access", lambda p, mode: mode != os.W_OK)
    target = export.resolve_sqlite(rep)
    assert target.parent == Path(os.environ["CENSUS_CACHE_DIR"]) / "exports"
    monkeypatch.setenv("FAKE_NSYS_MODE", "fail")
    target.unlink()
    msg = cli_error(["summary", str(rep)], 4)
    assert "`nsys export` failed (exit 1)" in msg and "cannot import report" in msg
    assert not list(target.parent.glob("*.sqlite"))  # nothing half-written left behind


# Exports census reads and never changes


@pytest.mark.skipif(
    os.geteuid() != 0 or not shutil.which("setpriv"),
    reason="needs root and setpriv to drop privileges",
)
def test_unreadable_file(tmp_path: Path) -> None:
    shared = Path(tempfile.mkdtemp(prefix="census-perm-"))  # traversable by the other user
    shared.chmod(0o755)
    p = shutil.copy(small_export(tmp_path), shared / "secret.sqlite")
    Path(p).chmod(0)
    # The unprivileged user may not see this interpreter's site-packages: load needs none of them.
    code = (
        "import sys; sys.path.insert(0, sys.argv[1]); from census.sources.readonly import open_readonly; "
        "from census.errors import InputError\ntry: open_readonly(__import__('pathlib').Path(sys.argv[2]))\n"
        "except InputError as e: print(e); sys.exit(e.exit_code)"
    )
    repo = str(Path(__file__).resolve().parent.parent)
    r = subprocess.run(
        [
            "setpriv",
            "--reuid=65534",
            "--regid=65534",
            "--clear-groups",
            sys.executable,
            "-I",
            "-c",
            code,
            repo,
            str(p),
        ],
        capture_output=True,
        text=True,
        check=False,
    )
    shutil.rmtree(shared)
    # The other user cannot read the checkout (a clone under /root): Python then finds no census
    if "Permission denied" in r.stderr or NO_CENSUS in r.stderr:
        pytest.skip(f"the unprivileged user cannot run the checkout: {r.stderr.strip()[-200:]}")
    assert r.returncode == 1, r.stderr
    assert r.stdout.strip() == f"{p}: permission denied (cannot read the file)"


def test_read_only_file_in_read_only_directory(tmp_path: Path) -> None:
    folder = tmp_path / "ro"
    folder.mkdir()
    p = shutil.copy(fixture_file("h200_eager_3steps.sqlite"), folder / "e.sqlite")
    before = sha(Path(p))
    Path(p).chmod(stat.S_IRUSR | stat.S_IRGRP | stat.S_IROTH)
    folder.chmod(0o555)
    try:
        r = runner.invoke(app, ["summary", str(p), "--json"])
        assert r.exit_code == 0, r.output
        assert sorted(x.name for x in folder.iterdir()) == ["e.sqlite"]  # no journal, no cache
        assert sha(Path(p)) == before
    finally:
        folder.chmod(0o755)


def test_database_locked_by_a_writer(tmp_path: Path) -> None:
    p = small_export(tmp_path)
    writer = sqlite3.connect(p, isolation_level=None)
    writer.execute("BEGIN EXCLUSIVE")
    try:
        msg = cli_error(["summary", str(p)], 1)
        assert (
            msg == f"Error: {p}: database is locked by another process (is nsys still writing it?)"
        )
    finally:
        writer.execute("ROLLBACK")
        writer.close()


def test_every_fixture_stays_byte_identical(tmp_path: Path) -> None:
    for src in sorted(FIXTURES.glob("*.sqlite")):
        before = sha(src)
        summarize(src, use_cache=False)
        assert sha(src) == before, src
        assert not Path(str(src) + "-journal").exists()


def test_json_that_is_no_trace(tmp_path: Path) -> None:
    """HTA's execution_trace sample pairs a Kineto trace with a Chakra execution trace
    (`benchmark_simple_add_et.json.gz`: JSON with `nodes`, no `traceEvents`): said to be JSON
    that is neither input, not "not a SQLite database"."""
    import gzip

    p = tmp_path / "benchmark_simple_add_et.json.gz"
    p.write_bytes(gzip.compress(b'{\n  "schema": "1.0.1", "pid": 563677, "nodes": []}\n'))
    assert cli_error(["summary", str(p)], 1) == (
        f"Error: {p}: JSON that is neither a PyTorch profiler trace (no `traceEvents` key near "
        "its start) nor an nsys SQLite export"
    )

"""The failures a hostile or unlucky user meets, each a one-line error with the exit
code, never a traceback, a hang or a wrong answer: folders of unrelated exports, exports in WAL
mode, a full, closed or abandoned stdout, file names that are not UTF-8 or too long, and
--steps/--phases patterns that backtrack catastrophically."""

from __future__ import annotations

import json
import os
import shutil
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest
from typer.testing import CliRunner

from census.cli.app import app
from tests.conftest import fixture_file
from tests.nsysdb import Export
from tests.test_robustness import small_export

runner = CliRunner()


def census_process(*args: str, **kwargs) -> subprocess.CompletedProcess:
    """census as a user runs it: its own process, its own stdout."""
    env = {**os.environ, "PYTHONIOENCODING": "utf-8"}
    return subprocess.run([sys.executable, "-m", "census", *args], env=env, timeout=120,
                          check=False, **kwargs)  # fmt: skip


# A folder of unrelated exports


@pytest.fixture
def mixed(tmp_path: Path) -> Path:
    folder = tmp_path / "mixed"
    folder.mkdir()
    shutil.copy(fixture_file("h200_eager_3steps.sqlite"), folder / "h200.sqlite")
    shutil.copy(fixture_file("nsysai_mfu_2gpu_before.sqlite"), folder / "mfu.sqlite")
    return folder


def test_a_folder_of_unrelated_exports_is_refused_naming_them(mixed: Path) -> None:
    expected = (
        f"Error: {mixed}: 2 exports (h200.sqlite, mfu.sqlite) in a folder that is not a census "
        "capture (no run.json naming its ranks); they differ (nsys 2025.3.2.0 vs 2026.2.1.210; "
        "GPUs NVIDIA H200 vs unknown; hosts modal vs vm): pass --ranks to read them as the ranks "
        "of one run, or give one export"
    )
    for args in (["summary", str(mixed)], ["diff", str(mixed), str(mixed)],
                 ["dashboard", str(mixed), "-o", str(mixed.parent / "d.html")]):  # fmt: skip
        r = runner.invoke(app, args)
        assert r.exit_code == 1 and r.stderr.strip() == expected, args
    assert not (mixed.parent / "d.html").exists()


def test_ranks_says_they_are_one_run(mixed: Path) -> None:
    r = runner.invoke(app, ["summary", str(mixed), "--ranks", "--json"])
    assert r.exit_code == 0, r.stderr
    doc = json.loads(r.stdout)
    assert doc["totals"]["kernel_count"] == 861 + 4010
    assert [x["rank"] for x in doc["ranks"]] == ["h200", "mfu"]


def test_a_capture_record_naming_a_missing_rank_is_an_input_error(mixed: Path) -> None:
    (mixed / "run.json").write_text(json.dumps({"ranks": {"0": "h200.sqlite", "1": "x.sqlite"}}))
    r = runner.invoke(app, ["summary", str(mixed)])
    assert r.exit_code == 1
    assert r.stderr.strip() == (
        f"Error: {mixed / 'run.json'}: rank 1's export x.sqlite is not in the folder"
    )


# SQLite WAL mode


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


# Standard output


def test_a_full_stdout_is_one_line_and_exit_74(tmp_path: Path) -> None:
    export = small_export(tmp_path)
    with open("/dev/full", "w") as full:
        r = census_process("summary", str(export), "--json", stdout=full, stderr=subprocess.PIPE,
                           text=True)  # fmt: skip
    assert r.returncode == 74
    assert r.stderr.strip() == "Error: cannot write to standard output (No space left on device)"


def test_help_on_a_full_stdout_is_one_line_and_exit_74() -> None:
    with open("/dev/full", "w") as full:
        r = census_process("summary", "--help", stdout=full, stderr=subprocess.PIPE, text=True)
    assert r.returncode == 74
    assert r.stderr == "Error: cannot write to standard output (No space left on device)\n"


def test_a_closed_stdout_is_one_line_and_exit_74(tmp_path: Path) -> None:
    export = small_export(tmp_path)
    command = f'exec "{sys.executable}" -m census summary "{export}" >&-'
    r = subprocess.run(["sh", "-c", command], stderr=subprocess.PIPE, text=True, timeout=120,
                       check=False)  # fmt: skip
    assert r.returncode == 74
    assert r.stderr.strip() == "Error: standard output is closed: census has nowhere to write"


def test_a_closed_stderr_leaves_stdout_clean(fixture) -> None:
    """Warnings have nowhere to go: they must not land in the JSON on stdout, nor fail census."""
    mock = fixture("nsysai_mock.sqlite")  # it warns about two missing tables
    command = f'exec "{sys.executable}" -m census summary "{mock}" --json 2>&-'
    r = subprocess.run(["sh", "-c", command], capture_output=True, text=True, timeout=120,
                       check=False)  # fmt: skip
    assert r.returncode == 0
    assert json.loads(r.stdout)["totals"]["kernel_count"] == 2


def test_a_reader_that_stops_early_is_exit_141_even_with_a_failing_gate(fixture) -> None:
    """`census diff ... --fail-if ... | head` must not pass a CI gate by the broken pipe."""
    eager, compiled = fixture("h200_eager_3steps.sqlite"), fixture("h200_compiled_3steps.sqlite")
    for args in (["summary", str(eager)], ["--help"],
                 ["diff", str(eager), str(compiled), "--fail-if", "kernel_count<+0"]):  # fmt: skip
        read, write = os.pipe()
        os.close(read)  # the reader is gone before census writes a byte
        r = census_process(*args, stdout=write, stderr=subprocess.PIPE, text=True)
        os.close(write)
        assert r.returncode == 141, args
        assert r.stderr == "", r.stderr


# File names


def test_a_file_name_that_is_not_utf8_is_read_and_shown(tmp_path: Path) -> None:
    name = os.fsdecode(b"bad\xff.sqlite")
    path = tmp_path / name
    shutil.copy(small_export(tmp_path), path)
    r = census_process("summary", str(path), capture_output=True)
    assert r.returncode == 0, r.stderr
    assert b"bad\\udcff.sqlite" in r.stdout
    out = tmp_path / os.fsdecode(b"report\xfe.html")
    r = census_process("dashboard", str(path), "-o", str(out), capture_output=True)
    assert r.returncode == 0 and out.is_file()
    missing = tmp_path / os.fsdecode(b"gone\xff.sqlite")
    r = census_process("summary", str(missing), capture_output=True)
    assert r.returncode == 1
    assert r.stderr.decode() == f"Error: {tmp_path}/gone\\udcff.sqlite: no such file\n"


def test_a_newline_or_a_link_loop_in_a_name_is_still_one_line(tmp_path: Path) -> None:
    odd = tmp_path / "a\nb.sqlite"
    r = runner.invoke(app, ["summary", str(odd)])
    assert r.exit_code == 1 and r.stderr == f"Error: {tmp_path}/a\\x0ab.sqlite: no such file\n"
    loop = tmp_path / "loop.sqlite"
    loop.symlink_to(loop)
    r = runner.invoke(app, ["summary", str(loop)])
    assert r.exit_code == 1
    assert r.stderr == f"Error: {loop}: Too many levels of symbolic links\n"


def test_names_too_long_are_one_line_never_exit_70(tmp_path: Path) -> None:
    export = small_export(tmp_path)
    long_input = tmp_path / ("a" * 300 + ".sqlite")
    r = runner.invoke(app, ["summary", str(long_input)])
    assert r.exit_code == 1 and r.stderr.strip() == f"Error: {long_input}: File name too long"
    long_output = tmp_path / ("b" * 300 + ".html")
    r = runner.invoke(app, ["dashboard", str(export), "-o", str(long_output)])
    assert r.exit_code == 2
    assert r.stderr.strip() == (
        f"Error: {long_output}: file name too long (305 bytes; this file system allows 255); "
        "choose a shorter output name"
    )
    in_long_folder = tmp_path / ("d" * 300) / "x.html"
    r = runner.invoke(app, ["dashboard", str(export), "-o", str(in_long_folder)])
    assert r.exit_code == 2
    assert r.stderr.strip() == f"Error: {in_long_folder}: cannot write there (File name too long)"
    near_limit = tmp_path / ("c" * 250 + ".html")  # fits; its temporary name must fit too
    r = runner.invoke(app, ["dashboard", str(export), "-o", str(near_limit)])
    assert r.exit_code == 0 and near_limit.is_file()
    assert [p.name for p in tmp_path.iterdir() if p.name.endswith(".part")] == []


# Patterns that backtrack


@pytest.fixture
def evil(tmp_path: Path) -> Path:
    e = Export()
    e.range("a" * 40 + "!", 0, 100)
    e.range("step 0", 0, 100)
    e.launch("k", 1, 10, 20)
    return e.write(tmp_path / "evil.sqlite")


@pytest.mark.parametrize("option", ["--steps", "--phases"])
def test_a_catastrophic_pattern_stops_in_seconds_naming_the_text(evil: Path, option: str) -> None:
    started = time.monotonic()
    r = runner.invoke(app, ["summary", str(evil), option, "^(a|aa)+$"])
    assert time.monotonic() - started < 10  # `re` would take hours on this text
    assert r.exit_code == 2
    assert r.stderr.strip() == (
        f"Error: {option} '^(a|aa)+$' took over 1 s on the NVTX text "
        "'aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa!' (catastrophic backtracking): simplify the "
        "pattern"
    )


def test_ordinary_patterns_still_select_steps(evil: Path) -> None:
    r = runner.invoke(app, ["summary", str(evil), "--steps", r"^step\b", "--json"])
    assert r.exit_code == 0 and len(json.loads(r.stdout)["steps"]) == 1


def test_many_slow_texts_are_bounded_in_total(monkeypatch: pytest.MonkeyPatch) -> None:
    """Each text under the per-text limit, together over the total: still bounded, and the
    slowest text is named."""
    from census.errors import UsageError
    from census.load import patterns

    monkeypatch.setattr(patterns, "TOTAL_SECONDS", 0.3)
    texts = ["a" * 22 + f"!{i}" for i in range(200)] + ["a" * 28 + "!"]  # ~9 ms each; ~160 ms
    started = time.monotonic()
    with pytest.raises(UsageError) as err:
        patterns.matching("--steps", "^(a|aa)+$", texts[::-1])
    assert time.monotonic() - started < 1.0
    assert str(err.value) == (
        "--steps '^(a|aa)+$' took over 0.3 s on the export's NVTX texts (the slowest: "
        "'aaaaaaaaaaaaaaaaaaaaaaaaaaaa!'): simplify the pattern"
    )

"""`census summary EXPORT --json [--no-idle]` into a pipe is answered before typer is imported
(census.cli.fast): from the cache, or computed there, with the same bytes on stdout, the same
warnings and errors on stderr and the same exit codes as the command (reached here with
`--top 15`, the default, which the early answer leaves to it); any other command line goes the
usual way."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from census.cli.fast import _summary_json_of
from tests.helpers.files import fixture_file

# Runs census's entry point as the `census` script does, then says on stderr whether typer (the
# command line) was imported: it is not when the cache answered.
DRIVER = (
    "import sys; from census.cli import main; sys.argv[0] = 'census'\n"
    "try:\n    main()\n"
    "finally:\n    print('typer imported:', 'typer' in sys.modules, file=sys.stderr)\n"
)


def _census(*args: str, cache: Path, stdout=subprocess.PIPE, **env: str):
    return subprocess.run(
        [sys.executable, "-c", DRIVER, *args],
        stdout=stdout,
        stderr=subprocess.PIPE,
        env={**os.environ, "CENSUS_CACHE_DIR": str(cache), **env},
        check=False,
    )


@pytest.mark.parametrize(
    ("argv", "named"),
    [
        (["summary", "a.sqlite", "--json"], ("a.sqlite", True)),
        (["summary", "--json", "a.sqlite"], ("a.sqlite", True)),
        (["summary", "a.sqlite", "--format", "json"], ("a.sqlite", True)),
        (["summary", "--format=json", "a.sqlite"], ("a.sqlite", True)),
        (["summary", "a.sqlite"], None),  # a table
        (["summary", "a.sqlite", "--format", "markdown"], None),
        (["summary", "a.sqlite", "--json", "--top", "3"], None),  # not the default document
        (["summary", "a.sqlite", "--json", "--no-idle"], ("a.sqlite", False)),
        (["summary", "--idle", "a.sqlite", "--json"], ("a.sqlite", True)),
        (["summary", "a.sqlite", "--json", "--no-idle", "--idle"], None),
        (["summary", "--no-idle", "--json"], None),
        (["summary", "--json"], None),
        (["summary", "-x", "--json"], None),
        (["diff", "a.sqlite", "--json"], None),
        (["--debug", "summary", "a.sqlite", "--json"], None),
        ([], None),
    ],
)
def test_only_the_default_summary_json_is_answered_early(argv: list[str], named) -> None:
    found = _summary_json_of(argv)
    assert (None if found is None else (str(found[0]), found[1])) == named


@pytest.mark.parametrize("name", ["nsysai_mock.sqlite", "flameox_nsight-2025.5.2_cudagraph.sqlite"])
def test_cached_answer_is_the_commands_byte_for_byte(tmp_path: Path, name: str) -> None:
    export = Path(shutil.copy(fixture_file(name), tmp_path / name))
    cache = tmp_path / "cache"
    command = _census("summary", str(export), "--json", "--top", "15", cache=tmp_path / "other")
    assert command.returncode == 0 and b"typer imported: True" in command.stderr
    cold = _census("summary", str(export), "--json", cache=cache)
    assert cold.returncode == 0 and b"typer imported: False" in cold.stderr
    assert cold.stdout == command.stdout and _lines(cold) == _lines(command)
    warm = _census("summary", str(export), "--json", cache=cache)
    assert warm.returncode == 0 and b"typer imported: False" in warm.stderr
    assert warm.stdout == cold.stdout and warm.stdout.endswith(b', "capture": null}\n')
    warnings = [line for line in cold.stderr.splitlines() if line.startswith(b"warning: ")]
    assert warnings  # these exports have some: the early answer prints them too
    assert [line for line in warm.stderr.splitlines() if line.startswith(b"warning: ")] == warnings
    # --format json is the same document; with the cache off, the command computes it again
    again = _census("summary", "--format", "json", str(export), cache=cache)
    assert again.stdout == cold.stdout and b"typer imported: False" in again.stderr
    off = _census("summary", str(export), "--json", cache=cache, CENSUS_NO_CACHE="1")
    assert off.stdout == cold.stdout and b"typer imported: False" in off.stderr
    # without the idle split: the command's document too
    plain = _census("summary", str(export), "--json", "--no-idle", cache=cache)
    typed = _census("summary", str(export), "--json", "--no-idle", "--top", "15", cache=cache)
    assert b"typer imported: False" in plain.stderr and b"typer imported: True" in typed.stderr
    assert plain.stdout == typed.stdout and _lines(plain) == _lines(typed)
    # stdout in another encoding than the cache's UTF-8: the command encodes the text itself
    utf16 = _census("summary", str(export), "--json", cache=cache, PYTHONIOENCODING="utf-16")
    assert "typer imported: True" in utf16.stderr.decode("utf-16")  # stderr's, too
    assert utf16.stdout.decode("utf-16") == cold.stdout.decode()


def test_a_damaged_entry_or_an_edited_export_is_computed_again(tmp_path: Path) -> None:
    export = Path(shutil.copy(fixture_file("h200_eager_3steps.sqlite"), tmp_path / "e.sqlite"))
    cache = tmp_path / "cache"
    cold = _census("summary", str(export), "--json", cache=cache)
    (entry,) = (cache / "summary-json").glob("*.json")
    data = entry.read_bytes()
    entry.write_bytes(data.replace(b'"kernel_count"', b'"kernel_c0unt"', 1))  # digest fails
    warm = _census("summary", str(export), "--json", cache=cache)
    assert warm.stdout == cold.stdout and warm.returncode == 0
    os.utime(export, ns=(1, 1))  # a new key: the old entry is not this file's
    edited = _census("summary", str(export), "--json", cache=cache)
    assert edited.stdout == cold.stdout and edited.returncode == 0


def test_early_answer_keeps_the_exit_codes(tmp_path: Path) -> None:
    export = Path(shutil.copy(fixture_file("h200_eager_3steps.sqlite"), tmp_path / "e.sqlite"))
    cache = tmp_path / "cache"
    assert _census("summary", str(export), "--json", cache=cache).returncode == 0
    # a reader that stopped early (gone before census writes): exit 141, nothing on stderr
    read_end, write_end = os.pipe()
    os.close(read_end)
    r = _census("summary", str(export), "--json", cache=cache, stdout=write_end)
    os.close(write_end)
    assert r.returncode == 141 and b"typer imported: False" in r.stderr
    assert b"Error" not in r.stderr and b"Traceback" not in r.stderr
    # a full disk: one line, exit 74
    with open("/dev/full", "wb") as full:
        r = _census("summary", str(export), "--json", cache=cache, stdout=full)
    assert r.returncode == 74 and b"typer imported: False" in r.stderr
    assert b"Error: cannot write to standard output (No space left on device)" in r.stderr


def _lines(run) -> list[bytes]:
    """stderr's lines but progress and the driver's own."""
    return [line for line in run.stderr.splitlines()
            if not line.startswith((b"census: ", b"typer imported:"))]  # fmt: skip


def test_early_answer_fails_as_the_command_does(tmp_path: Path) -> None:
    """Bad input answered early: the command's one line and exit code (docs/robustness.md)."""
    empty = tmp_path / "empty.sqlite"
    empty.write_bytes(b"")
    text = tmp_path / "notes.sqlite"
    text.write_text("not a database\n")
    cut = tmp_path / "cut.sqlite"
    cut.write_bytes(fixture_file("h200_eager_3steps.sqlite").read_bytes()[:40000])
    folder = tmp_path / "folder"
    folder.mkdir()
    cases = [tmp_path / "missing.sqlite", empty, text, cut, folder, tmp_path / ("x" * 300)]
    for path in cases:
        early = _census("summary", str(path), "--json", cache=tmp_path / "cache")
        command = _census("summary", str(path), "--json", "--top", "15", cache=tmp_path / "cache")
        assert b"typer imported: False" in early.stderr, path
        assert (early.returncode, _lines(early)) == (command.returncode, _lines(command)), path
        assert early.returncode not in (0, 70) and _lines(early)[0].startswith(b"Error: "), path

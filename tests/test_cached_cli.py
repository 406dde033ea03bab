"""`census summary EXPORT --json [--no-idle]` into a pipe is answered before typer is imported
(census.cli.fast): from the cache, or computed there, with the same bytes on stdout, the same
warnings and errors on stderr and the same exit codes as the command (reached here with
`--top 15`, the default, which the early answer leaves to it; both write the document through
census.cli.piped); any other command line goes the usual way."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from census.cli.fast import _summary_json_of
from tests.helpers.files import fixture_file

# Runs census's entry point as the `census` script does, then says on stderr whether typer (the
# command line) was imported, and whether a census was computed (not when the cache answered).
DRIVER = (
    "import sys; from census.cli import main; sys.argv[0] = 'census'\n"
    "try:\n    main()\n"
    "finally:\n    print('typer imported:', 'typer' in sys.modules, file=sys.stderr)\n"
    "    print('computed:', 'census.load.passes' in sys.modules, file=sys.stderr)\n"
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
        (["summary", "a.sqlite", "--json"], ("a.sqlite", {})),
        (["summary", "--json", "a.sqlite"], ("a.sqlite", {})),
        (["summary", "a.sqlite", "--format", "json"], ("a.sqlite", {})),
        (["summary", "--format=json", "a.sqlite"], ("a.sqlite", {})),
        (["summary", "sample:eager", "--json"], ("sample:eager", {})),
        (["summary", "", "--json"], None),  # the command's usage error
        (["summary", "a.sqlite"], None),  # a table
        (["summary", "a.sqlite", "--format", "markdown"], None),
        (["summary", "a.sqlite", "--json", "--top", "3"], None),  # not the default document
        (["summary", "a.sqlite", "--json", "--no-idle"], ("a.sqlite", {"idle": False})),
        (["summary", "--idle", "a.sqlite", "--json"], ("a.sqlite", {"idle": True})),
        (["summary", "a.sqlite", "--json", "--no-idle", "--idle"], None),
        (["summary", "--no-idle", "--json"], None),
        (["summary", "--json"], None),
        (["summary", "--sample", "eager", "--json"], None),
        (["summary", "-x", "--json"], None),
        (["diff", "a.sqlite", "--json"], None),
        (["--debug", "summary", "a.sqlite", "--json"], None),
        ([], None),
    ],
)
def test_only_the_default_summary_json_is_answered_early(argv: list[str], named) -> None:
    assert _summary_json_of(argv) == named


@pytest.mark.parametrize("name", ["nsysai_mock.sqlite", "flameox_nsight-2025.5.2_cudagraph.sqlite"])
def test_cached_answer_is_the_commands_byte_for_byte(tmp_path: Path, name: str) -> None:
    export = Path(shutil.copy(fixture_file(name), tmp_path / name))
    cache = tmp_path / "cache"
    command = _census("summary", str(export), "--json", "--top", "15", cache=tmp_path / "other")
    assert command.returncode == 0 and b"typer imported: True" in command.stderr
    cold = _census("summary", str(export), "--json", cache=cache)
    assert cold.returncode == 0 and b"typer imported: False" in cold.stderr
    assert cold.stdout == command.stdout and _lines(cold) == _lines(command)
    assert b"computed: True" in cold.stderr
    warm = _census("summary", str(export), "--json", cache=cache)
    assert warm.returncode == 0 and b"typer imported: False" in warm.stderr
    assert warm.stdout == cold.stdout and warm.stdout.endswith(b', "capture": null}\n')
    assert b"computed: False" in warm.stderr
    # the command answers from the same cache entry, with the same bytes and lines
    hit = _census("summary", str(export), "--json", "--top", "15", cache=cache)
    assert b"typer imported: True" in hit.stderr and b"computed: False" in hit.stderr
    assert (hit.returncode, hit.stdout, _lines(hit)) == (0, warm.stdout, _lines(warm))
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
    # stdout in another encoding than the cache's UTF-8: the text is encoded by the stream
    early, command = _early_and_command(str(export), cache=cache, PYTHONIOENCODING="utf-16")
    assert early.stdout.decode("utf-16") == cold.stdout.decode()
    assert (early.returncode, early.stdout) == (command.returncode, command.stdout)


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
            if not line.startswith((b"census: ", b"typer imported:", b"computed:"))]  # fmt: skip


def _early_and_command(*args: str, cache: Path, **env: str):
    """`summary ARGS --json` answered early, and by the command (`--top 15` added: the default,
    which the early answer leaves to typer), each checked to have gone its way."""
    early = _census("summary", *args, "--json", cache=cache, **env)
    command = _census("summary", *args, "--json", "--top", "15", cache=cache, **env)
    assert b"typer imported: False" in early.stderr.replace(b"\x00", b"")  # (UTF-16's too)
    assert b"typer imported: True" in command.stderr.replace(b"\x00", b"")
    return early, command


def _inputs(tmp_path: Path) -> dict[str, list[str]]:
    """What `summary ... --json` is given, by case."""
    export = Path(shutil.copy(fixture_file("h200_eager_3steps.sqlite"), tmp_path / "e.sqlite"))
    report = fixture_file("h200_eager_3steps.nsys-rep")  # its export beside it
    (tmp_path / "capture").mkdir()
    shutil.copy(export, tmp_path / "capture" / "capture.sqlite")
    (tmp_path / "folder").mkdir()
    (tmp_path / "empty.sqlite").write_bytes(b"")
    (tmp_path / "notes.sqlite").write_text("not a database\n")
    (tmp_path / "cut.sqlite").write_bytes(export.read_bytes()[:40000])
    shutil.copy(report, tmp_path / "alone.nsys-rep")
    files = {
        "export": export,
        "report": report,
        "capture folder": tmp_path / "capture",
        "report alone, no nsys": tmp_path / "alone.nsys-rep",
        "missing": tmp_path / "missing.sqlite",
        "empty": tmp_path / "empty.sqlite",
        "not SQLite": tmp_path / "notes.sqlite",
        "cut": tmp_path / "cut.sqlite",
        "folder without export": tmp_path / "folder",
        "name too long": tmp_path / ("x" * 300),
    }
    return {
        **{case: [str(path)] for case, path in files.items()},
        "sample": ["sample:eager"],
        "unknown sample": ["sample:nope"],
        "no idle split": [str(export), "--no-idle"],
        "idle split": ["--idle", str(export)],
    }


GOOD = ("export", "report", "capture folder", "sample", "no idle split", "idle split")
BAD = ("report alone, no nsys", "missing", "empty", "not SQLite", "cut", "folder without export",
       "name too long", "unknown sample")  # fmt: skip


@pytest.mark.parametrize("case", GOOD + BAD)
def test_early_answer_is_the_commands(tmp_path: Path, case: str) -> None:
    """The same stdout bytes, stderr lines and exit code, computed (no cache: a sample is
    unpacked into the cache folder, whose path the document names, so both share it); bad
    input: the command's one line and exit code (docs/robustness.md), never 70."""
    args = _inputs(tmp_path)[case]
    nsys = str(tmp_path / "no-nsys")  # an .nsys-rep alone cannot be converted, nsys or not
    early, command = _early_and_command(*args, cache=tmp_path / "cache", CENSUS_NO_CACHE="1",
                                        CENSUS_NSYS=nsys)  # fmt: skip
    assert (early.returncode, early.stdout, _lines(early)) == (
        command.returncode, command.stdout, _lines(command))  # fmt: skip
    if case in GOOD:
        document = json.loads(early.stdout)
        assert early.returncode == 0 and len(document["top_kernels"]) == 15
        assert (document["idle_by_range"] is None) == (case == "no idle split")
    else:
        assert early.returncode not in (0, 70) and early.stdout == b""
        assert len(_lines(early)) == 1 and _lines(early)[0].startswith(b"Error: ")


def test_the_early_answer_says_the_path_named_this_time(tmp_path: Path) -> None:
    """After `census summary link.sqlite` (a symlink), `census summary real.sqlite --json`
    prints real.sqlite as its source, from the command and from the early answer alike."""
    real = Path(shutil.copy(fixture_file("h200_eager_3steps.sqlite"), tmp_path / "real.sqlite"))
    link = tmp_path / "link.sqlite"
    link.symlink_to(real)
    cache = tmp_path / "cache"
    assert _census("summary", str(link), cache=cache).returncode == 0  # a table: census cached
    for named in (real, real, link, link):  # computed (from the cached census), then early
        r = _census("summary", str(named), "--json", cache=cache)
        assert json.loads(r.stdout)["source"]["path"] == str(named)

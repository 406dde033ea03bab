"""What the user names or types that cannot work, each a one-line error with its exit code: a
folder of unrelated exports, file names that are not UTF-8, hold a newline or are too long, counts
below their least, `--steps` given a count, patterns that backtrack catastrophically, gate values
in digits other than ASCII."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest
from typer.testing import CliRunner

from census.cli import app
from census.compare.gates import parse_gate
from census.errors import UsageError
from tests.helpers.cli import census_process
from tests.helpers.clock import cpu_seconds
from tests.helpers.exports import small_export
from tests.helpers.files import fixture_file
from tests.nsysdb import Export

runner = CliRunner()


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
                 ["dashboard", str(mixed), "--html", str(mixed.parent / "d.html")]):  # fmt: skip
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


# File names


def test_a_file_name_that_is_not_utf8_is_read_and_shown(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setenv("COLUMNS", "400")  # the title line holds the whole path, however deep
    name = os.fsdecode(b"bad\xff.sqlite")
    path = tmp_path / name
    shutil.copy(small_export(tmp_path), path)
    r = census_process("summary", str(path), capture_output=True)
    assert r.returncode == 0, r.stderr
    assert b"bad\\udcff.sqlite" in r.stdout
    out = tmp_path / os.fsdecode(b"report\xfe.html")
    r = census_process("dashboard", str(path), "--html", str(out), capture_output=True)
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
    r = runner.invoke(app, ["dashboard", str(export), "--html", str(long_output)])
    assert r.exit_code == 2
    assert r.stderr.strip() == (
        f"Error: {long_output}: file name too long (305 bytes; this file system allows 255); "
        "choose a shorter output name"
    )
    in_long_folder = tmp_path / ("d" * 300) / "x.html"
    r = runner.invoke(app, ["dashboard", str(export), "--html", str(in_long_folder)])
    assert r.exit_code == 2
    assert r.stderr.strip() == f"Error: {in_long_folder}: cannot write there (File name too long)"
    near_limit = tmp_path / ("c" * 250 + ".html")  # fits; its temporary name must fit too
    r = runner.invoke(app, ["dashboard", str(export), "--html", str(near_limit)])
    assert r.exit_code == 0 and near_limit.is_file()
    assert [p.name for p in tmp_path.iterdir() if p.name.endswith(".part")] == []


# Counts


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["summary", "X", "--top", "-1"], "--top -1: give 0 or more"),
        (["diff", "X", "X", "--top", "-3"], "--top -3: give 0 or more"),
        (["ab", "e", "--a", "x", "--b", "y", "--active", "-2"], "--active -2: give 1 or more"),
        (["ab", "e", "--demo", "eager,compiled", "--active", "0"], "--active 0: give 1 or more"),
        (["ab", "e", "--a", "x", "--b", "y", "--warmup", "-1"], "--warmup -1: give 0 or more"),
        (["summary", "X", "--skip-first", "-1"], "--skip-first must be 0 or more"),
        # Checked before nsys is looked for: a usage error, not "nsys not found" (exit 3).
        (["capture", "c", "--demo", "eager", "--warmup", "-1"], "--warmup -1: give 0 or more"),
        (["capture", "c", "--demo", "eager", "--active", "0"], "--active 0: give 1 or more"),
        (["capture", "c", "--demo", "ddp-eager", "--nproc", "0"], "--nproc 0: give 1 or more"),
        (["demo", "--active", "-2"], "--active -2: give 1 or more"),
        (["demo", "--warmup", "-1"], "--warmup -1: give 0 or more"),
    ],
)
def test_negative_counts_are_usage_errors(export: Path, args: list[str], message: str) -> None:
    r = runner.invoke(app, [str(export) if a == "X" else a for a in args])
    assert r.exit_code == 2 and message in r.stderr


REGEX_NOT_COUNT = (
    "Error: --steps '5': --steps is the step-range regex of census summary and census diff; the "
    "number of measured steps is --active N"
)


@pytest.mark.parametrize(
    ("args", "hint"),
    [
        (["capture", "c", "--steps", "5", "--", "python", "train.py"],
         "; a program's own --steps goes after --"),
        (["capture", "c", "--demo", "eager", "--steps", "5"], "; a program's own --steps goes after --"),
        (["ab", "e", "--a", "x", "--b", "y", "--steps", "5"], ""),
        (["demo", "--steps", "5"], ""),
    ],
)  # fmt: skip
def test_steps_is_a_regex_never_a_count(tmp_path: Path, args: list[str], hint: str) -> None:
    """One meaning per name: a count of steps given as --steps (the regex of summary and diff)
    is refused, before anything runs, naming --active."""
    r = runner.invoke(app, [*args, "-o", str(tmp_path)] if args[0] != "demo" else args)
    assert r.exit_code == 2, r.output
    assert r.stderr == REGEX_NOT_COUNT + hint + "\n"
    assert list(tmp_path.iterdir()) == []
    assert "--steps" not in runner.invoke(app, [args[0], "--help"]).stdout


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
    started = cpu_seconds()  # CPU, not wall: 11.9 s of wall on a shared 2-core machine
    r = runner.invoke(app, ["summary", str(evil), option, "^(a|aa)+$"])
    assert cpu_seconds() - started < 10  # `re` would take hours on this text
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
    slowest text is named. Bounded in this process's CPU time, which other processes on a busy
    machine (parallel test workers) do not inflate as they do the wall time; the bound is under
    half of what searching every text costs, measured here on a sample, so it cannot pass by a
    search of them all."""
    import regex

    from census.errors import UsageError
    from census.load import patterns

    texts = ["a" * 24 + f"!{i}" for i in range(200)] + ["a" * 28 + "!"]  # ~23 ms each; ~160 ms
    sample = cpu_seconds()
    for text in texts[:8]:
        regex.search("^(a|aa)+$", text)
    every_s = (cpu_seconds() - sample) / 8 * len(texts)  # ~4.7 s on a 2-core VM
    monkeypatch.setattr(patterns, "TOTAL_SECONDS", 0.3)
    started = cpu_seconds()
    with pytest.raises(UsageError) as err:
        patterns.matching("--steps", "^(a|aa)+$", texts[::-1])
    assert cpu_seconds() - started < min(1.0, every_s / 2)  # was 1.14 s of wall, 4 workers
    assert str(err.value) == (
        "--steps '^(a|aa)+$' took over 0.3 s on the export's NVTX texts (the slowest: "
        "'aaaaaaaaaaaaaaaaaaaaaaaaaaaa!'): simplify the pattern"
    )


# Gates


@pytest.mark.parametrize("value", ["١٠٠", "１００", "1٠", "+5.٥%"])
def test_a_gate_value_in_digits_other_than_ascii_is_refused(tmp_path: Path, value: str) -> None:
    gate = f"kernel_count>{value}"
    with pytest.raises(UsageError):
        parse_gate(gate)
    r = runner.invoke(app, ["summary", str(small_export(tmp_path)), "--fail-if", gate])
    assert r.exit_code == 2, r.output  # was: accepted as 100
    assert r.stderr.strip() == (
        f"Error: --fail-if {gate!r}: write KEY OP VALUE (VALUE in digits 0-9), "
        "e.g. 'kernel_count>+0' or 'd2d_bytes>+5%'"
    )
    assert parse_gate("kernel_count > +100").value == 100.0


def test_the_default_patterns_match_as_the_regex_engine_does(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """census's own patterns search ASCII texts with `re` (no import of `regex`): on texts at
    their edges (digits, underscores, case, punctuation) they find what `regex` finds; with one
    text past ASCII (a combining mark, where the two engines' `\b` differ) every text goes to
    `regex`, which then finds what it finds alone."""
    import regex

    from census.definitions import DEFAULT_PHASES_REGEX, DEFAULT_STEPS_REGEX
    from census.load import patterns

    ascii_texts = ["step", "step 3", "step_3", "step3", "step-1", "Step 1", " step",
                   "ProfilerStep#7", "ProfilerStep", "forward", "forward.", "forward_pass",
                   "backward 2", "backwards", "optimizer.step", "optimizers", "", "optimizer",
                   "step\t", "forward\n"]  # fmt: skip
    others = ["forward\u0301", "step\u0301", "step\u00e9", "backward\u00a0x", "step\u0663"]
    calls = []
    real = patterns.compile_pattern
    monkeypatch.setattr(patterns, "compile_pattern", lambda *a: calls.append(a) or real(*a))
    for pattern in (DEFAULT_STEPS_REGEX, DEFAULT_PHASES_REGEX):
        for texts, engine in ((ascii_texts, 0), (ascii_texts + others, 1)):
            want = [t for t in texts if regex.compile(pattern).search(t)]
            assert patterns.matching("--steps", pattern, iter(texts)) == want
            assert len(calls) == engine
            calls.clear()
    assert patterns.matching("--phases", DEFAULT_PHASES_REGEX, ["forward\u0301"]) == []
    assert patterns.matching("--steps", r"^step", ["step"]) == ["step"]
    assert len(calls) == 2  # a pattern of the user's goes to `regex`, ASCII or not

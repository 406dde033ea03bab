"""One set of options across summary, diff, dashboard and ab (issue #49, item 3): an option two of
them take means the same in both (one help text, one value name); the pairs that belong together
are there together; usage lines, descriptions and usage errors read as the README says."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import pytest
import typer
from typer.testing import CliRunner

from census.cli import app
from tests.helpers.cli import census_process
from tests.helpers.files import fixture_file

runner = CliRunner()
COMMANDS = ("summary", "diff", "dashboard", "ab")
# The same name for a different thing, on purpose: ab's gates are on its arms' interval (not a
# census key), and its -o is the folder its experiments go to (dashboard's, the page).
MEANS_OTHER_THINGS = {("ab", "--fail-if"), ("ab", "-o"), ("ab", "--output")}
SELECTION = {"--steps", "--skip-first", "--phases", "--idle", "--ranks", "--scheduler"}


def options(command: str) -> dict[str, tuple[str, str]]:
    """Each visible option of `command` by every name it has: (help, value name)."""
    group = typer.main.get_command(app)
    ctx = typer.Context(group)
    cmd = group.get_command(ctx, command)
    found = {}
    for p in cmd.get_params(ctx):
        if p.param_type_name == "option" and not p.hidden:
            for name in (*p.opts, *p.secondary_opts):
                found[name] = (p.help or "", p.metavar or "")
    return found


def test_an_option_means_the_same_in_every_command_that_takes_it() -> None:
    taken = {c: options(c) for c in COMMANDS}
    differ = []
    for name in sorted({n for opts in taken.values() for n in opts}):
        having = [c for c in COMMANDS if name in taken[c] and (c, name) not in MEANS_OTHER_THINGS]
        if len({taken[c][name] for c in having}) > 1:
            differ.append((name, {c: taken[c][name] for c in having}))
    assert differ == []


def test_options_that_belong_together_are_taken_together() -> None:
    taken = {c: set(options(c)) for c in COMMANDS}
    for command, names in taken.items():
        assert ("--format" in names) == ("--json" in names), command
    for command in ("summary", "diff", "dashboard"):  # those that read captures
        assert taken[command] >= SELECTION, command
    for command in ("summary", "diff", "dashboard"):  # those that read captures
        assert "--sample" in taken[command], command
    for command in ("diff", "dashboard", "ab"):  # those that compare two sides
        assert "--labels" in taken[command], command
    for command in ("diff", "ab"):  # those that print a comparison: its page too
        assert "--html" in taken[command], command


@pytest.mark.parametrize("command", ["summary", "diff", "dashboard", "capture", "ab", "demo",
                                     "doctor"])  # fmt: skip
def test_usage_lines_name_arguments_plainly(command: str) -> None:
    out = runner.invoke(app, [command, "--help"], env={"COLUMNS": "200"}).stdout
    usage = next(line for line in out.splitlines() if "Usage:" in line)
    assert "{" not in usage and "}" not in usage, usage
    expected = {"diff": "diff [OPTIONS] [A] [B]", "dashboard": "dashboard [OPTIONS] [A] [B]",
                "capture": "capture [OPTIONS] NAME -- COMMAND...", "ab": "ab [OPTIONS] NAME"}  # fmt: skip
    if command in expected:
        assert usage.strip().endswith(expected[command]), usage


def test_census_own_options_show_no_type_and_the_version() -> None:
    out = runner.invoke(app, ["--help"], env={"COLUMNS": "200"}).stdout
    assert "<bool>" not in out and "--version" in out
    r = runner.invoke(app, ["--version"])
    assert r.exit_code == 0 and re.fullmatch(r"census \d+\.\d+\.\d+\n", r.stdout), r.stdout


def test_descriptions_do_not_break_mid_sentence() -> None:
    out = runner.invoke(app, ["--help"], env={"COLUMNS": "200"}).stdout
    assert "or show a `census ab` experiment folder (its arms' verdict" in out
    assert "one capture per side explains why." in out
    help_text = runner.invoke(app, ["dashboard", "--help"], env={"COLUMNS": "200"}).stdout
    assert "experiment folder (--html FILE, else reports/LABEL.html; a diff's reports/A-vs-B" in (
        help_text
    )


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["diff", "a", "b", "--jsn"], "Error: No such option: --jsn (Possible options: --json) "
         "(usage: census diff [OPTIONS] [A] [B]; census diff --help for more)"),
        (["ab", "--demo", "eager,compiled"], "Error: Missing argument 'NAME'. (usage: census ab "
         "[OPTIONS] NAME; census ab --help for more)"),
        (["summary", "--top", "x"], "Error: Invalid value for '--top': "),
        (["bogus"], "Error: No such command 'bogus'. (usage: census [OPTIONS] COMMAND [ARGS]...; "
         "census --help for more)"),
    ],
)  # fmt: skip
def test_a_usage_error_is_one_line(args: list[str], message: str) -> None:
    r = runner.invoke(app, args, prog_name="census")
    assert r.exit_code == 2
    assert r.stdout == "" and r.stderr.count("\n") == 1, r.stderr
    assert r.stderr.startswith(message), r.stderr


def test_a_usage_error_is_one_line_from_the_command_too() -> None:
    r = census_process("diff", "a", "b", "--jsn", capture_output=True, text=True)
    assert r.returncode == 2 and r.stdout == ""
    assert r.stderr.count("\n") == 1 and r.stderr.startswith("Error: No such option: --jsn"), (
        r.stderr
    )


def test_diff_takes_json_as_summary_and_ab_do() -> None:
    args = ["diff", "sample:eager", "sample:compiled"]
    by_flag = runner.invoke(app, [*args, "--json"])
    assert by_flag.exit_code == 0, by_flag.output
    assert by_flag.stdout == runner.invoke(app, [*args, "--format", "json"]).stdout
    assert json.loads(by_flag.stdout)["labels"] == {"a": "eager", "b": "compiled"}


def test_dashboard_takes_a_sample_as_summary_does(tmp_path: Path) -> None:
    out = tmp_path / "e.html"
    r = runner.invoke(app, ["dashboard", "--sample", "eager", "--html", str(out)])
    assert r.exit_code == 0, r.output
    assert "sample:eager · nsys" in out.read_text("utf-8")
    r = runner.invoke(app, ["dashboard", "x.sqlite", "--sample", "eager", "--html", str(out)])
    assert r.exit_code == 2
    assert r.stderr.strip() == "Error: give either x.sqlite or --sample eager, not both"


def test_a_report_without_nsys_names_no_option_the_command_lacks(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    rep = tmp_path / "run.nsys-rep"
    shutil.copy(fixture_file("h200_eager_3steps.nsys-rep"), rep)
    monkeypatch.setenv("PATH", str(tmp_path))
    monkeypatch.delenv("CENSUS_NSYS", raising=False)
    for args in (
        ["summary", str(rep)],
        ["diff", str(rep), str(rep)],
        ["dashboard", str(rep), "--html", str(tmp_path / "r.html")],
    ):
        r = runner.invoke(app, args)
        assert r.exit_code == 3
        assert "--nsys" not in r.stderr and r.stderr.strip().endswith(
            "or set $CENSUS_NSYS to it"
        ), r.stderr
    r = runner.invoke(app, ["capture", "x", "-o", str(tmp_path), "--", "true"])
    assert r.exit_code == 3 and "pass its path with --nsys / $CENSUS_NSYS" in r.stderr

"""Every `census ...` command in README.md and docs/ runs as written (issue #49, item 2).

The commands are read from the pages: lines of code blocks, and inline code spans (a span may
wrap over lines). Their placeholders are filled (PROFILE, A, B, NAME, CMD, ...; `a|b` takes its
first choice, `[X]` its content), then each runs through the CLI in a folder holding
`profiles/eager` and `profiles/compiled` (the bundled captures), `base/` and `pr/` (the same)
and an experiment. A usage error (exit 2) or an internal error fails the test, and so does any
exit but 0 from a command that needs no GPU. The commands that run programs (capture, ab) need
a GPU and nsys: they run up to the point where the program would start, every check of their
options included.

Two spans are not commands: the bare name of one (`census ab`), checked to be a command; and a
span with `...` among census's own words (`census --debug ...`), which stands for arguments left
out: each option it names must be one that command takes.
"""

from __future__ import annotations

import re
import shlex
import shutil
from pathlib import Path

import pytest
import typer
from typer.testing import CliRunner

from census.cli import app
from census.sources.samples import sample_path
from tests.helpers.files import REPO

SPAN = re.compile(
    r"(?<!`)`([^`\n]+(?:\n[^`\n]+)*)`(?!`)"
)  # a span may wrap, never over a blank line
PAGES = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]
PLACEHOLDERS = {
    "PROFILE": "profiles/eager",
    "EXPORT": "profiles/eager/capture.sqlite",
    "A": "profiles/eager",
    "B": "profiles/compiled",
    "DIR": "profiles/eager",
    "DIR_A": "profiles/eager",
    "DIR_B": "profiles/compiled",
    "EXPERIMENT": "profiles/moe",
    "NAME": "x",
    "CMD": "python -c pass",
    "COMMAND": "python -c pass",
    "PATH": "reports/x.html",
    "K": "2",
    "N": "3",
}
# What a command that runs without a GPU may exit with besides 0: a failed gate, and doctor
# saying that this machine cannot capture.
ALSO_FINE = {"doctor": {3}}
GATE_FAILED = 5


def code_lines(text: str) -> list[str]:
    """The lines of fenced and indented code blocks, a `\\` continuation joined, comments cut."""
    lines: list[str] = []
    fenced = False
    for line in text.split("\n"):
        if line.startswith("```"):
            fenced = not fenced
            continue
        if not (fenced or line.startswith("    ")):
            continue
        line = line.strip()
        if lines and lines[-1].endswith("\\"):
            lines[-1] = f"{lines[-1][:-1]} {line}"
        else:
            lines.append(line)
    return [re.sub(r"\s+#\s.*$", "", line) for line in lines]


def inline_spans(text: str) -> list[str]:
    """The inline code spans of the prose (outside fenced blocks), whitespace made single."""
    prose = re.sub(r"^```.*?^```", "", text, flags=re.S | re.M)
    return [" ".join(m[1].split()) for m in SPAN.finditer(prose)]


def documented_commands() -> list[tuple[str, str]]:
    """(page, command) of every `census ...` command the pages show, once each."""
    found: dict[str, str] = {}
    for page in PAGES:
        text = page.read_text("utf-8")
        for command in [*code_lines(text), *inline_spans(text)]:
            command = command.replace("\\|", "|")
            if command == "census" or command.startswith("census "):
                found.setdefault(command, page.name)
    return [(page, command) for command, page in found.items()]


def fill(command: str) -> list[str]:
    """The command's arguments after `census`, its placeholders filled."""
    words: list[str] = []
    for word in shlex.split(command)[1:]:
        word = word.strip("[]") if word.startswith("[") or word.endswith("]") else word
        word = word.split("|")[0] if "|" in word and not word.startswith("|") else word
        value = PLACEHOLDERS.get(word.rstrip("."))
        if value is None:
            words.append(word)
        elif words and words[-1].startswith("-") and words[-1] != "--":
            words.append(value)  # an option's value: one word (`--a CMD`)
        else:
            words += shlex.split(value)  # a program after `--`: its words
    return words


def census_words(args: list[str]) -> list[str]:
    """The arguments census reads: those before `--` (after it, the program's)."""
    return args[: args.index("--")] if "--" in args else args


COMMANDS = documented_commands()


def test_the_pages_show_commands() -> None:
    shown = {c for _, c in COMMANDS}
    assert len(shown) > 30
    assert any(c.startswith("census dashboard") for c in shown)


@pytest.fixture(scope="module")
def folder(tmp_path_factory: pytest.TempPathFactory, ab_demo: Path) -> Path:
    """A working folder with the captures and the experiment the commands name."""
    cache = tmp_path_factory.mktemp("cache")
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("CENSUS_CACHE_DIR", str(cache))
        eager, compiled = sample_path("eager"), sample_path("compiled")
    work = tmp_path_factory.mktemp("work")
    (work / "profiles").mkdir()
    for name, source in (("eager", eager), ("compiled", compiled), ("base", eager), ("pr", compiled)):  # fmt: skip
        target = work / ("profiles" if name in ("eager", "compiled") else "") / name
        shutil.copytree(source, target)
    shutil.copytree(ab_demo, work / "profiles" / "moe")
    (work / "cache").symlink_to(cache)
    return work


@pytest.fixture
def _isolated_cache(folder: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """One cache for the module's commands (conftest's gives each test its own)."""
    monkeypatch.setenv("CENSUS_CACHE_DIR", str(folder / "cache"))


@pytest.fixture
def programs_stopped(monkeypatch: pytest.MonkeyPatch) -> list:
    """capture and ab stop where they would start a program (they need a GPU and nsys): every
    check of the command line has run; the spec they would have run is recorded."""
    import census.api

    started: list = []

    def stop(spec, *args, **kwargs):
        started.append(spec)
        raise typer.Exit(0)

    monkeypatch.setattr(census.api, "capture_steps", stop)
    monkeypatch.setattr(census.api, "run_experiment", stop)
    return started


@pytest.mark.parametrize(("page", "command"), COMMANDS, ids=[c for _, c in COMMANDS])
def test_a_documented_command_runs_as_written(
    page: str, command: str, folder: Path, programs_stopped: list, monkeypatch
) -> None:
    monkeypatch.chdir(folder)
    monkeypatch.setenv("COLUMNS", "100")
    args = fill(command)
    if not args:
        return
    if len(args) == 1 and not args[0].startswith("-"):  # the name of a command
        r = CliRunner().invoke(app, [args[0], "--help"])
        assert r.exit_code == 0, f"{page}: `{command}`: {r.output}"
        return
    if "..." in census_words(args):  # arguments left out: the options named must exist
        _check_options(page, command, census_words(args))
        return
    r = CliRunner().invoke(app, args)
    fine = {0} | ALSO_FINE.get(args[0], set()) | ({GATE_FAILED} if "--fail-if" in args else set())
    assert r.exit_code in fine, f"{page}: `{command}` exited {r.exit_code}: {r.output[-2000:]}"
    if args[0] in ("capture", "ab") and "--help" not in args:
        assert programs_stopped, f"{page}: `{command}` ran no program"


def _check_options(page: str, command: str, words: list[str]) -> None:
    group = typer.main.get_command(app)
    options = {o for p in group.params for o in p.opts} | {"--help"}
    sub = next((w for w in words if w in group.commands), None)
    if sub is not None:
        options |= {o for p in group.commands[sub].params if p.param_type_name == "option"
                    for o in (*p.opts, *p.secondary_opts)}  # fmt: skip
    unknown = [w for w in words if w.startswith("-") and w.split("=")[0] not in options]
    assert unknown == [], f"{page}: `{command}` names options census does not take: {unknown}"


def test_the_readme_stays_within_200_lines() -> None:
    # reference material belongs in docs/ (issue #59): the README is what a newcomer reads first
    assert len((REPO / "README.md").read_text("utf-8").splitlines()) <= 200


def test_ci_runs_the_readme_test_command_on_every_core() -> None:
    # the README's second line is the test command; .ci/run runs the same (python3 there)
    readme = (REPO / "README.md").read_text("utf-8").splitlines()[3].split("&&")[-1].split()
    ci = [ln.split() for ln in (REPO / ".ci/run").read_text().splitlines() if "-m pytest" in ln]
    assert readme[:3] == ["python", "-m", "pytest"] and ci == [["python3", *readme[1:]]]
    assert readme[3:5] == ["-n", "auto"]  # pytest-xdist: the 2-core run in under 5 minutes

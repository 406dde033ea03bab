"""An experiment as a person reads it on a narrow terminal (issue #49, item 7: the arms' table at
80 columns), and a p95 of too few values said so beside it in every format (item 9)."""

from __future__ import annotations

import json

from typer.testing import CliRunner

from census.api import experiment_view
from census.cli import app
from census.render import render
from tests.helpers.files import DATA
from tests.helpers.terminal import cells, terminal_tables

runner = CliRunner()
DEEPSPEED = DATA / "ab-deepspeed" / "ds"  # 8 arms (+1 warm) of 10 measured steps, no captures
FEW = "† p95 of 10 values, fewer than 20: it lies between the two largest, so read it as the maximum, not a tail estimate"  # noqa: E501


def _head(table: list[str]) -> list[str]:
    """A terminal table's column titles (a header of one line)."""
    return [c.strip() for c in table[1].strip("┃").split("┃")]


def _arm_tables(text: str) -> list[list[str]]:
    """The parts of the "Arms in run order" table (its rows led by `0 eager (warm, ...)`; the
    tail steps' by an arm's number alone)."""
    return [t for t in terminal_tables(text) if _head(t)[0] == "arm" and " " in cells(t[3])[0]]


def test_the_arms_table_fits_80_columns_and_keeps_the_arm_numbers() -> None:
    r = runner.invoke(app, ["diff", str(DEEPSPEED)], env={"COLUMNS": "80"})
    assert r.exit_code == 0, r.output
    assert max(len(line) for line in r.stdout.splitlines()) <= 80
    parts = _arm_tables(r.stdout)
    assert len(parts) == 2  # split, never cut
    for part in parts:
        arms = [cells(line)[0] for line in part[3:-1]]
        assert arms[:3] == ["0 eager (warm, discarded)", "1 eager", "2 compiled"], arms
        assert len(arms) == 9
    shown = {title for part in parts for title in _head(part)[1:]}
    assert {"median", "p95", "steps", "clock"} <= shown and "…" not in r.stdout


def test_a_p95_of_too_few_values_is_said_so_in_every_format() -> None:
    view = experiment_view(DEEPSPEED)
    terminal = render(view, "terminal", width=200)
    arms = _arm_tables(terminal)[0]
    head = _head(arms)
    p95 = [cells(line)[head.index("p95")] for line in arms[3:-1]]
    assert all(v.endswith("ms†") for v in p95), p95  # each arm's rests on 10 steps
    e2e = next(t for t in terminal_tables(terminal) if _head(t)[0] == "side")
    assert not any("†" in line for line in e2e)  # the sides' rest on 40 each
    assert terminal.count(FEW.split(":")[0]) == 1 and " ".join(FEW.split()) in " ".join(
        terminal.split()
    )
    markdown = render(view, "markdown")
    assert FEW in markdown and "| 240.05 ms† |" in markdown
    doc = json.loads(render(view, "json"))
    assert [a["steps"] for a in doc["arms"]] == [10] * 9
    assert doc["e2e"]["a"]["steps"] == 40
    page = render(view, "html")
    assert FEW.replace("'", "&#x27;") in page.replace("\u00a0", " ")


def test_the_summary_says_its_p95_rests_on_three_steps(fixture) -> None:
    path = str(fixture("h200_eager_3steps.sqlite"))
    out = runner.invoke(app, ["summary", path], env={"COLUMNS": "200"}).stdout
    assert "p95 15.86 ms (of 3 steps, fewer than 20: between the two largest), max 16.07 ms" in out
    out = runner.invoke(app, ["summary", "--sample", "eager"], env={"COLUMNS": "200"}).stdout
    assert ", p95 15.58 ms, max 15.66 ms;" in out  # 20 steps: nothing to say
    assert json.loads(runner.invoke(app, ["summary", path, "--json"]).stdout)["tail"]["steps"] == 3


def _empty_columns(table: list[str]) -> list[int]:
    """The columns of a terminal table with no text in any row (below the ┡ line)."""
    body = [
        cells(line) for line in table[next(i for i, t in enumerate(table) if t[0] == "┡") + 1 : -1]
    ]
    return [i for i in range(len(body[0])) if not any(row[i] for row in body)]


def test_an_experiment_prints_no_column_empty_in_every_row(ab_demo) -> None:
    """Issue #59: the demo's arms recorded no phases, so its tail steps have no phase that grew:
    those columns are left out (in markdown too), not drawn empty."""
    r = runner.invoke(app, ["diff", str(ab_demo)], env={"COLUMNS": "200"})
    assert r.exit_code == 0, r.output
    tables = terminal_tables(r.stdout)
    assert len(tables) >= 8
    assert [_empty_columns(t) for t in tables] == [[] for _ in tables]
    tails = next(t for t in tables if _head(t)[:3] == ["arm", "side", "step"])
    assert _head(tails) == ["arm", "side", "step", "time", "arm median", "excess"]
    md = render(experiment_view(ab_demo), "markdown")
    assert "| arm | side | step | time | arm median | excess |" in md
    assert "phase that grew" not in md and "CPU share" not in md

"""One render interface: every view in every format, nothing computed while rendering, and the
compact markdown summary."""

from __future__ import annotations

import ast
import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from census.api import Options, diff_view, experiment_view, summarize, summary_view
from census.cli import app
from census.compare import explain
from census.compare.ab import experiment
from census.errors import UsageError
from census.findings import limiter, spread, tails
from census.metrics import LAUNCHED_TITLE, WINDOW_TITLE
from census.render import FORMATS, render
from census.render.summaryrows import IDLE_RANGES_TITLE
from census.render.views import RanksView, SummaryView
from tests.helpers.exports import launch_bound, rank_folder


@pytest.fixture(scope="module")
def views(ab_demo: Path, tmp_path_factory: pytest.TempPathFactory) -> dict:
    folder = rank_folder(
        tmp_path_factory.mktemp("ranks"), "h200_eager_3steps.sqlite", "h200_compiled_3steps.sqlite"
    )
    return {
        # the launch-bound demo's capture: a host-bound summary with its idle split
        "summary": summary_view(launch_bound("eager"), shown="launch-bound:eager"),
        "ranks": summary_view(folder),
        "diff": diff_view("sample:eager", "sample:compiled", ("eager", "compiled")),
        "experiment": experiment_view(ab_demo),
    }


def test_every_view_renders_in_every_format(views: dict) -> None:
    assert isinstance(views["ranks"], RanksView) and isinstance(views["summary"], SummaryView)
    for view in views.values():
        for fmt in FORMATS:
            text = render(view, fmt)
            assert text.strip(), (type(view).__name__, fmt)
        assert json.loads(render(view, "json"))
        assert render(view, "html").startswith("<!DOCTYPE html>")


def test_renderers_compute_nothing(views: dict, monkeypatch: pytest.MonkeyPatch) -> None:
    """The tails, the limiter, the explanations and the spread come in the view: with every
    function that computes them broken, each format renders what it rendered before."""
    before = {(kind, fmt): render(v, fmt) for kind, v in views.items() for fmt in FORMATS}

    def broken(*_args: object) -> None:
        raise AssertionError("computed while rendering")

    for module, name in ((tails, "tail_steps"), (limiter, "find_limiter"),
                         (limiter, "summary_lead"), (explain, "explain_diff"),
                         (experiment, "explain_parts"), (spread, "rank_spread")):  # fmt: skip
        monkeypatch.setattr(module, name, broken)
    for kind, view in views.items():
        for fmt in FORMATS:
            assert render(view, fmt) == before[kind, fmt], (kind, fmt)


COMPUTING = {"tail_steps", "find_limiter", "summary_lead", "explain_diff", "explain_parts",
             "explain_experiment", "rank_spread"}  # fmt: skip


def test_no_renderer_imports_what_computes_a_view() -> None:
    """census.api computes these for the views; no module under census/render imports them
    (a name bound at import would escape the monkeypatching above), the notebook's reprs and
    cards included (census.api.notebook hands them a view)."""
    render_dir = Path(spread.__file__).parent.parent / "render"
    found = sorted(
        f"{path.name}: {alias.name}"
        for path in render_dir.glob("*.py")
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8")))
        if isinstance(node, ast.ImportFrom)
        for alias in node.names
        if alias.name in COMPUTING
    )
    assert found == []


def test_render_takes_a_view_and_a_known_format(views: dict) -> None:
    with pytest.raises(UsageError, match="summary_view"):
        render(summarize("sample:eager"), "terminal")
    with pytest.raises(UsageError, match="'pdf': choose terminal, markdown, json, html"):
        render(views["summary"], "pdf")


def table_rows(md: str) -> list[list[int]]:
    """Each markdown table's cell counts, one list per table."""
    tables, current = [], None
    for line in [*md.splitlines(), ""]:
        if line.startswith("| "):
            current = current if current is not None else []
            current.append(len(line.replace("\\|", "").split(" | ")))
        elif current is not None:
            tables.append(current)
            current = None
    return tables


def test_the_markdown_summary_is_short_and_pasteable(views: dict) -> None:
    view = views["summary"]
    md = render(view, "markdown", top=5)
    lines = md.splitlines()
    assert lines[0] == f"**{view.lead}**" and view.lead.startswith("host-bound")
    assert lines[2] == "### launch-bound:eager"
    heads = [line for line in lines if line.startswith("#### ")]
    assert heads == [f"#### {WINDOW_TITLE}", f"#### {IDLE_RANGES_TITLE}",
                     f"#### Kernel census: {LAUNCHED_TITLE}", "#### Phases (per step, mean)",
                     "#### Top 5 kernels by time"]  # fmt: skip
    assert (
        "| backward | 3.55 ms | 52.5% |" in lines
        and "| (no range open) | 46.2 µs | 0.7% |" in lines
    )
    assert "| step time | 11.70 ms |" in lines
    assert "| GPU kernels | 4,940 | 247 |" in lines
    tables = table_rows(md)
    assert len(tables) == 5 and all(len(set(t)) == 1 for t in tables)  # every row whole
    assert len(lines) < 72  # 71: the memsets (count, bytes) are the last two rows added


def test_the_markdown_summary_without_steps_has_no_lead_nor_window() -> None:
    view = summary_view("sample:eager", Options(steps_regex="^no such step$"))
    md = render(view, "markdown")
    assert md.startswith("### ") and WINDOW_TITLE not in md and "(mean)" not in md
    assert "#### Warnings" in md and "no NVTX step ranges matched" in md


def test_the_markdown_of_a_rank_folder_ends_with_the_spread(views: dict) -> None:
    md = render(views["ranks"], "markdown")
    assert md.index("#### Top 15 kernels") < md.index("#### Ranks (per step)")
    assert "| rank0 | 3 |" in md and "| rank1 | 3 |" in md
    assert md.index("#### Ranks (per step)") < md.index("#### Spread over ranks")


def test_the_cli_prints_what_the_interface_renders() -> None:
    runner = CliRunner()
    for args, fmt in ((["--format", "markdown"], "markdown"), (["--json"], "json")):
        r = runner.invoke(app, ["summary", "--sample", "eager", *args])
        assert r.exit_code == 0, r.output
        expected = render(summary_view("sample:eager", shown="sample:eager"), fmt, top=15)
        assert r.stdout == expected + "\n"
    r = runner.invoke(app, ["summary", "--sample", "eager", "--format", "html"])
    assert r.exit_code == 2 and "--format 'html': choose table, markdown or json" in r.stderr

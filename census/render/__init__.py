"""Renderers behind one interface: `render(view, fmt, **options) -> str`. Units are decided here
and nowhere earlier.

A view (census.render.views, built by census.api) carries a result and everything computed for
it before rendering; one renderer per kind of view and format formats it:

    render(view, "terminal", top=15, width=120, color=False)  # a summary: all_steps, overhead
    render(view, "markdown", top=15)
    render(view, "json", top=20, indent=None)
    render(view, "html")

Each format's options default as its renderer's do. A terminal rendering ends with its newline;
the others are documents, which the CLI prints as a line. render_pieces gives the same text in
pieces made as they are iterated (a compact JSON document of hundreds of MB is written, and
cached by census.store.cache, as it is made, never held whole); render is their join.
"""

from __future__ import annotations

from collections.abc import Iterable
from importlib import import_module
from typing import Any

from census.render.views import CaptureView, DiffView, ExperimentView, RanksView, SummaryView

FORMATS = ("terminal", "markdown", "json", "html")

# (kind of view, format) -> "module:function" under census.render; each takes the view first.
RENDERERS: dict[tuple[type, str], str] = {
    (SummaryView, "terminal"): "table:render_summary",
    (SummaryView, "markdown"): "markdown:render_summary_markdown",
    (SummaryView, "json"): "json_docs:render_summary_json",
    (SummaryView, "html"): "html:render_summary_html",
    (RanksView, "terminal"): "table:render_ranks",
    (RanksView, "markdown"): "markdown:render_ranks_markdown",
    (RanksView, "json"): "json_docs:render_ranks_json",
    (RanksView, "html"): "html:render_ranks_html",
    (DiffView, "terminal"): "diff_table:render_diff_table",
    (DiffView, "markdown"): "markdown:render_diff_markdown",
    (DiffView, "json"): "json_docs:render_diff_json",
    (DiffView, "html"): "html:render_diff_html",
    (ExperimentView, "terminal"): "ab:render_experiment_table",
    (ExperimentView, "markdown"): "ab:render_experiment_markdown",
    (ExperimentView, "json"): "json_docs:render_experiment_json",
    (ExperimentView, "html"): "html_ab:render_experiment_html",
    (CaptureView, "json"): "json_capture:render_capture_json",
}


def render(
    view: SummaryView | RanksView | DiffView | ExperimentView | CaptureView,
    fmt: str,
    **options: Any,
) -> str:
    """`view` as text in `fmt` (terminal, markdown, json or html)."""
    return "".join(render_pieces(view, fmt, **options))


def render_pieces(
    view: SummaryView | RanksView | DiffView | ExperimentView | CaptureView,
    fmt: str,
    **options: Any,
) -> Iterable[str]:
    """render's text in pieces, in order: their join is render's text. A renderer gives a
    text, or (a compact JSON document) pieces made each time they are iterated."""
    from census.errors import UsageError

    if fmt not in FORMATS:
        raise UsageError(f"format {fmt!r}: choose {', '.join(FORMATS)}")
    name = RENDERERS.get((type(view), fmt))
    if name is None:
        raise UsageError(
            f"cannot render a {type(view).__name__}: render a view from census.api "
            "(summary_view, diff_view, experiment_view)"
        )
    module, function = name.split(":")
    text = getattr(import_module(f"census.render.{module}"), function)(view, **options)
    return [text] if isinstance(text, str) else text

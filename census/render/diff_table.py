"""Terminal (rich) rendering of a diff: every table fits the terminal (census.render.fit)."""

from __future__ import annotations

from rich.console import Console
from rich.markup import escape

from census.compare.diff import CensusDiff
from census.render.diffrows import (
    IDLE_RANGES_TITLE,
    accounting_rows,
    basis_line,
    class_rows,
    headers,
    headline_groups,
    idle_range_rows,
    kernel_rows,
    ops_missing,
    ops_terminal,
    phase_rows,
)
from census.render.fit import print_fit
from census.render.text import rich_text
from census.render.views import DiffView
from census.units import one_line

SHORT_LABEL = 10  # longer side labels are A and B in column heads, named once above the tables


def render_diff_table(
    view: DiffView, top: int = 15, width: int | None = None, color: bool = False
) -> str:
    """The terminal diff: the verdict, why, basis, headline tables, step accounting, phases,
    classes, kernels."""
    return rich_text(
        lambda console: _draw_diff(view.diff, view.explanation, console, top), width, color
    )


def _draw_diff(d: CensusDiff, explanation: list[str], console: Console, top: int) -> None:
    """The verdict first (the explanation's headline: what makes the sides not comparable, or
    the step-time sentence), then the rest of the explanation, then the tables."""
    la, lb = d.labels
    short = max(len(la), len(lb)) > SHORT_LABEL
    h = headers(d, short)
    if explanation:
        console.print(f"[bold]{escape(one_line(explanation[0]))}[/bold]", highlight=False)
    if explanation[1:]:
        console.print("[bold]Why[/bold]")
    for s in explanation[1:]:
        console.print(f" • {escape(one_line(s))}", highlight=False)
    console.print(escape(one_line(basis_line(d))), highlight=False)
    if short:
        console.print(escape(one_line(f"A = {la}, B = {lb}")), highlight=False)
    acc = accounting_rows(d)
    for i, (title, rows) in enumerate(headline_groups(d)):
        print_fit(console, title, h["headline"], rows)
        if i == 0 and acc:  # under the step-window table it adds up
            print_fit(console, "Step accounting", h["accounting"], acc)
    phases = phase_rows(d)
    if phases:
        print_fit(console, "Phases (per step)", h["phases"], phases)
    ranges = idle_range_rows(d)
    if ranges:
        print_fit(console, IDLE_RANGES_TITLE, h["idle_ranges"], ranges, left=1)
    _draw_ops(d, h, console, top)
    print_fit(console, "Kernel classes", h["classes"], class_rows(d))
    kernels = kernel_rows(d, top)
    if kernels:
        print_fit(console, f"Top {len(kernels)} kernel changes", h["kernels"], kernels, left=3)


def _draw_ops(d: CensusDiff, h: dict[str, list[str]], console: Console, top: int) -> None:
    """The Operations table (each phase's where there are phases), or the line saying why
    there is none."""
    missing = ops_missing(d)
    if missing:
        console.print(escape(one_line(missing)), highlight=False)
    for title, rows in ops_terminal(d, top):
        print_fit(console, title, h["ops_terminal"], rows)

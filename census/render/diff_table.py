"""Terminal (rich) rendering of a diff."""

from __future__ import annotations

from rich.console import Console
from rich.markup import escape
from rich.table import Table

from census.compare.diff import CensusDiff
from census.render.diffrows import (
    accounting_rows,
    basis_line,
    class_rows,
    headers,
    headline_rows,
    kernel_rows,
    phase_rows,
)
from census.render.text import rich_text


def _table(title: str, head: list[str], rows: list[list[str]], left: int = 1) -> Table:
    t = Table(title=title, title_justify="left")
    for i, col in enumerate(head):
        # Numbers never wrap; a long kernel name is cut with an ellipsis instead.
        t.add_column(
            escape(col),
            justify="left" if i < left else "right",
            no_wrap=True,
            overflow="ellipsis",
        )
    for row in rows:
        t.add_row(*(escape(c) for c in row))
    return t


def render_diff_table(
    d: CensusDiff,
    explanation: list[str],
    top: int = 15,
    width: int | None = None,
    color: bool = False,
) -> str:
    """The terminal diff: basis, headline table, step accounting, why, classes, kernels."""
    return rich_text(lambda console: _draw_diff(d, explanation, console, top), width, color)


def _draw_diff(d: CensusDiff, explanation: list[str], console: Console, top: int) -> None:
    h = headers(d)
    console.print(escape(basis_line(d)))
    console.print(_table(f"{d.labels[0]} vs {d.labels[1]}", h["headline"], headline_rows(d)))
    acc = accounting_rows(d)
    if acc:
        console.print(_table("Step accounting", h["accounting"], acc))
    phases = phase_rows(d)
    if phases:
        console.print(_table("Phases (per step)", h["phases"], phases))
    console.print("[bold]Why[/bold]")
    for s in explanation:
        console.print(f" • {escape(s)}")
    console.print(_table("Kernel classes", h["classes"], class_rows(d)))
    # A terminal is narrow: change, name, times. `--format markdown` has counts and full names.
    keep = (0, 1, 5, 6, 7)
    kernels = [[r[i] for i in keep] for r in kernel_rows(d, top, width=56)]
    if kernels:
        head = [h["kernels"][i] for i in keep]
        console.print(_table(f"Top {len(kernels)} kernel changes", head, kernels, left=2))

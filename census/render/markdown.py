"""GitHub-flavoured markdown: a diff, pasted into a pull request unchanged, and the metric table
docs/definitions.md carries."""

from __future__ import annotations

from census.compare.diff import CensusDiff
from census.definitions import METRICS, TIMING_METRICS
from census.render.diffrows import (
    accounting_rows,
    basis_line,
    class_rows,
    headers,
    headline_groups,
    kernel_rows,
    phase_rows,
)
from census.render.fit import short_names
from census.units import one_line

_RIGHT = "---:"


def _cell(text: str) -> str:
    # Kernel names carry `|`, `<`, `>` and `*`: keep them literal in a table cell; a newline or
    # another control character in a name or a label would end the row.
    return (
        one_line(text)
        .replace("\\", "\\\\")
        .replace("|", "\\|")
        .replace("<", "&lt;")
        .replace(">", "&gt;")
        .replace("*", "\\*")
        .replace("_", "\\_")
    )


def markdown_table(head: list[str], rows: list[list[str]]) -> str:
    lines = [
        "| " + " | ".join(_cell(h) for h in head) + " |",
        "| " + " | ".join(["---"] + [_RIGHT] * (len(head) - 1)) + " |",
    ]
    lines += ["| " + " | ".join(_cell(c) for c in row) + " |" for row in rows]
    return "\n".join(lines)


MARKDOWN_NAME_CHARS = 80  # kernel names in a pull request's table, shortened as the terminal does


def _kernel_table(head: list[str], rows: list[list[str]]) -> str:
    right = [False, False, False, True, True, True, True, True]  # name, change, class: text
    names = short_names([row[0] for row in rows], MARKDOWN_NAME_CHARS)
    rows = [[name, *row[1:]] for name, row in zip(names, rows, strict=True)]
    lines = [
        "| " + " | ".join(_cell(h) for h in head) + " |",
        "| " + " | ".join(_RIGHT if r else "---" for r in right) + " |",
    ]
    lines += ["| " + " | ".join(_cell(c) for c in row) + " |" for row in rows]
    return "\n".join(lines)


def render_diff_markdown(d: CensusDiff, explanation: list[str], top: int = 15) -> str:
    h = headers(d)
    out = [f"**{_cell(explanation[0])}**", ""] if explanation else []  # the verdict first
    out += [one_line(f"### {d.labels[0]} vs {d.labels[1]}"), ""]
    if explanation[1:]:
        out += ["#### Why", ""] + [f"- {_cell(s)}" for s in explanation[1:]] + [""]
    out += [one_line(basis_line(d)), ""]
    acc = accounting_rows(d)
    for i, (title, rows) in enumerate(headline_groups(d)):
        out += [f"#### {title}", "", markdown_table(h["headline"], rows), ""]
        if i == 0 and acc:  # under the step-window table it adds up
            out += [markdown_table(h["accounting"], acc), ""]
    phases = phase_rows(d)
    if phases:
        out += ["#### Phases (per step)", "", markdown_table(h["phases"], phases), ""]
    out += ["#### Kernel classes", "", markdown_table(h["classes"], class_rows(d)), ""]
    kernels = kernel_rows(d, top)
    if kernels:
        out += [f"#### Top {len(kernels)} kernel changes", ""]
        out += [_kernel_table(h["kernels"], kernels), ""]
    notes = d.comparability.notes  # the problems open Why already
    if notes:
        out += ["#### Warnings", ""] + [f"- {_cell(w)}" for w in notes] + [""]
    return "\n".join(out)


def render_metric_table() -> str:
    """The table of every census key and step-timing key, from census.definitions."""
    lines = ["| key | shown as | unit | definition |", "| --- | --- | --- | --- |"]
    lines += [
        f"| `{m.name}` | {m.label} | {m.unit} | {m.definition} |"
        for m in (*METRICS, *TIMING_METRICS)
    ]
    return "\n".join(lines)

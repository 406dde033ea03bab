"""GitHub-flavoured markdown: a diff, pasted into a pull request unchanged, a compact summary of
one capture (or a rank folder), and the metric table docs/definitions.md carries."""

from __future__ import annotations

from census.metrics import METRICS, TIMING_METRICS, WINDOW_TITLE, launched_title
from census.render import summaryrows as sr
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
    ops_sections,
    phase_rows,
)
from census.render.fit import short_names
from census.render.views import DiffView, RanksView, SummaryView
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


def markdown_table(head: list[str], rows: list[list[str]], left: int = 1) -> str:
    """A table whose first `left` columns are text (left-aligned), the others numbers."""
    lines = [
        "| " + " | ".join(_cell(h) for h in head) + " |",
        "| " + " | ".join(["---"] * left + [_RIGHT] * (len(head) - left)) + " |",
    ]
    lines += ["| " + " | ".join(_cell(c) for c in row) + " |" for row in rows]
    return "\n".join(lines)


MARKDOWN_NAME_CHARS = 80  # kernel names in a pull request's table, shortened as the terminal does


def _kernel_table(head: list[str], rows: list[list[str]], left: int) -> str:
    """Kernel names shortened as the terminal does, then `left` columns of text."""
    names = short_names([row[0] for row in rows], MARKDOWN_NAME_CHARS)
    rows = [[name, *row[1:]] for name, row in zip(names, rows, strict=True)]
    return markdown_table(head, rows, left)


def render_diff_markdown(view: DiffView, top: int = 15) -> str:
    """The diff as markdown: the verdict, why, what is compared, the headline tables, phases, GPU
    idle by host range, kernel classes, the `top` kernel changes and the notes."""
    d, explanation = view.diff, view.explanation
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
    ranges = idle_range_rows(d)
    if ranges:
        out += [f"#### {IDLE_RANGES_TITLE}", "", markdown_table(h["idle_ranges"], ranges), ""]
    missing = ops_missing(d)
    out += [_cell(missing), ""] if missing else []
    for title, rows in ops_sections(d, top):
        out += [f"#### {_cell(title)}", "", markdown_table(h["ops"], rows, left=2), ""]
    out += ["#### Kernel classes", "", markdown_table(h["classes"], class_rows(d)), ""]
    kernels = kernel_rows(d, top)
    if kernels:
        out += [f"#### Top {len(kernels)} kernel changes", ""]
        out += [_kernel_table(h["kernels"], kernels, left=3), ""]  # name, change, class: text
    notes = d.comparability.notes  # the problems open Why already
    if notes:
        out += ["#### Warnings", ""] + [f"- {_cell(w)}" for w in notes] + [""]
    return "\n".join(out)


def render_summary_markdown(view: SummaryView, top: int = 15, ops: bool = False) -> str:
    """A compact summary: what limits the step, the step window, the work launched in it, the
    phases, the top kernels, with `ops` the top operations, and the warnings."""
    census = view.census
    out = [f"**{_cell(view.lead)}**", ""] if view.lead else []
    shown = view.shown or census.source.path
    out += [f"### {_cell(shown)}", "", _cell(sr.about_line(census)), ""]
    window = sr.window_rows(census)
    if window:
        out += [f"#### {WINDOW_TITLE}", "", markdown_table(*window), ""]
    ranges = sr.idle_range_rows(census)
    if ranges:
        out += [f"#### {sr.IDLE_RANGES_TITLE}", "", markdown_table(*ranges), ""]
    launched = markdown_table(*sr.census_rows(census))
    out += [f"#### Kernel census: {launched_title(bool(census.steps))}", "", launched, ""]
    if census.per_phase():
        out += ["#### Phases (per step, mean)", "", markdown_table(*sr.phase_rows(census)), ""]
    section = sr.nccl_rank_section(view)
    if section is not None:
        out += [f"#### {section[0]}", "", markdown_table(*section[1]), ""]
        out += [f"{_cell(line)}" for line in section[2]] + ([""] if section[2] else [])
    head, rows = sr.kernel_rows(census, top)
    if rows:
        out += [f"#### Top {len(rows)} kernels by time", "", _kernel_table(head, rows, left=2), ""]
    if ops and census.ops is None:
        out += [_cell(sr.OPS_NONE), ""]
    elif ops:
        out += [
            f"#### {sr.ops_title(census, top)}",
            "",
            _kernel_table(*sr.op_rows(census, top), left=1),
            "",
        ]
    if census.warnings:
        out += ["#### Warnings", ""] + [f"- {_cell(w)}" for w in census.warnings] + [""]
    return "\n".join(out)


def render_ranks_markdown(view: RanksView, top: int = 15, ops: bool = False) -> str:
    """The merged summary (with `ops` its operations), then each rank and the spread over
    ranks."""
    hosts = sr.hosts_line(view)
    return "\n".join([render_summary_markdown(view.merged, top, ops), "#### Ranks (per step)", "",
                      markdown_table(*sr.rank_rows(view)), "",
                      *([one_line(hosts), ""] if hosts else []), "#### Spread over ranks", "",
                      markdown_table(*sr.spread_rows(view)), ""])  # fmt: skip


def render_metric_table() -> str:
    """The table of every census key and step-timing key, from census.metrics: its definition on
    an nsys export, and its source in a torch.profiler (Kineto) trace."""
    lines = ["| key | shown as | unit | definition (nsys export) | Kineto trace |",
             "| --- | --- | --- | --- | --- |"]  # fmt: skip
    lines += [
        f"| `{m.name}` | {m.label} | {m.unit} | {m.definition} | {m.kineto} |"
        for m in (*METRICS, *TIMING_METRICS)
    ]
    return "\n".join(lines)

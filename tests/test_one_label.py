"""One label per metric across outputs (issue #59): every name a table, card or chart of the
terminal, markdown and HTML renderings (the dashboards) gives a census key is that key's label
in census.metrics (LABELS; a phase's own keys: PHASE_LABELS), the same in every format; the
rest are the tables' own words (NOT_METRICS)."""

from __future__ import annotations

import json
import re
from html.parser import HTMLParser

from census.api import diff_view, summary_view
from census.metrics import (
    GPU_SPAN_NS,
    HOST_LEAD_NS,
    KERNEL_COUNT,
    LABELS,
    LAUNCH_API_COUNT,
    PHASE_LABELS,
    STEP_TIME_NS,
)
from census.render import render
from tests.helpers.terminal import cells, headings, terminal_tables

SIDES = ("eager", "compiled")


# The tables' own words: headings of columns of names, counts and times that are no census key.
NOT_METRICS = {
    "phase", "step", "kernel", "class", "count", "time", "per step count", "per step time",
    "what", "bytes", "collective", "metric", "total", "per step (mean)", "per step", "Delta",
    "Delta %", "Kernel", "Change", "Class", "Phase", "Host range", "host range", "of idle",
    "Step accounting", "over median", "phase that grew", "phase that grew (GPU span)", "Δ",
    "eager", "compiled", "change", "Metric", "added (only in compiled)", "removed (only in eager)",
    "GPU idle",  # the idle-by-range table's: the GPU idle time in each host range
}  # fmt: skip
# Tables whose rows are census keys: their first cells are keys' names too.
KEY_ROWS = ("metric", "Metric", "Step accounting")


class _Tables(HTMLParser):
    """An HTML page's tables (their headings, their rows' first cells) and its cards' labels."""

    def __init__(self) -> None:
        super().__init__()
        self.tables: list[tuple[list[str], list[str]]] = []
        self.cards: list[str] = []
        self._into: list[str] | None = None
        self._text = ""
        self._first = False

    def handle_starttag(self, tag: str, attrs: list) -> None:
        if tag == "table":
            self.tables.append(([], []))
        elif tag == "tr":
            self._first = True
        elif tag == "th" and self.tables:
            self._into, self._text = self.tables[-1][0], ""
        elif tag == "td" and self.tables and self._first:
            self._into, self._text, self._first = self.tables[-1][1], "", False
        elif tag == "div" and dict(attrs).get("class") == "k":
            self._into, self._text = self.cards, ""

    def handle_data(self, data: str) -> None:
        self._text += data

    def handle_endtag(self, tag: str) -> None:
        if self._into is not None and tag in ("th", "td", "div"):
            self._into.append(self._text)
            self._into = None


def _key_names(tables: list[tuple[list[str], list[str]]]) -> list[str]:
    """Every heading, and the first cells of the tables whose rows are keys."""
    names = []
    for head, firsts in tables:
        names += head
        if head and head[0] in KEY_ROWS:
            names += firsts
    return names


def terminal_names(text: str) -> list[str]:
    tables = []
    for table in terminal_tables(text):
        tables.append((headings(table), [cells(ln)[0] for ln in table if ln.startswith("│")]))
    return _key_names(tables)


def markdown_names(text: str) -> list[str]:
    tables: list[tuple[list[str], list[str]]] = []
    lines = text.splitlines()
    for i, line in enumerate(lines):
        if not line.startswith("| ") or line.startswith("| ---"):
            continue
        parts = [p.strip() for p in line.strip().strip("|").split(" | ")]
        if i + 1 < len(lines) and lines[i + 1].startswith("| ---"):
            tables.append((parts, []))
        elif tables:
            tables[-1][1].append(parts[0])
    return _key_names(tables)


def html_names(text: str) -> list[str]:
    """The tables' and cards' names, and the charts' traces and waterfall steps."""
    parser = _Tables()
    parser.feed(text)
    figures = json.loads(text.split('id="figures">', 1)[1].split("</script>", 1)[0])
    traces = [t for f in figures for t in f["data"]]
    charts = [t["name"] for t in traces if t.get("name")]
    charts += [x for t in traces if t["type"] == "waterfall" for x in t["x"][1:-1]]
    return _key_names(parser.tables) + parser.cards + charts


def outputs() -> dict[str, list[str]]:
    """Every name of every table, card and chart of the summaries of the two samples (the
    compiled one's host ran ahead of its GPU) and their diff, in each format."""
    views = {"summary eager": summary_view("sample:eager"),
             "summary compiled": summary_view("sample:compiled"),
             "diff": diff_view("sample:eager", "sample:compiled")}  # fmt: skip
    found = {}
    for name, view in views.items():
        found[f"{name}, terminal"] = terminal_names(render(view, "terminal", width=400))
        found[f"{name}, markdown"] = markdown_names(render(view, "markdown"))
        found[f"{name}, html"] = html_names(render(view, "html"))
    return found


def plain(name: str) -> str:
    """A name without its table's decoration: indentation, a change's `Δ ` (`= Δ `), a side's
    label before it, a card's basis after it."""
    name = re.sub(r"\s+", " ", name).strip()
    name = name.removeprefix("= ").removeprefix("Δ ")
    for side in SIDES:
        name = name.removeprefix(f"{side} ")
    return re.sub(r" \((per step|whole capture)\)$", "", name)


def test_every_key_has_one_name_in_every_output() -> None:
    """Each name is a key's label (LABELS, a phase's PHASE_LABELS) or a table's own word; and
    no key is named two ways: a name that is neither fails, as `host lead (GPU end − step
    end)`, `step time (host)`, `kernels` and `launch calls` did."""
    labels = {plain(v) for v in (*LABELS.values(), *PHASE_LABELS.values())}
    assert len(labels) == len(set(LABELS.values()) | set(PHASE_LABELS.values()))
    assert not labels & NOT_METRICS
    found = outputs()
    assert all(found.values())
    unknown = {where: sorted({n for n in map(plain, names) if n not in labels | NOT_METRICS})
               for where, names in found.items()}  # fmt: skip
    assert {where: names for where, names in unknown.items() if names} == {}
    shown = {plain(n) for names in found.values() for n in names}
    for key in (STEP_TIME_NS, HOST_LEAD_NS, GPU_SPAN_NS, KERNEL_COUNT, LAUNCH_API_COUNT):
        assert LABELS[key] in shown, key


def test_a_second_name_fails() -> None:
    """The test above fails on a table that names a key its own way."""
    table = "| phase | host time | kernels |\n| --- | --- | --- |\n| forward | 1 ms | 3 |"
    names = {plain(n) for n in markdown_names(table)}
    labels = {plain(v) for v in (*LABELS.values(), *PHASE_LABELS.values())}
    assert names - labels - NOT_METRICS == {"host time", "kernels"}

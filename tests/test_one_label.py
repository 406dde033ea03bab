"""One label per metric across outputs (issue #59): every name a table, card or chart of the
terminal, markdown and HTML renderings (the dashboards) gives a census key is that key's label
in census.metrics (LABELS; a phase's own keys: PHASE_LABELS), the same in every format; the
rest are the tables' own words (NOT_METRICS). Walked: the samples' summaries and diff, the
Operations tables of the H200 Kineto pair (summary and diff), the per-rank NCCL table, the
experiment of `census ab` (tests/data/ab-demo); and the diff's sentences name keys as tables do."""

from __future__ import annotations

import json
import re
from html.parser import HTMLParser
from pathlib import Path

import pytest

from census.api import diff_view, experiment_view, summary_view
from census.metrics import (
    DURATION_NS,
    GPU_BUSY_NS,
    GPU_SPAN_NS,
    HOST_LEAD_NS,
    KERNEL_COUNT,
    KERNEL_TIME_NS,
    LABELS,
    LAUNCH_API_COUNT,
    NCCL_KERNEL_TIME_NS,
    PHASE_LABELS,
    STEP_TIME_NS,
    short_label,
)
from census.render import render
from tests.helpers.terminal import cells, headings, terminal_tables
from tests.nsysdb import Export

KINETO = Path(__file__).parent / "data" / "kineto"
ALL_REDUCE = "ncclDevKernel_AllReduce_Sum_f32_RING_LL(ncclDevKernelArgsStorage<4096>)"

SIDES = ("eager", "compiled")


# The tables' own words: headings of columns of names, counts and times that are no census key.
NOT_METRICS = {
    "phase", "step", "kernel", "class", "count", "time", "per step count", "per step time",
    "what", "bytes", "collective", "metric", "total", "per step (mean)", "per step", "Delta",
    "Delta %", "Kernel", "Change", "Class", "Phase", "Host range", "host range", "of idle",
    "Step accounting", "over median", "phase that grew", "phase that grew (GPU span)", "Δ",
    "eager", "compiled", "change", "Metric", "added (only in compiled)", "removed (only in eager)",
    "GPU idle",  # the idle-by-range table's: the GPU idle time in each host range
    # the Operations tables': the operations and their share of the kernel time
    "operation", "ops", "Operations: eager → compiled", "share",
    # the per-rank NCCL table's: its GPUs, its steps' count, the NCCL time's split (LEGEND)
    "rank", "GPU", "steps", "wait", "transfer", "unmatched", "exposed", "last",
    "compute", "NCCL wait", "NCCL transfer",  # its chart's parts of a rank's step
    # an experiment's: its arms, timed without nsys (no census key: an arm's own clock), memory
    "#", "arm", "side", "median", "p95", "arm median", "throughput", "excess", "clock",
    "peak alloc", "peak resv", "recompiles",
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
    """The tables' and cards' names, and the charts' traces (but an experiment's box per arm,
    named by its arm) and the step waterfall's steps (not the operations' waterfall's)."""
    parser = _Tables()
    parser.feed(text)
    figures = json.loads(text.split('id="figures">', 1)[1].split("</script>", 1)[0])
    traces = [t for f in figures for t in f["data"]]
    charts = [t["name"] for t in traces if t.get("name") and t["type"] != "box"]
    charts += [x for t in traces if t["type"] == "waterfall" and t["x"][0].endswith(" step")
               for x in t["x"][1:-1]]  # fmt: skip
    return _key_names(parser.tables) + parser.cards + charts


def names_of(view: object, ops: bool = False) -> dict[str, list[str]]:
    """Every name of every table, card and chart of `view` in each format (`ops`: a summary's
    Operations table too; the HTML summary has none)."""
    more = {"ops": True} if ops else {}
    return {"terminal": terminal_names(render(view, "terminal", width=400, **more)),
            "markdown": markdown_names(render(view, "markdown", **more)),
            "html": html_names(render(view, "html"))}  # fmt: skip


def outputs() -> dict[str, list[str]]:
    """Every name of every table, card and chart of the summaries of the two samples (the
    compiled one's host ran ahead of its GPU) and their diff, in each format."""
    views = {"summary eager": summary_view("sample:eager"),
             "summary compiled": summary_view("sample:compiled"),
             "diff": diff_view("sample:eager", "sample:compiled")}  # fmt: skip
    return {f"{name}, {fmt}": names for name, view in views.items()
            for fmt, names in names_of(view).items()}  # fmt: skip


def plain(name: str) -> str:
    """A name without its table's decoration: indentation, a change's `Δ ` (`= Δ `), a side's
    label before it, a card's basis after it."""
    name = re.sub(r"\s+", " ", name).strip()
    name = name.removeprefix("= ").removeprefix("Δ ")
    for side in SIDES:
        name = name.removeprefix(f"{side} ")
    return re.sub(r" \((per step|whole capture)\)$", "", name)


def unknown_names(found: dict[str, list[str]]) -> dict[str, list[str]]:
    """The names, by output, that are neither a key's label nor a table's own word."""
    labels = {plain(v) for v in (*LABELS.values(), *PHASE_LABELS.values())}
    unknown = {where: sorted({n for n in map(plain, names) if n not in labels | NOT_METRICS})
               for where, names in found.items()}  # fmt: skip
    return {where: names for where, names in unknown.items() if names}


def shown(found: dict[str, list[str]]) -> set[str]:
    return {plain(n) for names in found.values() for n in names}


def test_every_key_has_one_name_in_every_output() -> None:
    """Each name is a key's label (LABELS, a phase's PHASE_LABELS) or a table's own word; and
    no key is named two ways: a name that is neither fails, as `host lead (GPU end − step
    end)`, `step time (host)`, `kernels` and `launch calls` did."""
    labels = {plain(v) for v in (*LABELS.values(), *PHASE_LABELS.values())}
    assert len(labels) == len(set(LABELS.values()) | set(PHASE_LABELS.values()))
    assert not labels & NOT_METRICS
    found = outputs()
    assert all(found.values())
    assert unknown_names(found) == {}
    for key in (STEP_TIME_NS, HOST_LEAD_NS, GPU_SPAN_NS, KERNEL_COUNT, LAUNCH_API_COUNT):
        assert LABELS[key] in shown(found), key


def test_the_operations_tables_name_keys_by_their_labels() -> None:
    """The H200 Kineto pair's Operations tables (summary and diff) head their kernels, launch
    calls and kernel time by the labels: `A kernels`, `kernels` and `launches` were their own."""
    a, b = (KINETO / f"h200_{side}_3steps.kineto.json.gz" for side in SIDES)
    found = {f"summary, {fmt}": names for fmt, names in names_of(summary_view(a), ops=True).items()}
    found |= {f"diff, {fmt}": names
              for fmt, names in names_of(diff_view(a, b, labels=SIDES)).items()}  # fmt: skip
    assert unknown_names(found) == {}
    operations = {n for names in found.values() for n in names}
    kernels = LABELS[KERNEL_COUNT]
    assert {f"{side} {kernels}" for side in SIDES} | {
        kernels,
        "Operations: eager → compiled",
    } <= operations
    assert {LABELS[LAUNCH_API_COUNT], LABELS[KERNEL_TIME_NS], "eager ops"} <= operations


def rank_report(path: Path) -> Path:
    """One report of 2 ranks (pid r + 1 on GPU r), 2 steps each, an AllReduce in each step that
    rank 1 starts 1 µs late."""
    e = Export()
    launches = []
    for r in range(2):
        for k in range(2):
            base = (k + 1) * 1_000_000
            e.range(f"step {k}", base - 500, base + 500_000, r + 1)
            launches.append((base + 1000 * r, base - 300, base + 10_000, r))
    for start, api, end, r in sorted(launches):
        e.launch(ALL_REDUCE, api, start, end, pid=r + 1, device=r)
    return e.write(path)


def test_the_rank_table_names_keys_by_their_labels(tmp_path: Path) -> None:
    """The per-rank NCCL table heads its kernels, step time and NCCL time by the labels (they
    were `kernels`, `step time` beside `NCCL time`)."""
    found = names_of(summary_view(rank_report(tmp_path / "r.sqlite")))
    assert unknown_names(found) == {}
    for names in found.values():
        assert {LABELS[k] for k in (KERNEL_COUNT, STEP_TIME_NS, NCCL_KERNEL_TIME_NS)} <= set(names)


def test_an_experiment_names_keys_by_their_labels(ab_demo: Path) -> None:
    """`census ab`'s experiment: its arms' tables in their own words, its captures' diff in the
    keys' labels."""
    found = names_of(experiment_view(ab_demo))
    assert unknown_names(found) == {}
    assert {LABELS[STEP_TIME_NS], LABELS[GPU_BUSY_NS]} <= shown(found)


@pytest.mark.parametrize("clock", ["gpu", "host"])
def test_the_phase_sentence_names_keys_as_the_phase_tables_do(clock: str, ab_demo: Path) -> None:
    """The diff's sentence on the phase that changed most names its figures by their labels, in
    short_label's form (`kernels -7, launch calls -7` were its own): on the GPU's clock (the
    compiled sample's host ran ahead) by the phase's GPU span, else (the experiment's captures)
    by its time."""
    pair = (("sample:eager", "sample:compiled") if clock == "gpu" else
            tuple(ab_demo / side / "capture.sqlite" for side in "ab"))  # fmt: skip
    view = diff_view(*pair, labels=SIDES)
    assert view.diff.clock == clock
    [sentence] = [s for s in view.explanation if s.startswith("by phase")]
    key = GPU_SPAN_NS if clock == "gpu" else DURATION_NS
    said = [short_label(key, PHASE_LABELS), PHASE_LABELS[KERNEL_COUNT],
            PHASE_LABELS[LAUNCH_API_COUNT], PHASE_LABELS[GPU_BUSY_NS]]  # fmt: skip
    assert all(f"{label} " in sentence for label in said), sentence
    assert not re.search(r"(: |, )(kernels|launch calls|GPU busy|GPU span) [-+0-9]", sentence)


def test_a_second_name_fails() -> None:
    """The test above fails on a table that names a key its own way."""
    table = "| phase | host time | kernels |\n| --- | --- | --- |\n| forward | 1 ms | 3 |"
    names = {plain(n) for n in markdown_names(table)}
    labels = {plain(v) for v in (*LABELS.values(), *PHASE_LABELS.values())}
    assert names - labels - NOT_METRICS == {"host time", "kernels"}

"""Self-contained HTML dashboards (plotly.js inlined; nothing fetched at view time).

Every name reaches the page as text: HTML-escaped in markup and plotly labels, and as JSON data
that the kernel table inserts with textContent; its control characters show as `\\xNN` escapes.
"""

from __future__ import annotations

import base64
import functools
import gzip
import json
from typing import Any

from census.compare.diff import CensusDiff
from census.metrics import (
    DURATION_NS,
    GPU_BUSY_NS,
    GPU_IDLE_NS,
    GPU_SPAN_NS,
    HIDDEN_WHEN_ZERO,
    HOST_LEAD_NS,
    IDLE_AFTER_SYNC_NS,
    IDLE_LAUNCH_NS,
    IDLE_OTHER_NS,
    LABELS,
    PHASE_LABELS,
    STEP_TIME_NS,
    VIEW_CARDS,
    shown_in,
)
from census.model.census import Census
from census.render.charts import Chart, diff_charts, esc, rank_chart, summary_charts
from census.render.diffrows import IDLE_RANGES_TITLE as DIFF_RANGES_TITLE
from census.render.diffrows import (
    accounting_rows,
    basis_line,
    headers,
    headline_groups,
    ops_sections,
    phase_rows,
)
from census.render.diffrows import idle_range_rows as diff_range_rows
from census.render.summaryrows import (
    IDLE_RANGES_TITLE,
    idle_range_rows,
    nccl_rank_section,
    phase_keys,
)
from census.render.views import DiffView, RanksView, SummaryView
from census.units import fmt_metric, keep_units, one_line

PLOT_CONFIG = {"displaylogo": False, "responsive": True}

CSS = """
body{font-family:system-ui,-apple-system,Segoe UI,sans-serif;margin:24px;color:#1d2430;background:#fafbfc}
h1{font-size:22px;margin:0 0 4px} h2{font-size:17px;margin:28px 0 8px} .sub{color:#5b6675;font-size:13px}
.cards{display:flex;flex-wrap:wrap;gap:12px;margin:16px 0}
.card{background:#fff;border:1px solid #dde3ea;border-radius:8px;padding:10px 14px;min-width:150px}
.card .v{font-size:20px;font-weight:600} .card .k{font-size:12px;color:#5b6675}
.grid{display:grid;grid-template-columns:repeat(auto-fit,minmax(520px,1fr));gap:16px}
.panel{background:#fff;border:1px solid #dde3ea;border-radius:8px;padding:8px}
table{border-collapse:collapse;font-size:13px;background:#fff}
th,td{border:1px solid #dde3ea;padding:4px 8px;text-align:right;vertical-align:top}
th{background:#f0f3f7;cursor:pointer;user-select:none} td.l,th.l{text-align:left}
td.name{font-family:ui-monospace,monospace;font-size:12px;max-width:720px;word-break:break-all}
.panel h3{font-size:14px;font-weight:600;margin:4px 8px 0} .empty{color:#5b6675;padding:40px 8px}
.warn{color:#8a5300} ul.why li{margin:4px 0} input#filter{padding:4px 8px;width:320px;margin:6px 0}
.verdict{font-size:17px;font-weight:600;margin:0 0 14px;padding:8px 12px;background:#fff;
border-left:4px solid #457b9d}
"""

TABLE_JS = """
(function(){
  const holder = document.getElementById('kernel-data');
  if (!holder) return;  // a page without a kernel table (an experiment without captures)
  const data = JSON.parse(holder.textContent);
  const table = document.getElementById('kernels');
  const body = table.querySelector('tbody');
  const filter = document.getElementById('filter');
  let sortKey = data.sort, asc = false;
  function render(){
    const q = filter.value.toLowerCase();
    const rows = data.rows.filter(r => data.columns.some(c => String(r[c.key]).toLowerCase().includes(q)));
    rows.sort((a,b) => { const x=a[sortKey], y=b[sortKey];
      const c = (typeof x === 'number' && typeof y === 'number') ? x - y : String(x).localeCompare(String(y));
      return asc ? c : -c; });
    body.replaceChildren();
    for (const r of rows) {
      const tr = document.createElement('tr');
      for (const c of data.columns) {
        const td = document.createElement('td');
        td.textContent = c.fmt ? r[c.fmt] : r[c.key];
        if (c.left) td.className = c.key === 'name' ? 'l name' : 'l';
        tr.appendChild(td);
      }
      body.appendChild(tr);
    }
    document.getElementById('shown').textContent = rows.length + ' of ' + data.rows.length + ' kernels';
  }
  table.querySelectorAll('th').forEach((th, i) => th.addEventListener('click', () => {
    const k = data.columns[i].key; if (sortKey === k) asc = !asc; else { sortKey = k; asc = false; }
    render(); }));
  filter.addEventListener('input', render);
  render();
})();
"""

LOADER_JS = """
(async function(){
  const specs = JSON.parse(document.getElementById('figures').textContent);
  if (!('DecompressionStream' in window)) {
    document.querySelectorAll('.plot').forEach(
      d => d.textContent = 'This browser cannot unpack the charts (no DecompressionStream).');
    return;
  }
  const b64 = document.getElementById('plotly-gz').textContent;
  const bytes = Uint8Array.from(atob(b64), c => c.charCodeAt(0));
  const stream = new Blob([bytes]).stream().pipeThrough(new DecompressionStream('gzip'));
  const s = document.createElement('script');
  s.textContent = await new Response(stream).text();
  document.head.appendChild(s);
  for (let i = 0; i < specs.length; i++) {
    await Plotly.newPlot('fig-' + i, specs[i].data, specs[i].layout, CONFIG);
  }
  document.body.dataset.chartsReady = 'true';
})();
""".replace("CONFIG", json.dumps(PLOT_CONFIG))


def _json_script(element_id: str, data: Any) -> str:
    payload = (
        json.dumps(data).replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")
    )
    return f'<script type="application/json" id="{element_id}">{payload}</script>'


def figures(charts: list[Chart]) -> str:
    """Panels, each with its title above its chart (or the sentence saying why there is none),
    plus the charts' plotly JSON; drawn by LOADER_JS once plotly.js is unpacked."""
    panels, specs = [], []
    for chart in charts:
        title = f"<h3>{esc(chart.title)}</h3>"
        if chart.figure is None:
            panels.append(
                f"<div class='panel'>{title}<p class='empty'>{esc(chart.empty)}</p></div>"
            )
            continue
        fig = chart.figure
        fig.update_layout(
            margin={"l": 60, "r": 20, "t": 36, "b": 50},
            template="plotly_white",
            height=fig.layout.height or 380,
        )
        panels.append(
            f"<div class='panel'>{title}<div class='plot' id='fig-{len(specs)}'></div></div>"
        )
        specs.append(json.loads(fig.to_json()))
    return "<div class='grid'>" + "".join(panels) + "</div>" + _json_script("figures", specs)


@functools.lru_cache(maxsize=1)
def _plotly_gz_b64() -> str:
    """plotly.js, gzipped and base64-encoded: a third of its size, unpacked in the browser."""
    from plotly.offline import get_plotlyjs

    return base64.b64encode(gzip.compress(get_plotlyjs().encode(), mtime=0)).decode()


def page(title: str, subtitle: str, body: str, lead: str = "") -> str:
    """A self-contained page; `lead` (the verdict, or what limits a capture's step) is its first
    line, above the title."""
    # Nothing census writes into the body is a control character (the JSON in it is escaped):
    # those there come from names and labels, and show as `\xNN`, as in the terminal.
    title, subtitle, body = one_line(title), one_line(subtitle), one_line(body)
    first = f"<p class='verdict'>{esc(one_line(lead))}</p>" if lead else ""
    return (
        "<!DOCTYPE html><html><head><meta charset='utf-8'>"
        f"<title>{esc(title)}</title><style>{CSS}</style></head><body>{first}"
        f"<h1>{esc(title)}</h1><div class='sub'>{esc(subtitle)}</div>{body}"
        f"<script type='text/plain' id='plotly-gz'>{_plotly_gz_b64()}</script>"
        f"<script>{TABLE_JS}</script><script>{LOADER_JS}</script></body></html>"
    )


def _kernel_table(columns: list[dict[str, Any]], rows: list[dict[str, Any]], sort: str,
                  title: str = "Kernels") -> str:  # fmt: skip
    head = "".join(
        f"<th class='{'l' if c.get('left') else ''}'>{esc(c['label'])}</th>" for c in columns
    )
    return (
        f"<h2>{esc(title)}</h2><input id='filter' placeholder='filter by name or class'> "
        "<span id='shown' class='sub'></span>"
        f"<table id='kernels'><thead><tr>{head}</tr></thead><tbody></tbody></table>"
        + _json_script("kernel-data", {"columns": columns, "rows": rows, "sort": sort})
    )


def _cards(items: list[tuple[str, str]]) -> str:
    return (
        "<div class='cards'>"
        + "".join(
            f"<div class='card'><div class='v'>{esc(v)}</div><div class='k'>{esc(k)}</div></div>"
            for k, v in items
        )
        + "</div>"
    )


def html_table(head: list[str], rows: list[list[str]], left: int = 1) -> str:
    """An HTML table of display strings, escaped, its first `left` columns left-aligned."""
    th = "".join(f"<th class='{'l' if i < left else ''}'>{esc(h)}</th>" for i, h in enumerate(head))
    trs = "".join(
        "<tr>"
        + "".join(f"<td class='{'l' if i < left else ''}'>{esc(c)}</td>" for i, c in enumerate(r))
        + "</tr>"
        for r in rows
    )
    return f"<table><thead><tr>{th}</tr></thead><tbody>{trs}</tbody></table>"


def render_summary_html(view: SummaryView) -> str:
    """The dashboard of one capture: its title the view's label, its subtitle what the user
    named it (not a cache path)."""
    census = view.census
    warnings = "".join(f"<li class='warn'>{esc(w)}</li>" for w in census.warnings)
    body = (
        _cards(_summary_cards(census))
        + (f"<ul>{warnings}</ul>" if warnings else "")
        + _idle_range_table(census)
        + _phase_table(census)
        + _rank_table(view)
        + figures([*rank_chart(view), *summary_charts(census)])
        + _summary_kernels(census)
    )
    src = census.source
    gpus = ", ".join(g.name or f"GPU {g.id}" for g in src.gpus) or "no GPU"
    steps = f"{census.step_count} step(s)"
    sub = f"{view.shown or view.label} · {src.traced_by} · {gpus} · {steps}"
    return page(f"census: {view.label}", sub, body, view.lead)


def _rank_table(view: SummaryView) -> str:
    """With several ranks: their NCCL time split into wait and transfer, and the lines under."""
    section = nccl_rank_section(view)
    if section is None:
        return ""
    title, table, lines = section
    notes = "".join(f"<p>{esc(line)}</p>" for line in lines)
    return f"<h2>{esc(title)}</h2>" + html_table(*table) + notes


def _summary_cards(census: Census) -> list[tuple[str, str]]:
    """The step's cards (with steps), then the launched work's, per step or whole capture."""
    per = census.per_step() or census.totals.as_dict()
    basis = "per step" if census.step_count else "whole capture"
    keys = [m.name for m in shown_in(VIEW_CARDS) if m.name not in HIDDEN_WHEN_ZERO or per[m.name]]
    cards = [(f"{LABELS[k]} ({basis})", fmt_metric(k, per[k])) for k in keys]
    timing = census.per_step_timing()
    if timing:
        return _timing_cards(timing, bool(census.host_ran_ahead())) + cards
    return cards


def _summary_kernels(census: Census) -> str:
    """Every kernel, sortable and filtered in the page, by time first; per step too, when the
    capture has steps (without, the whole capture's alone, and the title says so)."""
    n = census.step_count
    columns = [
        {"key": "name", "label": "kernel", "left": True},
        {"key": "cls", "label": "class", "left": True},
        {"key": "count", "label": "count"},
        {"key": "time_ns", "label": "time", "fmt": "time"},
        {"key": "per_step_count", "label": "per step count"},
        {"key": "per_step_time_ns", "label": "per step time", "fmt": "per_step_time"},
    ][: 6 if n else 4]
    rows = [
        {
            "name": one_line(k.name),
            "cls": k.cls,
            "count": k.count,
            "time_ns": k.time_ns,
            "time": keep_units(fmt_metric("time_ns", k.time_ns)),
            "per_step_count": round(k.step_count / n, 2) if n else 0,
            "per_step_time_ns": k.step_time_ns / n if n else 0,
            "per_step_time": keep_units(fmt_metric("time_ns", k.step_time_ns / n)) if n else "",
        }
        for k in census.kernels
    ]
    title = "Kernels" if n else "Kernels: the whole capture (no step ranges, so none per step)"
    return _kernel_table(columns, rows, "time_ns", title)


def _timing_cards(timing: dict[str, float | None], ahead: bool) -> list[tuple[str, str]]:
    """The step's cards: its window's, then its GPU span; when the host ran ahead of the GPU,
    the GPU span and how long after the step's range its GPU work ended first."""
    window = [(f"{LABELS[k]} (per step)", fmt_metric(k, timing[k]))
              for k in (STEP_TIME_NS, GPU_BUSY_NS, GPU_IDLE_NS)]  # fmt: skip
    span = (f"{LABELS[GPU_SPAN_NS]} (per step)", fmt_metric(GPU_SPAN_NS, timing[GPU_SPAN_NS]))
    if not ahead:
        return [*window, span]
    lead = (f"{LABELS[HOST_LEAD_NS]} (per step)",
            fmt_metric(HOST_LEAD_NS, timing[HOST_LEAD_NS], signed=True))  # fmt: skip
    return [span, lead, *window]


def _idle_range_table(census: Census) -> str:
    ranges = idle_range_rows(census)
    return f"<h2>{esc(IDLE_RANGES_TITLE)}</h2>{html_table(*ranges)}" if ranges else ""


def _phase_table(census: Census) -> str:
    """Per phase, per step (mean): its time, GPU busy, idle split, the phase tables' census keys
    (census.render.summaryrows.phase_keys) and GPU span (first when the host ran ahead of the
    GPU, the phase's time then the host's)."""
    per = census.per_phase()
    if not per:
        return ""
    keys = phase_keys(census)
    time, busy, span = (PHASE_LABELS[k] for k in (DURATION_NS, GPU_BUSY_NS, GPU_SPAN_NS))
    idle = (IDLE_AFTER_SYNC_NS, IDLE_LAUNCH_NS, IDLE_OTHER_NS)
    head = ["phase", time, busy, *(LABELS[k].strip() for k in idle), *(k.label for k in keys)]
    rows = [[name, fmt_metric(DURATION_NS, m[DURATION_NS]), fmt_metric("x_ns", m[GPU_BUSY_NS]),
             fmt_metric("x_ns", m[IDLE_AFTER_SYNC_NS]), fmt_metric("x_ns", m[IDLE_LAUNCH_NS]),
             fmt_metric("x_ns", m[IDLE_OTHER_NS]), *(fmt_metric(k.name, m[k.name]) for k in keys)]
            for name, m in per.items()]  # fmt: skip
    spans = [fmt_metric(GPU_SPAN_NS, m[GPU_SPAN_NS]) for m in per.values()]
    if census.host_ran_ahead():
        head = ["phase", span, *head[1:]]
        rows = [[r[0], s, *r[1:]] for r, s in zip(rows, spans, strict=True)]
    else:
        head = [*head, span]
        rows = [[*r, s] for r, s in zip(rows, spans, strict=True)]
    if all(m[IDLE_OTHER_NS] is None for m in per.values()):  # no idle split: no empty columns
        keep = [i for i, h in enumerate(head) if not h.startswith("idle ")]
        head, rows = [head[i] for i in keep], [[r[i] for i in keep] for r in rows]
    return "<h2>Phases (per step, mean; GPU span: unclipped)</h2>" + html_table(head, rows)


def diff_parts(d: CensusDiff, explanation: list[str]) -> tuple[str, list[Chart], str]:
    """(explanation and tables, charts, kernel table) of a diff's page: the explanation (its
    sentences as given: the page shows the headline above its title) before the tables."""
    h = headers(d)
    why = "".join(f"<li>{esc(s)}</li>" for s in explanation)
    # The problems open the explanation already; the page lists the notes.
    warnings = "".join(f"<li class='warn'>{esc(w)}</li>" for w in d.comparability.notes)
    acc = accounting_rows(d)
    head = (
        (f"<h2>Why</h2><ul class='why'>{why}</ul>" if why else "")
        + (f"<ul>{warnings}</ul>" if warnings else "")
        + f"<p class='sub'>{esc(basis_line(d))}</p>"
        + "".join(
            f"<h2>{esc(t)}</h2>"
            + html_table(h["headline"], rows)
            + (html_table(h["accounting"], acc) if i == 0 and acc else "")
            for i, (t, rows) in enumerate(headline_groups(d))
        )  # the step accounting under the step-window table, where it adds up
        + _section("Phases (per step)", h["phases"], phase_rows(d))
        + _section(DIFF_RANGES_TITLE, h["idle_ranges"], diff_range_rows(d))
        + (f"<p class='sub'>{esc(d.ops.missing)}</p>" if d.ops and d.ops.missing else "")
        + "".join(_section(title, h["ops"], rows, 2) for title, rows in ops_sections(d))
    )
    return head, diff_charts(d), _kernel_table(*_kernel_changes(d), "abs_delta")


def _section(title: str, head: list[str], rows: list[list[str]], left: int = 1) -> str:
    """A titled table (its first `left` columns text), or nothing without rows."""
    return f"<h2>{esc(title)}</h2>{html_table(head, rows, left)}" if rows else ""


def _kernel_changes(d: CensusDiff) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """(columns, rows) of the diff page's sortable kernel table."""
    la, lb = d.labels
    columns = [
        {"key": "name", "label": "kernel", "left": True},
        {"key": "cls", "label": "class", "left": True},
        {"key": "bucket", "label": "change", "left": True},
        {"key": "count_a", "label": f"{la} count"},
        {"key": "count_b", "label": f"{lb} count"},
        {"key": "time_a", "label": f"{la} time", "fmt": "time_a_text"},
        {"key": "time_b", "label": f"{lb} time", "fmt": "time_b_text"},
        {"key": "abs_delta", "label": "Δ time", "fmt": "delta_text"},
    ]
    rows = [
        {
            "name": one_line(k.name),
            "cls": k.cls,
            "bucket": k.bucket,
            "count_a": round(k.count.a or 0, 2),
            "count_b": round(k.count.b or 0, 2),
            "time_a": k.time_ns.a or 0,
            "time_b": k.time_ns.b or 0,
            "time_a_text": keep_units(fmt_metric("t_ns", k.time_ns.a)),
            "time_b_text": keep_units(fmt_metric("t_ns", k.time_ns.b)),
            "abs_delta": abs(k.time_ns.delta or 0),
            "delta_text": keep_units(fmt_metric("t_ns", k.time_ns.delta, signed=True)),
        }
        for k in d.kernels
    ]
    return columns, rows


def render_diff_html(view: DiffView) -> str:
    """The dashboard of a diff; the view's sources: what the user named the two sides (the
    subtitle)."""
    d, explanation, sources = view.diff, view.explanation, view.sources
    head, charts, tail = diff_parts(d, explanation[1:])
    la, lb = d.labels
    sa, sb = sources or d.labels
    subtitle = f"{la}: {sa} vs {lb}: {sb}" if sources else f"{la} vs {lb}"
    lead = explanation[0] if explanation else ""
    return page(f"census: {la} vs {lb}", subtitle, head + figures(charts) + tail, lead)


def render_ranks_html(view: RanksView) -> str:
    """A rank folder's dashboard: its merged summary."""
    return render_summary_html(view.merged)

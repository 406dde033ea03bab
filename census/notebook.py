"""Short forms of a Census and a CensusDiff for notebooks: a one-line `repr` (at most REPR_CHARS
characters, whatever the capture's size) and a small HTML card (`_repr_html_`).

A leaf beside the model: it reads the objects' fields and formats them with census.units, so the
model and the diff can answer `repr()` without importing a later stage. The card keeps the step
window and the work launched in the step in separate tables, as every other output does.
"""

from __future__ import annotations

import html
from typing import Any

from census.metrics import LABELS, LAUNCHED_TITLE, METRIC_KEYS, WINDOW_TITLE
from census.units import clip, fmt_count, fmt_metric, fmt_ns, fmt_pct, one_line

REPR_CHARS = 300
WINDOW_KEYS = ("step_time_ns", "gpu_busy_ns", "gpu_idle_ns")


def census_repr(census: Any) -> str:
    """`<Census 'eager.sqlite': 20 steps, 247 kernels/step, step 11.70 ms, GPU busy 4.94 ms>`."""
    timing = census.per_step_timing()
    if timing is None:
        body = f"no steps, {fmt_count(census.totals.kernel_count)} kernels"
    else:
        per_step = census.per_step() or {}
        body = (f"{census.step_count} steps, {fmt_count(per_step['kernel_count'])} kernels/step, "
                f"step {fmt_ns(timing['step_time_ns'])}, GPU busy "
                f"{fmt_ns(timing['gpu_busy_ns'])}")  # fmt: skip
    warned = f", {len(census.warnings)} warnings" if census.warnings else ""
    return _bounded("Census", census.source.path, f"{body}{warned}")


def diff_repr(d: Any) -> str:
    """`<CensusDiff 'eager -> compiled': step -2.55 ms (-21.8%), kernels/step -22>`."""
    step, kernels = d.metrics["step_time_ns"], d.metrics["kernel_count"]
    body = (f"step {fmt_ns(step.delta, signed=True)} ({fmt_pct(step.pct)}), "
            f"kernels{'/step' if d.per_step else ''} {fmt_count(kernels.delta, signed=True)}")  # fmt: skip
    if d.within_noise:
        body += ", step within noise"
    if d.comparability.problems:
        n = len(d.comparability.problems)
        body = f"NOT COMPARABLE ({n} problem{'s' if n > 1 else ''}); " + body
    a, b = (clip(_safe(label), 40) for label in d.labels)
    return _bounded("CensusDiff", f"{a} -> {b}", body)


def census_html(census: Any) -> str:
    """Source, steps, then the per-step means (or totals) in two tables."""
    timing = census.per_step_timing()
    means = census.per_step()
    head = (f"<p><b>{_esc(census.source.path)}</b>: {census.step_count} steps; GPUs "
            f"{_esc(', '.join(g.name or 'unknown' for g in census.source.gpus) or 'unknown')}"
            "</p>")  # fmt: skip
    column = "per step (mean)" if means is not None else "total"
    launched = means if means is not None else census.totals.as_dict()
    parts = [head, *(f"<p>warning: {_esc(w)}</p>" for w in census.warnings[:5])]
    if timing is not None:
        parts.append(_table(WINDOW_TITLE, ["metric", column],
                            [[LABELS[k], fmt_metric(k, timing[k])] for k in WINDOW_KEYS]))  # fmt: skip
    parts.append(_table(LAUNCHED_TITLE, ["metric", column],
                        [[LABELS[k], fmt_metric(k, launched[k])] for k in METRIC_KEYS]))  # fmt: skip
    return "<div>" + "".join(parts) + "</div>"


def diff_html(d: Any) -> str:
    """What makes the sides not comparable first, then the step window and the work launched,
    each side and the delta."""
    a, b = d.labels
    parts = [f"<p><b>{_esc(b)}</b> against <b>{_esc(a)}</b></p>"]
    parts += [f"<p><b>not directly comparable:</b> {_esc(p)}</p>" for p in d.comparability.problems]
    if d.within_noise:
        parts.append(f"<p>step time: within noise (±{_esc(fmt_ns(d.noise_ns))})</p>")
    header = ["metric", a, b, "delta", "delta %"]
    for title, keys in ((WINDOW_TITLE, WINDOW_KEYS), (LAUNCHED_TITLE, METRIC_KEYS)):
        rows = [_delta_row(k, d.metrics[k]) for k in keys if k in d.metrics]
        if rows:
            parts.append(_table(title, header, rows))
    return "<div>" + "".join(parts) + "</div>"


def _delta_row(key: str, delta: Any) -> list[str]:
    return [LABELS[key], fmt_metric(key, delta.a), fmt_metric(key, delta.b),
            fmt_metric(key, delta.delta, signed=True), fmt_pct(delta.pct)]  # fmt: skip


def _table(title: str, header: list[str], rows: list[list[str]]) -> str:
    head = "".join(f"<th>{_esc(h)}</th>" for h in header)
    body = "".join(
        "<tr>" + "".join(f"<td>{_esc(cell)}</td>" for cell in row) + "</tr>" for row in rows
    )
    return f"<table><caption>{_esc(title)}</caption><tr>{head}</tr>{body}</table>"


def _bounded(kind: str, name: str, body: str) -> str:
    """`<kind 'name': body>` in at most REPR_CHARS characters: the name is cut first."""
    room = REPR_CHARS - len(kind) - len(body) - 7
    text = f"<{kind} {clip(_safe(name), max(room, 12))!r}: {body}>"
    return clip(text, REPR_CHARS)


def _safe(text: str) -> str:
    """Control characters as escapes: a repr is shown by terminals too."""
    return one_line(text)


def _esc(text: str) -> str:
    return html.escape(_safe(str(text)))

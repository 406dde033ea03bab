"""Short forms of a Census, a CensusDiff and an Experiment for notebooks: a one-line `repr` (at
most REPR_CHARS characters, whatever the capture's size) and a small HTML card (`_repr_html_`).
Each leads with what the CLI says first: a capture's limiter (and that the host ran ahead of the
GPU, its step then timed by the GPU span), a diff's verdict sentence (census.compare.headline,
asked of the diff), an experiment's verdict on its arms.

The model and the diff answer `repr()` through census.model.shown, which census/__init__.py
points at census.api.notebook: it builds the result's view (census.render.views, the limiter and
first line computed there) and hands it here; the model imports no renderer, and this module
computes nothing every output says. It reads the views' fields and formats them with
census.units. The card keeps the step window and the work launched in the step in separate
tables, as every other output does.
"""

from __future__ import annotations

import html
from typing import Any

from census.findings.limiter import limiter_sentence, steps_ahead
from census.metrics import (
    GPU_BUSY_NS,
    GPU_IDLE_NS,
    GPU_SPAN_NS,
    KERNEL_COUNT,
    LABELS,
    METRIC_KEYS,
    STEP_TIME_NS,
    WINDOW_TITLE,
    launched_title,
)
from census.paths import shown_path
from census.render.views import DiffView, ExperimentView, SummaryView
from census.units import (
    clip,
    first_clause,
    fmt_count,
    fmt_metric,
    fmt_ns,
    fmt_pct,
    keep_units,
    one_line,
)

REPR_CHARS = 300
WINDOW_KEYS = (STEP_TIME_NS, GPU_BUSY_NS, GPU_IDLE_NS)


def census_repr(view: SummaryView) -> str:
    """`<Census 'sample:eager': 20 steps, 251 kernels/step, GPU span 15.35 ms (the host ran ahead
    by ~3 steps); GPU-bound: GPU busy 97% of the step>`; a capture whose host kept pace shows
    its step and GPU busy time instead of the span."""
    census = view.census
    timing = census.per_step_timing()
    if timing is None:
        body = f"no steps, {fmt_count(census.totals.kernel_count)} kernels"
    else:
        per_step = census.per_step() or {}
        if census.host_ran_ahead():
            n = steps_ahead(census)
            time = (f"GPU span {fmt_ns(timing[GPU_SPAN_NS])} (the host ran ahead by ~{n} "
                    f"step{'s' if n > 1 else ''})")  # fmt: skip
        else:
            time = f"step {fmt_ns(timing[STEP_TIME_NS])}, GPU busy {fmt_ns(timing[GPU_BUSY_NS])}"
        bound = f"; {limiter_sentence(view.limiter)}" if view.limiter else ""
        body = (f"{census.step_count} steps, {fmt_count(per_step[KERNEL_COUNT])} kernels/step, "
                f"{time}{bound}")  # fmt: skip
    warned = f", {len(census.warnings)} warnings" if census.warnings else ""
    return _bounded("Census", shown_path(census.source.path), f"{body}{warned}")


def diff_repr(view: DiffView) -> str:
    """`<CensusDiff 'eager -> compiled': compiled is faster than eager on the GPU: GPU span -1.76
    ms/step (-11.5%) (beyond the ±166.9 µs spread of one capture each), kernels/step -22>`: the
    verdict sentence up to its first `;` (the diff's headline, census.compare.headline); without
    one, the step-time change, or where a side has no steps, the first comparability problem."""
    from census.compare.headline import headline

    d = view.diff
    verdict = headline(d)
    kernels = d.metrics[KERNEL_COUNT]
    step = d.metrics[STEP_TIME_NS]
    if verdict:
        body = first_clause(one_line(verdict))
    elif step.delta is None:  # a side without steps: what the comparison is, not `step  ()`
        problems = d.comparability.problems
        body = first_clause(one_line(problems[0])) if problems else "no step time on both sides"
    else:
        body = f"step {fmt_ns(step.delta, signed=True)} ({fmt_pct(step.pct)})"
        body += ", step within noise" if d.within_noise else ""
    body += "; " if step.delta is None and not verdict else ", "
    body += f"kernels{'/step' if d.per_step else ''} {fmt_count(kernels.delta, signed=True)}"
    if d.comparability.problems:
        n = len(d.comparability.problems)
        body = f"NOT COMPARABLE ({n} problem{'s' if n > 1 else ''}); " + body
    a, b = (clip(_safe(label), 40) for label in d.labels)
    return _bounded("CensusDiff", f"{a} -> {b}", body)


def experiment_repr(view: ExperimentView) -> str:
    """`<Experiment 'eager -> compiled': compiled is faster than eager by 1.75 ms/step (...),
    over 8 uncaptured arms; captured>`: the arms' verdict (census.compare.ab.experiment's
    verdict_sentence), and whether each side was captured."""
    from census.compare.ab.experiment import verdict_sentence

    exp = view.experiment
    verdict = verdict_sentence(exp.stats, exp.labels)
    captured = "captured" if exp.diff is not None else "no captures"
    a, b = (clip(_safe(label), 40) for label in exp.labels)
    return _bounded("Experiment", f"{a} -> {b}", f"{one_line(verdict)}; {captured}")


def census_html(view: SummaryView) -> str:
    """What the user named it (`sample:eager`, not the cache's copy), the summary's first line
    (the host ran ahead; the limiter), then the per-step means (or totals) in two tables."""
    census, lead = view.census, view.lead
    timing = census.per_step_timing()
    means = census.per_step()
    gpus = ", ".join(g.name or "unknown" for g in census.source.gpus) or "unknown"
    head = (f"<p><b>{_esc(shown_path(census.source.path))}</b>: {census.step_count} steps; "
            f"GPUs {_esc(gpus)}</p>")  # fmt: skip
    column = "per step (mean)" if means is not None else "total"
    launched = means if means is not None else census.totals.as_dict()
    parts = [head, *([f"<p><b>{_esc(lead)}</b></p>"] if lead else [])]
    parts += [f"<p>warning: {_esc(w)}</p>" for w in census.warnings[:5]]
    if timing is not None:
        parts.append(_table(WINDOW_TITLE, ["metric", column],
                            [[LABELS[k], fmt_metric(k, timing[k])] for k in WINDOW_KEYS]))  # fmt: skip
        launched = {**launched, GPU_SPAN_NS: timing[GPU_SPAN_NS]}
    keys = _launched_keys(bool(census.host_ran_ahead()), GPU_SPAN_NS in launched)
    parts.append(_table(launched_title(means is not None), ["metric", column],
                        [[LABELS[k], fmt_metric(k, launched[k])] for k in keys]))  # fmt: skip
    return "<div>" + "".join(parts) + "</div>"


def _launched_keys(ahead: bool, span: bool) -> tuple[str, ...]:
    """The launched work's rows: its GPU span first when the host ran ahead (the step's time on
    the GPU's clock), last otherwise; none without steps."""
    if not span:
        return METRIC_KEYS
    return (GPU_SPAN_NS, *METRIC_KEYS) if ahead else (*METRIC_KEYS, GPU_SPAN_NS)


def diff_html(view: DiffView) -> str:
    """What makes the sides not comparable first, then the verdict sentence (the diff's
    headline), each side's limiter, then the step window and the work launched, each side and
    the delta."""
    from census.compare.headline import headline

    d = view.diff
    verdict = headline(d)
    a, b = d.labels
    parts = [f"<p><b>{_esc(b)}</b> against <b>{_esc(a)}</b></p>"]
    parts += [f"<p><b>not directly comparable:</b> {_esc(p)}</p>" for p in d.comparability.problems]
    if verdict:
        parts.append(f"<p><b>{_esc(verdict)}</b></p>")
    elif d.within_noise:
        parts.append(f"<p>step time: within noise (±{_esc(fmt_ns(d.noise_ns))})</p>")
    for label, limiter in ((a, view.a.limiter), (b, view.b.limiter)):
        if limiter:
            parts.append(f"<p>{_esc(label)}: {_esc(limiter_sentence(limiter))}</p>")
    header = ["metric", a, b, "delta", "delta %"]
    launched = _launched_keys(d.clock == "gpu", True)
    for title, keys in ((WINDOW_TITLE, WINDOW_KEYS), (launched_title(d.per_step), launched)):
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
    """Text for the card: control characters as escapes, a number and its unit on one line."""
    return html.escape(keep_units(_safe(str(text))))

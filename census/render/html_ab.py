"""The dashboard of an A/B experiment: the verdict, the end-to-end table, the arms' phases, every
arm's steps in run order (a strip plot), then the census diff of the captures."""

from __future__ import annotations

from census.render.ab import (
    ARM_HEAD,
    E2E_HEAD,
    TAIL_HEAD,
    TAIL_TITLE,
    arm_rows,
    captures_title,
    delta_line,
    e2e_rows,
    filled,
    p95_notes,
    pairs_line,
    phase_head,
    phase_rows,
    phase_title,
    tail_rows,
)
from census.render.charts import Chart, esc
from census.render.html import diff_parts, figures, html_table, page
from census.render.views import ExperimentView

COLORS = {"a": "#457b9d", "b": "#e76f51"}


def render_experiment_html(view: ExperimentView) -> str:
    """The experiment's page: verdict, tables, every arm's step times as a strip plot, then its
    captures' diff."""
    import plotly.graph_objects as go

    exp, parts = view.experiment, view.explanation
    strip = go.Figure()
    for arm in exp.arms:
        label = exp.labels[0 if arm.side == "a" else 1]
        name = f"{arm.index}: {label}" + (" (warm, discarded)" if arm.discarded else "")
        strip.add_trace(
            go.Box(
                y=[t / 1e6 for t in arm.step_time_ns],
                name=esc(name),
                boxpoints="all",
                jitter=0.4,
                pointpos=0,
                marker_color="#999999" if arm.discarded else COLORS[arm.side],
                showlegend=False,
            )
        )
    strip.update_layout(height=420)
    figs = [Chart("Step time of every arm, in run order (ms, uncaptured)", strip)]
    sides_note, arms_note = p95_notes(exp)
    head = (
        "".join(f"<p class='warn'>warning: {esc(w)}</p>" for w in parts.warnings)
        + html_table(E2E_HEAD, e2e_rows(exp))
        + (f"<p class='sub'>{esc(sides_note)}</p>" if sides_note else "")
        + f"<p>{esc(delta_line(exp))}</p>"
        + f"<p class='sub'>{esc(pairs_line(exp.stats, exp.labels))}</p>"
        + _phases(view)
        + html_table(*filled(ARM_HEAD, arm_rows(exp)))
        + (f"<p class='sub'>{esc(arms_note)}</p>" if arms_note else "")
    )
    tail = ""
    if view.diff is not None:
        diff_head, diff_figs, tail = diff_parts(view.diff.diff, view.diff.explanation)
        head += f"<h2>{esc(captures_title(view))}</h2>" + diff_head
        figs += diff_figs
    else:
        head += "".join(f"<p>{esc(line)}</p>" for line in parts.findings)
    title = f"census ab: {exp.labels[0]} vs {exp.labels[1]}"
    subtitle = f"{len(exp.arms) - 1} uncaptured arms (+1 warm, discarded), ABBA BAAB order"
    # the equivalence, when asked, is said with the verdict at the top of the page
    lead = "; ".join([parts.verdict, *parts.said_next])
    return page(title, subtitle, head + figures(figs) + tail, lead)


def _phases(view: ExperimentView) -> str:
    """The arms' phase table and what it says ("" when the arms have no phase in common)."""
    exp = view.experiment
    table = ""
    if exp.stats.phases:
        table = f"<h2>{esc(phase_title(exp.labels))}</h2>" + html_table(
            phase_head(exp.stats), phase_rows(exp.stats)
        )
    tails = f"<h2>{esc(TAIL_TITLE)}</h2>" + html_table(*filled(TAIL_HEAD, tail_rows(exp)))
    lines = "".join(f"<p>{esc(line)}</p>" for line in view.explanation.phases)
    notes = "".join(f"<p>{esc(line)}</p>" for line in view.explanation.arm_notes)
    return table + lines + (tails if exp.tails else "") + notes

"""The per-step lists of the JSON documents (`steps`, `timing.steps`), written as text straight
from the steps: the same bytes as json.dumps of their dicts (census.render.json_docs._step and
_step_timing), without a dict per step and phase. They are 90% of a summary document (112 MB
at 10^7 kernels): building and encoding the dicts took 1.9 s of one core there.

A row's numbers (ints, or None where a figure was not computed) go through one %-template; its
text (a step's or phase's name) through json.dumps. `dumps` writes a document whose values may
hold such text (Raw) as json.dumps writes it with the lists in their place.
"""

from __future__ import annotations

import json
from typing import Any

from census.definitions import IDLE_KEYS, METRIC_KEYS
from census.model import METRIC_VALUES, Phase, Step
from census.rows import PHASE_ROW_KEYS, idle_row, phase_row


class Raw(str):
    """JSON text to be written as it is."""


def _template(keys: tuple[str, ...]) -> str:
    """', "k": %s' for each key: the numbers of a row after its name."""
    return "".join(f", {json.dumps(k)}: %s" for k in keys)


_STEP = _template(("start_ns", "end_ns", *METRIC_KEYS))
_PHASE = _template(PHASE_ROW_KEYS)
_TIMING = _template(("step_time_ns", "gpu_busy_ns", "gpu_idle_ns", "gpu_start_ns", "gpu_span_ns",
                     "host_lead_ns", *IDLE_KEYS))  # fmt: skip


def _numbers(template: str, values: tuple) -> str:
    # ints render as json.dumps renders them; None as "None", which no number contains
    return (template % values).replace("None", "null")


def _phase(p: Phase) -> str:
    return '{"name": ' + json.dumps(p.name) + _numbers(_PHASE, phase_row(p)) + "}"


def steps_text(steps: tuple[Step, ...]) -> Raw:
    """json.dumps([json_docs._step(s) for s in steps])."""
    rows = (
        '{"name": ' + json.dumps(s.name)
        + _numbers(_STEP, (s.start_ns, s.end_ns, *METRIC_VALUES(s.metrics)))
        + ', "phases": [' + ", ".join(map(_phase, s.phases)) + "]}"
        for s in steps
    )  # fmt: skip
    return Raw("[" + ", ".join(rows) + "]")


def timing_text(steps: tuple[Step, ...]) -> Raw:
    """json.dumps([json_docs._step_timing(s) for s in steps])."""
    rows = (
        '{"name": ' + json.dumps(s.name)
        + _numbers(_TIMING, (s.duration_ns, s.gpu_busy_ns, s.gpu_idle_ns, s.gpu_start_ns,
                             s.gpu_span_ns, s.host_lead_ns, *idle_row(s.idle)))
        + "}"
        for s in steps
    )  # fmt: skip
    return Raw("[" + ", ".join(rows) + "]")


def dumps(doc: Any) -> str:
    """json.dumps(doc) (compact), with each Raw value written as it is."""
    if isinstance(doc, Raw):
        return doc
    if isinstance(doc, dict) and _holds_raw(doc):
        return "{" + ", ".join(json.dumps(str(k)) + ": " + dumps(v) for k, v in doc.items()) + "}"
    return json.dumps(doc)


def _holds_raw(doc: dict) -> bool:
    return any(isinstance(v, Raw) or (isinstance(v, dict) and _holds_raw(v)) for v in doc.values())

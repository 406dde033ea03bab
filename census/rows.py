"""Census model objects as rows of values, without a dict each: what the cache's record
(census.store.codec) and the JSON documents' per-step lists (census.render.json_rows) are
written from, tens of thousands of steps and phases at a time."""

from __future__ import annotations

from census.definitions import IDLE_KEYS, PHASE_KEYS
from census.model import METRIC_VALUES, IdleSplit, Phase

# Phase.as_dict's keys, then its GPU span: the values of phase_row
PHASE_ROW_KEYS = (*PHASE_KEYS, "gpu_start_ns", "gpu_span_ns")
_NO_IDLE = (None,) * len(IDLE_KEYS)


def idle_row(idle: IdleSplit | None) -> tuple:
    """model.idle_values' values: None each when the split was not computed."""
    return _NO_IDLE if idle is None else tuple(idle.__dict__.values())  # IDLE_KEYS order


def phase_row(p: Phase) -> tuple:
    """The values of PHASE_ROW_KEYS."""
    return (*METRIC_VALUES(p.metrics), p.duration_ns, p.gpu_busy_ns, *idle_row(p.idle),
            p.gpu_start_ns, p.gpu_span_ns)  # fmt: skip

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
from collections.abc import Callable, Iterable, Iterator
from functools import cache
from typing import Any

from census.metrics import (
    GPU_BUSY_NS,
    GPU_IDLE_NS,
    GPU_SPAN_NS,
    GPU_START_NS,
    HOST_LEAD_NS,
    IDLE_KEYS,
    METRIC_KEYS,
    PHASE_KEYS,
    STEP_TIME_NS,
)
from census.model.ops import OpRows
from census.model.step_table import PHASE_INTS, Rows, StepTable

# Phase.as_dict's keys, then its GPU span: a phase's numbers
PHASE_ROW_KEYS = (*PHASE_KEYS, GPU_START_NS, GPU_SPAN_NS)


class Raw:
    """JSON text to be written as it is: its pieces, in order, made by `make` each time it is
    iterated (a summary's per-step lists reach hundreds of MB: they are written as they are
    made, never held whole, and every join is a whole copy)."""

    def __init__(self, make: Callable[[], Iterable[str]]) -> None:
        self.make = make

    def __iter__(self) -> Iterator[str]:
        return iter(self.make())

    def text(self) -> str:
        """The whole text, made again and joined."""
        return "".join(self)


def _template(keys: tuple[str, ...]) -> str:
    """', "k": %s' for each key: the numbers of a row after its name."""
    return "".join(f", {json.dumps(k)}: %s" for k in keys)


_STEP_KEYS = ("start_ns", "end_ns", *METRIC_KEYS)
_STEP = _template(_STEP_KEYS)
_PHASE = _template(PHASE_ROW_KEYS)
_TIMING = _template((STEP_TIME_NS, GPU_BUSY_NS, GPU_IDLE_NS, GPU_START_NS, GPU_SPAN_NS,
                     HOST_LEAD_NS, *IDLE_KEYS))  # fmt: skip


_ROW = '{"name": %s'  # a row's start: its name's JSON, then its numbers


def steps_text(steps: StepTable, ops: OpRows | None = None) -> Raw:
    """json.dumps([json_docs._step(s, ops, i, steps.bounds[i]) for i, s in enumerate(steps)])."""
    return Raw(lambda: _listed(_step_chunk(steps, lo, hi, ops) for lo, hi in steps.chunks()))


def _step_chunk(steps: StepTable, lo: int, hi: int, ops: OpRows | None = None) -> str:
    """Steps lo:hi, with their phases (and `ops`' entries), as one %-template of all their
    values."""
    bounds = steps.bounds[lo : hi + 1].tolist()
    phase_rows = steps.phases.part(bounds[0], bounds[-1])
    phases = _cells(phase_rows, phase_rows.stacked(PHASE_INTS), True).ravel().tolist()
    own = steps.steps.part(lo, hi)
    rows = _cells(own, own.stacked(_STEP_KEYS), False)
    width = len(PHASE_ROW_KEYS) + 1
    values, templates = [], []
    for i, (row, a, b) in enumerate(zip(rows.tolist(), bounds, bounds[1:], strict=False)):
        values += row
        if ops is None:
            values += phases[(a - bounds[0]) * width : (b - bounds[0]) * width]
        else:
            for k in range(a, b):  # each phase's values, then its ops
                values += phases[(k - bounds[0]) * width : (k + 1 - bounds[0]) * width]
                values.append(json.dumps(ops.entries(phase=k)))
            values.append(json.dumps(ops.entries(lo + i)))
        templates.append(_step_template(b - a, ops is not None))
    return ", ".join(templates) % tuple(values)


@cache
def _step_template(phases: int, ops: bool = False) -> str:
    listed = ", ".join([_ROW + _PHASE + (', "ops": %s}' if ops else "}")] * phases)
    return _ROW + _STEP + ', "phases": [' + listed + "]" + (', "ops": %s}' if ops else "}")


def _cells(rows: Rows, ints: Any, span: bool) -> Any:
    """An object array of the rows' values as their JSON texts' %-values: the name's JSON,
    `ints`, then (`span`) the idle split and the GPU's start and span, "null" where not
    computed."""
    import numpy as np

    names = {name: json.dumps(name) for name in dict.fromkeys(rows.names)}
    out = np.empty((len(rows), 1 + ints.shape[1] + (len(IDLE_KEYS) + 2 if span else 0)), object)
    out[:, 0] = [names[name] for name in rows.names]
    out[:, 1 : 1 + ints.shape[1]] = ints
    if span:
        k = 1 + ints.shape[1]
        out[:, k : k + len(IDLE_KEYS)] = _or_null(rows.idle, rows.split)
        out[:, k + len(IDLE_KEYS) :] = _or_null(rows.gpu, rows.launched)
    return out


def _or_null(values: Any, present: Any) -> Any:
    """The values (as Python ints) where present, else the text null."""
    import numpy as np

    return np.where(present[:, None], values.astype(object), "null")


def timing_text(steps: StepTable) -> Raw:
    """json.dumps([json_docs._step_timing(s) for s in steps])."""
    return Raw(lambda: _listed(_timing_chunk(steps, lo, hi) for lo, hi in steps.chunks()))


def _timing_chunk(steps: StepTable, lo: int, hi: int) -> str:
    import numpy as np

    rows = steps.steps.part(lo, hi)
    start, end, busy = (rows.columns[k] for k in ("start_ns", "end_ns", GPU_BUSY_NS))
    lead = rows.gpu[:, :1] + rows.gpu[:, 1:] - end[:, None]
    gpu = _or_null(np.concatenate([rows.gpu, lead], axis=1), rows.launched)
    columns = np.stack([end - start, busy, end - start - busy], axis=1)
    values = np.concatenate([_cells(rows, columns, False), gpu,
                             _or_null(rows.idle, rows.split)], axis=1)  # fmt: skip
    return ", ".join([_ROW + _TIMING + "}"] * len(rows)) % tuple(values.ravel().tolist())


def _listed(chunks: Iterable[str]) -> Iterator[str]:
    """A JSON list whose items come as the texts of chunks of them (items joined by ", ")."""
    yield "["
    for i, chunk in enumerate(chunks):
        if i:
            yield ", "
        yield chunk
    yield "]"


def dumps(doc: Any) -> str:
    """json.dumps(doc) (compact), with each Raw value written as it is."""
    return "".join(dump_pieces(doc))


def dump_pieces(doc: Any) -> Iterator[str]:
    """dumps(doc) as pieces, in order, as they are made: the Raw values' own pieces between
    the text of the rest (never joined)."""
    if isinstance(doc, Raw):
        yield from doc
    elif isinstance(doc, dict) and _holds_raw(doc):
        yield "{"
        for i, (k, v) in enumerate(doc.items()):
            yield (", " if i else "") + json.dumps(str(k)) + ": "
            yield from dump_pieces(v)
        yield "}"
    else:
        yield json.dumps(doc)


def document(doc: Any) -> Raw:
    """dumps(doc) as pieces made each time they are iterated: a document written as it is
    made (census.store.cache writes it, then reads it back; never held whole)."""
    return Raw(lambda: _collector_paused(dump_pieces(doc)))


def _collector_paused(made: Iterable[str]) -> Iterator[str]:
    """The pieces, made with the cyclic collector off (census.heap.collector_paused)."""
    from census.heap import collector_paused

    with collector_paused():
        yield from made


def _holds_raw(doc: dict) -> bool:
    return any(isinstance(v, Raw) or (isinstance(v, dict) and _holds_raw(v)) for v in doc.values())

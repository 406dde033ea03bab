"""A batch of decoded Kineto events made int64 columns, one set per table.

The tables and their columns (times in integer ns; names as ids into the trace's strings):

- kernels: start_ns, end_ns, device, stream, correlation, pid, tid, name  (category `kernel`)
- memcpys: start_ns, end_ns, device, stream, correlation, pid, name, copy_kind, bytes
  (`gpu_memcpy`; copy_kind is CUPTI's memcpy kind, census.metrics.MEMCPY_KINDS, from the name)
- memsets: start_ns, end_ns, device, stream, correlation, pid, name, bytes  (`gpu_memset`)
- api_calls: start_ns, end_ns, pid, tid, correlation, name, driver  (`cuda_runtime`: driver 0,
  `cuda_driver`: driver 1)
- annotations: start_ns, end_ns, pid, tid, name  (`user_annotation`: host ranges, the steps'
  and phases' candidates)
- gpu_annotations: start_ns, end_ns, device, stream, name  (`gpu_user_annotation`: never steps)
- cpu_ops: start_ns, end_ns, pid, tid, name, sequence, fwd_thread  (`cpu_op`: the autograd
  sequence number and forward thread id from args, NO_VALUE where absent)

Only complete events (`ph` X) are read; a GPU event's device and stream come from its args
(its pid and tid where a trace lacks them).
"""

from __future__ import annotations

import re
from typing import Any

import numpy as np

from census.sources.kineto.numbers import NO_VALUE, Rounded, decimal_ns, int_column

# Each table's categories; torch 1.8-1.9 wrote them capitalised (`Kernel`, `Runtime`, ...), as
# TensorBoard's plugin reads them, and `Operator` for the ops and `ProfilerStep#N` alike.
TABLES: dict[str, tuple[str, ...]] = {
    "kernels": ("kernel", "Kernel"),
    "memcpys": ("gpu_memcpy", "Memcpy"),
    "memsets": ("gpu_memset", "Memset"),
    "api_calls": ("cuda_runtime", "cuda_driver", "Runtime"),
    "annotations": ("user_annotation",),
    "gpu_annotations": ("gpu_user_annotation",),
    "cpu_ops": ("cpu_op",),
}
_TABLE_OF = dict(enumerate(TABLES, start=1))
_CODE = {cat: code for code, table in _TABLE_OF.items() for cat in TABLES[table]}
_OPERATOR = _CODE["Operator"] = len(TABLES) + 1  # a step or an op, by its name
_STEP, _OP = _CODE["user_annotation"], _CODE["cpu_op"]
# Kineto names a copy `Memcpy <kind> (<src> -> <dst>)`, the kind as CUPTI's enum lists it.
_COPY_KINDS = {"HtoD": 1, "DtoH": 2, "HtoA": 3, "AtoH": 4, "AtoA": 5, "AtoD": 6, "DtoA": 7,
               "DtoD": 8, "HtoH": 9, "PtoP": 10}  # fmt: skip
_COPY_NAME = re.compile(r"Memcpy (\w+)")


class Counts:
    """What the reader set aside or changed, for the notes: counted, never silent."""

    def __init__(self) -> None:
        self.events = 0
        self.rounded = Rounded()
        self.no_time: dict[str, int] = {}  # table -> events without a readable ts or dur
        self.negative: dict[str, int] = {}  # table -> events with a negative dur
        self.not_complete: dict[str, int] = {}  # table -> events of another ph than X

    def add(self, counts: dict[str, int], table: str, n: int) -> None:
        """Count `n` more of a table's events in `counts`."""
        if n:
            counts[table] = counts.get(table, 0) + n


class Strings:
    """Names as ids: the trace's strings table, grown batch by batch."""

    def __init__(self) -> None:
        self.ids: dict[str, int] = {}
        self.names: list[str] = []  # the names' text in id order, grown with `ids`

    def column(self, names: list[Any]) -> np.ndarray:
        """The names' ids (a new name gets the next id)."""
        ids = self.ids
        try:
            new = set(names).difference(ids)
        except TypeError:  # a name that is not a string (a list): its text
            names = [n if isinstance(n, str) else str(n) for n in names]
            new = set(names).difference(ids)
        for name in sorted(new, key=str):
            ids[name] = len(ids)
            self.names.append(name if isinstance(name, str) else str(name))
        return np.fromiter(map(ids.__getitem__, names), dtype=np.int64, count=len(names))

    def table(self) -> list[str]:
        """The names in id order."""
        return list(self.names)

    def texts(self, ids: np.ndarray) -> list[str]:
        """The names of an id column, without copying the table."""
        names = self.names
        return [names[i] for i in ids.tolist()]


def batch_tables(events: list, strings: Strings, labels: dict[str, int], counts: Counts) -> dict:
    """The batch's events, by table, as named int64 columns (tables without events absent)."""
    counts.events += len(events)
    get = _CODE.get
    try:  # comprehensions, not attrgetter: Python's attribute caches make them 10x faster
        codes = np.array([get(e.cat, 0) for e in events], dtype=np.int8)
    except TypeError:  # an unhashable category
        codes = np.array([_CODE.get(e.cat, 0) if isinstance(e.cat, str) else 0 for e in events])
    for i in np.flatnonzero(codes == _OPERATOR).tolist():  # torch 1.8-1.9
        codes[i] = _STEP if str(events[i].name).startswith("ProfilerStep#") else _OP
    out = {}
    for code in np.flatnonzero(np.bincount(codes, minlength=len(TABLES) + 2)).tolist():
        if code:
            chosen = [events[i] for i in np.flatnonzero(codes == code).tolist()]
            out[_TABLE_OF[code]] = _table_columns(_TABLE_OF[code], chosen, strings, labels, counts)
    return out


class _NoArgs:
    """What an event without args reads as."""

    correlation = device = stream = bytes = sequence = fwd_thread = None


_EMPTY = _NoArgs()


def _table_columns(
    table: str, events: list, strings: Strings, labels: dict, counts: Counts
) -> dict:
    """The events' columns; those not complete or without a readable, non-negative time are
    left out and counted."""
    ph = [e.ph for e in events]
    ts = [e.ts for e in events]
    dur = [e.dur for e in events]
    pid = [e.pid for e in events]
    tid = [e.tid for e in events]
    name = [e.name for e in events]
    start = decimal_ns(ts, counts.rounded)
    length = decimal_ns(dur, counts.rounded)
    missing = (start == NO_VALUE) | (length == NO_VALUE)
    if missing.any():
        start, length = np.where(missing, 0, start), np.where(missing, 0, length)
    cols = {"start_ns": start, "end_ns": start + length}
    gpu = table in ("kernels", "memcpys", "memsets", "gpu_annotations")
    if gpu or table == "api_calls":
        args = [e.args for e in events]
        if None in args:  # an event without args
            args = [_EMPTY if a is None else a for a in args]
        corr = [a.correlation for a in args]
        device = [a.device for a in args]
        stream = [a.stream for a in args]
        size = [a.bytes for a in args]
        if gpu:  # from args, else the event's pid and tid (older traces)
            cols["device"] = _or(int_column(device), pid, labels)
            cols["stream"] = _or(int_column(stream), tid, labels)
        if table != "gpu_annotations":
            cols["correlation"] = int_column(corr)
        if table in ("memcpys", "memsets"):
            cols["bytes"] = int_column(size)
    if table != "gpu_annotations":
        cols["pid"] = int_column(pid, labels)
    if table in ("kernels", "api_calls", "annotations", "cpu_ops"):
        cols["tid"] = int_column(tid, labels)
    cols["name"] = strings.column(name)
    if table == "cpu_ops":
        args = [_EMPTY if e.args is None else e.args for e in events]
        cols["sequence"] = int_column([a.sequence for a in args])
        cols["fwd_thread"] = int_column([a.fwd_thread for a in args])
    if table == "api_calls":
        cols["driver"] = np.array([e.cat == "cuda_driver" for e in events], dtype=np.int64)
    if table == "memcpys":
        cols["copy_kind"] = np.array([_copy_kind(n) for n in name], dtype=np.int64)
    return _complete(table, cols, ph, missing, length < 0, counts)


def _complete(
    table: str, cols: dict, ph: list, missing: np.ndarray, negative: np.ndarray, counts: Counts
) -> dict:
    """The rows of complete events with readable, non-negative times; the others counted."""
    if ph.count("X") == len(ph):
        complete = np.ones(len(ph), dtype=bool)
    else:
        complete = np.array([p == "X" for p in ph], dtype=bool)
    keep = complete & ~missing & ~negative
    if keep.all():
        return cols
    counts.add(counts.not_complete, table, int((~complete).sum()))
    counts.add(counts.no_time, table, int((complete & missing).sum()))
    counts.add(counts.negative, table, int((complete & negative).sum()))
    return {k: v[keep] for k, v in cols.items()}


def _or(values: np.ndarray, fallback: list, labels: dict) -> np.ndarray:
    """`values`, with `fallback`'s where a value is missing."""
    if (values == NO_VALUE).any():
        return np.where(values == NO_VALUE, int_column(fallback, labels), values)
    return values


def _copy_kind(name: Any) -> int:
    m = _COPY_NAME.match(name) if isinstance(name, str) else None
    return _COPY_KINDS.get(m.group(1), 0) if m else 0

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
- cpu_ops: start_ns, end_ns, pid, tid, name  (`cpu_op`)

Only complete events (`ph` X) are read; a GPU event's device and stream come from its args
(its pid and tid where a trace lacks them).
"""

from __future__ import annotations

import re
from operator import attrgetter
from typing import Any

import numpy as np

from census.sources.kineto.numbers import NO_VALUE, Rounded, decimal_ns, int_column

TABLES: dict[str, tuple[str, ...]] = {
    "kernels": ("kernel",),
    "memcpys": ("gpu_memcpy",),
    "memsets": ("gpu_memset",),
    "api_calls": ("cuda_runtime", "cuda_driver"),
    "annotations": ("user_annotation",),
    "gpu_annotations": ("gpu_user_annotation",),
    "cpu_ops": ("cpu_op",),
}
_CODE = {cat: code for code, cat in enumerate((c for t in TABLES.values() for c in t), start=1)}
_TABLE_OF = {code: table for table, cats in TABLES.items() for code in map(_CODE.get, cats)}
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
        return np.fromiter(map(ids.__getitem__, names), dtype=np.int64, count=len(names))

    def table(self) -> list[str]:
        """The names in id order."""
        return [n if isinstance(n, str) else str(n) for n in self.ids]


def batch_tables(events: list, strings: Strings, labels: dict[str, int], counts: Counts) -> dict:
    """The batch's events, by table, as named int64 columns (tables without events absent)."""
    counts.events += len(events)
    try:
        codes = np.array([_CODE.get(e.cat, 0) for e in events], dtype=np.int8)
    except TypeError:  # an unhashable category
        codes = np.array([_CODE.get(e.cat, 0) if isinstance(e.cat, str) else 0 for e in events])
    out = {}
    for code in np.unique(codes).tolist():
        if code == 0:
            continue
        index = np.flatnonzero(codes == code).tolist()
        chosen = [events[i] for i in index]
        table = _TABLE_OF[code]
        columns = _table_columns(table, chosen, strings, labels, counts)
        if table == "api_calls":
            columns["driver"] = np.full(len(columns["start_ns"]), int(code == _CODE["cuda_driver"]))
        if table in out:
            out[table] = {k: np.concatenate([out[table][k], v]) for k, v in columns.items()}
        else:
            out[table] = columns
    return out


def _table_columns(
    table: str, events: list, strings: Strings, labels: dict, counts: Counts
) -> dict:
    phases = list(map(attrgetter("ph"), events))
    if phases.count("X") != len(phases):
        counts.add(counts.not_complete, table, len(phases) - phases.count("X"))
        events = [e for e, ph in zip(events, phases, strict=False) if ph == "X"]
    start = decimal_ns(list(map(attrgetter("ts"), events)), counts.rounded)
    dur = decimal_ns(list(map(attrgetter("dur"), events)), counts.rounded)
    missing = (start == NO_VALUE) | (dur == NO_VALUE)
    negative = ~missing & (dur < 0)
    keep = ~(missing | negative)
    if not keep.all():
        counts.add(counts.no_time, table, int(missing.sum()))
        counts.add(counts.negative, table, int(negative.sum()))
        events = [e for e, k in zip(events, keep.tolist(), strict=False) if k]
        start, dur = start[keep], dur[keep]
    cols = {"start_ns": start, "end_ns": start + dur}
    if table in ("kernels", "memcpys", "memsets", "gpu_annotations"):
        cols.update(_gpu_columns(events, labels))
    if table in ("kernels", "memcpys", "memsets", "api_calls"):
        cols["correlation"] = _args_column(events, "correlation", None)
    if table != "gpu_annotations":
        cols["pid"] = int_column(list(map(attrgetter("pid"), events)), labels)
    if table in ("kernels", "api_calls", "annotations", "cpu_ops"):
        cols["tid"] = int_column(list(map(attrgetter("tid"), events)), labels)
    names = list(map(attrgetter("name"), events))
    cols["name"] = strings.column(names)
    if table == "memcpys":
        cols["copy_kind"] = np.array([_copy_kind(n) for n in names], dtype=np.int64)
    if table in ("memcpys", "memsets"):
        cols["bytes"] = _args_column(events, "bytes", None)
    return cols


def _gpu_columns(events: list, labels: dict) -> dict:
    """device and stream from args, else the event's pid and tid."""
    device = _args_column(events, "device", None)
    stream = _args_column(events, "stream", None)
    if (device == NO_VALUE).any():
        pid = int_column(list(map(attrgetter("pid"), events)), labels)
        device = np.where(device == NO_VALUE, pid, device)
    if (stream == NO_VALUE).any():
        tid = int_column(list(map(attrgetter("tid"), events)), labels)
        stream = np.where(stream == NO_VALUE, tid, stream)
    return {"device": device, "stream": stream}


def _args_column(events: list, field: str, labels: dict | None) -> np.ndarray:
    values = [None if e.args is None else getattr(e.args, field) for e in events]
    return int_column(values, labels)


def _copy_kind(name: Any) -> int:
    m = _COPY_NAME.match(name) if isinstance(name, str) else None
    return _COPY_KINDS.get(m.group(1), 0) if m else 0

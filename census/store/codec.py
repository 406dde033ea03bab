"""The cache's codec: `to_record`/`from_record` round-trip a whole Census exactly, as JSON-able
data; `dump_record`/`load_record` as the bytes of a cache entry: a line of JSON, then the step
and phase columns as raw little-endian int64 and bool arrays (an object column, of Python ints
past int64 or of floats, stays in the JSON), read back with numpy, never unpickled.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable
from dataclasses import asdict, fields, replace
from typing import Any

from census.metrics import IDLE_KEYS
from census.model.census import (
    ApiStat,
    Census,
    ClassStat,
    CollectiveStat,
    Gpu,
    KernelStat,
    MemoryStat,
    RangeIdle,
    Source,
)
from census.model.ranks import record_fields, record_of
from census.model.step import Metrics
from census.model.step_table import Rows, StepTable, int_array

_BLOB = "$blob"  # a column's place in the JSON line: {"$blob": [dtype, length]}
_DTYPES = ("<i8", "|b1")


def _listed(values: Any) -> list:
    return values.ravel().tolist()


def dump_record(census: Census) -> list[bytes]:
    """The cache entry of `census`, in pieces: the SHA-256 of the rest (a line), the JSON
    line, then each column's bytes."""
    blobs: list[bytes] = []

    def column(values: Any) -> Any:
        flat = values.ravel()
        if flat.dtype.str not in _DTYPES:  # exact Python ints or floats: as JSON
            return flat.tolist()
        blobs.append(flat.tobytes())
        return {_BLOB: [flat.dtype.str, len(flat)]}

    body = [json.dumps(to_record(census, column)).encode("utf-8"), b"\n", *blobs]
    digest = hashlib.sha256()
    for piece in body:
        digest.update(piece)
    return [digest.hexdigest().encode(), b"\n", *body]


def load_record(data: bytes) -> Census:
    """The census of a cache entry; ValueError (or KeyError, TypeError, AttributeError) when
    it is not one: cut, damaged (its digest), foreign."""
    import numpy as np

    digest, _, body = data.partition(b"\n")
    if hashlib.sha256(body).hexdigest().encode() != digest:
        raise ValueError("a damaged cache entry")
    line, sep, rest = body.partition(b"\n")
    if not sep:
        raise ValueError("a cut cache entry")
    rec = json.loads(line)
    view, at = memoryview(rest), 0

    def column(value: Any) -> Any:
        nonlocal at
        if not isinstance(value, dict):
            return value
        dtype, n = value[_BLOB]
        if dtype not in _DTYPES or not isinstance(n, int) or n < 0:
            raise ValueError("not a census column")
        size = np.dtype(dtype).itemsize * n
        if at + size > len(view):
            raise ValueError("a cut cache entry")
        out = np.frombuffer(view[at : at + size], dtype).copy()
        at += size
        return out

    table = rec["steps"]
    for side in ("steps", "phases"):
        if not isinstance(table[side], dict):
            raise ValueError("not a census record")
        table[side] = {k: column(v) for k, v in table[side].items()}
    table["bounds"] = column(table["bounds"])
    nccl = rec.get("nccl")
    if nccl is not None:
        rec["nccl"] = {k: column(v) for k, v in nccl.items()}
    if at != len(view):
        raise ValueError("a cache entry with bytes to spare")
    return from_record(rec)


def to_record(census: Census, column: Callable[[Any], Any] = _listed) -> dict[str, Any]:
    """Everything, for the cache; `from_record` inverts it exactly. Steps are stored as columns
    (each as `column` gives it: a flat list by default): tens of thousands of them load several
    times faster that way."""
    rec = asdict(replace(census, steps=(), nccl=None))
    table = census.steps
    rec["steps"] = {"steps": _rows_record(table.steps, column),
                    "phases": _rows_record(table.phases, column),
                    "bounds": column(table.bounds)}  # fmt: skip
    rec["nccl"] = record_fields(census.nccl, column)  # its blobs after the steps'
    rec["means"] = {"per_step": census.per_step(), "per_step_timing": census.per_step_timing(),
                    "per_phase": census.per_phase(),
                    "host_ran_ahead": census.host_ran_ahead()}  # fmt: skip
    return rec


def from_record(rec: dict[str, Any]) -> Census:
    """The Census to_record made `rec` of, exactly, with its memoized means."""

    def build(cls: type, data: dict[str, Any]) -> Any:
        return cls(**{f.name: data[f.name] for f in fields(cls)})

    src = rec["source"]
    census = Census(
        source=Source(
            src["path"],
            src["nsys_version"],
            src["schema_version"],
            tuple(build(Gpu, g) for g in src["gpus"]),
            tuple((str(t), str(why)) for t, why in src["read_with_sql"]),
        ),
        totals=build(Metrics, rec["totals"]),
        steps=_table(rec["steps"]),
        classes=tuple(build(ClassStat, c) for c in rec["classes"]),
        kernels=tuple(build(KernelStat, k) for k in rec["kernels"]),
        memory=tuple(build(MemoryStat, m) for m in rec["memory"]),
        launch_apis=tuple(build(ApiStat, a) for a in rec["launch_apis"]),
        warnings=tuple(rec["warnings"]),
        graph_trace_mode=rec["graph_trace_mode"],
        sliced=rec["sliced"],
        collectives=tuple(build(CollectiveStat, c) for c in rec["collectives"]),
        nccl_overlap_ns=rec["nccl_overlap_ns"],
        idle_by_range=None
        if rec["idle_by_range"] is None
        else tuple(build(RangeIdle, r) for r in rec["idle_by_range"]),
        nccl=record_of(rec["nccl"]),
    )
    census.__dict__["_memo_values"] = dict(rec["means"])
    return census


def _rows_record(rows: Rows, column: Callable[[Any], Any]) -> dict[str, Any]:
    """Rows as flat columns, with their width."""
    return {"names": rows.names, "width": rows.ints.shape[1],
            **{k: column(getattr(rows, k)) for k in ("ints", "gpu", "launched", "idle", "split")}}  # fmt: skip


def _rows(rec: dict[str, Any]) -> Rows:
    import numpy as np

    n = len(rec["names"])
    return Rows(rec["names"], int_array(rec["ints"]).reshape(n, rec["width"]),
                int_array(rec["gpu"]).reshape(n, 2), np.array(rec["launched"], bool),
                int_array(rec["idle"]).reshape(n, len(IDLE_KEYS)), np.array(rec["split"], bool))  # fmt: skip


def _table(rec: dict[str, Any]) -> StepTable:
    import numpy as np

    return StepTable(_rows(rec["steps"]), _rows(rec["phases"]), np.array(rec["bounds"], np.int64))

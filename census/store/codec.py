"""The cache's codec: `to_record`/`from_record` round-trip a whole Census exactly."""

from __future__ import annotations

from dataclasses import asdict, fields, replace
from typing import Any

from census.definitions import IDLE_KEYS
from census.model import (
    ApiStat,
    Census,
    ClassStat,
    CollectiveStat,
    Gpu,
    KernelStat,
    MemoryStat,
    Metrics,
    RangeIdle,
    Source,
)
from census.step_table import Rows, StepTable, exact_array


def to_record(census: Census) -> dict[str, Any]:
    """Everything, for the cache; `from_record` inverts it exactly. Steps are stored as columns:
    tens of thousands of them load several times faster that way."""
    rec = asdict(replace(census, steps=()))
    table = census.steps
    rec["steps"] = {"steps": _rows_record(table.steps), "phases": _rows_record(table.phases),
                    "bounds": table.bounds.tolist()}  # fmt: skip
    rec["means"] = {"per_step": census.per_step(), "per_step_timing": census.per_step_timing(),
                    "per_phase": census.per_phase(),
                    "host_ran_ahead": census.host_ran_ahead()}  # fmt: skip
    return rec


def from_record(rec: dict[str, Any]) -> Census:
    def build(cls: type, data: dict[str, Any]) -> Any:
        return cls(**{f.name: data[f.name] for f in fields(cls)})

    src = rec["source"]
    census = Census(
        source=Source(
            src["path"],
            src["nsys_version"],
            src["schema_version"],
            tuple(build(Gpu, g) for g in src["gpus"]),
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
    )
    census.__dict__["_memo_values"] = dict(rec["means"])
    return census


def _rows_record(rows: Rows) -> dict[str, Any]:
    """Rows as flat lists of ints (JSON), with their width."""
    return {"names": rows.names, "width": rows.ints.shape[1],
            **{k: getattr(rows, k).ravel().tolist()
               for k in ("ints", "gpu", "launched", "idle", "split")}}  # fmt: skip


def _rows(rec: dict[str, Any]) -> Rows:
    import numpy as np

    n = len(rec["names"])
    return Rows(rec["names"], exact_array(rec["ints"]).reshape(n, rec["width"]),
                exact_array(rec["gpu"]).reshape(n, 2), np.array(rec["launched"], bool),
                exact_array(rec["idle"]).reshape(n, len(IDLE_KEYS)), np.array(rec["split"], bool))  # fmt: skip


def _table(rec: dict[str, Any]) -> StepTable:
    import numpy as np

    return StepTable(_rows(rec["steps"]), _rows(rec["phases"]), np.array(rec["bounds"], np.int64))

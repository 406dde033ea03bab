"""JSON documents: the diff contract (`census diff --format json`)."""

from __future__ import annotations

from typing import Any

from census.diff import BUCKETS, CensusDiff, KernelDelta
from census.model import summary_json


def _kernel(k: KernelDelta) -> dict[str, Any]:
    return {
        "name": k.name,
        "class": k.cls,
        "count": k.count.as_dict(),
        "time_ns": k.time_ns.as_dict(),
    }


def diff_json(d: CensusDiff, explanation: list[str], top: int = 20) -> dict[str, Any]:
    return {
        "labels": {"a": d.labels[0], "b": d.labels[1]},
        "basis": "per_step" if d.per_step else "capture",
        "a": summary_json(d.a, top),
        "b": summary_json(d.b, top),
        "metrics": {k: v.as_dict() for k, v in d.metrics.items()},
        "classes": [
            {"class": c.cls, "count": c.count.as_dict(), "time_ns": c.time_ns.as_dict()}
            for c in d.classes
        ],
        "kernels": {b: [_kernel(k) for k in d.bucket(b)] for b in BUCKETS if b != "unchanged"},
        "explanation": explanation,
        "warnings": list(d.warnings),
    }

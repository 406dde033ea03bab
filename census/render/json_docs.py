"""Every JSON contract census prints, in one module: `census summary --json` (summary_json, and
spread_json for rank folders) and `census diff --format json` (diff_json)."""

from __future__ import annotations

from typing import Any

from census import CENSUS_VERSION
from census.census import rank_spread
from census.compare.diff import BUCKETS, CensusDiff, KernelDelta
from census.definitions import METRIC_KEYS
from census.model import METRIC_VALUES, Census


def summary_json(census: Census, top: int = 20) -> dict[str, Any]:
    """The `census summary --json` contract."""
    n = census.step_count

    def mean(x: int) -> float | None:
        return x / n if n else None

    return {
        "census_version": CENSUS_VERSION,
        "source": {
            "path": census.source.path,
            "nsys_version": census.source.nsys_version,
            "schema_version": census.source.schema_version,
            "gpus": [{"id": g.id, "name": g.name} for g in census.source.gpus],
        },
        "totals": census.totals.as_dict(),
        "steps": [
            {
                "name": s.name,
                "start_ns": s.start_ns,
                "end_ns": s.end_ns,
                **dict(zip(METRIC_KEYS, METRIC_VALUES(s.metrics), strict=True)),
            }
            for s in census.steps
        ],
        "per_step": census.per_step(),
        "timing": {
            "steps": [
                {
                    "name": s.name,
                    "step_time_ns": s.duration_ns,
                    "gpu_busy_ns": s.gpu_busy_ns,
                    "gpu_idle_ns": s.gpu_idle_ns,
                }
                for s in census.steps
            ],
            "per_step": census.per_step_timing(),
        },
        "classes": [
            {
                "class": c.cls,
                "count": c.count,
                "time_ns": c.time_ns,
                "per_step_count": mean(c.step_count),
                "per_step_time_ns": mean(c.step_time_ns),
            }
            for c in census.classes
        ],
        "top_kernels": [
            {
                "name": k.name,
                "class": k.cls,
                "count": k.count,
                "time_ns": k.time_ns,
                "per_step_count": mean(k.step_count),
                "per_step_time_ns": mean(k.step_time_ns),
            }
            for k in census.kernels[:top]
        ],
        "memory": [
            {
                "kind": m.kind,
                "count": m.count,
                "bytes": m.bytes,
                "time_ns": m.time_ns,
                "per_step_count": mean(m.step_count),
                "per_step_bytes": mean(m.step_bytes),
            }
            for m in census.memory
        ],
        "launch_apis": [
            {
                "api": a.api,
                "count": a.count,
                "time_ns": a.time_ns,
                "per_step_count": mean(a.step_count),
                "per_step_time_ns": mean(a.step_time_ns),
            }
            for a in census.launch_apis
        ],
        "nccl": {
            "collectives": [
                {
                    "collective": c.collective,
                    "count": c.count,
                    "time_ns": c.time_ns,
                    "per_step_count": mean(c.step_count),
                    "per_step_time_ns": mean(c.step_time_ns),
                }
                for c in census.collectives
            ],
            "overlap_ns": census.nccl_overlap_ns,
            "per_step_overlap_ns": mean(sum(s.nccl_overlap_ns for s in census.steps)),
        },
        "warnings": list(census.warnings),
    }


def spread_json(labels: list[str], ranks: list[Census]) -> dict:
    return {
        "ranks": [
            {"rank": label, "summary": summary_json(c)}
            for label, c in zip(labels, ranks, strict=True)
        ],
        "spread": {k: vars(v) for k, v in rank_spread(labels, ranks).items()},
    }


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

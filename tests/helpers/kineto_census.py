"""docs/definitions.md's census keys computed from a Kineto trace independently of census: the
events of tests/helpers/kineto_oracle.py (Python's json, the times' decimal text, Decimal ns),
the launch list and the step rules re-written here from the definitions, event by event.
tests/test_kineto_summary.py and scripts/foreign_traces.py hold `census summary --json` to it."""

from __future__ import annotations

import re
from collections import defaultdict
from pathlib import Path

from tests.helpers.kineto_oracle import ns, oracle_events

KEYS = ("kernel_count", "kernel_time_ns", "nccl_kernel_count", "nccl_kernel_time_ns",
        "non_nccl_kernel_count", "non_nccl_kernel_time_ns", "non_nccl_union_ns",
        "launch_api_count", "launch_api_time_ns", "graph_launch_count", "d2d_count", "d2d_bytes",
        "h2d_count", "h2d_bytes", "d2h_count", "d2h_bytes", "memset_count", "memset_bytes")  # fmt: skip
LAUNCHES = {"cudaLaunchKernel", "cudaLaunchKernelExC", "cudaLaunchKernelEx",
            "cudaLaunchCooperativeKernel", "cudaLaunchCooperativeKernelMultiDevice",
            "cuLaunchKernel", "cuLaunchKernelEx", "cuLaunchCooperativeKernel",
            "cuLaunchCooperativeKernelMultiDevice", "cuLaunchGrid", "cuLaunchGridAsync",
            "cudaGraphLaunch", "cuGraphLaunch",
            # HIP's (docs/definitions.md)
            "hipLaunchKernel", "hipExtLaunchKernel", "hipModuleLaunchKernel",
            "hipExtModuleLaunchKernel", "hipHccModuleLaunchKernel", "hipLaunchCooperativeKernel",
            "hipLaunchCooperativeKernelMultiDevice", "hipModuleLaunchCooperativeKernel",
            "hipModuleLaunchCooperativeKernelMultiDevice", "hipExtLaunchMultiKernelMultiDevice",
            "hipGraphLaunch"}  # fmt: skip
STEPS = re.compile(r"^(step\b|ProfilerStep#)")
COPIES = {"Memcpy DtoD": "d2d", "Memcpy HtoD": "h2d", "Memcpy DtoH": "d2h"}
API = ("cuda_runtime", "cuda_driver")
# torch 1.8-1.9's categories (TensorBoard's plugin reads them so; oracle_events makes an
# `Operator` named `ProfilerStep#N` a `user_annotation`)
OLD = {"Kernel": "kernel", "Memcpy": "gpu_memcpy", "Memset": "gpu_memset",
       "Runtime": "cuda_runtime", "Operator": "cpu_op"}  # fmt: skip


def is_launch(name: str) -> bool:
    """The launch list: a trailing `_v<digits>`, then `_ptsz`/`_ptds`/`_spt`, removed first."""
    base = re.sub(r"_(ptsz|ptds|spt)$", "", re.sub(r"_v\d+$", "", name))
    return base in LAUNCHES


def _bytes(event: dict) -> int:
    """A copy's or memset's `args.bytes`; 0 where the trace has none (ROCm's copies), as census
    counts it (docs/kineto.md: a definition question)."""
    return (event.get("args") or {}).get("bytes", 0)


def census_of(events: list[dict]) -> dict:
    """The census keys of GPU events (kernels, copies, memsets) and launch API events."""
    out = dict.fromkeys(KEYS, 0)
    spans: dict[object, list[tuple[int, int]]] = defaultdict(list)
    for e in events:
        cat, dur = e["cat"], ns(e["dur"])
        if cat == "kernel":
            nccl = "nccl" in e["name"].lower()
            out["kernel_count"] += 1
            out["kernel_time_ns"] += dur
            side = "nccl" if nccl else "non_nccl"
            out[f"{side}_kernel_count"] += 1
            out[f"{side}_kernel_time_ns"] += dur
            if not nccl:
                spans[(e.get("args") or {}).get("device", e["pid"])].append(
                    (ns(e["ts"]), ns(e["ts"]) + dur)
                )
        elif cat == "gpu_memcpy":
            kind = COPIES.get(e["name"][:11])
            if kind:
                out[f"{kind}_count"] += 1
                out[f"{kind}_bytes"] += _bytes(e)
        elif cat == "gpu_memset":
            out["memset_count"] += 1
            out["memset_bytes"] += _bytes(e)
        elif cat in API:
            out["launch_api_count"] += 1
            out["launch_api_time_ns"] += dur
            out["graph_launch_count"] += e["name"] in (
                "cudaGraphLaunch",
                "cuGraphLaunch",
                "hipGraphLaunch",
            )
    for intervals in spans.values():
        end = None
        for lo, hi in sorted(intervals):
            start = lo if end is None else max(lo, end)
            out["non_nccl_union_ns"] += max(0, hi - start)
            end = hi if end is None else max(end, hi)
    return out


def independent_census(path: str | Path) -> dict:
    """{"totals": the keys over the whole trace, "steps": [{name, pid, start_ns, end_ns, keys}],
    "unattributed": GPU events launched in no step, "no_bytes": copies and memsets without
    `args.bytes`, "no_call": GPU events whose launching call
    (same `args.correlation`) is not in the trace}. Launch calls count once per (pid,
    correlation), the longest kept; a GPU event belongs to a step when its call starts in the
    step's [start, end] on the step's process."""
    _, events = oracle_events(path)
    for e in events:
        e["cat"] = OLD.get(e["cat"], e["cat"])
    launches: dict[tuple, dict] = {}
    calls: dict[object, dict] = {}
    for e in events:
        if e["cat"] in API and "correlation" in (e.get("args") or {}):
            calls.setdefault(e["args"]["correlation"], e)
            if is_launch(e["name"]):
                key = (e["pid"], e["args"]["correlation"])
                if key not in launches or ns(e["dur"]) > ns(launches[key]["dur"]):
                    launches[key] = e
    gpu = [e for e in events if e["cat"] in ("kernel", "gpu_memcpy", "gpu_memset")]
    steps = sorted((e for e in events if e["cat"] == "user_annotation"
                    and STEPS.match(e["name"])), key=lambda e: ns(e["ts"]))  # fmt: skip
    found = []
    launched = set()
    for s in steps:
        lo, hi = ns(s["ts"]), ns(s["ts"]) + ns(s["dur"])
        mine = [c for c in launches.values() if c["pid"] == s["pid"] and lo <= ns(c["ts"]) <= hi]
        for g in gpu:
            c = calls.get((g.get("args") or {}).get("correlation"))
            if c is not None and c["pid"] == s["pid"] and lo <= ns(c["ts"]) <= hi:
                mine.append(g)
                launched.add(id(g))
        found.append({"name": s["name"], "pid": s["pid"], "start_ns": lo, "end_ns": hi,
                      **census_of(mine)})  # fmt: skip
    return {
        "totals": census_of(gpu + list(launches.values())),
        "steps": found,
        "unattributed": sum(id(g) not in launched for g in gpu),
        "no_bytes": sum("bytes" not in (g.get("args") or {}) for g in gpu if g["cat"] != "kernel"),
        "no_call": sum(calls.get((g.get("args") or {}).get("correlation")) is None for g in gpu),
    }

"""Kineto traces read for the operation tests (#56) with plain Python: json with exact decimals,
the columns `census.findings.op_ranges` takes. A stand-in for the Kineto reader (#55) in tests only."""

from __future__ import annotations

import gzip
import json
from dataclasses import dataclass
from decimal import Decimal
from pathlib import Path

import numpy as np

from census.findings.op_ranges import (
    BACKWARD_PREFIX,
    OpRanges,
    attribute_launches,
    normalize_names,
)
from census.findings.ops import OpTable, group_kernels

LAUNCH_CATS = ("cuda_runtime", "cuda_driver")


def ns(us: Decimal) -> int:
    """A Kineto time in microseconds, written in decimal, as integer nanoseconds (exact)."""
    value = us * 1000
    assert value == value.to_integral_value(), us
    return int(value)


def read_events(path: Path) -> list[dict]:
    """The trace's events, times as Decimal."""
    with gzip.open(path, "rt", encoding="utf-8") as f:
        doc = json.load(f, parse_float=Decimal)
    return doc["traceEvents"] if isinstance(doc, dict) else doc


@dataclass
class Trace:
    """One process's op ranges, launch calls and kernels as columns."""

    ranges: OpRanges
    launch_start_ns: np.ndarray
    launch_thread: np.ndarray
    launch_of: dict[int, int]  # correlation -> launch row
    kernels: list[dict]  # the kernel events, in the trace's order
    kernel_launch: np.ndarray  # each kernel's launch row, -1 where none
    kernel_name: list[str]
    kernel_ns: np.ndarray  # durations


def read_trace(path: Path) -> Trace:
    """The columns of the trace at `path` (its one process with op ranges)."""
    events = read_events(path)
    ops = [e for e in events if e.get("ph") == "X" and e.get("cat") == "cpu_op"]
    raw = [e["name"] for e in ops]
    names, ids = normalize_names(list(dict.fromkeys(raw)))
    raw_id = {n: i for i, n in enumerate(dict.fromkeys(raw))}
    ranges = OpRanges(
        start_ns=np.array([ns(e["ts"]) for e in ops], dtype=np.int64),
        end_ns=np.array([ns(e["ts"]) + ns(e["dur"]) for e in ops], dtype=np.int64),
        thread=np.array([int(e["tid"]) for e in ops], dtype=np.int64),
        name_id=ids[[raw_id[n] for n in raw]] if ops else np.zeros(0, np.int64),
        sequence=np.array([int(e["args"].get("Sequence number", -1)) for e in ops], np.int64),
        backward=np.array(
            [
                int(e["args"].get("Fwd thread id", 0)) > 0 or e["name"].startswith(BACKWARD_PREFIX)
                for e in ops
            ],
            dtype=bool,
        ),
        names=names,
    )
    calls = [e for e in events if e.get("ph") == "X" and e.get("cat") in LAUNCH_CATS]
    calls = [e for e in calls if "correlation" in e.get("args", {})]
    kernels = [e for e in events if e.get("ph") == "X" and e.get("cat") == "kernel"]
    launch_of = {int(e["args"]["correlation"]): i for i, e in enumerate(calls)}
    return Trace(
        ranges=ranges,
        launch_start_ns=np.array([ns(e["ts"]) for e in calls], dtype=np.int64),
        launch_thread=np.array([int(e["tid"]) for e in calls], dtype=np.int64),
        launch_of=launch_of,
        kernels=kernels,
        kernel_launch=np.array(
            [launch_of.get(int(k["args"]["correlation"]), -1) for k in kernels], dtype=np.int64
        ),
        kernel_name=[k["name"] for k in kernels],
        kernel_ns=np.array([ns(k["dur"]) for k in kernels], dtype=np.int64),
    )


def trace_table(t: Trace, step: np.ndarray, n_steps: int) -> OpTable:
    """The OpTable of a trace's kernels (`step`: each kernel's step, -1 in none), from its
    columns alone (attribute_launches, group_kernels), as tests/test_ops.py checks it."""
    lo = attribute_launches(t.launch_start_ns, t.launch_thread, t.ranges)
    names = list(dict.fromkeys(t.kernel_name))
    ids = np.array([names.index(n) for n in t.kernel_name], dtype=np.int64)
    return group_kernels(ids, names, t.kernel_ns, step, n_steps, t.kernel_launch, lo, t.ranges)


def profiler_steps(path: Path, t: Trace) -> tuple[list[tuple[int, int]], np.ndarray]:
    """The trace's `ProfilerStep#` ranges (start_ns, end_ns), in time order, and each kernel's
    step among them by its launch call's start (-1: in none, or no launch)."""
    steps = sorted(
        (ns(e["ts"]), ns(e["ts"]) + ns(e["dur"]))
        for e in read_events(path)
        if e.get("cat") == "user_annotation" and e["name"].startswith("ProfilerStep#")
    )
    launch_at = np.where(t.kernel_launch >= 0, t.launch_start_ns[t.kernel_launch], -1)
    step = np.full(len(t.kernels), -1, dtype=np.int64)
    for i, (s, e) in enumerate(steps):
        step[(t.kernel_launch >= 0) & (launch_at >= s) & (launch_at < e)] = i
    return steps, step


def brute_op(path: Path) -> tuple[list[int], list[int]]:
    """Each kernel's innermost `aten::` cpu_op and innermost backward node around its launch
    (index in the trace's cpu_op order, -1 for none), by looking at every op of the thread."""
    events = read_events(path)
    ops = [e for e in events if e.get("ph") == "X" and e.get("cat") == "cpu_op"]
    calls = {
        int(e["args"]["correlation"]): e
        for e in events
        if e.get("ph") == "X" and e.get("cat") in ("cuda_runtime", "cuda_driver")
        and "correlation" in e.get("args", {})
    }  # fmt: skip
    by_thread: dict[int, list[tuple[int, int, int, dict]]] = {}
    for i, e in enumerate(ops):
        start = ns(e["ts"])
        by_thread.setdefault(int(e["tid"]), []).append((start, start + ns(e["dur"]), i, e))
    op_of, node_of = [], []
    for k in (e for e in events if e.get("ph") == "X" and e.get("cat") == "kernel"):
        call = calls.get(int(k["args"]["correlation"]))
        if call is None:
            op_of.append(-1)
            node_of.append(-1)
            continue
        t = ns(call["ts"])
        around = [o for o in by_thread.get(int(call["tid"]), []) if o[0] <= t < o[1]]
        aten = [o for o in around if o[3]["name"].startswith("aten::")]
        node = [o for o in around if int(o[3]["args"].get("Fwd thread id", 0)) > 0]
        op_of.append(max(aten, key=lambda o: (o[0], -o[1], o[2]))[2] if aten else -1)
        node_of.append(max(node, key=lambda o: (o[0], -o[1], o[2]))[2] if node else -1)
    return op_of, node_of

"""What links a Kineto trace's tables: a GPU event's launching call (the API call with the same
`args.correlation`), and the step whose host range holds that call's start.

A trace file is one process's profile: its correlation ids are unique within it, so the
launching call is found by correlation alone (a GPU event's pid is its device, not the host
process). A GPU event whose call is not in the trace (launched before the profiler started)
has none: it counts in the totals and in no step.
"""

from __future__ import annotations

import re

import numpy as np

from census.definitions import DEFAULT_STEPS_REGEX
from census.sources.kineto.numbers import NO_VALUE
from census.sources.kineto.reader import KinetoTrace


def launch_index(trace: KinetoTrace, table: str) -> np.ndarray:
    """For each event of a GPU table (kernels, memcpys, memsets), the row of its launching
    call in `api_calls`, or -1 where the trace has none."""
    gpu = trace.tables.get(table)
    if gpu is None:
        return np.zeros(0, dtype=np.int64)
    wanted = gpu["correlation"]
    api = trace.tables.get("api_calls")
    if api is None or len(api["correlation"]) == 0:
        return np.full(len(wanted), -1, dtype=np.int64)
    order = np.argsort(api["correlation"], kind="stable")  # the first of duplicates wins
    known = api["correlation"][order]
    pos = np.minimum(np.searchsorted(known, wanted), len(known) - 1)
    found = (known[pos] == wanted) & (wanted != NO_VALUE)
    return np.where(found, order[pos], -1)


def step_ranges(trace: KinetoTrace, pattern: str = DEFAULT_STEPS_REGEX) -> dict[str, np.ndarray]:
    """The host annotations (`user_annotation`, never `gpu_user_annotation`) whose name
    matches `pattern`, in start order: start_ns, end_ns, pid, name."""
    ann = trace.tables.get("annotations")
    keys = ("start_ns", "end_ns", "pid", "name")
    if ann is None:
        return {k: np.zeros(0, dtype=np.int64) for k in keys}
    regex = re.compile(pattern)
    ids = [i for i, text in enumerate(trace.strings) if regex.search(text)]
    chosen = np.isin(ann["name"], np.array(ids, dtype=np.int64))
    order = np.argsort(ann["start_ns"][chosen], kind="stable")
    return {k: ann[k][chosen][order] for k in keys}


def step_of(trace: KinetoTrace, table: str, steps: dict[str, np.ndarray]) -> np.ndarray:
    """For each event of a GPU table, the index of the step (in `steps`) whose range holds its
    launching call's start on the same process, or -1 (no call, or outside every step). Where
    steps overlap, the latest to start."""
    index = launch_index(trace, table)
    out = np.full(len(index), -1, dtype=np.int64)
    has = index >= 0
    if not has.any() or len(steps["start_ns"]) == 0:
        return out
    api = trace.tables["api_calls"]
    start, pid = api["start_ns"][index[has]], api["pid"][index[has]]
    found = np.full(len(start), -1, dtype=np.int64)
    for p in np.unique(steps["pid"]).tolist():
        rows = np.flatnonzero(steps["pid"] == p)
        mine = pid == p
        k = np.searchsorted(steps["start_ns"][rows], start[mine], side="right") - 1
        inside = (k >= 0) & (start[mine] < steps["end_ns"][rows][np.maximum(k, 0)])
        found[mine] = np.where(inside, rows[np.maximum(k, 0)], -1)
    out[has] = found
    return out

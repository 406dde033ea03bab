"""The kernels by operation (#56) of an export with op ranges (census.load.op_ranges): each
kernel's launching call (the CUDA API row of its process and correlationId, as the API map
finds it), that call's step or phase segment (the same StepIndex lookup as every other figure:
census.load.intervals.StepIndex.step_at), its innermost `aten::` range
(census.findings.op_ranges) and its row (census.findings.ops.group_kernels). Read after the
passes, in this process, only where the export has op ranges: an export without costs one
look at its tables (and, for an nsys export, one query of its NVTX ranges).
"""

from __future__ import annotations

import sqlite3

import numpy as np

from census.definitions import kernel_name
from census.findings.op_ranges import attribute_launches
from census.findings.ops import OpTable, group_kernels
from census.load.api_names import read_strings
from census.load.intervals import INT_NULL, StepIndex, factorize
from census.load.op_ranges import read_op_ranges
from census.sources import schema as sc
from census.sqlite import TIMED, read_batches, rowid_range


def read_ops(
    conn: sqlite3.Connection, schema: sc.Schema, index: StepIndex, keys: int
) -> OpTable | None:
    """The OpTable of the export's kernels over the index's `keys` (steps, or phase segments),
    or None where it has no op ranges or no kernels."""
    ranges = read_op_ranges(conn, schema)
    if ranges is None or not schema.has(sc.KERNEL):
        return None
    dn = "demangledName" if schema.has_column(sc.KERNEL, "demangledName") else "NULL"
    k = _columns(conn, sc.KERNEL, {**TIMED, "proc": "globalPid >> 24", "corr": "correlationId",
                                   "dn": dn, "sn": "shortName"})  # fmt: skip
    calls = _columns(conn, sc.RUNTIME if schema.has(sc.RUNTIME) else None,
                     {"start": "start", "thread": "globalTid", "proc": "globalTid >> 24",
                      "corr": "correlationId"})  # fmt: skip
    launch = _launch_of(k["proc"], k["corr"], calls["proc"], calls["corr"])
    used, launch = np.unique(launch, return_inverse=True)
    launch = launch.ravel() - int(len(used) and used[0] < 0)  # -1 stays -1
    used = used[used >= 0]
    step = index.step_at(calls["proc"][used], calls["start"][used])
    kernel_step = np.where(launch >= 0, step[np.maximum(launch, 0)], -1)
    lo = attribute_launches(calls["start"][used], calls["thread"][used], ranges)
    pairs, pair = factorize(k["dn"], k["sn"])
    strings = read_strings(conn, [i for p in pairs for i in p if i != INT_NULL])
    names = [kernel_name(strings, *(None if i == INT_NULL else i for i in p)) for p in pairs]
    time_ns = np.where(k["dur"] != INT_NULL, k["dur"], 0)
    return group_kernels(pair, names, time_ns, kernel_step, keys, launch, lo, ranges)


def _columns(conn: sqlite3.Connection, table: str | None, columns: dict[str, str]) -> dict:
    """A table's columns whole (empty ones without the table)."""
    whole = rowid_range(conn, table) if table is not None else None
    if whole is None:
        return {k: np.zeros(0, np.int64) for k in columns}
    parts = [b for b, _ in read_batches(conn, table, columns, whole)]
    return {k: np.concatenate([p[k] for p in parts]) for k in columns}


def _launch_of(k_proc: np.ndarray, k_corr: np.ndarray, c_proc: np.ndarray,
               c_corr: np.ndarray) -> np.ndarray:  # fmt: skip
    """Each kernel's launching call: the first call row of its process and correlationId
    (-1 where none, or where either is NULL)."""
    out = np.full(len(k_proc), -1, np.int64)
    k_ok = (k_proc != INT_NULL) & (k_corr != INT_NULL)
    c_ok = np.flatnonzero((c_proc != INT_NULL) & (c_corr != INT_NULL))
    if not len(c_ok) or not k_ok.any():
        return out
    procs = np.unique(c_proc[c_ok])
    corrs = np.unique(c_corr[c_ok])
    c_key = np.searchsorted(procs, c_proc[c_ok]) * len(corrs) + np.searchsorted(corrs, c_corr[c_ok])
    order = np.argsort(c_key, kind="stable")  # the first row of a (process, correlationId)
    keys = c_key[order]
    kp, kc = k_proc[k_ok], k_corr[k_ok]
    pi = np.minimum(np.searchsorted(procs, kp), len(procs) - 1)
    ci = np.minimum(np.searchsorted(corrs, kc), len(corrs) - 1)
    known = (procs[pi] == kp) & (corrs[ci] == kc)
    at = np.searchsorted(keys, pi * len(corrs) + ci)
    at = np.minimum(at, len(keys) - 1)
    hit = known & (keys[at] == pi * len(corrs) + ci)
    found = np.full(len(kp), -1, np.int64)
    found[hit] = c_ok[order[at[hit]]]
    out[k_ok] = found
    return out

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
from collections.abc import Callable, Mapping, Sequence

import numpy as np

from census.definitions import kernel_name
from census.findings.op_ranges import attribute_launches
from census.findings.ops import OpTable, group_kernels
from census.heap import small_pages
from census.load.api_names import read_strings
from census.load.intervals import INT_NULL, StepIndex, distinct, factorize, unique
from census.load.op_ranges import Launches, has_op_ranges, read_op_ranges
from census.sources import schema as sc
from census.sqlite import TIMED, read_batches, rowid_range


def read_ops(
    conn: sqlite3.Connection,
    schema: sc.Schema,
    index: StepIndex,
    keys: int,
    inductor: Mapping[str, Sequence[str]] | None = None,
) -> OpTable | None:
    """The OpTable of the export's kernels over the index's `keys` (steps, or phase segments),
    or None where it has no op ranges or no kernels. `inductor`: Inductor's map kept by the
    capture (census.sources.inductor_map), which decides a Triton kernel's fused group."""
    if not schema.has(sc.KERNEL) or not has_op_ranges(conn, schema):
        return None
    with small_pages():
        return _read_ops(conn, schema, index, keys, inductor)


def _read_ops(
    conn: sqlite3.Connection,
    schema: sc.Schema,
    index: StepIndex,
    keys: int,
    inductor: Mapping[str, Sequence[str]] | None,
) -> OpTable | None:
    dn = "demangledName" if schema.has_column(sc.KERNEL, "demangledName") else "NULL"
    k = _columns(conn, sc.KERNEL, {"dur": TIMED["dur"], "proc": "globalPid >> 24",
                                   "corr": "correlationId", "dn": dn, "sn": "shortName"})  # fmt: skip
    # the calls whose correlationId a kernel has (most calls launch nothing: at 10^6 kernels,
    # 3.2 million rows kept would be 3.2 times the work)
    wanted = _Wanted(k["corr"])
    calls = _columns(conn, sc.RUNTIME if schema.has(sc.RUNTIME) else None,
                     {"start": "start", "thread": "globalTid", "proc": "globalTid >> 24",
                      "corr": "correlationId"}, lambda b: wanted.has(b["corr"]))  # fmt: skip
    launch = _launch_of(k["proc"], k["corr"], calls["proc"], calls["corr"])
    used, launch = _compact(launch, len(calls["proc"]))
    step = index.step_at(calls["proc"][used], calls["start"][used])
    kernel_step = np.append(step, -1)[launch]  # -1 (no call) reads the last
    at, thread = calls["start"][used], calls["thread"][used]
    del calls
    ranges = read_op_ranges(conn, schema, Launches(at, thread))
    if ranges is None:
        return None
    lo = attribute_launches(at, thread, ranges)
    pairs, pair = factorize(k["dn"], k["sn"])
    strings = read_strings(conn, [i for p in pairs for i in p if i != INT_NULL])
    names = [kernel_name(strings, *(None if i == INT_NULL else i for i in p)) for p in pairs]
    time_ns = np.where(k["dur"] != INT_NULL, k["dur"], 0)
    return group_kernels(pair, names, time_ns, kernel_step, keys, launch, lo, ranges, inductor)


def _columns(conn: sqlite3.Connection, table: str | None, columns: dict[str, str],
             keep: Callable[[dict], np.ndarray] | None = None) -> dict:  # fmt: skip
    """A table's columns whole (empty ones without the table); `keep`: the rows of each batch
    kept (a bool mask)."""
    whole = rowid_range(conn, table) if table is not None else None
    if whole is None:
        return {k: np.zeros(0, np.int64) for k in columns}
    parts = []
    for b, _ in read_batches(conn, table, columns, whole):
        mask = None if keep is None else keep(b)
        parts.append(b if mask is None else {k: v[mask] for k, v in b.items()})
    return {k: np.concatenate([p[k] for p in parts]) for k in columns}


class _Wanted:
    """A set of correlationIds, asked of a column at a time: a bitmap over their span where it
    is small, else a sorted array."""

    def __init__(self, corr: np.ndarray) -> None:
        corr = corr[corr != INT_NULL]
        self.lo = int(corr.min()) if len(corr) else 0
        span = int(corr.max()) - self.lo + 1 if len(corr) else 0
        self.bitmap = np.zeros(span, bool) if span <= 1 << 28 else None
        if self.bitmap is not None:
            self.bitmap[corr - self.lo] = True
        else:
            self.sorted = unique(corr)

    def has(self, corr: np.ndarray) -> np.ndarray:
        """Whether each value is in the set (NULL never is)."""
        if self.bitmap is not None:
            at = corr - self.lo
            inside = (corr != INT_NULL) & (at >= 0) & (at < len(self.bitmap))
            return inside & self.bitmap[np.where(inside, at, 0)]
        if not len(self.sorted):
            return np.zeros(len(corr), bool)
        i = np.minimum(np.searchsorted(self.sorted, corr), len(self.sorted) - 1)
        return (self.sorted[i] == corr) & (corr != INT_NULL)


def _compact(launch: np.ndarray, n: int) -> tuple[np.ndarray, np.ndarray]:
    """(the call rows that launched a kernel, ascending; each kernel's index among them, -1
    where none): by a count per row, not a sort or a hash."""
    used = np.flatnonzero(np.bincount(launch[launch >= 0], minlength=n))
    new = np.full(n + 1, -1, np.int64)  # row n: what a kernel without a call reads
    new[used] = np.arange(len(used))
    return used, new[np.where(launch >= 0, launch, n)]


def _launch_of(k_proc: np.ndarray, k_corr: np.ndarray, c_proc: np.ndarray,
               c_corr: np.ndarray) -> np.ndarray:  # fmt: skip
    """Each kernel's launching call: the first call row of its process and correlationId
    (-1 where none, or where either is NULL)."""
    out = np.full(len(k_proc), -1, np.int64)
    k_ok = (k_proc != INT_NULL) & (k_corr != INT_NULL)
    c_ok = np.flatnonzero((c_proc != INT_NULL) & (c_corr != INT_NULL))
    if not len(c_ok) or not k_ok.any():
        return out
    procs = distinct(c_proc[c_ok])[0]  # a few
    c_code = np.searchsorted(procs, c_proc[c_ok])
    k_code = np.minimum(np.searchsorted(procs, k_proc[k_ok]), len(procs) - 1)
    known = procs[k_code] == k_proc[k_ok]
    lo = min(int(c_corr[c_ok].min()), int(k_corr[k_ok].min()))
    span = max(int(c_corr[c_ok].max()), int(k_corr[k_ok].max())) - lo + 1
    if span * len(procs) >= 2**62:  # correlationIds far apart: ranks among them instead
        corrs = distinct(np.concatenate((c_corr[c_ok], k_corr[k_ok])))[0]
        c_rank, k_rank = np.searchsorted(corrs, c_corr[c_ok]), np.searchsorted(corrs, k_corr[k_ok])
        span, lo = len(corrs), 0
    else:
        c_rank, k_rank = c_corr[c_ok] - lo, k_corr[k_ok] - lo
    c_key = c_code * span + c_rank
    order = np.argsort(c_key, kind="stable")  # the first row of a (process, correlationId)
    keys = c_key[order]
    k_key = k_code * span + k_rank
    at = np.minimum(np.searchsorted(keys, k_key), len(keys) - 1)
    hit = known & (keys[at] == k_key)
    found = np.full(len(k_key), -1, np.int64)
    found[hit] = c_ok[order[at[hit]]]
    out[k_ok] = found
    return out

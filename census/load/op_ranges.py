"""The operation ranges of an export (#56), read into census.findings.op_ranges.OpRanges: a
Kineto trace's `cpu_op` events from its export's own table (census.sources.schema.OP_RANGES),
else an nsys export's op NVTX ranges as `torch.autograd.profiler.emit_nvtx` or nsys's
`--pytorch=autograd-nvtx` write them: push/pop ranges named `aten::mm, seq = 12, op_id = 40`,
`MmBackward0, seq = 12`, `autograd::engine::evaluate_function: MmBackward0` (docs/definitions.md,
"Operation"). None where the export has no such ranges; a range's thread is its globalTid, the
launching calls' own.
"""

from __future__ import annotations

import re
import sqlite3

import numpy as np

from census.findings.op_ranges import (
    ATEN,
    BACKWARD_PREFIX,
    OpRanges,
    normalize_names,
    normalize_op_name,
)
from census.load.api_names import read_strings
from census.load.intervals import INT_NULL, distinct
from census.load.steps import nvtx_text
from census.sources import schema as sc
from census.sqlite import read_batches, rowid_range, without_rowid

_SEQ = re.compile(r",\s*seq\s*=\s*(\d+)")
# an autograd node's range as emit_nvtx names it: its class (`MmBackward0`,
# `CompiledFunctionBackward`), with a sequence number
_NODE = re.compile(r"^\w+Backward\d*$")
# the NVTX ranges that are ops: aten ops, the autograd engine's calls of nodes, and any range
# emit_nvtx decorated with a sequence number
_OP_LIKE = (f"{ATEN}%", f"{BACKWARD_PREFIX}%", "%, seq = %")


def read_op_ranges(
    conn: sqlite3.Connection, schema: sc.Schema, launches: Launches | None = None
) -> OpRanges | None:
    """The export's op ranges, or None where it has none. With `launches` (the launching
    calls' start and thread), only the ranges that can answer for them: those holding a launch
    on their thread, and the forward ranges with a sequence number (a backward node's forward
    op is chosen among all of those); the answers are the same, and at 10^6 kernels a few
    million ranges that launch nothing are never kept."""
    if schema.has(sc.OP_RANGES):
        return _kineto_ranges(conn, launches)
    if schema.has(sc.NVTX):
        return _nvtx_ranges(conn, schema, launches)
    return None


def has_op_ranges(conn: sqlite3.Connection, schema: sc.Schema) -> bool:
    """Whether the export holds any op range (read_op_ranges' ranges, unfiltered)."""
    if schema.has(sc.OP_RANGES):
        return rowid_range(conn, sc.OP_RANGES) is not None
    return schema.has(sc.NVTX) and bool(_nvtx_rows(conn, schema, " LIMIT 1"))


class Launches:
    """The launching calls' start times by thread, sorted, to ask which ranges hold one."""

    def __init__(self, start_ns: np.ndarray, thread: np.ndarray) -> None:
        order = np.lexsort((start_ns, thread))
        threads, first = np.unique(thread[order], return_index=True)
        bounds = np.append(first, len(order))
        self.by_thread = {int(t): start_ns[order[bounds[i]:bounds[i + 1]]]
                          for i, t in enumerate(threads.tolist())}  # fmt: skip

    def held(self, start: np.ndarray, end: np.ndarray, thread: np.ndarray) -> np.ndarray:
        """Whether each [start, end) holds a launch of its thread."""
        out = np.zeros(len(start), bool)
        for t, times in self.by_thread.items():
            mine = np.flatnonzero(thread == t)
            if len(mine):
                inside = np.searchsorted(times, end[mine]) - np.searchsorted(times, start[mine])
                out[mine] = inside > 0
        return out


def _kept(b: dict[str, np.ndarray], launches: Launches | None) -> dict[str, np.ndarray]:
    """A batch of ranges (start, end, thread, seq, back) with a known start, end and thread,
    `seq` -1 where none; with `launches`, only those read_op_ranges keeps."""
    keep = (b["start"] != INT_NULL) & (b["end"] != INT_NULL) & (b["thread"] != INT_NULL)
    b["seq"] = np.where(b["seq"] == INT_NULL, -1, b["seq"])
    if launches is not None:
        keep &= ((b["seq"] >= 0) & ~b["back"]) | launches.held(b["start"], b["end"], b["thread"])
    return b if keep.all() else {k: v[keep] for k, v in b.items()}


def _kineto_ranges(conn: sqlite3.Connection, launches: Launches | None) -> OpRanges | None:
    whole = rowid_range(conn, sc.OP_RANGES)
    if whole is None:
        return None
    columns = {"start": "start", "end": '"end"', "thread": "globalTid", "name": "nameId",
               "seq": "sequence", "back": "backward"}  # fmt: skip
    parts = []
    for b, _ in read_batches(conn, sc.OP_RANGES, columns, whole):
        b["back"] = b["back"] == 1
        parts.append(_kept(b, launches))
    col = {k: np.concatenate([p[k] for p in parts]) for k in columns}
    ids, raw = distinct(col["name"])
    strings = read_strings(conn, ids.tolist())
    names, new = normalize_names([strings.get(int(i), f"<name id {i}>") for i in ids.tolist()])
    return OpRanges(start_ns=col["start"], end_ns=col["end"], thread=col["thread"],
                    name_id=new[raw], sequence=col["seq"], backward=col["back"],
                    names=names)  # fmt: skip


def _nvtx_ranges(
    conn: sqlite3.Connection, schema: sc.Schema, launches: Launches | None
) -> OpRanges | None:
    rows = _nvtx_rows(conn, schema)
    if not rows:
        return None
    start, end, thread, texts = zip(*rows, strict=True)
    distinct_texts = list(dict.fromkeys(texts))
    text_id = {t: i for i, t in enumerate(distinct_texts)}
    raw = np.fromiter((text_id[t] for t in texts), np.int64, len(texts))
    names, new = normalize_names(distinct_texts)
    seqs = [_SEQ.search(t) for t in distinct_texts]
    seq = np.array([int(m.group(1)) if m else -1 for m in seqs], np.int64)
    back = np.array([_backward(normalize_op_name(t), s >= 0)
                     for t, s in zip(distinct_texts, seq.tolist(), strict=True)], bool)  # fmt: skip
    b = {"start": _ints(start), "end": _ints(end), "thread": _ints(thread), "seq": seq[raw],
         "back": back[raw], "name": new[raw]}  # fmt: skip
    b = _kept(_engine_calls_numbered(b), launches)
    return OpRanges(
        start_ns=b["start"],
        end_ns=b["end"],
        thread=b["thread"],
        name_id=b["name"],
        sequence=b["seq"],
        backward=b["back"],
        names=names,
    )


def _engine_calls_numbered(b: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """The autograd engine's call of a node (`autograd::engine::evaluate_function: X`) given the
    sequence number of the node range it opens (`X, seq = N`, the first backward range with a
    number starting inside it on its thread): nsys's and emit_nvtx's engine calls carry none,
    yet the engine runs work of the node after the node's own range ends (the sums that reduce
    a broadcast gradient, in validate_outputs), and that work is the node's backward."""
    calls = np.flatnonzero(b["back"] & (b["seq"] < 0))
    nodes = np.flatnonzero(b["back"] & (b["seq"] >= 0))
    if not len(calls) or not len(nodes):
        return b
    # calls and nodes in (thread, start) order, a call before a node of the same start: each
    # call's node is the first node at or after it (one sort, no loop over the calls)
    rows = np.concatenate([calls, nodes])
    is_node = np.concatenate([np.zeros(len(calls), bool), np.ones(len(nodes), bool)])
    order = np.lexsort((is_node, b["start"][rows], b["thread"][rows]))
    at = np.where(is_node[order], np.arange(len(order)), len(order))
    following = np.minimum.accumulate(at[::-1])[::-1]
    mine = np.flatnonzero(~is_node[order])
    call = rows[order[mine]]
    ok = following[mine] < len(order)
    first = rows[order[np.minimum(following[mine], len(order) - 1)]]
    ok &= (b["thread"][first] == b["thread"][call]) & (b["start"][first] < b["end"][call])
    seq = b["seq"].copy()
    seq[call[ok]] = seq[first[ok]]
    return {**b, "seq": seq}


def _nvtx_rows(conn: sqlite3.Connection, schema: sc.Schema, limit: str = "") -> list[tuple]:
    """(start, end, globalTid, text) of the NVTX ranges whose text is an op range's."""
    text, join = nvtx_text(schema)
    like = " OR ".join(f"t LIKE '{p}'" for p in _OP_LIKE)
    # the rows in the table's order: by rowid, or a table without rowids by its primary key
    order = "NULL" if without_rowid(conn, sc.NVTX) else "n.rowid"
    return conn.execute(
        f"""SELECT start, "end", globalTid, t FROM (
              SELECT {order} AS r, n.start, n."end", n.globalTid, {text} AS t
              FROM "{sc.NVTX}" n {join}
              WHERE n.eventType IN ({",".join(map(str, sc.NVTX_RANGE_TYPES))}))
            WHERE ({like}) ORDER BY r{limit}"""
    ).fetchall()


def _backward(name: str, has_seq: bool) -> bool:
    """Whether an NVTX op range is a backward node's: the autograd engine's call of one, or a
    node's own range (its class name, with a sequence number)."""
    return name.startswith(BACKWARD_PREFIX) or (has_seq and _NODE.match(name) is not None)


def _ints(values: tuple) -> np.ndarray:
    return np.array([INT_NULL if v is None else v for v in values], np.int64)

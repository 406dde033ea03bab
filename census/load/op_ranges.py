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
from census.load.intervals import INT_NULL
from census.load.steps import nvtx_text
from census.sources import schema as sc
from census.sqlite import TIMED, read_batches, rowid_range

_SEQ = re.compile(r",\s*seq\s*=\s*(\d+)")
# an autograd node's range as emit_nvtx names it: its class (`MmBackward0`,
# `CompiledFunctionBackward`), with a sequence number
_NODE = re.compile(r"^\w+Backward\d*$")
# the NVTX ranges that are ops: aten ops, the autograd engine's calls of nodes, and any range
# emit_nvtx decorated with a sequence number
_OP_LIKE = (f"{ATEN}%", f"{BACKWARD_PREFIX}%", "%, seq = %")


def read_op_ranges(conn: sqlite3.Connection, schema: sc.Schema) -> OpRanges | None:
    """The export's op ranges, or None where it has none."""
    if schema.has(sc.OP_RANGES):
        return _kineto_ranges(conn)
    if schema.has(sc.NVTX):
        return _nvtx_ranges(conn, schema)
    return None


def _kineto_ranges(conn: sqlite3.Connection) -> OpRanges | None:
    whole = rowid_range(conn, sc.OP_RANGES)
    if whole is None:
        return None
    columns = {**TIMED, "thread": "globalTid", "name": "nameId", "seq": "sequence",
               "back": "backward"}  # fmt: skip
    parts = [b for b, _ in read_batches(conn, sc.OP_RANGES, columns, whole)]
    col = {k: np.concatenate([p[k] for p in parts]) for k in columns}
    ids, raw = np.unique(col["name"], return_inverse=True)
    strings = read_strings(conn, ids.tolist())
    names, new = normalize_names([strings.get(int(i), f"<name id {i}>") for i in ids.tolist()])
    return _ranges(col["start"], col["dur"], col["thread"], new[raw], col["seq"],
                   col["back"] == 1, names)  # fmt: skip


def _nvtx_ranges(conn: sqlite3.Connection, schema: sc.Schema) -> OpRanges | None:
    text, join = nvtx_text(schema)
    like = " OR ".join(f"t LIKE '{p}'" for p in _OP_LIKE)
    rows = conn.execute(
        f"""SELECT start, "end" - start, globalTid, t FROM (
              SELECT n.start, n."end", n.globalTid, {text} AS t FROM "{sc.NVTX}" n {join}
              WHERE n.eventType IN ({",".join(map(str, sc.NVTX_RANGE_TYPES))}))
            WHERE ({like}) ORDER BY rowid"""
    ).fetchall()
    if not rows:
        return None
    start, dur, thread, texts = zip(*rows, strict=True)
    distinct = list(dict.fromkeys(texts))
    text_id = {t: i for i, t in enumerate(distinct)}
    raw = np.fromiter((text_id[t] for t in texts), np.int64, len(texts))
    names, new = normalize_names(distinct)
    seqs = [_SEQ.search(t) for t in distinct]
    seq = np.array([int(m.group(1)) if m else -1 for m in seqs], np.int64)
    back = np.array([_backward(normalize_op_name(t), s >= 0)
                     for t, s in zip(distinct, seq.tolist(), strict=True)], bool)  # fmt: skip
    return _ranges(_ints(start), _ints(dur), _ints(thread), new[raw], seq[raw], back[raw], names)


def _backward(name: str, has_seq: bool) -> bool:
    """Whether an NVTX op range is a backward node's: the autograd engine's call of one, or a
    node's own range (its class name, with a sequence number)."""
    return name.startswith(BACKWARD_PREFIX) or (has_seq and _NODE.match(name) is not None)


def _ints(values: tuple) -> np.ndarray:
    return np.array([INT_NULL if v is None else v for v in values], np.int64)


def _ranges(start, dur, thread, name_id, seq, back, names) -> OpRanges:
    """The ranges with a known start and end (a range cut off by the capture's end has none)."""
    keep = (start != INT_NULL) & (dur != INT_NULL) & (thread != INT_NULL)
    seq = np.where(seq == INT_NULL, -1, seq)
    return OpRanges(start_ns=start[keep], end_ns=(start + dur)[keep], thread=thread[keep],
                    name_id=name_id[keep], sequence=seq[keep], backward=back[keep],
                    names=names)  # fmt: skip

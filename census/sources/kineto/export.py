"""A Kineto trace made an nsys-shaped SQLite export, so that the one engine reads it through the
one door (census.sqlite.read_batches and the SQL beside it), as an .nsys-rep is made one by
`nsys export` (census/sources/export.py): the tables census reads, nothing else.

- StringIds: every name (kernels, API calls, annotations).
- CUPTI_ACTIVITY_KIND_KERNEL / _MEMCPY / _MEMSET: start, end, deviceId, streamId,
  correlationId, globalPid = the host process << 24 (a GPU event's own pid is its device: the
  process is the one whose calls the trace holds), names, copyKind, bytes.
- CUPTI_ACTIVITY_KIND_RUNTIME: runtime and driver calls alike (as nsys keeps them), globalTid =
  pid << 24 | tid.
- NVTX_EVENTS: the `user_annotation` host ranges as push/pop ranges (`ProfilerStep#N` and
  census's `step N` then match the steps' pattern; `gpu_user_annotation` never enters).
- KINETO_OP_RANGES (census.sources.schema.OP_RANGES): the `cpu_op` events (`aten::` ops,
  autograd nodes), a table of their own so that they never read as steps, phases or the idle
  split's host ranges: start, end, globalTid, nameId (the name as the trace writes it),
  sequence (args' `Sequence number`, NULL where none) and backward (1 where args' `Fwd thread
  id` > 0 or the name is the autograd engine's call of a node), for census.load.op_ranges.
  Only the ranges that can answer for a kernel are kept (_keep_answering_ops): those holding, on
  their thread, a call whose correlationId a kernel has, and the forward ranges with a sequence
  number; census.load.op_ranges keeps the same ones again as it reads, so the answers are the
  same, and a summary does not read the ops that launch nothing (2/3 of them in HTA's trace).
- META_DATA_EXPORT: the tracer; the rank and world size where the trace names them
  (`distributedInfo`); its `traceName` and `host_name` where it has them; its clock's origin
  (KINETO_CLOCK_ORIGIN_NS: `baseTimeNanoseconds`, the wall-clock ns its `ts` count from; 0 for an
  older trace whose `ts` count from the epoch; absent where neither holds).
- TARGET_INFO_GPU: the GPUs' ids and names from `deviceProperties`.

Written in the cache folder (never beside the user's trace), atomically, streamed batch by
batch; made again only when the trace is newer.
"""

from __future__ import annotations

import sqlite3
from collections import Counter
from pathlib import Path

import numpy as np

from census.findings.op_ranges import BACKWARD_PREFIX
from census.paths import atomic_target, cache_dir
from census.sources.kineto.numbers import NO_VALUE
from census.sources.kineto.reader import iter_batches, notes
from census.sources.kineto.tables import Strings
from census.sources.schema import NOTE, OP_RANGES

TRACER = "torch.profiler (Kineto)"
EXPORT_VERSION = 5  # in the export's name: a census that writes exports otherwise makes its own
_TID_BITS = (1 << 24) - 1
_GPU_TABLES = {"kernels": "CUPTI_ACTIVITY_KIND_KERNEL", "memcpys": "CUPTI_ACTIVITY_KIND_MEMCPY",
               "memsets": "CUPTI_ACTIVITY_KIND_MEMSET"}  # fmt: skip
_SCHEMA = {
    "CUPTI_ACTIVITY_KIND_KERNEL": "start INT, end INT, deviceId INT, contextId INT, streamId INT, "
    "correlationId INT, globalPid INT, demangledName INT, shortName INT, gridId INT, "
    "graphNodeId INT",
    "CUPTI_ACTIVITY_KIND_RUNTIME": "start INT, end INT, eventClass INT, globalTid INT, "
    "correlationId INT, nameId INT, returnValue INT",
    "CUPTI_ACTIVITY_KIND_MEMCPY": "start INT, end INT, deviceId INT, contextId INT, streamId INT, "
    "correlationId INT, globalPid INT, bytes INT, copyKind INT",
    "CUPTI_ACTIVITY_KIND_MEMSET": "start INT, end INT, deviceId INT, contextId INT, streamId INT, "
    "correlationId INT, globalPid INT, value INT, bytes INT",
    "NVTX_EVENTS": "start INT, end INT, eventType INT, rangeId INT, text TEXT, globalTid INT, "
    "textId INT, domainId INT",
    OP_RANGES: "start INT, end INT, globalTid INT, nameId INT, sequence INT, backward INT",
}
_ALL_OPS = "temp.all_ops"  # every cpu_op, until _keep_answering_ops keeps those that can answer


def kineto_target(trace: Path) -> Path:
    """Where a trace's export goes: the cache folder, named by the trace's name, size and time."""
    stat = trace.stat()
    name = trace.name.removesuffix(".gz").removesuffix(".json")
    stamp = f"{stat.st_size}-{stat.st_mtime_ns}-v{EXPORT_VERSION}"
    return cache_dir() / "exports" / f"{name}-{stamp}.kineto.sqlite"


def named_source(named: Path, export: Path) -> Path:
    """What a census names as its source: the export read, or the trace (or nsys Arrow/Parquet
    folder) the user named where `export` is its export in the cache folder (export_kineto,
    census.sources.columnar.export_columnar)."""
    made = export.parent == cache_dir() / "exports" and export.name.endswith(
        (".kineto.sqlite", ".columnar.sqlite"))  # fmt: skip
    return named if made and named.exists() else export


def export_kineto(trace: Path) -> Path:
    """The nsys-shaped SQLite export of a Kineto trace (kineto_target), made unless there;
    InputError naming the trace where it is not a readable trace (nothing is left behind)."""
    target = kineto_target(trace)
    if target.exists():
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    with atomic_target(target) as tmp:
        conn = sqlite3.connect(tmp)
        try:
            _write(conn, trace)
            conn.commit()
        finally:
            conn.close()
    return target


def _write(conn: sqlite3.Connection, trace: Path) -> None:
    conn.execute("PRAGMA journal_mode = OFF")
    conn.execute("PRAGMA synchronous = OFF")
    for table, columns in _SCHEMA.items():
        conn.execute(f"CREATE TABLE {table} ({columns})")
    conn.execute(f"CREATE TABLE {_ALL_OPS} ({_SCHEMA[OP_RANGES]})")
    batches = iter_batches(trace)
    host = _HostProcess()
    no_bytes = 0  # copies and memsets without args.bytes (ROCm's)
    for tables in batches:
        host.add(tables.get("api_calls"))
        if "api_calls" in tables:
            _insert_calls(conn, tables["api_calls"])
        if "annotations" in tables:
            _insert_ranges(conn, tables["annotations"], batches.strings)
        if "cpu_ops" in tables:
            _insert_ops(conn, tables["cpu_ops"], batches.strings)
        for name in _GPU_TABLES:
            if name in tables:
                no_bytes += _insert_gpu(conn, name, tables[name])
    for table in _GPU_TABLES.values():  # the process is known once every call is read
        conn.execute(f"UPDATE {table} SET globalPid = ?", (host.pid() << 24,))
    _keep_answering_ops(conn)
    strings = batches.strings.table()
    conn.execute("CREATE TABLE StringIds (id INTEGER PRIMARY KEY, value TEXT)")
    conn.executemany("INSERT INTO StringIds VALUES (?, ?)", enumerate(strings))
    conn.execute("CREATE TABLE META_DATA_EXPORT (name TEXT, value TEXT)")
    meta = [("EXPORT_SCHEMA_VERSION", "3"), ("TRACER", TRACER), *_trace_meta(conn, batches.meta)]
    said = notes(batches.counts)
    if no_bytes:
        said.append(f"{no_bytes:,} copies or memsets carry no `args.bytes`: their bytes count as 0")
    meta += [(f"{NOTE}{i}", text) for i, text in enumerate(said)]  # warnings (census.load)
    conn.executemany("INSERT INTO META_DATA_EXPORT VALUES (?, ?)", meta)
    gpus = batches.meta.get("deviceProperties")
    conn.execute("CREATE TABLE TARGET_INFO_GPU (id INT, name TEXT)")
    if isinstance(gpus, list):
        conn.executemany(
            "INSERT INTO TARGET_INFO_GPU VALUES (?, ?)",
            [(g["id"], str(g.get("name"))) for g in gpus
             if isinstance(g, dict) and isinstance(g.get("id"), int)],
        )  # fmt: skip


EPOCH_AFTER_NS = 10**18  # 2001-09-09: a time past it counts from the epoch


def _trace_meta(conn: sqlite3.Connection, top: dict) -> list[tuple[str, str]]:
    """What the trace's top-level keys say of its place: rank, world size, name, host, and the
    wall-clock time (ns since the epoch) its `ts` count from."""
    info = top.get("distributedInfo")
    meta = [(f"KINETO_{k.upper()}", str(info[k]))
            for k in ("rank", "world_size") if isinstance(info, dict) and k in info]  # fmt: skip
    meta += [(f"KINETO_{k.upper()}", top[k]) for k in ("traceName", "host_name")
             if isinstance(top.get(k), str) and top[k]]  # fmt: skip
    base = top.get("baseTimeNanoseconds")
    if isinstance(base, int) and not isinstance(base, bool):
        meta.append(("KINETO_CLOCK_ORIGIN_NS", str(base)))
    else:  # older Kineto wrote ts since the epoch, with no base: so when the times are past 2001
        first = conn.execute("SELECT MIN(start) FROM CUPTI_ACTIVITY_KIND_RUNTIME").fetchone()[0]
        if isinstance(first, int) and first >= EPOCH_AFTER_NS:
            meta.append(("KINETO_CLOCK_ORIGIN_NS", "0"))
    return meta


class _HostProcess:
    """The process whose calls the trace holds (the most calls, where there are several)."""

    def __init__(self) -> None:
        self.calls: Counter[int] = Counter()

    def add(self, calls: dict[str, np.ndarray] | None) -> None:
        if calls is not None:
            pids, counts = np.unique(calls["pid"], return_counts=True)
            self.calls.update(dict(zip(pids.tolist(), counts.tolist(), strict=True)))

    def pid(self) -> int:
        return self.calls.most_common(1)[0][0] if self.calls else 0


def _thread(pid: np.ndarray, tid: np.ndarray) -> np.ndarray:
    return (np.maximum(pid, 0) << 24) | (tid & _TID_BITS)


def _insert_calls(conn: sqlite3.Connection, c: dict[str, np.ndarray]) -> None:
    rows = zip(c["start_ns"].tolist(), c["end_ns"].tolist(),
               _thread(c["pid"], c["tid"]).tolist(), c["correlation"].tolist(),
               c["name"].tolist(), strict=True)  # fmt: skip
    conn.executemany(
        "INSERT INTO CUPTI_ACTIVITY_KIND_RUNTIME (start, end, eventClass, globalTid, "
        "correlationId, nameId, returnValue) VALUES (?, ?, 1, ?, ?, ?, 0)",
        rows,
    )


def _insert_ranges(conn: sqlite3.Connection, c: dict[str, np.ndarray], strings: Strings) -> None:
    rows = zip(c["start_ns"].tolist(), c["end_ns"].tolist(),
               strings.texts(c["name"]), _thread(c["pid"], c["tid"]).tolist(),
               strict=True)  # fmt: skip
    conn.executemany(
        "INSERT INTO NVTX_EVENTS (start, end, eventType, rangeId, text, globalTid, textId, "
        "domainId) VALUES (?, ?, 59, 0, ?, ?, NULL, 0)",
        rows,
    )


def _insert_ops(conn: sqlite3.Connection, c: dict[str, np.ndarray], strings: Strings) -> None:
    backward = (c["fwd_thread"] != NO_VALUE) & (c["fwd_thread"] > 0)
    prefixed = [
        isinstance(n, str) and n.startswith(BACKWARD_PREFIX) for n in strings.texts(c["name"])
    ]
    backward |= np.array(prefixed, dtype=bool)
    seq = c["sequence"]
    rows = zip(c["start_ns"].tolist(), c["end_ns"].tolist(),
               _thread(c["pid"], c["tid"]).tolist(), c["name"].tolist(),
               [None if s == NO_VALUE else s for s in seq.tolist()],
               backward.astype(np.int64).tolist(), strict=True)  # fmt: skip
    conn.executemany(f"INSERT INTO {_ALL_OPS} VALUES (?, ?, ?, ?, ?, ?)", rows)


def _keep_answering_ops(conn: sqlite3.Connection) -> None:
    """OP_RANGES: the cpu_ops that can be a kernel's operation, in the trace's order: the
    forward ranges with a sequence number (a backward node's forward op is chosen among all of
    those), and those holding (start <= t < end) a call on their thread whose correlationId a
    kernel has. A superset of what census.load.op_ranges keeps (it also asks the process)."""
    conn.execute(
        "CREATE TEMP TABLE launches AS SELECT globalTid AS tid, start AS t "
        "FROM CUPTI_ACTIVITY_KIND_RUNTIME WHERE correlationId IN "
        "(SELECT correlationId FROM CUPTI_ACTIVITY_KIND_KERNEL)"
    )
    conn.execute("CREATE INDEX temp.launch_at ON launches (tid, t)")
    conn.execute(
        f"""INSERT INTO {OP_RANGES} SELECT start, "end", globalTid, nameId, sequence, backward
            FROM {_ALL_OPS} o WHERE (o.sequence IS NOT NULL AND o.backward = 0) OR EXISTS (
              SELECT 1 FROM launches l
              WHERE l.tid = o.globalTid AND l.t >= o.start AND l.t < o."end")
            ORDER BY o.rowid"""
    )
    conn.execute(f"DROP TABLE {_ALL_OPS}")
    conn.execute("DROP TABLE temp.launches")


def _insert_gpu(conn: sqlite3.Connection, name: str, c: dict[str, np.ndarray]) -> int:
    """The GPU events' rows; how many of them (copies, memsets) have no bytes."""
    corr = np.where(c["correlation"] == NO_VALUE, 0, c["correlation"])
    head = [c["start_ns"].tolist(), c["end_ns"].tolist(), c["device"].tolist(),
            c["stream"].tolist(), corr.tolist()]  # fmt: skip
    process = 0  # set once the host process is known
    if name == "kernels":
        rows = zip(*head, c["name"].tolist(), c["name"].tolist(), strict=True)
        sql = ("INSERT INTO CUPTI_ACTIVITY_KIND_KERNEL (start, end, deviceId, streamId, "
               f"correlationId, demangledName, shortName, contextId, globalPid, gridId, "
               f"graphNodeId) VALUES (?, ?, ?, ?, ?, ?, ?, 1, {process}, 0, NULL)")  # fmt: skip
    else:
        size = np.where(c["bytes"] == NO_VALUE, 0, c["bytes"]).tolist()
        if name == "memcpys":
            rows = zip(*head, size, c["copy_kind"].tolist(), strict=True)
            sql = ("INSERT INTO CUPTI_ACTIVITY_KIND_MEMCPY (start, end, deviceId, streamId, "
                   "correlationId, bytes, copyKind, contextId, globalPid) "
                   f"VALUES (?, ?, ?, ?, ?, ?, ?, 1, {process})")  # fmt: skip
        else:
            rows = zip(*head, size, strict=True)
            sql = ("INSERT INTO CUPTI_ACTIVITY_KIND_MEMSET (start, end, deviceId, streamId, "
                   "correlationId, bytes, value, contextId, globalPid) "
                   f"VALUES (?, ?, ?, ?, ?, ?, 0, 1, {process})")  # fmt: skip
    conn.executemany(sql, rows)
    return 0 if name == "kernels" else int((c["bytes"] == NO_VALUE).sum())

"""SQLite export -> aggregates. Every pass over the big tables runs inside SQLite.

Python only sees aggregates (one row per kernel name and step, per copy kind, per step) and the
small NVTX step list. Inputs are opened read-only; helper tables live in SQLite's temp schema,
which is never the input file.
"""

from __future__ import annotations

import os
import re
import sqlite3
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path

from census import queries as q
from census import schema as sc
from census.errors import InputError

SQLITE_MAGIC = b"SQLite format 3\x00"

Progress = Callable[[str], None]


@dataclass(frozen=True)
class StepRange:
    """One NVTX step range; `idx` orders the selected steps by start time."""

    idx: int
    name: str
    proc: int
    start_ns: int
    end_ns: int


@dataclass
class Aggregates:
    """What the census is computed from: aggregates keyed by step (None: outside every step)."""

    # (demangled id, short id, has API row, count, time_ns, count in steps, time in steps)
    kernel_groups: list[tuple[int | None, int | None, bool, int, int, int, int]]
    names: dict[int, str]
    # step -> non-NCCL union summed over devices; key None holds the whole capture
    non_nccl_union_ns: dict[int | None, int]
    # step -> (count, time_ns, graph_count); key None holds the whole capture
    launch: dict[int | None, tuple[int, int, int]]
    # api -> (count, time_ns, step_count, step_time_ns)
    launch_by_api: dict[str, tuple[int, int, int, int]]
    # (copy kind, step, has API row, count, bytes, time_ns); kind -1 is memset
    memory_groups: list[tuple[int, int | None, int, int, int]]
    busy_ns: dict[int, int]
    orphan_kernels: int = 0  # kernels without a launching API row (sliced exports)
    # step -> (count, time_ns, NCCL count, NCCL time_ns) of the kernels launched in it
    step_kernels: dict[int, tuple[int, int, int, int]] = field(default_factory=dict)
    # step -> |NCCL union ∩ non-NCCL union| per device, summed; key None: the whole capture
    nccl_overlap_ns: dict[int | None, int] = field(default_factory=dict)


@dataclass(frozen=True)
class Profile:
    path: Path
    schema: sc.Schema
    gpus: tuple[tuple[int, str | None], ...]
    steps: tuple[StepRange, ...]
    aggregates: Aggregates
    warnings: tuple[str, ...]


def open_readonly(path: Path) -> sqlite3.Connection:
    """Open an export read-only, or raise InputError naming the file and the problem."""
    if not path.exists():
        raise InputError(f"{path}: no such file")
    if path.is_dir():
        raise InputError(f"{path}: is a directory, not an nsys SQLite export")
    if not os.access(path, os.R_OK):
        raise InputError(f"{path}: permission denied (cannot read the file)")
    with path.open("rb") as fh:
        head = fh.read(len(SQLITE_MAGIC))
    if len(head) == 0:
        raise InputError(f"{path}: empty file, not an nsys SQLite export")
    if head != SQLITE_MAGIC:
        raise InputError(
            f"{path}: not a SQLite database (export it with `nsys export --type sqlite`)"
        )
    _check_not_truncated(path)
    uri = f"{path.resolve().as_uri()}?mode=ro"
    try:
        conn = sqlite3.connect(uri, uri=True, timeout=2.0)
        conn.text_factory = _decode_text
        conn.execute("PRAGMA temp_store = FILE")
        conn.execute("PRAGMA threads = 2")
        conn.execute("PRAGMA cache_size = -65536")  # 64 MiB page cache, bounded RSS
        conn.execute("SELECT count(*) FROM sqlite_master").fetchone()
    except (sqlite3.Error, UnicodeDecodeError) as exc:
        raise InputError(f"{path}: {describe_sqlite_error(exc)}") from None
    return conn


def _check_not_truncated(path: Path) -> None:
    """The header records the page size and count: a shorter file was cut while copying."""
    with path.open("rb") as fh:
        header = fh.read(100)
    if len(header) < 100:
        raise InputError(f"{path}: truncated SQLite file ({len(header)} bytes); copy it again")
    page_size = int.from_bytes(header[16:18], "big")
    page_size = 65536 if page_size == 1 else page_size
    pages = int.from_bytes(header[28:32], "big")
    size = path.stat().st_size
    # The in-header count is valid only when the change counters agree (SQLite >= 3.7.0).
    if pages and header[24:28] == header[92:96] and size < pages * page_size:
        raise InputError(
            f"{path}: truncated SQLite file ({size:,} of {pages * page_size:,} bytes); copy it again"
        )


def _decode_text(raw: bytes) -> str:
    return raw.decode("utf-8", errors="replace")


def describe_sqlite_error(exc: Exception) -> str:
    text = " ".join(str(exc).split())  # one line, however SQLite quotes a broken schema
    text = text if len(text) <= 160 else text[:159] + "…"
    if "locked" in text:
        return "database is locked by another process (is nsys still writing it?)"
    if isinstance(exc, UnicodeDecodeError):
        return "corrupt SQLite file (undecodable text in its schema); export it again"
    if "malformed" in text or "not a database" in text or "disk I/O" in text:
        return f"corrupt or truncated SQLite file ({text}); export it again"
    return f"cannot read the SQLite file ({text})"


def load_profile(
    path: Path,
    steps_regex: str,
    skip_first: int,
    is_nccl: Callable[[str], bool],
    progress: Progress | None = None,
) -> Profile:
    """Run every aggregate query on one export. `is_nccl` decides which kernel names are NCCL."""
    conn = open_readonly(path)
    try:
        return _load(conn, path, steps_regex, skip_first, is_nccl, progress or (lambda _: None))
    except (sqlite3.Error, UnicodeDecodeError) as exc:  # SQLite's own message can be undecodable
        raise InputError(f"{path}: {describe_sqlite_error(exc)}") from None
    finally:
        conn.close()


def _load(
    conn: sqlite3.Connection,
    path: Path,
    steps_regex: str,
    skip_first: int,
    is_nccl: Callable[[str], bool],
    progress: Progress,
) -> Profile:
    schema = sc.read_schema(conn)
    if not sc.looks_like_nsys(schema):
        raise InputError(
            f"{path}: a SQLite database but not an nsys export "
            "(no META_DATA_EXPORT/EXPORT_META_DATA or StringIds table)"
        )
    for table in sc.REQUIRED_COLUMNS:
        missing = schema.missing_columns(table) if schema.has(table) else []
        if missing:
            raise InputError(
                f"{path}: table {table} lacks column(s) {', '.join(missing)}: "
                "unsupported nsys schema"
            )
    warnings = _schema_warnings(schema)
    progress("reading NVTX step ranges")
    steps, step_warnings = read_steps(conn, schema, steps_regex, skip_first)
    warnings += step_warnings
    q.create_steps_table(conn, steps)
    progress("linking GPU work to CUDA API calls")
    duplicated = q.link_runtime(conn, schema, has_steps=bool(steps))
    pairs = q.kernel_name_pairs(conn, schema)
    names = q.resolve_names(conn, schema, _kernel_name_ids(pairs))
    nccl_pairs = [p for p in pairs if is_nccl(kernel_name(names, *p))]
    q.create_nccl_table(conn, nccl_pairs)
    progress("sweeping GPU activity in time order")
    swept = q.gpu_sweep(conn, schema, bool(nccl_pairs), steps, progress)
    kernel_groups = [(*key, *v) for key, v in swept.groups.items()]
    unions = swept.unions
    progress("summing launch API calls")
    launch, launch_by_api = q.launch_aggregates(conn, bool(steps), duplicated)
    progress("summing memory copies and memsets")
    memory = q.memory_groups(conn, schema)
    busy = swept.busy_ns
    agg = Aggregates(kernel_groups, names, unions["non_nccl"], launch, launch_by_api, memory, busy)
    agg.nccl_overlap_ns = (
        {
            k: unions["nccl"].get(k, 0) + v - unions["all"].get(k, 0)
            for k, v in unions["non_nccl"].items()
        }
        if nccl_pairs
        else {}
    )
    agg.orphan_kernels = sum(g[3] for g in kernel_groups if not g[2])
    agg.step_kernels = {k: tuple(v) for k, v in swept.step_kernels.items()}
    warnings += _data_warnings(conn, schema, agg)
    return Profile(path, schema, read_gpus(conn, schema), tuple(steps), agg, tuple(warnings))


def kernel_name(names: dict[int, str], demangled: int | None, short: int | None) -> str:
    """demangledName through StringIds, falling back to shortName, then to a placeholder."""
    for sid in (demangled, short):
        if sid is not None and sid in names:
            return names[sid]
    return f"<unknown kernel name id {demangled}>"


def _schema_warnings(schema: sc.Schema) -> list[str]:
    out = []
    major = schema.major_version
    if major is not None and major not in sc.KNOWN_MAJOR_VERSIONS:
        out.append(
            f"export schema {schema.schema_version} is newer than census knows "
            f"(2.x, 3.x): figures may be incomplete"
        )
    for table in (sc.KERNEL, sc.RUNTIME, sc.NVTX, sc.STRINGS):
        if not schema.has(table):
            out.append(f"no {table} table: {sc.MISSING_TABLE_HINTS[table]}")
    return out


def read_steps(
    conn: sqlite3.Connection, schema: sc.Schema, steps_regex: str, skip_first: int
) -> tuple[list[StepRange], list[str]]:
    """NVTX ranges whose text matches `steps_regex`, minus the first `skip_first` per process."""
    if not schema.has(sc.NVTX):
        return [], []
    pattern = re.compile(steps_regex)
    conn.create_function(
        "census_step_match", 1, lambda t: t is not None and bool(pattern.search(t))
    )
    text = "n.text"
    join = ""
    if schema.has(sc.STRINGS) and schema.has_column(sc.NVTX, "textId"):
        text = "COALESCE(n.text, s.value)"
        join = f'LEFT JOIN "{sc.STRINGS}" s ON s.id = n.textId'
    rows = conn.execute(
        f"""SELECT {text}, n.start, n.end, n.globalTid >> 24 FROM "{sc.NVTX}" n {join}
            WHERE n.eventType IN ({",".join(map(str, sc.NVTX_RANGE_TYPES))})
              AND census_step_match({text})
            ORDER BY n.start"""
    ).fetchall()
    warnings: list[str] = []
    unusable = [r for r in rows if r[1] is None or r[2] is None or r[3] is None or r[2] < r[1]]
    if unusable:
        warnings.append(f"{len(unusable)} step range(s) without a valid end or thread were ignored")
    seen: dict[int, int] = {}
    kept: list[tuple[str, int, int, int]] = []
    for name, start, end, proc in rows:
        if start is None or end is None or proc is None or end < start:
            continue
        seen[proc] = seen.get(proc, 0) + 1
        if seen[proc] > skip_first:
            kept.append((name, start, end, proc))
    steps = [StepRange(i, n, p, s, e) for i, (n, s, e, p) in enumerate(kept)]
    if _overlapping(steps):
        warnings.append(
            "step ranges overlap within a process: work in an overlap counts in the later step only"
        )
    return steps, warnings


def _overlapping(steps: list[StepRange]) -> bool:
    last_end: dict[int, int] = {}
    for st in steps:
        if st.proc in last_end and st.start_ns <= last_end[st.proc]:
            return True
        last_end[st.proc] = max(st.end_ns, last_end.get(st.proc, st.end_ns))
    return False


def read_gpus(conn: sqlite3.Connection, schema: sc.Schema) -> tuple[tuple[int, str | None], ...]:
    names: dict[int, str] = {}
    if schema.has(sc.GPU_INFO) and {"id", "name"} <= schema.columns.get(sc.GPU_INFO, frozenset()):
        names = {
            int(i): str(n)
            for i, n in conn.execute(f'SELECT id, name FROM "{sc.GPU_INFO}"')
            if i is not None
        }
    devices: list[int] = []
    if schema.has(sc.KERNEL):
        devices = [
            int(r[0])
            for r in conn.execute(
                f'SELECT DISTINCT deviceId FROM "{sc.KERNEL}" WHERE deviceId IS NOT NULL ORDER BY 1'
            )
        ]
    if not devices:
        devices = sorted(names)
    return tuple((d, names.get(d)) for d in devices)


def has_step_ranges(path: Path, steps_regex: str) -> bool:
    """Whether any export at `path` (a file, or a folder of them) holds a matching step range."""
    files = sorted(path.glob("*.sqlite")) if path.is_dir() else [path]
    for file in files:
        conn = open_readonly(file)
        try:
            if read_steps(conn, sc.read_schema(conn), steps_regex, 0)[0]:
                return True
        finally:
            conn.close()
    return False


def _kernel_name_ids(pairs: Iterable[tuple]) -> set[int]:
    ids: set[int] = set()
    for dn, sn, *_ in pairs:
        ids.update(i for i in (dn, sn) if isinstance(i, int))
    return ids


def _data_warnings(conn: sqlite3.Connection, schema: sc.Schema, agg: Aggregates) -> list[str]:
    out = []
    kernels = sum(g[3] for g in agg.kernel_groups)
    orphan = agg.orphan_kernels
    if orphan and schema.has(sc.RUNTIME):
        out.append(
            f"{orphan} of {kernels} kernels have no launching CUDA API row (a sliced export?): "
            "they count in the totals but in no step"
        )
    if schema.has(sc.KERNEL):
        bad = conn.execute(
            f'SELECT COUNT(*) FROM "{sc.KERNEL}" WHERE start IS NULL OR end IS NULL OR end < start'
        ).fetchone()[0]
        if bad:
            out.append(f"{bad} kernel(s) have a missing or negative duration")
    if schema.has(sc.GRAPH_TRACE):
        graphs = conn.execute(f'SELECT COUNT(*) FROM "{sc.GRAPH_TRACE}"').fetchone()[0]
        if graphs:
            out.append(
                f"{graphs} CUDA graph execution(s) were traced as whole graphs "
                "(--cuda-graph-trace=graph): their kernels are not in the kernel table; "
                "capture again with --cuda-graph-trace=node"
            )
    return out

"""SQLite export -> aggregates: the schema, the NVTX steps, then the passes of census.engine.

The big tables are read as integer columns (census.columns) and aggregated with numpy; what
reaches the Census is one row per kernel name, copy kind and step. Inputs are opened
read-only and never written.
"""

from __future__ import annotations

import re
import sqlite3
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from census import schema as sc
from census.errors import ColumnError, InputError
from census.readonly import describe_sqlite_error, open_readonly

if TYPE_CHECKING:
    from census.engine import Passes
    from census.linking import LaunchTotals

# progress(stage) or progress(stage, rows_done, rows_total)
Progress = Callable[..., None]


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


def load_profile(
    path: Path,
    steps_regex: str,
    skip_first: int,
    progress: Progress | None = None,
    workers: int | None = None,
    batch_rows: int | None = None,
) -> Profile:
    """Read the aggregates of one export. `workers`: processes to read it with (default: one
    per core, up to 8, for large exports; $CENSUS_WORKERS overrides); `batch_rows`: rows per
    batch (tests make it small to exercise what carries from batch to batch)."""
    conn = open_readonly(path)
    try:
        run = (progress or _silent, workers, batch_rows)
        return _load(conn, path, steps_regex, skip_first, *run)
    except (sqlite3.Error, UnicodeDecodeError, OverflowError) as exc:
        raise InputError(f"{path}: {describe_sqlite_error(exc)}") from None
    except ColumnError as exc:
        raise InputError(f"{path}: {exc}: not a valid nsys export") from None
    finally:
        conn.close()


def _silent(*_args) -> None:
    pass


def _load(
    conn: sqlite3.Connection,
    path: Path,
    steps_regex: str,
    skip_first: int,
    progress: Progress,
    workers: int | None,
    batch_rows: int | None,
) -> Profile:
    from census.engine import run_passes
    from census.intervals import StepIndex

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
    index = StepIndex.build((s.idx, s.proc, s.start_ns, s.end_ns) for s in steps)
    passes = run_passes(conn, path, schema, index, progress, workers, batch_rows)
    agg = _aggregates(conn, schema, passes)
    warnings += _data_warnings(conn, schema, agg, passes.gpu.bad_kernels)
    gpus = read_gpus(conn, schema, passes.gpu.devices)
    return Profile(path, schema, gpus, tuple(steps), agg, tuple(warnings))


def _aggregates(conn: sqlite3.Connection, schema: sc.Schema, passes: Passes) -> Aggregates:
    from census.activity import ALL_CLASS, NCCL_CLASS, NON_NCCL, WHOLE
    from census.columns import read_strings
    from census.intervals import NO_STEP

    gpu = passes.gpu
    groups = [(*key, *v) for key, v in gpu.groups.items()]
    ids = {i for dn, sn, *_ in groups for i in (dn, sn) if i is not None}
    names = read_strings(conn, ids) if schema.has(sc.STRINGS) else {}
    unions: dict[int, dict[int | None, int]] = {
        c: {None: 0} for c in (NON_NCCL, NCCL_CLASS, ALL_CLASS)
    }
    for (scope, cls, _dev), ns in gpu.union_ns.items():
        key = None if scope == WHOLE else scope
        unions[cls][key] = unions[cls].get(key, 0) + ns
    non, nccl, every = unions[NON_NCCL], unions[NCCL_CLASS], unions[ALL_CLASS]
    launch, by_api = _launch(passes.launch)
    memory = [
        (kind, None if st == NO_STEP else st, has, *v) for (kind, st, has), v in gpu.memory.items()
    ]
    agg = Aggregates(groups, names, non, launch, by_api, memory, dict(gpu.busy_ns))
    if passes.any_nccl:
        agg.nccl_overlap_ns = {k: nccl.get(k, 0) + v - every.get(k, 0) for k, v in non.items()}
    agg.orphan_kernels = sum(g[3] for g in groups if not g[2])
    agg.step_kernels = {k: tuple(v) for k, v in gpu.step_kernels.items()}
    return agg


def _launch(totals: LaunchTotals) -> tuple[dict, dict]:
    """(step or None -> (count, time_ns, graph launches), api -> (count, time, in steps...))."""
    from census.intervals import NO_STEP

    launch: dict[int | None, tuple[int, int, int]] = {None: (0, 0, 0)}
    by_api: dict[str, tuple[int, int, int, int]] = {}
    for (st, api), (count, time_ns, graph) in totals.cells.items():
        for key in {None, None if st == NO_STEP else st}:
            c, t, g = launch.get(key, (0, 0, 0))
            launch[key] = (c + count, t + time_ns, g + graph)
        c, t, sc_, st_ = by_api.get(api, (0, 0, 0, 0))
        inside = st != NO_STEP
        by_api[api] = (c + count, t + time_ns, sc_ + count * inside, st_ + time_ns * inside)
    return launch, by_api


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
    text = "n.text"
    join = ""
    if schema.has(sc.STRINGS) and schema.has_column(sc.NVTX, "textId"):
        text = "COALESCE(n.text, s.value)"
        join = f'LEFT JOIN "{sc.STRINGS}" s ON s.id = n.textId'
    ranges = f"""FROM "{sc.NVTX}" n {join}
                 WHERE n.eventType IN ({",".join(map(str, sc.NVTX_RANGE_TYPES))})"""
    # Match each distinct text once, then let SQLite pick the ranges that carry a match.
    factory = conn.text_factory
    conn.text_factory = bytes
    try:
        texts = [t for (t,) in conn.execute(f"SELECT DISTINCT {text} {ranges}") if t is not None]
    finally:
        conn.text_factory = factory
    matching = [t for t in texts if pattern.search(t.decode("utf-8", errors="replace"))]
    conn.execute("CREATE TEMP TABLE IF NOT EXISTS step_texts (t TEXT PRIMARY KEY)")
    conn.execute("DELETE FROM temp.step_texts")
    conn.executemany(
        "INSERT OR IGNORE INTO temp.step_texts VALUES (CAST(? AS TEXT))", ((t,) for t in matching)
    )
    rows = conn.execute(
        f"""SELECT {text}, n.start, n.end, n.globalTid >> 24 {ranges}
              AND {text} IN (SELECT t FROM temp.step_texts) ORDER BY n.start"""
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


def read_gpus(
    conn: sqlite3.Connection, schema: sc.Schema, devices: set[int]
) -> tuple[tuple[int, str | None], ...]:
    """The devices kernels ran on (else those TARGET_INFO_GPU lists), with their names."""
    names: dict[int, str] = {}
    if schema.has(sc.GPU_INFO) and {"id", "name"} <= schema.columns.get(sc.GPU_INFO, frozenset()):
        names = {
            int(i): str(n)
            for i, n in conn.execute(f'SELECT id, name FROM "{sc.GPU_INFO}"')
            if i is not None
        }
    found = sorted(devices) or sorted(names)
    return tuple((d, names.get(d)) for d in found)


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


def _data_warnings(
    conn: sqlite3.Connection, schema: sc.Schema, agg: Aggregates, bad: int
) -> list[str]:
    out = []
    kernels = sum(g[3] for g in agg.kernel_groups)
    orphan = agg.orphan_kernels
    if orphan and schema.has(sc.RUNTIME):
        out.append(
            f"{orphan} of {kernels} kernels have no launching CUDA API row (a sliced export?): "
            "they count in the totals but in no step"
        )
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

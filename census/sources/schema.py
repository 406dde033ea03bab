"""What each nsys export schema holds: table and column names, version quirks, in one place.

Schemas 2.9 (nsys 2022) to 3.25 (nsys 2026) are known. Metadata moved from `EXPORT_META_DATA`
to `META_DATA_EXPORT`; tables exist only when the capture produced such events.
"""

from __future__ import annotations

import sqlite3
from dataclasses import dataclass
from pathlib import Path

from census.errors import InputError

KERNEL = "CUPTI_ACTIVITY_KIND_KERNEL"
RUNTIME = "CUPTI_ACTIVITY_KIND_RUNTIME"
MEMCPY = "CUPTI_ACTIVITY_KIND_MEMCPY"
MEMSET = "CUPTI_ACTIVITY_KIND_MEMSET"
GRAPH_TRACE = "CUPTI_ACTIVITY_KIND_GRAPH_TRACE"
NVTX = "NVTX_EVENTS"
STRINGS = "StringIds"
GPU_INFO = "TARGET_INFO_GPU"
SYSTEM_ENV = "TARGET_INFO_SYSTEM_ENV"  # name/value pairs: Hostname, ...
# the session's start: utcEpochNs (wall clock) and, in newer exports, systemClockNs (the trace's clock)
SESSION_START = "TARGET_INFO_SESSION_START_TIME"
META_TABLES = ("META_DATA_EXPORT", "EXPORT_META_DATA")
# a Kineto trace's `cpu_op` events in census's export of it (census.sources.kineto.export): the
# operation ranges of #56, which an nsys export holds as NVTX ranges instead
OP_RANGES = "KINETO_OP_RANGES"
NOTE = "KINETO_NOTE_"  # META_DATA_EXPORT names of a trace's notes: KINETO_NOTE_0, _1, ...

KNOWN_MAJOR_VERSIONS = (2, 3)

# Columns census reads, per table; a table that exists without them cannot be trusted.
REQUIRED_COLUMNS: dict[str, tuple[str, ...]] = {
    KERNEL: ("start", "end", "deviceId", "correlationId", "globalPid", "shortName"),
    RUNTIME: ("start", "end", "globalTid", "correlationId", "nameId"),
    MEMCPY: ("start", "end", "deviceId", "correlationId", "globalPid", "bytes", "copyKind"),
    MEMSET: ("start", "end", "deviceId", "correlationId", "globalPid", "bytes"),
    NVTX: ("start", "end", "eventType", "text", "globalTid"),
    STRINGS: ("id", "value"),
}

# Every table census reads. nsys writes each as a table; a view of one (a file edited after the
# export) has no rowids to read in ranges, and must not read as missing (a silent zero).
READ_TABLES = (*REQUIRED_COLUMNS, GRAPH_TRACE, GPU_INFO, SYSTEM_ENV, *META_TABLES)

# Why a missing table matters, shown as a warning with the zero it causes. No MEMSET entry: nsys
# writes that table only when memsets ran, so a capture without one simply had none (zero memsets,
# said by nothing; a capture without `-t cuda` is already warned by its missing kernel table).
MISSING_TABLE_HINTS: dict[str, str] = {
    KERNEL: "no GPU kernels were captured: was nsys run with `-t cuda`?",
    RUNTIME: "no CUDA API calls were captured: launch API time is zero and no GPU work "
    "can be assigned to steps",
    MEMCPY: "no memory copies were captured: D2D copies and bytes are zero",
    NVTX: "no NVTX ranges were captured (was nsys run with `-t nvtx`?): no per-step figures",
    STRINGS: "no StringIds table: kernel and API names cannot be resolved",
}

# NVTX event types that are ranges (ENUM_NSYS_EVENT_TYPE): push/pop, start/end, NVTX-text push/pop.
NVTX_RANGE_TYPES = (59, 60, 70)


@dataclass(frozen=True)
class Schema:
    """Tables and columns of one export, plus the versions its metadata declares."""

    tables: frozenset[str]
    columns: dict[str, frozenset[str]]
    nsys_version: str | None
    schema_version: str | None
    # META_DATA_EXPORT's TRACER, written for a trace (census/sources/kineto/export.py); None: nsys
    tracer: str | None = None
    # what the trace's reading set aside or changed, with counts (KINETO_NOTE_<i> rows): warnings
    notes: tuple[str, ...] = ()

    def has(self, table: str) -> bool:
        """Whether the export has `table`."""
        return table in self.tables

    def has_column(self, table: str, column: str) -> bool:
        """Whether the export's `table` has `column`."""
        return column in self.columns.get(table, frozenset())

    @property
    def major_version(self) -> int | None:
        """The schema version's major number (2, 3); None when it declares none or not a number."""
        if not self.schema_version:
            return None
        head = self.schema_version.split(".", 1)[0]
        return int(head) if head.isdigit() else None

    def missing_columns(self, table: str) -> list[str]:
        """The REQUIRED_COLUMNS of `table` that it lacks."""
        have = self.columns.get(table, frozenset())
        return [c for c in REQUIRED_COLUMNS.get(table, ()) if c not in have]


def read_schema(conn: sqlite3.Connection) -> Schema:
    """Read table names, the columns of the tables census uses, and the export's versions."""
    tables = frozenset(
        r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")
    )
    columns = {
        t: frozenset(r[1] for r in conn.execute(f'PRAGMA table_info("{t}")'))
        for t in (*REQUIRED_COLUMNS, GRAPH_TRACE, GPU_INFO, SYSTEM_ENV, SESSION_START)
        if t in tables
    }
    meta: dict[str, str] = {}
    for table in META_TABLES:
        if table in tables:
            rows = conn.execute(f'SELECT name, value FROM "{table}"').fetchall()
            meta.update({str(k): str(v) for k, v in rows if k is not None and v is not None})
    return Schema(
        tables=tables,
        columns=columns,
        nsys_version=meta.get("EXPORT_PRODUCT_VERSION"),
        schema_version=meta.get("EXPORT_SCHEMA_VERSION"),
        tracer=meta.get("TRACER"),
        notes=_notes(meta),
    )


def _notes(meta: dict[str, str]) -> tuple[str, ...]:
    """A trace's notes (META_DATA_EXPORT's KINETO_NOTE_<i>) in their order."""
    keys = [k for k in meta if k.startswith(NOTE) and k[len(NOTE) :].isdigit()]
    return tuple(meta[k] for k in sorted(keys, key=lambda k: int(k[len(NOTE) :])))


def checked_schema(conn: sqlite3.Connection, path: Path) -> Schema:
    """The export's schema, refused when it is not nsys's or lacks a column census reads."""
    schema = read_schema(conn)
    if not looks_like_nsys(schema):
        raise InputError(
            f"{path}: a SQLite database but not an nsys export "
            "(no META_DATA_EXPORT/EXPORT_META_DATA or StringIds table)"
        )
    for table in REQUIRED_COLUMNS:
        missing = schema.missing_columns(table) if schema.has(table) else []
        if missing:
            raise InputError(
                f"{path}: table {table} lacks column(s) {', '.join(missing)}: "
                "unsupported nsys schema"
            )
    return schema


def schema_warnings(schema: Schema) -> list[str]:
    """What an export's schema leaves out or may not hold: a schema newer than census knows, a
    table the capture did not write (each with its hint)."""
    out = []
    major = schema.major_version
    if major is not None and major not in KNOWN_MAJOR_VERSIONS:
        out.append(
            f"export schema {schema.schema_version} is newer than census knows "
            f"(2.x, 3.x): figures may be incomplete"
        )
    for table in MISSING_TABLE_HINTS:
        if not schema.has(table):
            out.append(f"no {table} table: {MISSING_TABLE_HINTS[table]}")
    return out


def read_views(conn: sqlite3.Connection) -> list[str]:
    """The tables census reads that this database holds as views instead."""
    marks = ", ".join("?" * len(READ_TABLES))
    sql = f"SELECT name FROM sqlite_master WHERE type = 'view' AND name COLLATE NOCASE IN ({marks})"
    return sorted(r[0] for r in conn.execute(sql, READ_TABLES))


def looks_like_nsys(schema: Schema) -> bool:
    """An nsys export has its metadata table or, at least, StringIds and a CUPTI/NVTX table."""
    if any(schema.has(t) for t in META_TABLES):
        return True
    activity = any(t.startswith("CUPTI_ACTIVITY_KIND_") for t in schema.tables)
    return schema.has(STRINGS) and (activity or schema.has(NVTX))


def read_gpus(
    conn: sqlite3.Connection, schema: Schema, devices: set[int]
) -> tuple[tuple[int, str | None], ...]:
    """The devices kernels ran on (else those TARGET_INFO_GPU lists), with their names."""
    names: dict[int, str] = {}
    if schema.has(GPU_INFO) and {"id", "name"} <= schema.columns.get(GPU_INFO, frozenset()):
        names = {
            int(i): str(n)
            for i, n in conn.execute(f'SELECT id, name FROM "{GPU_INFO}"')
            if i is not None
        }
    found = sorted(devices) or sorted(names)
    return tuple((d, names.get(d)) for d in found)

"""The SQL behind the census: every pass over the big tables, run inside SQLite.

Helper tables live in the connection's temp schema, never in the (read-only) input:
  temp.steps     the selected step ranges, indexed by (proc, start)
  temp.gpu_keys  (process, correlationId) of every kernel, memcpy and memset
  temp.rt        the runtime rows that matter: launches, and calls that issued GPU work
  temp.api       one row per (process, correlationId) of temp.rt, with the step it started in
  temp.nccl      the (demangled, short) name-id pairs that are NCCL kernels
Python receives aggregates only: one row per kernel name and step, per copy kind, per step.
"""

from __future__ import annotations

import itertools
import json
import sqlite3
from collections.abc import Callable, Iterable, Iterator

from census import schema as sc
from census.classify import launch_api_kind
from census.sweep import SweepResult, sweep

CHUNK_ROWS = 50_000  # ~20 MB of row tuples in flight


def step_at(proc: str, time: str) -> str:
    """The step that process `proc` was in at `time`, or NULL: one index probe per row (the
    latest step starting at or before `time`, kept only if it has not ended before `time`)."""
    return (
        f"(SELECT CASE WHEN s.end >= {time} THEN s.idx END FROM temp.steps s "
        f"WHERE s.proc = {proc} AND s.start <= {time} ORDER BY s.start DESC LIMIT 1)"
    )


def create_steps_table(conn: sqlite3.Connection, steps: Iterable) -> None:
    conn.execute(
        "CREATE TEMP TABLE steps (idx INTEGER PRIMARY KEY, proc INTEGER NOT NULL, "
        "start INTEGER NOT NULL, end INTEGER NOT NULL)"
    )
    conn.executemany(
        "INSERT INTO temp.steps VALUES (?, ?, ?, ?)",
        [(s.idx, s.proc, s.start_ns, s.end_ns) for s in steps],
    )
    conn.execute("CREATE INDEX temp.steps_by_start ON steps (proc, start)")


def resolve_names(conn: sqlite3.Connection, schema: sc.Schema, ids: set[int]) -> dict[int, str]:
    if not ids or not schema.has(sc.STRINGS):
        return {}
    rows = conn.execute(
        f'SELECT id, value FROM "{sc.STRINGS}" WHERE id IN (SELECT value FROM json_each(?))',
        (json.dumps(sorted(ids)),),
    )
    return {int(i): str(v) for i, v in rows if v is not None}


def _gpu_tables(schema: sc.Schema) -> list[str]:
    return [t for t in (sc.KERNEL, sc.MEMCPY, sc.MEMSET) if schema.has(t)]


def link_runtime(conn: sqlite3.Connection, schema: sc.Schema, has_steps: bool) -> bool:
    """Build temp.gpu_keys, temp.launch_names, temp.rt and temp.api (see the module doc).
    True when some (process, correlationId) has several runtime rows (legacy exports)."""
    conn.execute(
        "CREATE TEMP TABLE gpu_keys (proc INTEGER NOT NULL, corr INTEGER NOT NULL, "
        "PRIMARY KEY (proc, corr)) WITHOUT ROWID"
    )
    for table in _gpu_tables(schema):
        conn.execute(
            f"""INSERT OR IGNORE INTO temp.gpu_keys
                SELECT globalPid >> 24, correlationId FROM "{table}"
                WHERE globalPid IS NOT NULL AND correlationId IS NOT NULL"""
        )
    conn.execute("CREATE TEMP TABLE launch_names (id INTEGER PRIMARY KEY, api TEXT, graph INTEGER)")
    conn.execute(
        "CREATE TEMP TABLE rt (p INTEGER, c INTEGER, start INTEGER, end INTEGER, nameId INTEGER, rid INTEGER)"
    )
    conn.execute(
        "CREATE TEMP TABLE api (proc INTEGER NOT NULL, corr INTEGER NOT NULL, step INTEGER, "
        "PRIMARY KEY (proc, corr)) WITHOUT ROWID"
    )
    if not schema.has(sc.RUNTIME):
        return False
    conn.executemany("INSERT INTO temp.launch_names VALUES (?, ?, ?)", _launch_names(conn, schema))
    # One scan of the runtime table keeps what any later figure needs; the rest never leaves it.
    conn.execute(
        f"""INSERT INTO temp.rt
            SELECT r.globalTid >> 24, r.correlationId, r.start, r.end, r.nameId, r.rowid
            FROM "{sc.RUNTIME}" r
            WHERE r.nameId IN (SELECT id FROM temp.launch_names)
               OR EXISTS (SELECT 1 FROM temp.gpu_keys k
                          WHERE k.proc = r.globalTid >> 24 AND k.corr = r.correlationId)"""
    )
    # Usually one runtime row per (process, correlationId): insert directly. Legacy exports
    # repeat some calls; then the table is rebuilt so each call starts at its earliest row.
    conn.execute(
        f"""INSERT OR IGNORE INTO temp.api
            SELECT r.p, r.c, {step_at("r.p", "r.start") if has_steps else "NULL"} FROM temp.rt r
            WHERE r.p IS NOT NULL AND r.c IS NOT NULL"""
    )
    linked = conn.execute(
        "SELECT COUNT(*) FROM temp.rt WHERE p IS NOT NULL AND c IS NOT NULL"
    ).fetchone()[0]
    duplicated = linked > conn.execute("SELECT COUNT(*) FROM temp.api").fetchone()[0]
    if duplicated:
        conn.execute("DELETE FROM temp.api")
        conn.execute(
            f"""INSERT INTO temp.api
                SELECT r.p, r.c, {step_at("r.p", "r.t") if has_steps else "NULL"} FROM (
                  SELECT p, c, MIN(start) AS t FROM temp.rt
                  WHERE p IS NOT NULL AND c IS NOT NULL GROUP BY 1, 2
                ) r"""
        )
    return duplicated


def _launch_names(conn: sqlite3.Connection, schema: sc.Schema) -> list[tuple[int, str, int]]:
    """Launch-API name ids, found among StringIds (names mentioning `Launch`)."""
    if not schema.has(sc.STRINGS):
        return []
    rows = conn.execute(f"""SELECT id, value FROM "{sc.STRINGS}" WHERE value LIKE '%Launch%'""")
    out = []
    for sid, name in rows:
        api = launch_api_kind(str(name))
        if api is not None and sid is not None:
            out.append((int(sid), api, int("GraphLaunch" in api)))
    return out


def _api_join(alias: str) -> str:
    return (
        f"LEFT JOIN temp.api a ON a.proc = ({alias}.globalPid >> 24) "
        f"AND a.corr = {alias}.correlationId"
    )


def kernel_name_pairs(conn: sqlite3.Connection, schema: sc.Schema) -> list[tuple]:
    """Distinct (demangledName, shortName) id pairs: all the names there are to classify."""
    if not schema.has(sc.KERNEL):
        return []
    dn = "demangledName" if schema.has_column(sc.KERNEL, "demangledName") else "NULL"
    return conn.execute(f'SELECT DISTINCT {dn}, shortName FROM "{sc.KERNEL}"').fetchall()


def create_nccl_table(conn: sqlite3.Connection, pairs: list[tuple]) -> None:
    conn.execute(
        "CREATE TEMP TABLE nccl (dn INTEGER NOT NULL, sn INTEGER NOT NULL, PRIMARY KEY (dn, sn))"
    )
    conn.executemany(
        "INSERT OR IGNORE INTO temp.nccl VALUES (COALESCE(?, -1), COALESCE(?, -1))", pairs
    )


def _chunks(cursor: sqlite3.Cursor, progress: Callable[[str], None] | None) -> Iterator[list]:
    """Rows in batches, reporting how many have streamed through."""
    seen = 0
    while rows := cursor.fetchmany(CHUNK_ROWS):
        seen += len(rows)
        if progress:
            progress(f"swept {seen:,} GPU activity rows")
        yield rows


def gpu_sweep(
    conn: sqlite3.Connection,
    schema: sc.Schema,
    any_nccl: bool,
    steps: list,
    progress: Callable[[str], None] | None = None,
) -> SweepResult:
    """Kernels (linked to temp.api and temp.nccl) and, for busy time, the memcpys and memsets
    of processes with steps, streamed once in start order through census.sweep."""
    parts = []
    if schema.has(sc.KERNEL):
        dn = "k.demangledName" if schema.has_column(sc.KERNEL, "demangledName") else "NULL"
        nccl_join, nccl = "", "0"
        if any_nccl:
            nccl_join = (
                "LEFT JOIN temp.nccl n "
                f"ON n.dn = COALESCE({dn}, -1) AND n.sn = COALESCE(k.shortName, -1)"
            )
            nccl = "n.dn IS NOT NULL"
        parts.append(
            f"""SELECT 0, k.deviceId, k.globalPid >> 24, k.start, k.end, a.step, {nccl},
                       {dn}, k.shortName, a.proc IS NOT NULL
                FROM "{sc.KERNEL}" k {_api_join("k")} {nccl_join}"""
        )
    if steps:
        parts += [
            f"""SELECT 1, deviceId, globalPid >> 24, start, end, NULL, 0, NULL, NULL, 0
                FROM "{t}" WHERE (globalPid >> 24) IN (SELECT proc FROM temp.steps)"""
            for t in (sc.MEMCPY, sc.MEMSET)
            if schema.has(t)
        ]
    if not parts:
        return SweepResult()
    cursor = conn.execute(" UNION ALL ".join(parts) + " ORDER BY 4")
    rows = itertools.chain.from_iterable(_chunks(cursor, progress))
    return sweep(rows, [(s.idx, s.proc, s.start_ns, s.end_ns) for s in steps], any_nccl)


def launch_aggregates(
    conn: sqlite3.Connection, has_steps: bool, duplicated: bool
) -> tuple[dict[int | None, tuple[int, int, int]], dict[str, tuple[int, int, int, int]]]:
    """Launch API calls from temp.rt. Legacy exports record some calls twice under one
    (process, correlationId): they count once, the longest kept."""
    if duplicated or not has_steps:
        step = step_at("p", "t") if has_steps else "NULL"
        sql = f"""SELECT {step} AS st, api, COUNT(*), SUM(d), SUM(g) FROM (
              SELECT r.p AS p, MIN(r.start) AS t, MAX(r.end - r.start) AS d,
                     MAX(l.graph) AS g, MIN(l.api) AS api
              FROM temp.rt r JOIN temp.launch_names l ON l.id = r.nameId
              GROUP BY r.p, CASE WHEN r.c IS NULL THEN -1 - r.rid ELSE r.c END
            ) GROUP BY 1, 2"""
    else:  # one row per call: its step is already in temp.api, no regrouping needed
        sql = f"""SELECT COALESCE(a.step, CASE WHEN r.c IS NULL THEN {step_at("r.p", "r.start")} END),
                         l.api, COUNT(*), SUM(r.end - r.start), SUM(l.graph)
            FROM temp.rt r JOIN temp.launch_names l ON l.id = r.nameId
            LEFT JOIN temp.api a ON a.proc = r.p AND a.corr = r.c
            GROUP BY 1, 2"""
    rows = conn.execute(sql).fetchall()
    per_step: dict[int | None, tuple[int, int, int]] = {None: (0, 0, 0)}
    by_api: dict[str, tuple[int, int, int, int]] = {}
    for st, api, count, time_ns, graph in rows:
        c, t, g = int(count), int(time_ns or 0), int(graph or 0)
        for key in {None, st}:
            pc, pt, pg = per_step.get(key, (0, 0, 0))
            per_step[key] = (pc + c, pt + t, pg + g)
        bc, bt, sc_, st_ = by_api.get(api, (0, 0, 0, 0))
        in_step = st is not None
        by_api[api] = (bc + c, bt + t, sc_ + c * in_step, st_ + t * in_step)
    return per_step, by_api


def memory_groups(conn: sqlite3.Connection, schema: sc.Schema) -> list[tuple]:
    """(copy kind or -1 for memsets, step, has API row, count, bytes, time_ns)."""
    out = []
    parts = []
    if schema.has(sc.MEMCPY):
        parts.append(("m.copyKind", sc.MEMCPY))
    if schema.has(sc.MEMSET):
        parts.append(("-1", sc.MEMSET))
    for kind, table in parts:
        rows = conn.execute(
            f"""SELECT {kind}, a.step, a.proc IS NOT NULL, COUNT(*),
                       COALESCE(SUM(m.bytes), 0), COALESCE(SUM(m.end - m.start), 0)
                FROM "{table}" m {_api_join("m")} GROUP BY 1, 2, 3"""
        ).fetchall()
        out += [
            (int(k) if k is not None else 0, st, bool(h), int(c), int(b), int(t))
            for k, st, h, c, b, t in rows
        ]
    return out

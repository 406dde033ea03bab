"""NVTX step ranges: which ranges are training steps, read once per distinct text."""

from __future__ import annotations

import re
import sqlite3
from dataclasses import dataclass
from pathlib import Path

from census.load import schema as sc
from census.load.readonly import open_readonly


@dataclass(frozen=True)
class StepRange:
    """One NVTX step range; `idx` orders the selected steps by start time."""

    idx: int
    name: str
    proc: int
    start_ns: int
    end_ns: int


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

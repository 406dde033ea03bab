"""NVTX step ranges: which ranges are training steps, read once per distinct text."""

from __future__ import annotations

import re
import sqlite3
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from pathlib import Path

from census.load.patterns import matching as matching_texts
from census.load.patterns import quoted
from census.sources import schema as sc
from census.sources.readonly import open_readonly
from census.units import clip


@dataclass(frozen=True)
class StepRange:
    """One NVTX step range; `idx` orders the selected steps by start time."""

    idx: int
    name: str
    proc: int
    start_ns: int
    end_ns: int
    tid: int | None = None  # the range's thread (globalTid): the one that runs the loop


def nvtx_text(schema: sc.Schema) -> tuple[str, str]:
    """(the SQL of an NVTX row `n`'s text, the join it needs): its own text, else its
    registered string's."""
    if schema.has(sc.STRINGS) and schema.has_column(sc.NVTX, "textId"):
        return "COALESCE(n.text, s.value)", f'LEFT JOIN "{sc.STRINGS}" s ON s.id = n.textId'
    return "n.text", ""


def matching_ranges(
    conn: sqlite3.Connection,
    schema: sc.Schema,
    regex: str,
    table: str = "step_texts",
    option: str = "--steps",
) -> list[tuple[str, int | None, int | None, int | None, int | None]]:
    """(text, start, end, process, thread) of the NVTX ranges (push/pop or start/end, any domain) whose
    text matches `regex` (the user's `option`), by start time. Each distinct text is matched
    once in Python, with a time limit; SQLite then picks the ranges that carry a match."""
    if not schema.has(sc.NVTX):
        return []
    text, join = nvtx_text(schema)
    ranges = f"""FROM "{sc.NVTX}" n {join}
                 WHERE n.eventType IN ({",".join(map(str, sc.NVTX_RANGE_TYPES))})"""
    factory = conn.text_factory
    conn.text_factory = bytes
    try:
        texts = [t for (t,) in conn.execute(f"SELECT DISTINCT {text} {ranges}") if t is not None]
    finally:
        conn.text_factory = factory
    decoded = [t.decode("utf-8", errors="replace") for t in texts]
    found = set(matching_texts(option, regex, dict.fromkeys(decoded)))
    matching = [raw for raw, text in zip(texts, decoded, strict=True) if text in found]
    conn.execute(f"CREATE TEMP TABLE IF NOT EXISTS {table} (t TEXT PRIMARY KEY)")
    conn.execute(f"DELETE FROM temp.{table}")
    conn.executemany(
        f"INSERT OR IGNORE INTO temp.{table} VALUES (CAST(? AS TEXT))", ((t,) for t in matching)
    )
    return conn.execute(
        f"""SELECT {text}, n.start, n.end, n.globalTid >> 24, n.globalTid {ranges}
              AND {text} IN (SELECT t FROM temp.{table}) ORDER BY n.start"""
    ).fetchall()


def _usable(row: tuple) -> bool:
    _, start, end, proc, _ = row
    return start is not None and end is not None and proc is not None and end >= start


def read_steps(
    conn: sqlite3.Connection, schema: sc.Schema, steps_regex: str, skip_first: int
) -> tuple[list[StepRange], list[str]]:
    """NVTX ranges whose text matches `steps_regex`, minus the first `skip_first` per process."""
    rows = matching_ranges(conn, schema, steps_regex)
    warnings: list[str] = []
    unusable = [r for r in rows if not _usable(r)]
    if unusable:
        warnings.append(f"{len(unusable)} step range(s) without a valid end or thread were ignored")
    seen: dict[int, int] = {}
    kept: list[tuple[str, int, int, int, int]] = []
    for name, start, end, proc, tid in filter(_usable, rows):
        seen[proc] = seen.get(proc, 0) + 1
        if seen[proc] > skip_first:
            kept.append((name, start, end, proc, tid))
    steps = [StepRange(i, n, p, s, e, t) for i, (n, s, e, p, t) in enumerate(kept)]
    if not steps and seen:
        warnings.append(_all_skipped(seen, steps_regex, skip_first))
    elif not steps and schema.has(sc.NVTX):
        warnings.append(_no_steps_hint(conn, schema, steps_regex))
    if _overlapping(steps):
        warnings.append(
            "step ranges overlap within a process: work in an overlap counts in the later step only"
        )
    return steps, warnings


def _all_skipped(seen: dict[int, int], steps_regex: str, skip_first: int) -> str:
    """The warning for step ranges that matched but --skip-first skipped every one of."""
    most = max(seen.values())
    return (f"--skip-first {skip_first} skips every step: the {sum(seen.values())} range(s) "
            f"matching --steps '{steps_regex}' are {most} at most in one process; per-step "
            f"figures are unavailable (skip fewer than {most})")  # fmt: skip


def _no_steps_hint(conn: sqlite3.Connection, schema: sc.Schema, steps_regex: str) -> str:
    """The warning for a capture whose NVTX ranges (a trace's `user_annotation` ranges) match no
    step: its most frequent range texts, and a --steps that would select the most frequent
    leading word (`iteration` of `iteration 0`, `iteration 1`, ...) among those whose ranges hold
    GPU work launches."""
    text = "COALESCE(n.text, s.value)" if _has_text_ids(conn) else "n.text"
    join = f'LEFT JOIN "{sc.STRINGS}" s ON s.id = n.textId' if _has_text_ids(conn) else ""
    counts = conn.execute(
        f"""SELECT {text} AS t, COUNT(*) FROM "{sc.NVTX}" n {join}
            WHERE n.eventType IN ({",".join(map(str, sc.NVTX_RANGE_TYPES))}) AND t IS NOT NULL
            GROUP BY t ORDER BY 2 DESC, t LIMIT 200"""
    ).fetchall()
    ranges, none, mark = (
        ("`ProfilerStep#N` or `step N` ranges", "user_annotation ranges", MARK_TRACE_STEPS)
        if schema.tracer
        else ("NVTX step ranges", "NVTX ranges with text", MARK_STEPS)
    )
    message = f"no {ranges} matched --steps '{steps_regex}': per-step figures are unavailable"
    if not counts:
        return f"{message} (the {'trace' if schema.tracer else 'capture'} has no {none})"
    listed = ", ".join(f"{quoted(t)} ×{n}" for t, n in counts[:5])
    suggestion = _steps_suggestion(counts, partial(_launches_in, conn, schema), mark)
    return f"{message}; its most frequent ranges: {listed}; {suggestion}"


NUMBERED_TEXT = re.compile(r"(?P<word>[A-Za-z][A-Za-z_]*?)(?P<sep>[ #_:-]*)[0-9]+", re.ASCII)
MARK_STEPS = "mark the steps with census.steps() or NVTX ranges 'step N', or name them with --steps"
# A torch.profiler trace's steps: `prof.step()` writes `ProfilerStep#N`; a user range `step N`.
MARK_TRACE_STEPS = ("call prof.step() once per step (ranges `ProfilerStep#N`), wrap each step in "
                    "torch.profiler.record_function('step N'), or name them with --steps")  # fmt: skip


def _steps_suggestion(
    counts: list[tuple[str, int]], launching: Callable[[str], bool], mark: str = MARK_STEPS
) -> str:
    """A --steps for the texts that look like numbered steps (`iteration 0`, `iteration 1`, ...:
    one word, then a number, at least two different numbers) and whose ranges hold GPU work
    launches (`launching(pattern)`: a data loader's `batch 0`, `batch 1` on a thread of its own
    would give steps of no kernels); none for operator ranges (`aten::mm` ×18,088 is not a
    step)."""
    numbered: dict[str, set[str]] = {}
    underscored: set[str] = set()
    for text, _ in counts:
        m = NUMBERED_TEXT.fullmatch(text)
        if m:
            numbered.setdefault(m["word"], set()).add(text)
            if "_" in m["sep"]:
                underscored.add(m["word"])
    words = {w: len(texts) for w, texts in numbered.items() if len(texts) >= 2}
    if not words:
        return f"none looks like a numbered step ('step 0', 'step 1', ...): {mark}"
    for word in sorted(words, key=lambda w: (words[w], w), reverse=True):
        pattern = f"^{word}_?[0-9]" if word in underscored else f"^{word}\\b"
        if launching(pattern):
            return f"try --steps '{pattern}'"
    named = ", ".join(f"'{clip(w, 40)} N'" for w in sorted(words, key=lambda w: (-words[w], w))[:3])
    return f"the numbered ranges ({named}) hold no GPU work launches: {mark}"


def _launches_in(conn: sqlite3.Connection, schema: sc.Schema, pattern: str) -> bool:
    """Whether a range `pattern` selects holds a CUDA call that issues GPU work (a launch, a
    memcpy or a memset) in its process, as a step counts the work launched in it: the calls are
    read once, a batch at a time, and looked up in the ranges' union per process."""
    import numpy as np

    from census.load.api_names import read_api_names

    ranges = [r for r in matching_ranges(conn, schema, pattern, "hint_texts") if _usable(r)]
    if not ranges or not schema.has(sc.RUNTIME):
        return False
    spans = {p: _union(sorted((s, e) for _, s, e, q, _ in ranges if q == p))
             for p in {r[3] for r in ranges}}  # fmt: skip
    calls = conn.execute(
        f"""SELECT globalTid >> 24, start FROM "{sc.RUNTIME}"
            WHERE {read_api_names(conn, schema).where} AND start IS NOT NULL"""
    )
    while batch := calls.fetchmany(65_536):
        rows = np.array([r for r in batch if r[0] in spans], np.int64).reshape(-1, 2)
        for proc, (starts, ends) in spans.items():
            at = rows[rows[:, 0] == proc, 1]
            i = np.searchsorted(starts, at, side="right") - 1
            if np.any((i >= 0) & (at <= ends[np.maximum(i, 0)])):
                return True
    return False


def _union(spans: list[tuple[int, int]]):
    """Sorted intervals merged where they overlap: (starts, ends) arrays, both increasing."""
    import numpy as np

    merged: list[list[int]] = []
    for start, end in spans:
        if merged and start <= merged[-1][1]:
            merged[-1][1] = max(merged[-1][1], end)
        else:
            merged.append([start, end])
    return np.array([m[0] for m in merged], np.int64), np.array([m[1] for m in merged], np.int64)


def _has_text_ids(conn: sqlite3.Connection) -> bool:
    cols = {r[1] for r in conn.execute(f'PRAGMA table_info("{sc.NVTX}")')}
    tables = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type='table'")}
    return "textId" in cols and sc.STRINGS in tables


def _overlapping(steps: list[StepRange]) -> bool:
    last_end: dict[int, int] = {}
    for st in steps:
        if st.proc in last_end and st.start_ns <= last_end[st.proc]:
            return True
        last_end[st.proc] = max(st.end_ns, last_end.get(st.proc, st.end_ns))
    return False


def has_step_ranges(path: Path, steps_regex: str) -> bool:
    """Whether any export at `path` (a file, or a folder of them: nsys's, or torch.profiler's
    traces, read through their exports) holds a matching step range."""
    from census.sources.export import resolve_sqlite

    files = sorted(path.glob("*.sqlite")) if path.is_dir() else [path]
    if path.is_dir() and not files:  # census capture --profiler torch
        files = [resolve_sqlite(t) for t in sorted(path.glob("*.pt.trace.json.gz"))]
    for file in files:
        conn = open_readonly(file)
        try:
            if read_steps(conn, sc.read_schema(conn), steps_regex, 0)[0]:
                return True
        finally:
            conn.close()
    return False

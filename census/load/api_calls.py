"""CUDA API calls -> the step of every piece of GPU work, and the launch-API aggregates.

GPU work belongs to the step in which the API call that issued it (same process and
correlationId) started. Only calls that can issue GPU work are read: launches, memcpys and
memsets (by name); a GPU row whose call is none of these is looked up afterwards
(`read_other_calls`), so the link is exact either way. Calls sharing a (process,
correlationId) are one call recorded twice (legacy exports): it starts at its earliest row and
its launch counts once, the longest row kept (`read_runtime_grouped`).
"""

from __future__ import annotations

import itertools
import os
import sqlite3
from collections.abc import Iterable
from dataclasses import dataclass, field

import numpy as np

from census.load.accumulators import merge_fields, per_key
from census.load.api_names import ApiNames
from census.load.call_map import CompactCalls
from census.load.intervals import INT_MAX, INT_NULL, NO_STEP, StepIndex, unique, with_end
from census.load.launch_totals import LaunchTotals
from census.load.timeline import TimelineParts
from census.sources import schema as sc
from census.sqlite import TIMED, RowidRange, read_batches, rowid_range

RUNTIME_COLUMNS = {**TIMED, "proc": "globalTid >> 24", "corr": "correlationId", "name": "nameId"}


@dataclass
class ApiMap:
    """Per process: the correlationIds of its API calls (sorted) and the step each started in."""

    corr: dict[int, np.ndarray] = field(default_factory=dict)
    step: dict[int, np.ndarray] = field(default_factory=dict)
    # processes whose calls are kept compact instead (census.load.call_map)
    compact: dict[int, CompactCalls] = field(default_factory=dict)

    def lookup(self, proc: np.ndarray, corr: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(has an API row, its step or NO_STEP) for each (process, correlationId)."""
        found = np.zeros(len(proc), bool)
        step = np.full(len(proc), NO_STEP, np.int64)
        keyed = np.flatnonzero((proc != INT_NULL) & (corr != INT_NULL))
        for p, rows in _by_value(proc, keyed):
            if p in self.compact:
                found[rows], step[rows] = self.compact[p].lookup(corr[rows])
                continue
            known = self.corr.get(p)
            if known is None or not len(known):
                continue
            q = corr[rows]
            if known.dtype == np.uint32:  # probes outside its range match nothing
                fits = (q >= 0) & (q <= _U32_MAX)
                rows, q = rows[fits], q[fits]
            order = np.argsort(q, kind="stable")  # sorted probes stay in cache
            rows, q = rows[order], q[order].astype(known.dtype, copy=False)  # the map's own type
            i = np.minimum(np.searchsorted(known, q), len(known) - 1)
            hit = known[i] == q
            found[rows[hit]] = True
            step[rows[hit]] = self.step[p][i[hit]]
        return found, step

    def spilled(self, folder: str) -> ApiMap:
        """The same map, the bitmap of each compact process in a file of `folder` (a spill
        folder: CompactCalls.spilled)."""
        compact = {p: c.spilled(os.path.join(folder, f"calls-{i}-{os.getpid()}.bin"))
                   for i, (p, c) in enumerate(self.compact.items())}  # fmt: skip
        return ApiMap(self.corr, self.step, compact)

    def extended(self, more: dict[int, tuple[np.ndarray, np.ndarray]]) -> ApiMap:
        """A new map with `more` calls (process -> (correlationIds, steps)) added: the calls
        that are not launches, memcpys or memsets but issued GPU work (read_other_calls)."""
        out = ApiMap(dict(self.corr), dict(self.step), dict(self.compact))
        for p, (corr, step) in more.items():
            if p in out.compact:  # (rare: GPU work of calls that are not launches) as columns
                out.corr[p], out.step[p] = out.compact.pop(p).columns()
            c = np.concatenate([out.corr.get(p, np.zeros(0, np.int64)), corr])
            s = np.concatenate([out.step.get(p, np.zeros(0, np.int64)), step])
            order = np.argsort(c, kind="stable")
            out.corr[p], out.step[p] = narrow(c[order]), s[order]
        return out


_U32_MAX = (1 << 32) - 1


def narrow(corr: np.ndarray) -> np.ndarray:
    """Sorted correlationIds as uint32 when they all fit (CUPTI's are 32-bit): half the API
    map's largest column; else as they are."""
    if len(corr) and int(corr[0]) >= 0 and int(corr[-1]) <= _U32_MAX:
        return corr.astype(np.uint32)
    return corr


def _by_value(values: np.ndarray, rows: np.ndarray) -> Iterable[tuple[int, np.ndarray]]:
    """(value, the rows holding it) for each distinct value among `rows`."""
    if not len(rows):
        return
    v = values[rows]
    if v.min() == v.max():  # one process: the common case
        yield int(v[0]), rows
        return
    rows = rows[np.argsort(v, kind="stable")]
    v = values[rows]
    cuts = np.flatnonzero(v[1:] != v[:-1]) + 1
    for a, b in zip(np.r_[0, cuts], np.r_[cuts, len(rows)], strict=True):
        yield int(v[a]), rows[a:b]


@dataclass
class RangeCalls:
    """One rowid range's calls per process, for the API map: compacted batch by batch while
    they increase (census.load.call_map), else columns (`add`), settled at the range's end
    (`close`)."""

    # per process, batch by batch in rowid order: correlationIds, and steps (int32)
    corr: dict[int, list[np.ndarray]] = field(default_factory=dict)
    step: dict[int, list[np.ndarray]] = field(default_factory=dict)
    increasing: dict[int, bool] = field(default_factory=dict)  # strictly, across the batches
    # the processes whose calls increase, compact instead of in `corr` and `step`
    compact: dict[int, CompactCalls] = field(default_factory=dict)
    # per process still compact, batch by batch (until `close`)
    pieces: dict[int, list[CompactCalls]] = field(default_factory=dict)
    # the correlationIds of launches without a process (a call recorded twice is found there)
    unkeyed: list[np.ndarray] = field(default_factory=list)

    def add(self, b: dict[str, np.ndarray], keyed: np.ndarray, launch: np.ndarray) -> None:
        """A runtime batch with its `step` column: its `keyed` rows' calls, per process, and
        its launches without a process (`launch`: the launch rows)."""
        for p, r in _by_value(b["proc"], np.flatnonzero(keyed)):
            self.keep(p, b["corr"][r], b["step"][r].astype(np.int32))
        self.unkeyed.append(b["corr"][launch & (b["proc"] == INT_NULL) & (b["corr"] != INT_NULL)])

    def keep(self, p: int, corr: np.ndarray, step: np.ndarray) -> None:
        """Process p's calls of one batch: compacted at once while its calls so far increase
        and compact well (a bitmap and runs per batch, joined at the end: a worker holds no
        column of its range's calls), else kept as columns from then on (the pieces so far
        made columns)."""
        if p not in self.corr:
            mine = self.pieces.get(p, [])
            if np.all(corr[1:] > corr[:-1]) and (not mine or int(corr[0]) > mine[-1].last):
                piece = CompactCalls.of(corr, step)
                if piece is not None:
                    self.pieces.setdefault(p, []).append(piece)
                    return
            if mine:
                first, steps = CompactCalls.joined(self.pieces.pop(p)).columns()
                self.corr[p], self.step[p] = [first], [steps.astype(np.int32)]
        self.corr.setdefault(p, []).append(corr)
        self.step.setdefault(p, []).append(step)

    def close(self) -> None:
        """The range's calls, per process: its compact pieces joined, else its columns (made
        compact where they increase and compact well all together)."""
        self.increasing = {p: _increasing(chunks) for p, chunks in self.corr.items()}
        for p, compact in self.pieces.items():
            self.compact[p] = CompactCalls.joined(compact)
            self.increasing[p] = True
        self.pieces = {}
        for p in [p for p, up in self.increasing.items() if up and p in self.corr]:
            compact = CompactCalls.of(np.concatenate(self.corr[p]), np.concatenate(self.step[p]))
            if compact is not None:
                self.compact[p] = compact
                del self.corr[p], self.step[p]
        self.unkeyed = [np.concatenate([np.zeros(0, np.int64), *self.unkeyed])]

    def chunks(self, p: int) -> tuple[list[np.ndarray], list[np.ndarray]]:
        """Process p's calls in the range, as columns (correlationIds, steps) batch by batch."""
        if p in self.compact:
            corr, step = self.compact[p].columns()
            return [corr], [step]
        return self.corr.get(p, []), self.step.get(p, [])


class Calls(list):
    """The runtime pass's calls, an accumulator: one RangeCalls per rowid range, in rowid
    order; merged as ranges join, finished all at once into the API map (one join of the
    ranges' bitmaps, and a call recorded twice is found wherever its rows lie)."""

    def merge(self, other: Calls) -> None:
        """Both passes' ranges, this one's first."""
        self.extend(other)

    def finish(self) -> tuple[ApiMap, bool]:
        """(the API map of every range's calls, whether some call has several rows)."""
        api = ApiMap()
        duplicated = False
        for p in sorted({p for part in self for p in (*part.corr, *part.compact)}):
            compact = [part.compact[p] for part in self if p in part.compact]
            if len(compact) == sum(p in part.compact or p in part.corr for part in self) and all(
                a.last < b.first for a, b in itertools.pairwise(compact)
            ):  # every range's calls compact, one range after another
                api.compact[p] = CompactCalls.joined(compact)
                continue
            columns = [part.chunks(p) for part in self]
            chunks = [c for cs, _ in columns for c in cs]
            corr = np.concatenate(chunks)
            step = np.concatenate([s for _, ss in columns for s in ss])
            # Each worker checked its own range; here only the seams between ranges are left.
            checked = all(part.increasing.get(p, True) for part in self)
            if not (checked and _seams_increase(chunks)):
                # calls from several threads interleave: sort, and look for calls seen twice
                order = np.argsort(corr, kind="stable")
                corr, step = corr[order], step[order]
                duplicated |= bool(np.any(corr[1:] == corr[:-1]))
            api.corr[p], api.step[p] = narrow(corr), step
        unkeyed = np.concatenate([np.zeros(0, np.int64), *(u for r in self for u in r.unkeyed)])
        duplicated |= len(unique(unkeyed)) < len(unkeyed)
        return api, duplicated


@dataclass
class RuntimePart:
    """What one rowid range of the runtime table contributes: accumulators (merged field by
    field, census.load.accumulators.merge_fields; the per-key ones declared, `per_key`)."""

    calls: Calls = field(default_factory=Calls)
    # per key; made by the pass with its launch APIs (LaunchTotals.of)
    launch: LaunchTotals = per_key(lambda keys: LaunchTotals())
    timeline: TimelineParts = field(default_factory=TimelineParts)  # launch and sync calls


def read_runtime_part(
    conn: sqlite3.Connection,
    names: ApiNames,
    steps: StepIndex,
    rows: RowidRange,
    batch_rows: int,
    tick=lambda n: None,
) -> RuntimePart:
    """One pass over a rowid range, assuming each call has one row; Calls.finish checks it."""
    calls = RangeCalls()
    part = RuntimePart(Calls([calls]), LaunchTotals.of(names.launch_api, steps.size))
    last = rows.lo
    for b, top in read_batches(
        conn, sc.RUNTIME, RUNTIME_COLUMNS, rows, names.pass_where, batch_rows
    ):
        with_end(sc.RUNTIME, b)
        code = names.launch_code(b["name"])
        if names.timeline:
            _add_timeline(part.timeline, names, steps, b, code >= 0)
        b["step"] = step = steps.step_at(b["proc"], b["start"])
        keyed = (b["proc"] != INT_NULL) & (b["corr"] != INT_NULL)
        if names.sync_ids:  # read for the idle split only: not in the API map
            keyed &= names.is_candidate(b["name"])
        launch = code >= 0
        calls.add(b, keyed, launch)
        part.launch.add(step[launch], code[launch], b["dur"][launch], names.graph[code[launch]])
        tick(top - last)
        last = top
    part.launch = part.launch.sparse()
    calls.close()
    return part


def merge_runtime(parts: list[RuntimePart]) -> tuple[ApiMap, RuntimePart, bool, TimelineParts]:
    """The ranges' parts merged (field by field) and their calls finished: the API map, the
    merged part (its calls and timeline taken out: the API map holds the one, the last item the
    other), True when some call has several rows, the launch and sync calls the idle split
    needs."""
    total = RuntimePart()
    for part in parts:
        merge_fields(total, part)
    api, duplicated = total.calls.finish()
    timeline, total.calls, total.timeline = total.timeline, Calls(), TimelineParts()
    return api, total, duplicated, timeline


def _add_timeline(parts: TimelineParts, names: ApiNames, steps: StepIndex, b: dict,
                  launch: np.ndarray) -> None:  # fmt: skip
    """The launch (`launch`) and synchronising calls of processes with steps, where they touch
    a step."""
    timed = (b["dur"] != INT_NULL) & (b["dur"] >= 0)
    kinds = (("launch", timed & launch),
             ("sync", timed & names.is_sync(b["name"])))  # fmt: skip
    for kind, rows in kinds:
        for p in steps.by_proc:
            mine = rows & (b["proc"] == p)
            if mine.any():
                parts.add(kind, steps, p, b["start"][mine], b["end"][mine])


def _increasing(chunks: list[np.ndarray]) -> bool:
    """Whether the chunks, one after another, are strictly increasing."""
    return all(bool(np.all(c[1:] > c[:-1])) for c in chunks) and _seams_increase(chunks)


def _seams_increase(chunks: list[np.ndarray]) -> bool:
    edges = [(c[0], c[-1]) for c in chunks if len(c)]
    return all(a[1] < b[0] for a, b in itertools.pairwise(edges))


def read_runtime_grouped(
    conn: sqlite3.Connection, names: ApiNames, steps: StepIndex
) -> tuple[ApiMap, LaunchTotals]:
    """Exports that repeat calls: each (process, correlationId) starts at its earliest row and
    counts one launch, its longest row, its smallest API name."""
    whole = rowid_range(conn, sc.RUNTIME)
    batches = [
        with_end(sc.RUNTIME, b)
        for b, _ in read_batches(conn, sc.RUNTIME, RUNTIME_COLUMNS, whole, names.where)
    ]
    cols = {k: np.concatenate([b[k] for b in batches]) for k in batches[0]} if batches else {}
    if not cols:
        return ApiMap(), LaunchTotals()
    proc, corr, start = cols["proc"], cols["corr"], cols["start"]
    api = ApiMap()
    keyed = np.flatnonzero((proc != INT_NULL) & (corr != INT_NULL))
    for p, r in _by_value(proc, keyed):
        c, first_start = _group_min(corr[r], np.where(start[r] == INT_NULL, INT_MAX, start[r]))
        t = np.where(first_start == INT_MAX, INT_NULL, first_start)
        api.corr[p], api.step[p] = narrow(c), steps.step_at(np.full(len(c), p), t)
    code = names.launch_code(cols["name"])
    rank = np.argsort(np.argsort(np.array(names.launch_api, dtype=object)))  # MIN(api) by name
    launch = LaunchTotals.of(names.launch_api, steps.size)
    rows = np.flatnonzero(code >= 0)
    single = rows[corr[rows] == INT_NULL]
    grouped = rows[corr[rows] != INT_NULL]
    dur = cols["dur"]
    launch.add(steps.step_at(proc[single], start[single]), code[single], dur[single],
               names.graph[code[single]])  # fmt: skip
    if len(grouped):
        order = grouped[np.lexsort((corr[grouped], proc[grouped]))]
        key_p, key_c = proc[order], corr[order]
        firsts = np.flatnonzero(np.r_[True, (key_p[1:] != key_p[:-1]) | (key_c[1:] != key_c[:-1])])
        t0 = np.minimum.reduceat(np.where(start[order] == INT_NULL, INT_MAX, start[order]), firsts)
        t0 = np.where(t0 == INT_MAX, INT_NULL, t0)
        d = np.maximum.reduceat(dur[order], firsts)  # INT_NULL is the smallest: ignored
        api_code = np.argsort(rank)[np.minimum.reduceat(rank[code[order]], firsts)]
        graph = np.maximum.reduceat(names.graph[code[order]], firsts)
        step = steps.step_at(key_p[firsts], t0)
        launch.add(step, api_code, d, graph)
    return api, launch


def _group_min(keys: np.ndarray, values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    order = np.lexsort((values, keys))
    k = keys[order]
    firsts = np.flatnonzero(np.r_[True, k[1:] != k[:-1]])
    return k[firsts], np.minimum.reduceat(values[order], firsts)


def read_other_calls(
    conn: sqlite3.Connection, names: ApiNames, steps: StepIndex, missing: dict[int, np.ndarray]
) -> dict[int, tuple[np.ndarray, np.ndarray]]:
    """For GPU rows whose (process, correlationId) no launch/memcpy/memset call holds: any other
    runtime row with that key (earliest start), as {process: (correlationIds, steps)}."""
    conn.execute(
        "CREATE TEMP TABLE IF NOT EXISTS missing (proc INTEGER NOT NULL, corr INTEGER NOT NULL, "
        "PRIMARY KEY (proc, corr)) WITHOUT ROWID"
    )
    conn.execute("DELETE FROM temp.missing")
    conn.executemany(
        "INSERT OR IGNORE INTO temp.missing VALUES (?, ?)",
        ((p, c) for p, corrs in missing.items() for c in corrs.tolist()),
    )
    other = f"(r.nameId IS NULL OR NOT ({names.where.replace('nameId', 'r.nameId')}))"
    rows = conn.execute(
        f"""SELECT r.globalTid >> 24, r.correlationId, MIN(r.start) FROM "{sc.RUNTIME}" r
            WHERE {other} AND EXISTS (SELECT 1 FROM temp.missing m
                  WHERE m.proc = r.globalTid >> 24 AND m.corr = r.correlationId)
            GROUP BY 1, 2"""
    ).fetchall()
    out: dict[int, tuple[np.ndarray, np.ndarray]] = {}
    by_proc: dict[int, list[tuple[int, int | None]]] = {}
    for p, c, t in rows:
        by_proc.setdefault(int(p), []).append((int(c), t))
    for p, items in by_proc.items():
        corr = np.array([c for c, _ in items], np.int64)
        t = np.array([INT_NULL if s is None else int(s) for _, s in items], np.int64)
        out[p] = (corr, steps.step_at(np.full(len(corr), p), t))
    return out

"""GPU activity -> per-name, per-step, union and busy aggregates for one rowid range of kernels.

Kernels arrive in rowid order, a batch at a time, into the range's accumulators (PartResult,
census.load.accumulators). nsys writes them in start order, so every batch starts no earlier
than the one before it, and the union's running maximum end carries from batch to batch (and,
in census.load.range_merge, from range to range). A range that is not in start
order raises OutOfOrder; the engine then reads the export as one batch. Memcpys and memsets
count in busy time, fed into the sweep alongside the kernels that start when they do.
"""

from __future__ import annotations

import sqlite3
from dataclasses import dataclass, field

import numpy as np

from census.definitions import is_nccl, kernel_name
from census.load.accumulators import (
    Count,
    Devices,
    GroupSums,
    KernelSums,
    Missing,
    add_batch,
    batched,
    for_keys,
    merge_fields,
    per_key,
)
from census.load.api_calls import ApiMap
from census.load.api_names import read_strings
from census.load.figures import Spans, add_rows
from census.load.intervals import (
    INT_MAX,
    INT_NULL,
    NO_STEP,
    Members,
    StepIndex,
    Windowed,
    add_spans,
    distinct,
    factorize,
    no_members,
    with_end,
)
from census.load.rank_kernels import RankKernels
from census.load.swept import ALL_CLASS, BusyTime, Unions
from census.load.timeline import TimelineParts
from census.sources import schema as sc
from census.sqlite import BATCH_ROWS, TIMED, RowidRange, read_batches

WHOLE = NO_STEP  # the scope of capture-wide unions
UnionKey = tuple[int, int, int]  # (step or WHOLE, class, deviceId or INT_NULL)


def parent_scope(step: np.ndarray | int, segments: int):
    """The union scope of a step when the index holds its phase segments (0 .. segments-1)."""
    return step + segments


def union_scopes(ctx: GpuContext) -> int:
    """How many union scopes the index has: its keys, and with segments their steps too."""
    parents = ctx.parents
    if parents is None:
        return ctx.steps.size
    return parent_scope(int(parents.max()) + 1 if len(parents) else 0, len(parents))


class OutOfOrder(Exception):
    """The kernels of a range are not in start order: batches cannot carry the sweep."""


@dataclass(frozen=True)
class GpuContext:
    """What every range of the GPU passes shares: the keys (steps or segments) and the API
    map that gives each row its key, the tables and columns there are, and the memcpys and
    memsets that count in busy time."""

    steps: StepIndex
    api: ApiMap
    any_nccl: bool  # whether any kernel name can be NCCL; without, no all-kernel union
    has_demangled: bool
    tables: frozenset[str]
    # memcpys/memsets that count in busy time, by start: Members, or SpilledBusy's runs
    memory_busy: Windowed | None = None
    # with phase segments as the index: each segment's step, for the steps' own unions (scopes
    # parent_scope(step)); None when the index holds the steps themselves
    parents: np.ndarray | None = None
    timeline: bool = False  # gather the GPU busy pieces the idle split needs (census.load.timeline)

    @property
    def step_procs(self) -> np.ndarray:
        """The processes that have steps, sorted (a busy interval's code is its index here)."""
        return np.array(sorted(self.steps.by_proc), np.int64)


@dataclass(frozen=True)
class Part:
    """One rowid range of kernels for one job, bounded by the kernels' start times around it."""

    rows: RowidRange | None  # kernel rowids; None: no kernel table
    after_ns: int | None = None  # every kernel of the range starts at or after this
    before_ns: int | None = None  # ... and at or before this; memcpys/memsets strictly before
    batch_rows: int = BATCH_ROWS


# PartResult's accumulators whose intervals cross range bounds (census.load.range_merge fixes
# each up, with the members its _head reads again for that field)
STRADDLING = ("unions", "busy")


@dataclass
class PartResult:
    """What a rowid range of kernels adds up to: accumulators (census.load.accumulators), so
    that two ranges' merge field by field (`merge`); the per-key ones declared (`per_key`)."""

    groups: GroupSums = field(default_factory=GroupSums)  # (dn, sn, has_api) -> 4 sums
    step_kernels: KernelSums = per_key(KernelSums, batches=True)
    unions: Unions = per_key(Unions)  # per (scope, class, device)
    busy: BusyTime = per_key(BusyTime)  # per key; ends per process
    span: Spans = per_key(Spans)  # GPU work launched in each key
    bad_kernels: Count = field(default_factory=Count)  # a missing or negative duration
    devices: Devices = batched(Devices)
    missing: Missing = batched(Missing)  # GPU rows without a call
    timeline: TimelineParts = field(default_factory=TimelineParts)  # with ctx.timeline
    ranks: RankKernels = field(default_factory=RankKernels)  # per process; its NCCL kernels

    def merge(self, other: PartResult) -> None:
        """Add the result of the range after this one (its boundary fixed up before:
        census.load.range_merge)."""
        merge_fields(self, other)


def kernel_columns(ctx: GpuContext) -> dict[str, str]:
    """The kernel table's columns the pass reads, as read_batches' SQL expressions."""
    return {
        **TIMED,
        "dev": "deviceId",
        "proc": "globalPid >> 24",
        "corr": "correlationId",
        "dn": "demangledName" if ctx.has_demangled else "NULL",
        "sn": "shortName",
    }


class PartReader:
    """Accumulates a PartResult from kernel batches and the memcpys/memsets beside them."""

    def __init__(self, conn: sqlite3.Connection, ctx: GpuContext) -> None:
        self.conn = conn
        self.ctx = ctx
        n = ctx.steps.size
        self.res = for_keys(PartResult, n, unions=Unions(union_scopes(ctx)))
        self.nccl: dict[tuple[int, int], bool] = {}
        self.latest_start: int | None = None
        self.step_procs = ctx.step_procs

    # -- kernels ---------------------------------------------------------------------------
    def add_kernels(
        self, b: dict[str, np.ndarray], part: Part
    ) -> tuple[int | None, list[Members], Members]:
        """Aggregate one batch. Returns the latest start among its kernels with an extent, and
        what they add to the unions and to busy time, for sweeping."""
        with_end(sc.KERNEL, b)
        b["found"], b["step"] = found, step = self.ctx.api.lookup(b["proc"], b["corr"])
        pairs, pair = factorize(b["dn"], b["sn"])
        b["nccl"] = nccl = self._nccl_flags(pairs)[pair]
        timed = b["dur"] != INT_NULL  # start and end both known
        b["time_ns"] = dur = np.where(timed, b["dur"], 0)
        self.res.bad_kernels.add(int(np.count_nonzero(~timed | (b["dur"] < 0))))
        add_batch(self.res, b)  # the rows without a call, the devices, the per-key sums
        self._add_groups(pairs, pair, found, step, dur)
        add_spans(self.res.span, step, b["start"], b["end"])
        self.res.ranks.add(b["proc"], b["dev"], dur, nccl & timed,
                           (b["dn"], b["sn"], b["start"], b["end"], step))  # fmt: skip
        extent = timed & (b["dur"] > 0)
        latest = self._check_order(b["start"][extent], part)
        unions = self._union_members(b, extent, step, nccl)
        busy = busy_members(self.step_procs, b["proc"], b["start"], b["end"], extent)
        if self.ctx.timeline:
            zero = timed & (b["dur"] == 0)  # the next GPU work after a sync, too
            add_timeline(self.res.timeline, self.ctx.steps,
                         busy_members(self.step_procs, b["proc"], b["start"], b["end"], zero))  # fmt: skip
        return latest, unions, busy

    def _check_order(self, starts: np.ndarray, part: Part) -> int | None:
        if not len(starts):
            return None
        first, last = int(starts.min()), int(starts.max())
        if self.latest_start is not None and first < self.latest_start:
            raise OutOfOrder
        if (part.after_ns is not None and first < part.after_ns) or (
            part.before_ns is not None and last > part.before_ns
        ):
            raise OutOfOrder
        self.latest_start = last
        return last

    def _nccl_flags(self, pairs: list[tuple[int, int]]) -> np.ndarray:
        new = [p for p in pairs if p not in self.nccl]
        if new:
            ids = {i for p in new for i in p if i != INT_NULL}
            names = _resolve(self.conn, self.ctx, sorted(ids))
            for dn, sn in new:
                name = kernel_name(names, *(None if i == INT_NULL else i for i in (dn, sn)))
                self.nccl[(dn, sn)] = self.ctx.any_nccl and is_nccl(name)
        return np.array([self.nccl[p] for p in pairs], bool)

    def _add_groups(self, pairs, pair, found, step, dur) -> None:
        code = pair * 2 + found
        n = 2 * len(pairs)
        inside = step != NO_STEP
        # count, time, and the same of those in a step: summed in one pass
        sums = add_rows(code, n, np.stack([np.ones(len(code), np.int64), dur,
                                           inside.astype(np.int64), np.where(inside, dur, 0)],
                                          axis=1)).T.tolist()  # fmt: skip

        def key(c: int) -> tuple:
            dn, sn = pairs[c // 2]
            return (None if dn == INT_NULL else dn, None if sn == INT_NULL else sn, bool(c % 2))

        used = np.flatnonzero(sums[0]).tolist()
        self.res.groups.add((key(c), [s[c] for s in sums]) for c in used)

    def _union_members(self, b, extent, step, nccl) -> list[Members]:
        """Each kernel with an extent joins its class's and (with NCCL about) the all-kernel
        union, on its device, for the whole capture and for its step."""
        s, e, st = b["start"][extent], b["end"][extent], step[extent]
        devs, dev = distinct(b["dev"][extent])
        nd = max(1, len(devs))
        classes = [nccl[extent].astype(np.int64)]
        if self.ctx.any_nccl:
            classes.append(np.full(len(s), ALL_CLASS, np.int64))
        inside = np.flatnonzero(st != NO_STEP)
        dev_values = devs.tolist()

        def key(code: int) -> UnionKey:
            q, d = divmod(code, nd)
            scope, c = divmod(q, 3)
            return (scope - 1, c, dev_values[d])

        def parts(codes: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
            q, d = np.divmod(codes, nd)
            scope, c = np.divmod(q, 3)
            return scope - 1, c, devs[d]

        out = [Members(c * nd + dev, s, e, key, parts) for c in classes]  # scope 0: the capture
        scopes = [st[inside]]
        if self.ctx.parents is not None:  # segments' steps: unions do not add up, so their own
            scopes.append(parent_scope(self.ctx.parents[st[inside]], len(self.ctx.parents)))
        out += [
            Members(
                ((sc_ + 1) * 3 + c[inside]) * nd + dev[inside], s[inside], e[inside], key, parts
            )
            for sc_ in scopes
            for c in classes
        ]
        return out

    # -- sweeping -------------------------------------------------------------------------
    def sweep_busy(self, m: Members) -> None:
        """Add busy intervals `m` to busy time and (with ctx.timeline) gather their new pieces
        for the idle split."""
        swept = self.res.busy.add(m, self.ctx.steps)
        if self.ctx.timeline:
            new = swept.end > swept.piece_lo
            pieces = Members(
                swept.codes[swept.seg[new]], swept.piece_lo[new], swept.end[new], m.key
            )
            add_timeline(self.res.timeline, self.ctx.steps, pieces)


def add_timeline(parts: TimelineParts, steps: StepIndex, m: Members) -> None:
    """GPU busy intervals of processes with steps, kept where they touch a step."""
    if not len(m.code):
        return
    codes, inverse = distinct(m.code)  # small codes (process indices): no sort
    if len(codes) == 1:
        parts.add("busy", steps, m.key(int(codes[0])), m.start, m.end)
        return
    for i, code in enumerate(codes.tolist()):
        rows = inverse == i
        parts.add("busy", steps, m.key(code), m.start[rows], m.end[rows])


def busy_members(procs: np.ndarray, proc, start, end, extent) -> Members:
    """The intervals with an extent of processes that have steps; code: index into procs."""
    if not len(procs):
        return no_members()
    i = np.minimum(np.searchsorted(procs, proc), len(procs) - 1)
    rows = np.flatnonzero(extent & (procs[i] == proc))
    return Members(i[rows], start[rows], end[rows], lambda c: int(procs[c]))


def _resolve(conn: sqlite3.Connection, ctx: GpuContext, ids: list[int]) -> dict[int, str]:
    return read_strings(conn, ids) if sc.STRINGS in ctx.tables else {}


def read_part(
    conn: sqlite3.Connection, ctx: GpuContext, part: Part, tick=lambda n: None
) -> PartResult:
    """Aggregate one rowid range of kernels; sweep busy time with the memcpys/memsets that
    start in its time window, each batch with those that start by its latest kernel start
    (read a batch's worth at a time: a range holds no window of them)."""
    reader = PartReader(conn, ctx)
    memory = ctx.memory_busy or no_members()
    fed = part.after_ns  # the memory intervals that start from here on are not swept yet
    if part.rows is not None:
        last = part.rows.lo
        batches = read_batches(conn, sc.KERNEL, kernel_columns(ctx), part.rows,
                               batch_rows=part.batch_rows)  # fmt: skip
        for b, top in batches:
            latest, unions, busy = reader.add_kernels(b, part)
            reader.res.unions.add(unions)
            if latest is not None:
                upto = _earliest(_after(latest), part.before_ns)
                busy = _joined(busy, memory.window(fed, upto))
                fed = upto
            reader.sweep_busy(busy)
            tick(top - last)
            last = top
    reader.sweep_busy(memory.window(fed, part.before_ns))
    return reader.res


def _after(t: int) -> int | None:
    """The first time after t (None: none is, past int64)."""
    return t + 1 if t < INT_MAX else None


def _earliest(a: int | None, b: int | None) -> int | None:
    """The earlier of two window ends (None: open)."""
    return b if a is None else a if b is None else min(a, b)


def _joined(kernels: Members, memory: Members) -> Members:
    if not len(memory.code):
        return kernels
    return Members(
        np.concatenate([kernels.code, memory.code]),
        np.concatenate([kernels.start, memory.start]),
        np.concatenate([kernels.end, memory.end]),
        memory.key,
    )

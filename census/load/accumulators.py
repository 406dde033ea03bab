"""The engine as a declared map-reduce: what every accumulator of a pass does.

A pass maps its workers over consecutive rowid ranges of a table (census.load.pool); each worker
adds the range's batches into its accumulators (`add`); census's process merges the ranges'
accumulators in rowid order (`merge`), fixing up at each range boundary what was counted on both
sides of it (`Straddling`: only unions and busy time, census.load.swept, have intervals that
reach across; census.load.range_merge); and the accumulators with per-key figures finish into
one table of columns (`finish`, `key_table`), one row per key (a step's or phase segment's
idx), the table census.load.finish makes the step table of, and the whole capture's figures come
from the same accumulators (`total`).

    accumulator            add                           merge         finish
    KernelSums             a kernel batch: per key       sums add      kernel_count, ...
                           count, time, NCCL's
    BusyTime               busy pieces (kernels,         sums add,     gpu_busy_ns
                           memcpys, memsets), swept      ends max
                           and clipped per key
    Unions                 kernel members, swept         lengths add,  UNIONS columns;
                                                         ends max      total
    Spans                  a batch's GPU work per key    min, max      SPAN columns
    LaunchTotals           a runtime batch's launches    sums add      LAUNCH_SUMS columns;
                                                                       total, by_api
    Calls                  a runtime batch's calls per   ranges join   the API map (one join
                           process (RangeCalls)                        of the ranges' bitmaps;
                                                                       calls recorded twice)
    CopySums, MemsetSums   a memcpy/memset batch: per    sums add      COPY_COLUMNS,
                           key count, bytes of counted                 MEMSET_KEYS; total
                           kinds, of memsets
    KindSums               a memcpy/memset batch: per    sums add      the memory table
                           copy kind, in keys and all
    TimelineParts          intervals touching a step     pieces join   the idle split's input
    GroupSums, Count,      kernel groups, bad rows,      add, union,   themselves
    Devices, Missing,      devices, rows without a       extend, max
    Maxima                 call, running maximum ends

A batch is a dict of int64 columns (census.sqlite.read_batches'), with what the pass looked up
added to it (`step`: the key of its launching call, `found`: whether it has one); the key table
is the same kind of dict, one row per key. A result of a range (census.load.kernels.PartResult,
census.load.memory.MemoryResult, census.load.api_calls.RuntimePart) is a dataclass of
accumulators, so merging two is `merge_fields`: no field listed by hand. Its per-key
accumulators are declared once, as fields made by `per_key`: the pass makes them for its keys
(`for_keys`), the merge merges them as every field, and the finish reads the same declaration
(`finish_declared`: the key table's columns and the whole capture's totals). A per-step figure
from any table is a Metric (census.metrics), an accumulator here, and its field in that pass's
result.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import field, fields
from typing import Any, Protocol, TypeVar

import numpy as np

from census.definitions import MEMSET_KIND
from census.load.figures import Columns, Sums, add_rows, fit_rows, named
from census.load.intervals import INT_NULL, NO_STEP, add_into, add_sums, distinct, unique
from census.metrics import (
    COPY_COLUMNS,
    COPY_KEYS,
    KERNEL_COUNT,
    KERNEL_TIME_NS,
    MEMSET_KEYS,
    NCCL_KERNEL_COUNT,
    NCCL_KERNEL_TIME_NS,
)

Batch = Columns  # a batch of rows: named columns, as the key table the accumulators finish into
B = TypeVar("B", contravariant=True)
R = TypeVar("R")
# a result's field's metadata: how its per-key accumulator is made; whether it adds batches
PER_KEY, BATCHES = "per_key", "batches"


class Accumulator(Protocol[B]):
    """What a pass accumulates from its batches: added to a batch at a time, merged with
    another range's (the later one), and, where it has per-key columns, finished into them."""

    def add(self, batch: B) -> None:
        """Take in one batch."""

    def merge(self, other: Any) -> None:
        """Take in another range's accumulator of the same kind, read after this one."""


class PerKey(Protocol):
    """An accumulator whose figures are columns, one row per key."""

    def finish(self, keys: int) -> Columns:
        """Its columns by name, `keys` rows each."""
        ...


class Straddling(Protocol):
    """An accumulator whose rows' intervals can reach across a range boundary, so that two
    ranges' merge counts their overlap twice (unions, busy time): census.load.range_merge reads
    the next range's head again and takes the overlap away (its boundary fix-up)."""

    def reach(self) -> int:
        """The latest end any of its intervals reached (INT_NULL: none)."""
        ...

    def take_overlap(self, head: Any, before: Any, steps: Any) -> None:
        """Take away what the intervals of this range's head (`head`: those starting before
        `before.reach()`) add where `before`, the ranges before this one, already covers;
        `steps`: the key index (busy time's pieces are clipped to the keys). census.load.
        range_merge calls it on each field of the range's result named in STRADDLING
        (census.load.kernels)."""
        ...


def merge_fields(total: Any, other: Any, names: Iterable[str] | None = None) -> None:
    """Merge `other`, a result of a later range, into `total`, field by field (dataclasses of
    accumulators); `names`: only these fields (two kinds of results that share them)."""
    for name in names if names is not None else (f.name for f in fields(total)):
        getattr(total, name).merge(getattr(other, name))


def per_key(make: Callable[[int], PerKey], batches: bool = False) -> Any:
    """A pass's result's field declared per key: `make(keys)` is its accumulator for `keys`
    keys (`for_keys`); with `batches`, it adds the pass's batches (`add_batch`); merged as every
    field (`merge_fields`); finished into the key table's columns, and its `total()` where it
    has one into the whole capture's (`finish_declared`)."""
    return field(default_factory=lambda: make(0), metadata={PER_KEY: make, BATCHES: batches})


def batched(make: Callable[[], Accumulator]) -> Any:
    """A pass's result's field declared as an accumulator of the pass's batches (`add_batch`),
    with no per-key columns."""
    return field(default_factory=make, metadata={BATCHES: True})


def add_batch(result: Any, batch: Batch) -> None:
    """One batch into every field of `result` declared to add the pass's batches."""
    for f in fields(result):
        if f.metadata.get(BATCHES):
            getattr(result, f.name).add(batch)


def for_keys(result: type[R], keys: int, **made: Any) -> R:
    """A pass's result with its per-key fields made for `keys` keys (`made`: fields the pass
    makes otherwise)."""
    declared = {f.name: f.metadata[PER_KEY] for f in fields(result) if PER_KEY in f.metadata}  # type: ignore[arg-type]
    return result(**{name: make(keys) for name, make in declared.items() if name not in made},
                  **made)  # fmt: skip


def declared(results: Sequence[Any]) -> tuple[PerKey, ...]:
    """The results' per-key accumulators (their fields declared with `per_key`), merged and not
    yet finished: what census.load.finish finishes into the step table (`finish_declared`)."""
    return tuple(getattr(r, f.name) for r in results for f in fields(r) if PER_KEY in f.metadata)


def finish_declared(accumulators: Sequence[Any], keys: int) -> tuple[Columns, dict[str, int]]:
    """(the key table of per-key accumulators (`declared`), `keys` rows; the whole capture's
    totals of those that have them), every figure computed once."""
    totals: dict[str, int] = {}
    for acc in accumulators:
        totals |= acc.total() if hasattr(acc, "total") else {}
    return key_table([acc.finish(keys) for acc in accumulators]), totals


def key_table(columns: Sequence[Columns]) -> Columns:
    """Finished accumulators' columns side by side: one table, one row per key (the columns
    themselves, not copied)."""
    table: Columns = {}
    for finished in columns:
        assert not table.keys() & finished.keys(), "a column named twice"
        table.update(finished)
    return table


class KeySums(Sums):
    """Exact running sums (census.load.figures.Sums) of named columns per key, and of the rows in
    no key (row 0; a key's row is its idx + 1), so that the whole capture's come the same way
    (`total`). A subclass says which columns (`NAMES`) and how a batch makes them
    (`batch_values`)."""

    NAMES: tuple[str, ...] = ()

    def __init__(self, keys: int) -> None:
        super().__init__(keys + 1, len(self.NAMES))

    def add(self, batch: Batch) -> None:  # type: ignore[override]
        """The batch's columns summed into the key of each row (its `step`; NO_STEP: row 0)."""
        add_sums(self, batch["step"] + 1, *self.batch_values(batch))

    def batch_values(self, batch: Batch) -> tuple[np.ndarray, ...]:
        """Per row of the batch, its value of each of NAMES."""
        raise NotImplementedError

    def finish(self, keys: int) -> Columns:
        """NAMES' sums, `keys` rows (keys nothing was added to: zeros)."""
        return named(self.NAMES, fit_rows(self.values[1:], keys))

    def total(self) -> dict[str, int]:
        """The whole capture's sums: every key's and those of the rows in none (exact: int64
        sums stay below Sums' bound, Python ints beyond)."""
        return dict(zip(self.NAMES, self.values.sum(axis=0).tolist(), strict=True))


class KernelSums(KeySums):
    """Per key, the kernels launched in it, their time, the NCCL ones and theirs. The batch's
    `time_ns` is its duration, 0 where unknown; `nccl` marks NCCL kernels. A per-step kernel
    figure is a name here and its column in `batch_values` (and its Metric in
    census/metrics.py)."""

    NAMES = (KERNEL_COUNT, KERNEL_TIME_NS, NCCL_KERNEL_COUNT, NCCL_KERNEL_TIME_NS)

    def batch_values(self, batch: Batch) -> tuple[np.ndarray, ...]:
        """count, time_ns, NCCL count, NCCL time_ns of each kernel."""
        time_ns, nccl = batch["time_ns"], batch["nccl"]
        return (np.ones(len(time_ns), np.int64), time_ns, nccl.astype(np.int64),
                np.where(nccl, time_ns, 0))  # fmt: skip


class CopySums(KeySums):
    """Per key, the counted copies launched in it (census.metrics.COUNTED_COPIES): each kind's
    count and bytes. The batch's `kind` is its copyKind (MEMSET_KIND: memsets), `bytes` 0 where
    unknown."""

    NAMES = COPY_COLUMNS

    def batch_values(self, batch: Batch) -> tuple[np.ndarray, ...]:
        """Per counted kind, 1 and the bytes of the rows of that kind, 0 and 0 elsewhere."""
        kind, nbytes = batch["kind"], batch["bytes"]
        mine = [kind == k for k in COPY_KEYS]
        return tuple(v for m in mine for v in (m.astype(np.int64), np.where(m, nbytes, 0)))


class MemsetSums(KeySums):
    """Per key, the memsets launched in it: their count and bytes."""

    NAMES = MEMSET_KEYS

    def batch_values(self, batch: Batch) -> tuple[np.ndarray, ...]:
        """1 and the bytes of each memset, 0 and 0 for a memcpy."""
        mine = batch["kind"] == MEMSET_KIND
        return mine.astype(np.int64), np.where(mine, batch["bytes"], 0)


class KindSums(dict):
    """Per copy kind (MEMSET_KIND: memsets) its rows' count, bytes and time, and the count and
    bytes of those launched in a key (the memory table: census.model.census.MemoryStat)."""

    def add(self, batch: Batch) -> None:  # type: ignore[override]
        """The batch's rows summed by `kind` (`bytes`, `time_ns`: 0 where unknown)."""
        kinds, code = distinct(batch["kind"])
        inside = (batch["step"] != NO_STEP).astype(np.int64)
        values = np.stack([np.ones(len(code), np.int64), batch["bytes"], batch["time_ns"],
                           inside, inside * batch["bytes"]], axis=1)  # fmt: skip
        add_into(self, zip(kinds.tolist(), add_rows(code, len(kinds), values).tolist(),
                           strict=True))  # fmt: skip

    def merge(self, other: KindSums) -> None:
        """Sums add, kind by kind."""
        add_into(self, other.items())


class Count:
    """A count of rows (the kernels with a missing or negative duration)."""

    def __init__(self, n: int = 0) -> None:
        self.n = n

    def add(self, n: int) -> None:
        """`n` more."""
        self.n += n

    def merge(self, other: Count) -> None:
        """Counts add."""
        self.n += other.n


class Devices(set):
    """The deviceIds met."""

    def add(self, batch: Batch) -> None:  # type: ignore[override]
        """The batch's known devices."""
        dev = batch["dev"]
        self.update(distinct(dev[dev != INT_NULL])[0].tolist())

    def merge(self, other: Devices) -> None:
        """Devices met by either."""
        self |= other


class GroupSums(dict):
    """Sums of a few numbers per group key (a kernel's names and whether it has a call)."""

    def add(self, items: Iterable[tuple[Any, Iterable[int]]]) -> None:
        """(key, values) added into the key's sums, element by element."""
        add_into(self, items)

    def merge(self, other: GroupSums) -> None:
        """Sums add, group by group."""
        add_into(self, other.items())


class Maxima(dict):
    """A running maximum per key (the latest end busy time reached, per process)."""

    def reach(self) -> int:
        """The largest of them (INT_NULL: none)."""
        return max(self.values(), default=INT_NULL)

    def merge(self, other: Maxima) -> None:
        """The larger of the two, key by key."""
        for key, v in other.items():
            self[key] = max(self.get(key, v), v)


class Runs(list):
    """A memory job's busy intervals, one run sorted by start (in memory, or spilled)."""

    def merge(self, other: Runs) -> None:
        """Both ranges' runs, this one's first."""
        self.extend(other)


class Missing(dict):
    """Per process, the correlationIds of GPU rows that found no API call (looked up later
    among the calls that are not launches, memcpys or memsets)."""

    def add(self, batch: Batch) -> None:
        """The batch's rows with a process and correlationId but no call (`found` false)."""
        proc, corr = batch["proc"], batch["corr"]
        lost = np.flatnonzero(~batch["found"] & (proc != INT_NULL) & (corr != INT_NULL))
        for p in unique(proc[lost]).tolist():
            self.setdefault(p, []).append(corr[lost[proc[lost] == p]])

    def merge(self, other: Missing) -> None:
        """Both ranges' rows, this one's first."""
        for p, corrs in other.items():
            self.setdefault(p, []).extend(corrs)

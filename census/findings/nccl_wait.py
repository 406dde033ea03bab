"""Each rank's NCCL kernel time split into waiting and transfer, and the straggler named (#46).

Pure: int64 arrays in, int64 arrays out, no floats. The definitions (docs/definitions.md will
state them with the engine's wiring):

- A **rank** is one entry of `ranks`: the NCCL kernels one process launched in the window, in
  any order. Its position in `ranks` is how every result names it.
- A rank's kernels of one collective (an int id; census decodes AllReduce, SendRecv, ... with
  census.definitions.nccl_collective) are taken in order of (start, end, position in the input).
  **Occurrence k** of a collective is its k-th kernel on every rank, when every rank has the same
  number of that collective, zero included (a rank with none while another has some makes it
  unmatched). Otherwise the collective is **unmatched**: listed in `NcclWait.unmatched` with each
  rank's count, and its kernels get no split (mask `matched` False, wait and transfer 0, their
  time in `RankTotals.unmatched_ns`), so that over the matched kernels wait + transfer = NCCL
  time exactly, and over all of a rank's kernels wait + transfer + unmatched = NCCL time.
- **last arrival** of occurrence k = the latest start over the ranks. A rank's **wait** =
  min(its end, last arrival) − its start; its **transfer** = its end − min(its end, last
  arrival). Wait + transfer = end − start, exactly. A kernel that ends before it starts (a
  corrupt row, which census warns of and still counts) keeps the identity with wait = its
  negative duration and transfer 0; every other kernel has wait >= 0 and transfer >= 0.
- A rank **arrived last** in an occurrence when its start equals the last arrival. On ties every
  rank starting at that latest start arrived last (each counts one, and each has wait 0).
- **The straggler**: the rank with the most last arrivals; ties broken by the larger wait it
  caused, then by the lower position in `ranks`. The wait a rank **caused** is the sum of the
  other ranks' waits over the occurrences where it arrived last (an occurrence tied between
  several last arrivers counts towards each of them). None with fewer than two ranks, no
  matched occurrence, or ranks on several hosts. A straggler with caused_wait_ns 0 made no one
  wait (every occurrence it was last in, it was tied or the others had ended).
- Ranks are matched only on one host: clocks of different hosts differ. Given `hosts` (one name
  per rank) naming more than one host, nothing is matched: every kernel is unmatched,
  `NcclWait.hosts` names the hosts, and `unmatched` stays empty (the counts are not the reason).

Sums by step or phase are the caller's: the per-kernel arrays are in the caller's input order,
so its own keys (a step index per kernel, say) sum them with `sum_by_key`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import NamedTuple

import numpy as np


@dataclass(frozen=True, eq=False)
class NcclKernels:
    """One rank's NCCL kernels in the window, in any order: int64 arrays of one length.

    collective: the collective's id per kernel (any int; equal ids are one collective on every
    rank). start_ns, end_ns: the kernel's start and end, on the clock shared by the ranks."""

    collective: np.ndarray
    start_ns: np.ndarray
    end_ns: np.ndarray

    def __post_init__(self) -> None:
        columns = [_int_column(getattr(self, f)) for f in ("collective", "start_ns", "end_ns")]
        if len({len(c) for c in columns}) > 1:
            raise ValueError(f"NcclKernels columns differ in length: {[len(c) for c in columns]}")
        for name, column in zip(("collective", "start_ns", "end_ns"), columns, strict=True):
            object.__setattr__(self, name, column)

    def __len__(self) -> int:
        return len(self.start_ns)


class RankTotals(NamedTuple):
    """One rank's sums over its kernels (ns, counts). nccl_ns = wait_ns + transfer_ns +
    unmatched_ns; kernel_count = matched_count + unmatched_count."""

    kernel_count: int
    nccl_ns: int  # Σ (end − start) over all its NCCL kernels
    wait_ns: int  # over matched kernels
    transfer_ns: int  # over matched kernels
    last_arrivals: int  # matched occurrences it arrived last in (ties: each tied rank)
    caused_wait_ns: int  # the others' waits over those occurrences
    unmatched_count: int
    unmatched_ns: int  # Σ (end − start) over its kernels of unmatched collectives


@dataclass(frozen=True, eq=False)
class RankSplit:
    """One rank's kernels split, each array in the order of its NcclKernels: wait_ns and
    transfer_ns (int64, 0 where not matched), arrived_last (bool, False where not matched),
    matched (bool: its collective is matched), and the rank's totals."""

    wait_ns: np.ndarray
    transfer_ns: np.ndarray
    arrived_last: np.ndarray
    matched: np.ndarray
    totals: RankTotals


class Unmatched(NamedTuple):
    """A collective whose count differs between ranks: its id and each rank's count."""

    collective: int
    counts: tuple[int, ...]


class Straggler(NamedTuple):
    """The rank (its position in `ranks`) that arrived last most often: how often, and the
    others' waits over those occurrences (ns)."""

    rank: int
    last_arrivals: int
    caused_wait_ns: int


@dataclass(frozen=True, eq=False)
class NcclWait:
    """The split of every rank (in the order of `ranks`), the unmatched collectives (by id),
    the number of matched occurrences (over all matched collectives), the straggler, the
    hosts when there are several (then nothing is matched), and who waited for whom:
    waited_for[r, s] is rank r's wait over the occurrences rank s arrived last in (int64,
    ranks x ranks; its column s sums to rank s's caused_wait_ns, its diagonal is 0)."""

    ranks: tuple[RankSplit, ...]
    unmatched: tuple[Unmatched, ...]
    occurrences: int
    straggler: Straggler | None
    hosts: tuple[str, ...] = ()
    waited_for: np.ndarray = field(default_factory=lambda: np.zeros((0, 0), np.int64))


def unmatched_split(ranks: Sequence[NcclKernels], hosts: tuple[str, ...] = ()) -> NcclWait:
    """Nothing matched: every kernel unsplit (its time in unmatched_ns), no straggler; for ranks
    whose clocks cannot be compared (`hosts`: theirs, when they are on several)."""
    n = len(ranks)
    return NcclWait(tuple(_unsplit(k) for k in ranks), (), 0, None, hosts,
                    np.zeros((n, n), np.int64))  # fmt: skip


def split_nccl_time(ranks: Sequence[NcclKernels], hosts: Sequence[str] | None = None) -> NcclWait:
    """Split each rank's NCCL kernel time into wait and transfer (module docstring: the
    definitions). `hosts`, when given, names each rank's host; several hosts match nothing."""
    ranks = tuple(ranks)
    if hosts is not None and len(hosts) != len(ranks):
        raise ValueError(f"{len(hosts)} hosts for {len(ranks)} ranks")
    several = tuple(sorted(set(hosts or ())))
    if len(several) > 1:
        return unmatched_split(ranks, several)
    none = np.zeros((len(ranks), len(ranks)), np.int64)
    runs = [_collective_runs(k) for k in ranks]
    ids, counts = _collective_counts(runs)
    same = (counts == counts[:1]).all(axis=0) if len(ranks) else np.ones(0, bool)
    unmatched = tuple(
        Unmatched(int(ids[c]), tuple(int(n) for n in counts[:, c])) for c in np.flatnonzero(~same)
    )
    picks = [_matched_in_order(run, ids, same) for run in runs]
    occurrences = len(picks[0]) if picks else 0
    if not occurrences:
        return NcclWait(tuple(_unsplit(k) for k in ranks), unmatched, 0, None, (), none)
    start = np.stack([k.start_ns[p] for k, p in zip(ranks, picks, strict=True)])
    end = np.stack([k.end_ns[p] for k, p in zip(ranks, picks, strict=True)])
    last_arrival = start.max(axis=0)
    reached = np.minimum(end, last_arrival)
    wait, transfer, last = reached - start, end - reached, start == last_arrival
    caused = np.where(last, wait.sum(axis=0) - wait, 0).sum(axis=1)
    splits = tuple(
        _split(k, p, wait[r], transfer[r], last[r], int(caused[r]))
        for r, (k, p) in enumerate(zip(ranks, picks, strict=True))
    )
    waited_for = np.matmul(wait, last.T.astype(np.int64))  # int64: exact
    np.fill_diagonal(waited_for, 0)  # a last arriver's own wait is 0 (but for corrupt rows)
    return NcclWait(splits, unmatched, occurrences, _straggler(splits), (), waited_for)


def _int_column(values: np.ndarray) -> np.ndarray:
    """`values` as a 1-D int64 array; floats (or anything but ints) refused, not rounded."""
    column = np.asarray(values)
    if column.ndim != 1 or (column.size and column.dtype.kind not in "iu"):
        raise TypeError(f"expected a 1-D array of ints, got {column.dtype} of shape {column.shape}")
    if column.dtype.kind == "u" and column.size and int(column.max()) > np.iinfo(np.int64).max:
        raise TypeError("expected ints that fit int64, got larger unsigned ones")
    return column.astype(np.int64, copy=False)


class _Runs(NamedTuple):
    """A rank's kernels in order of (collective, start, end, position), and its runs of one
    collective in that order: their ids (ascending) and lengths."""

    order: np.ndarray
    ids: np.ndarray
    lengths: np.ndarray


def _collective_runs(kernels: NcclKernels) -> _Runs:
    """Sort a rank's kernels (the one sort of the split) and find its collectives' runs."""
    order = np.lexsort((kernels.end_ns, kernels.start_ns, kernels.collective))
    ordered = kernels.collective[order]
    firsts = np.flatnonzero(np.r_[True, ordered[1:] != ordered[:-1]]) if len(order) else order
    return _Runs(order, ordered[firsts], np.diff(np.r_[firsts, len(order)]))


def _collective_counts(runs: list[_Runs]) -> tuple[np.ndarray, np.ndarray]:
    """The collective ids found on any rank (ascending), and each rank's count of each:
    (len(runs), len(ids))."""
    ids = np.unique(np.concatenate([r.ids for r in runs] or [np.zeros(0, np.int64)]))
    counts = np.zeros((len(runs), len(ids)), np.int64)
    for row, run in zip(counts, runs, strict=True):
        row[np.searchsorted(ids, run.ids)] = run.lengths
    return ids, counts


def _matched_in_order(runs: _Runs, ids: np.ndarray, same: np.ndarray) -> np.ndarray:
    """The positions of a rank's kernels of matched collectives, by (collective, start, end,
    position): entry j is the same occurrence on every rank, as every rank has the same counts."""
    return runs.order[np.repeat(same[np.searchsorted(ids, runs.ids)], runs.lengths)]


def _split(
    kernels: NcclKernels,
    picks: np.ndarray,
    wait_ns: np.ndarray,
    transfer_ns: np.ndarray,
    last: np.ndarray,
    caused_wait_ns: int,
) -> RankSplit:
    """One rank's split, its matched kernels' (rows of `picks`) put back in its input order."""
    n = len(kernels)
    wait, transfer = np.zeros(n, np.int64), np.zeros(n, np.int64)
    arrived_last, matched = np.zeros(n, bool), np.zeros(n, bool)
    wait[picks], transfer[picks], arrived_last[picks], matched[picks] = (
        wait_ns, transfer_ns, last, True
    )  # fmt: skip
    loose = (kernels.end_ns - kernels.start_ns)[~matched]
    totals = RankTotals(
        kernel_count=n,
        nccl_ns=int(np.sum(kernels.end_ns - kernels.start_ns)),
        wait_ns=int(wait_ns.sum()),
        transfer_ns=int(transfer_ns.sum()),
        last_arrivals=int(np.count_nonzero(last)),
        caused_wait_ns=caused_wait_ns,
        unmatched_count=len(loose),
        unmatched_ns=int(loose.sum()),
    )
    return RankSplit(wait, transfer, arrived_last, matched, totals)


def _unsplit(kernels: NcclKernels) -> RankSplit:
    """A rank none of whose kernels is matched."""
    none = np.zeros(0, np.int64)
    return _split(kernels, none, none, none, np.zeros(0, bool), 0)


def _straggler(splits: tuple[RankSplit, ...]) -> Straggler | None:
    """The rank with the most last arrivals, then the most caused wait, then the first."""
    if len(splits) < 2:
        return None
    rank = max(
        range(len(splits)),
        key=lambda r: (splits[r].totals.last_arrivals, splits[r].totals.caused_wait_ns, -r),
    )
    totals = splits[rank].totals
    return Straggler(rank, totals.last_arrivals, totals.caused_wait_ns)


def sum_by_key(values: np.ndarray, keys: np.ndarray, key_count: int) -> np.ndarray:
    """Exact int64 sums of `values` (ints or bools, per kernel) by `keys` (an int per kernel,
    e.g. its step index): entry i is the sum over kernels whose key is i; keys outside
    [0, key_count) (a kernel in no step: -1) are left out. np.bincount's weights would be
    float64, exact only below 2^53."""
    values, keys = np.asarray(values), _int_column(keys)
    values = values.astype(np.int64) if values.dtype == bool else _int_column(values)
    if len(values) != len(keys):
        raise ValueError(f"{len(values)} values for {len(keys)} keys")
    inside = (keys >= 0) & (keys < key_count)
    out = np.zeros(key_count, np.int64)
    np.add.at(out, keys[inside], values[inside])
    return out

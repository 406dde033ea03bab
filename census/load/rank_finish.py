"""Aggregates -> NcclRecord (census.model.ranks): the ranks of one export and their NCCL kernels,
each placed in its step's and phase's row of the census's StepTable, and the exposed NCCL time of
every step and phase. Pure: no I/O.

Exposed NCCL (per step, per phase, per rank): the union of the NCCL kernels not overlapped by
non-NCCL kernels, per device, summed over devices: |all-kernel union| − |non-NCCL union| of the
kernels launched in the step (a phase: in each of its segments, summed; the whole capture: of
every kernel on the rank's devices).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

from census.definitions import kernel_name, nccl_collective
from census.load.figures import Columns, add_rows
from census.load.intervals import INT_NULL
from census.metrics import NON_NCCL_UNION_NS
from census.model.ranks import NcclRecord, RankInfo

if TYPE_CHECKING:
    from census.load.aggregates import Aggregates
    from census.load.profile import Profile
    from census.model.step_table import StepTable


def nccl_record(profile: Profile, table: StepTable, by_step: Columns,
                by_segment: Columns | None) -> NcclRecord | None:  # fmt: skip
    """The record of an export whose census has `table` as its steps (rows in profile.steps'
    order), finished from the key tables `by_step` and `by_segment` (None: no phases); None
    when no process launched NCCL kernels and at most one launched any."""
    agg = profile.aggregates
    columns = agg.ranks
    if columns is None:
        return None
    pairs = columns.pairs[columns.pairs[:, 0] != INT_NULL]
    procs = sorted({int(p) for p in pairs[:, 0].tolist()})
    if not len(columns.nccl) and len(procs) < 2:
        return None
    ranks = tuple(_rank(p, pairs, agg) for p in procs)
    proc = columns.column("proc")
    known = np.isin(proc, np.array(procs, np.int64))
    nccl = columns.nccl[known]
    rank = np.searchsorted(np.array(procs, np.int64), nccl[:, 0])
    names, collective = _collectives(agg, nccl[:, 1], nccl[:, 2])
    step_row, phase_row = _rows_of_keys(profile, table, nccl[:, 5])
    kernels = np.stack([rank, collective, nccl[:, 3], nccl[:, 4], step_row, phase_row], axis=1)
    step_proc = np.array([s.proc for s in profile.steps], np.int64)
    at = np.minimum(np.searchsorted(np.array(procs, np.int64), step_proc), len(procs) - 1)
    step_rank = np.where(np.array(procs, np.int64)[at] == step_proc, at, -1) if procs else (
        np.full(len(step_proc), -1, np.int64))  # fmt: skip
    steps_exposed, phases_exposed = _exposed(profile, table, by_step, by_segment)
    return NcclRecord(ranks, names, kernels.astype(np.int64), step_rank.astype(np.int64),
                      steps_exposed, phases_exposed)  # fmt: skip


def _rank(proc: int, pairs: np.ndarray, agg: Aggregates) -> RankInfo:
    mine = pairs[pairs[:, 0] == proc]
    devices = tuple(int(d) for d in mine[:, 1].tolist() if d != INT_NULL)
    shared = any(int(p) != proc and int(d) in devices for p, d in pairs[:, :2].tolist())
    exposed = None if shared else sum(agg.exposed_by_device.get(d, 0) for d in devices)
    return RankInfo(proc, devices, int(sum(mine[:, 2].tolist())), int(sum(mine[:, 3].tolist())),
                    exposed)  # fmt: skip


def _collectives(agg: Aggregates, dn: np.ndarray, sn: np.ndarray) -> tuple[tuple[str, ...], Any]:
    """The collectives' names (sorted) and each kernel's index among them (as
    census.definitions.nccl_collective decodes its name)."""
    if not len(dn):
        return (), np.zeros(0, np.int64)
    pair_ids, inverse = np.unique(np.stack([dn, sn], axis=1), axis=0, return_inverse=True)
    found = [nccl_collective(kernel_name(agg.names, *(None if i == INT_NULL else i for i in p)))
             or "other NCCL" for p in pair_ids.tolist()]  # fmt: skip
    names = tuple(sorted(set(found)))
    code = np.array([names.index(c) for c in found], np.int64)
    return names, code[inverse.ravel()]


def _rows_of_keys(profile: Profile, table: StepTable, keys: np.ndarray) -> tuple[Any, Any]:
    """Each key's (a step's idx, or with phases a segment's) step row and phase row in `table`
    (-1: none)."""
    inside = keys >= 0
    keys = np.where(inside, keys, 0)
    segments = profile.segments
    step_idx = segments.step[keys] if len(segments) else keys
    rows = _row_of_idx(profile)
    step_row = np.where(inside, rows[step_idx] if len(rows) else -1, -1)
    if not len(segments):
        return step_row, np.full(len(keys), -1, np.int64)
    phase_row = _phase_rows(table, segments.names, step_row, segments.code[keys])
    return step_row, np.where(inside, phase_row, -1)


def _row_of_idx(profile: Profile) -> np.ndarray:
    """Per step idx, its row in the census's steps (profile.steps' order)."""
    idx = np.array([s.idx for s in profile.steps], np.int64)
    rows = np.zeros(len(idx), np.int64)
    rows[idx] = np.arange(len(idx))
    return rows


def _phase_rows(table: StepTable, names: tuple[str, ...], step_row: Any, code: Any) -> Any:
    """The row in table's phases of the phase named names[code] in step row step_row."""
    width = len(names)
    own = {n: i for i, n in enumerate(names)}
    phase_code = np.array([own.get(n, -1) for n in table.phases.names], np.int64)
    key = table.phase_step() * width + phase_code
    order = np.argsort(key, kind="stable")
    want = step_row * width + code
    at = np.minimum(np.searchsorted(key[order], want), max(len(key) - 1, 0))
    found = order[at] if len(key) else np.zeros(len(want), np.int64)
    return np.where((step_row >= 0) & (key[found] == want if len(key) else False), found, -1)


def _exposed(profile: Profile, table: StepTable, by_step: Columns,
             by_segment: Columns | None) -> tuple[Any, Any]:  # fmt: skip
    """(per step row, per phase row) the exposed NCCL time of the kernels launched in it."""
    agg = profile.aggregates
    rows = _row_of_idx(profile)
    n_phases = len(table.phases)
    if not agg.any_nccl:
        return np.zeros(len(rows), np.int64), np.zeros(n_phases, np.int64)
    per_idx = by_step["all_union_ns"] - by_step[NON_NCCL_UNION_NS]
    steps = np.zeros(len(rows), per_idx.dtype)
    steps[rows] = per_idx[: len(rows)]
    if by_segment is None or not n_phases:
        return steps, np.zeros(n_phases, np.int64)
    segments = profile.segments
    per_segment = by_segment["all_union_ns"] - by_segment[NON_NCCL_UNION_NS]
    row = _phase_rows(table, segments.names, rows[segments.step], segments.code)
    keep = row >= 0
    return steps, add_rows(row[keep], n_phases, per_segment[keep, None])[:, 0]

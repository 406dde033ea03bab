"""One capture's kernels by operation (#56): each kernel's row (its `aten::` operation, or the
fused group of an Inductor kernel), the kernels, launches and kernel time of every row in every
step, and the unattributed row, so that the rows add up to each step's kernel count and time
exactly.

Pure on columns: the kernels (name ids into a table, durations, steps, launch rows) and what
`census.findings.op_ranges.attribute_launches` said of their launches. A kernel whose name is an
Inductor kernel's (`triton_{poi,red,per,tem}_fused_<ops>_<n>`) belongs to the fused group of
the ops its name lists, unless Inductor's own map (kernel name -> the aten ops it fused, kept by
the capture) is given: then the map decides. Any other kernel belongs to the innermost `aten::`
op around its launch (cuBLAS and flash attention called from compiled code too); a kernel with
none is unattributed. A row is backward when the launch sat inside a backward node's range.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from census.definitions.triton_names import decode_triton
from census.findings.op_ranges import ATEN, LaunchOps, OpRanges

if TYPE_CHECKING:
    from census.model.census import Census

# Ops that move no data in eager (views) say nothing about what a fused kernel computes; and
# the copy family is one thing under two names (`copy_` in eager, `_to_copy` in a kernel's name).
LAYOUT_OPS = frozenset((
    "view", "_unsafe_view", "reshape", "transpose", "t", "permute", "squeeze", "unsqueeze",
    "select", "slice", "expand", "as_strided", "unflatten", "split", "alias", "detach",
))  # fmt: skip
COPY_OPS = frozenset(("copy_", "_to_copy", "clone", "contiguous", "to"))


@dataclass(frozen=True, order=True)
class OpKey:
    """A row: `name` is the bare aten op (`mm`) or a fused group (`native_layer_norm + add`),
    `fused` for an Inductor group, `backward` for work launched inside a backward node."""

    name: str
    fused: bool = False
    backward: bool = False

    @property
    def label(self) -> str:
        """How a table names the row."""
        return self.name + (" (backward)" if self.backward else "")


@dataclass(frozen=True)
class OpTable:
    """A capture's rows: keys (None, the unattributed row, last), per row the op names it stands
    for (`lists`, for matching) and the forward ops of a backward row (`forward`), and
    [row, step] int64 columns of kernels, distinct launch calls and kernel time; `total_*` over
    the whole capture (kernels in no step included)."""

    keys: tuple[OpKey | None, ...]
    lists: tuple[frozenset[str], ...]
    forward: tuple[tuple[str, ...], ...]
    kernel_count: np.ndarray
    launch_count: np.ndarray
    kernel_time_ns: np.ndarray
    total_count: np.ndarray
    total_launches: np.ndarray
    total_time_ns: np.ndarray


def bare(name: str) -> str:
    """`aten::mm` -> `mm`."""
    return name[len(ATEN) :] if name.startswith(ATEN) else name


def group_kernels(
    name_id: np.ndarray,
    names: Sequence[str],
    duration_ns: np.ndarray,
    step: np.ndarray,
    n_steps: int,
    launch: np.ndarray,
    launch_ops: LaunchOps,
    ranges: OpRanges,
    inductor_map: Mapping[str, Sequence[str]] | None = None,
) -> OpTable:
    """The OpTable of a capture's kernels: `name_id` indexes `names`, `step` is each kernel's
    step (-1: in none; 0..n_steps-1), `launch` its launching call's row in `launch_ops` (-1:
    launched before the trace began)."""
    has = launch >= 0
    at = np.where(has, launch, 0)
    if not len(launch_ops.op):  # no launching call at all: every kernel unattributed
        has = np.zeros(len(launch), bool)
        launch_ops = LaunchOps(*(np.full(1, -1, np.int64) for _ in range(3)))
    op = np.where(has, launch_ops.op[at], -1)
    fwd = np.where(has, launch_ops.forward[at], -1)
    back = np.where(has, launch_ops.node[at] >= 0, False)
    name_of = np.append(ranges.name_id, -1)  # index -1: no range (also with no range at all)
    op_name = name_of[np.where(op >= 0, op, -1)]
    fwd_name = name_of[np.where(fwd >= 0, fwd, -1)]
    kinds, kind_of = _kinds(
        (np.asarray(name_id, np.int64), op_name, back.astype(np.int64), fwd_name),
        (len(names), len(ranges.names) + 1, 2, len(ranges.names) + 1),
    )
    rows: dict[OpKey | None, int] = {}
    lists: list[set[str]] = []
    forwards: list[set[str]] = []
    row_of_kind = np.empty(len(kinds), dtype=np.int64)
    for i, (nid, oid, bwd, fid) in enumerate(kinds.tolist()):
        key, listed = _key(names[nid], ranges.names[oid] if oid >= 0 else None, bool(bwd),
                           inductor_map)  # fmt: skip
        row = rows.setdefault(key, len(rows))
        if row == len(lists):
            lists.append(set())
            forwards.append(set())
        lists[row].update(listed)
        if fid >= 0 and key is not None and key.backward:
            forwards[row].add(bare(ranges.names[fid]))
        row_of_kind[i] = row
    return _table(rows, lists, forwards, row_of_kind[kind_of], duration_ns, step,
                  n_steps, launch)  # fmt: skip


def _kinds(cols: tuple[np.ndarray, ...], sizes: tuple[int, ...]) -> tuple[np.ndarray, np.ndarray]:
    """The distinct rows of small non-negative id columns (-1 allowed: shifted by one) and each
    row's index among them, through one int64 key (np.unique(axis=0) is many times slower)."""
    if np.prod([float(z) + 1 for z in sizes]) >= 2.0**62:
        kinds, inverse = np.unique(np.stack(cols, axis=1), axis=0, return_inverse=True)
        return kinds, inverse.ravel()
    key = np.zeros(len(cols[0]), dtype=np.int64)
    for col, size in zip(cols, sizes, strict=True):
        key = key * (size + 1) + (col + 1)
    order = np.argsort(key, kind="stable")
    ordered = key[order]
    new = np.ones(len(key), dtype=bool)
    new[1:] = ordered[1:] != ordered[:-1]
    kind_of = np.empty(len(key), dtype=np.int64)
    kind_of[order] = np.cumsum(new) - 1
    first = order[new]
    return np.stack([col[first] for col in cols], axis=1), kind_of


def _key(
    kernel: str, op: str | None, backward: bool, inductor_map: Mapping[str, Sequence[str]] | None
) -> tuple[OpKey | None, set[str]]:
    """A kernel's row and the op names it stands for."""
    listed = inductor_map.get(kernel) if inductor_map is not None else None
    if listed is None:
        decoded = decode_triton(kernel)
        listed = decoded[1] if decoded else None
    if listed is not None:
        ops = tuple(bare(o) for o in listed)
        return OpKey(" + ".join(ops) or kernel, fused=True, backward=backward), set(ops)
    if op is None:
        return None, set()
    return OpKey(bare(op), backward=backward), {bare(op)}


def _table(
    rows: dict[OpKey | None, int],
    lists: list[set[str]],
    forwards: list[set[str]],
    row: np.ndarray,
    duration_ns: np.ndarray,
    step: np.ndarray,
    n_steps: int,
    launch: np.ndarray,
) -> OpTable:
    """The sums by row and step; the unattributed row placed last (present even when empty)."""
    rows.setdefault(None, len(rows))
    if len(lists) < len(rows):
        lists.append(set())
        forwards.append(set())
    keys = sorted(rows, key=lambda k: (k is None, k or OpKey("")))
    new = np.empty(len(rows), dtype=np.int64)
    for i, k in enumerate(keys):
        new[rows[k]] = i
    row = new[row] if len(row) else row.astype(np.int64)
    n = len(keys)
    dur = np.asarray(duration_ns, np.int64)
    in_step = step >= 0
    cell = row[in_step] * n_steps + step[in_step]
    size = n * n_steps
    count = np.bincount(cell, minlength=size).reshape(n, n_steps).astype(np.int64)
    time_ns = _int_bincount(cell, dur[in_step], size).reshape(n, n_steps)
    launches = _distinct_launches(row, step, launch, n, n_steps)
    order = [rows[k] for k in keys]
    return OpTable(
        keys=tuple(keys),
        lists=tuple(frozenset(lists[i]) for i in order),
        forward=tuple(tuple(sorted(forwards[i])) for i in order),
        kernel_count=count,
        launch_count=launches[:, :n_steps],
        kernel_time_ns=time_ns,
        total_count=np.bincount(row, minlength=n).astype(np.int64),
        total_launches=launches[:, n_steps],
        total_time_ns=_int_bincount(row, dur, n),
    )


def _int_bincount(cell: np.ndarray, values: np.ndarray, size: int) -> np.ndarray:
    """Exact int64 sums of `values` by `cell` (np.bincount's weights are float64): running sums
    in cell order, differenced at each cell's end."""
    order = np.argsort(cell, kind="stable")
    running = np.concatenate(([0], np.cumsum(np.asarray(values, np.int64)[order])))
    ends = np.searchsorted(cell[order], np.arange(size), side="right")
    starts = np.searchsorted(cell[order], np.arange(size), side="left")
    return running[ends] - running[starts]


def _distinct_launches(
    row: np.ndarray, step: np.ndarray, launch: np.ndarray, n: int, n_steps: int
) -> np.ndarray:
    """[row, step] distinct launch calls, and the whole capture's in a last column: a CUDA
    graph's kernels share one launch."""
    out = np.zeros((n, n_steps + 1), dtype=np.int64)
    has = launch >= 0
    if not has.any():
        return out
    top = int(launch[has].max()) + 1
    cols = (row[has], launch[has], np.where(step[has] >= 0, step[has], n_steps))
    pairs, _ = _kinds(cols, (n, top, n_steps + 1))
    cell = pairs[:, 0] * (n_steps + 1) + pairs[:, 2]
    out += np.bincount(cell, minlength=n * (n_steps + 1)).reshape(n, n_steps + 1)
    whole, _ = _kinds(cols[:2], (n, top))
    out[:, n_steps] = np.bincount(whole[:, 0], minlength=n)
    return out


def op_table(census: Census, phases: bool = False) -> OpTable | None:
    """The census's kernels by operation as an OpTable over its steps (`phases`: over its
    phase rows instead), or None where its export had no op ranges."""
    rows = census.ops
    if rows is None:
        return None
    keys = tuple(None if op is None else OpKey(op if fused else bare(op), fused, back)
                 for op, fused, back in zip(rows.op, rows.fused, rows.backward, strict=True))  # fmt: skip
    cols = [getattr(rows, ("phase_" if phases else "") + k) for k in
            ("kernel_count", "launch_count", "kernel_time_ns")]  # fmt: skip
    return OpTable(keys=keys, lists=tuple(frozenset(x) for x in rows.lists),
                   forward=rows.forward, kernel_count=cols[0], launch_count=cols[1],
                   kernel_time_ns=cols[2], total_count=rows.total_kernel_count,
                   total_launches=rows.total_launch_count,
                   total_time_ns=rows.total_kernel_time_ns)  # fmt: skip

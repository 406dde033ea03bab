"""A capture's kernels by operation (#56), as the Census carries them: one row per operation
(an `aten::` op, forward or backward), per Inductor fused group, and the unattributed row
(`op` None, last), with [row, step] and [row, phase] int64 columns of kernels, kernel time
and distinct launch calls, and the whole capture's per row (kernels in no step included).

Per step (and phase) the rows add up to the step's kernel count and kernel time exactly; over
the capture to its totals (census.load.ops, checked by load/profile.py). numpy is imported
inside the functions (the CLI's --help imports the model).
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property
from typing import Any

from census.metrics import KERNEL_COUNT, KERNEL_TIME_NS
from census.model.record import Column, as_given, listed

# the [row, step] columns, the [row, phase] ones and the whole capture's [row] ones, in order
STEP_ARRAYS = (KERNEL_COUNT, KERNEL_TIME_NS, "launch_count")
PHASE_ARRAYS = ("phase_kernel_count", "phase_kernel_time_ns", "phase_launch_count")
TOTAL_ARRAYS = ("total_kernel_count", "total_kernel_time_ns", "total_launch_count")
_LABELS = ("op", "fused", "backward", "forward", "lists")


@dataclass(frozen=True, eq=False)
class OpRows:
    """The rows: `op` is the `aten::` name as the trace writes it, cut at the first comma
    (`aten::mm`), the fused group's name for an Inductor kernel (`native_layer_norm + add`),
    None for the unattributed; `fused` marks the groups, `backward` work launched inside a
    backward node, `forward` the forward ops a backward row's nodes belong to (bare names,
    sequence-number links), `lists` the bare op names a row stands for (for matching). The
    columns as STEP_ARRAYS, PHASE_ARRAYS and TOTAL_ARRAYS name them."""

    op: tuple[str | None, ...]
    fused: tuple[bool, ...]
    backward: tuple[bool, ...]
    forward: tuple[tuple[str, ...], ...]
    lists: tuple[tuple[str, ...], ...]
    kernel_count: Any  # (rows, steps)
    kernel_time_ns: Any
    launch_count: Any
    phase_kernel_count: Any  # (rows, phases): the census's phase rows
    phase_kernel_time_ns: Any
    phase_launch_count: Any
    total_kernel_count: Any  # (rows,)
    total_kernel_time_ns: Any
    total_launch_count: Any

    def __len__(self) -> int:
        return len(self.op)

    def label(self, row: int) -> str:
        """How tables name a row: `mm`, `mm (backward)`, a fused group, `(unattributed)`."""
        op = self.op[row]
        if op is None:
            return "(unattributed)"
        name = op.removeprefix("aten::") if not self.fused[row] else op
        return name + (" (backward)" if self.backward[row] else "")

    def order(self, time_ns: list[int] | None = None) -> list[int]:
        """The rows by kernel time (`time_ns`, one per row; else the whole capture's),
        descending (ties by label), the unattributed last: the order outputs list them in."""
        if time_ns is None:
            return list(self._capture_order)
        return self._ordered(time_ns)

    @cached_property
    def _capture_order(self) -> tuple[int, ...]:
        """order() by the whole capture's kernel time, once (entries asks it of every step)."""
        return tuple(self._ordered(self.total_kernel_time_ns.tolist()))

    def _ordered(self, time: list[int]) -> list[int]:
        return sorted(range(len(self.op)),
                      key=lambda r: (self.op[r] is None, -time[r], self.label(r)))  # fmt: skip

    def entries(self, step: int | None = None, phase: int | None = None) -> list[dict[str, Any]]:
        """The rows as the JSON lists them (docs/json.md, `ops`): over the whole capture (every
        row with kernels, and the unattributed always), in the step at position `step` or in
        the phase row at position `phase` (the rows with kernels there); in `order`, adding up
        to the kernel count and time."""
        if phase is not None:
            cols = tuple(getattr(self, k)[:, phase] for k in PHASE_ARRAYS)
        elif step is not None:
            cols = tuple(getattr(self, k)[:, step] for k in STEP_ARRAYS)
        else:
            cols = (self.total_kernel_count, self.total_kernel_time_ns, self.total_launch_count)
        whole = step is None and phase is None
        count, time, launches = (c.tolist() for c in cols)
        return [{"op": self.op[r], "fused": self.fused[r], "backward": self.backward[r],
                 "forward": list(self.forward[r]), KERNEL_COUNT: count[r],
                 KERNEL_TIME_NS: time[r], "launch_count": launches[r]}
                for r in self._capture_order if count[r] or (whole and self.op[r] is None)]  # fmt: skip

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, OpRows):
            return NotImplemented
        return all(getattr(self, k) == getattr(other, k) for k in _LABELS) and all(
            getattr(self, k).tolist() == getattr(other, k).tolist() for k in _ARRAYS
        )

    def __hash__(self) -> int:
        return hash((self.op, self.backward))

    def to_record(self, column: Column = listed) -> dict[str, Any]:
        """Its rows as JSON-able data, each array as `column` writes it."""
        shape = [len(self.op), self.kernel_count.shape[1], self.phase_kernel_count.shape[1]]
        return {**{k: [list(v) if isinstance(v, tuple) else v for v in getattr(self, k)]
                   for k in _LABELS},
                "shape": shape, **{k: column(getattr(self, k)) for k in _ARRAYS}}  # fmt: skip

    @classmethod
    def from_record(cls, data: dict[str, Any], column: Column = as_given) -> OpRows:
        """The OpRows to_record wrote `data` of (each array read back by `column`)."""
        from census.model.step_table import int_array

        rows, steps, phases = data["shape"]
        arrays = {k: int_array(column(data[k])) for k in _ARRAYS}
        for names, width in ((STEP_ARRAYS, steps), (PHASE_ARRAYS, phases)):
            for k in names:
                arrays[k] = arrays[k].reshape(rows, width)
        return cls(op=tuple(data["op"]), fused=tuple(data["fused"]),
                   backward=tuple(data["backward"]),
                   forward=tuple(tuple(f) for f in data["forward"]),
                   lists=tuple(tuple(x) for x in data["lists"]), **arrays)  # fmt: skip


_ARRAYS = (*STEP_ARRAYS, *PHASE_ARRAYS, *TOTAL_ARRAYS)


def merge_ops(records: list[OpRows | None]) -> OpRows | None:
    """A rank folder's exports' rows as one, as census.model.step_table.concat joins their
    steps and phases (in order): rows matched by (op, fused, backward), each export's columns
    side by side, zeros where it lacks a row; the totals summed. None when an export has no op
    ranges (the others' rows would not add up to the merged totals)."""
    import numpy as np

    if not records or any(r is None for r in records):
        return None
    found = [r for r in records if r is not None]
    keys: dict[tuple, int] = {}
    for r in found:
        for i in range(len(r)):
            keys.setdefault((r.op[i] is None, r.op[i] or "", r.fused[i], r.backward[i]), len(keys))
    order = sorted(keys)  # the unattributed last, as in every export
    at = {k: i for i, k in enumerate(order)}
    arrays = {}
    for name in _ARRAYS:
        parts = []
        for r in found:
            col = getattr(r, name)
            out = np.zeros((len(order), *col.shape[1:]), col.dtype)
            rows = [
                at[(r.op[i] is None, r.op[i] or "", r.fused[i], r.backward[i])]
                for i in range(len(r))
            ]
            out[rows] = col
            parts.append(out)
        arrays[name] = (
            sum(parts[1:], parts[0]) if name in TOTAL_ARRAYS else np.concatenate(parts, axis=1)
        )
    merged: dict[tuple, tuple[set, set]] = {k: (set(), set()) for k in order}
    for r in found:
        for i in range(len(r)):
            forward, lists = merged[(r.op[i] is None, r.op[i] or "", r.fused[i], r.backward[i])]
            forward.update(r.forward[i])
            lists.update(r.lists[i])
    return OpRows(op=tuple(None if k[0] else k[1] for k in order),
                  fused=tuple(k[2] for k in order), backward=tuple(k[3] for k in order),
                  forward=tuple(tuple(sorted(merged[k][0])) for k in order),
                  lists=tuple(tuple(sorted(merged[k][1])) for k in order), **arrays)  # fmt: skip

"""What a Census keeps of its ranks for the distributed view (#46): each process that launched
kernels (a rank), its NCCL kernels as columns, and the exposed NCCL time of every step and
phase. census.findings.nccl_ranks splits the NCCL time into wait and transfer from it; census.load.rank_finish
makes it from the aggregates; it writes and reads its own record, which the cache stores
(census.store.codec).

Integer ns; numpy imported inside the functions.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple

from census.model.record import Column, as_given, listed, reader

# The columns of NcclRecord.kernels, in order.
KERNEL_COLUMNS = ("rank", "collective", "start_ns", "end_ns", "step", "phase")
PID_MASK = (1 << 24) - 1  # globalPid >> 24 holds the pid in its low 24 bits


class RankInfo(NamedTuple):
    """A process that launched kernels: its id (globalPid >> 24), the devices it ran kernels
    on, its kernels (count, Σ (end − start)), the whole capture's exposed NCCL time of its
    devices (None where another process ran kernels on one of them), its label and host (a
    rank folder's export's, where known)."""

    proc: int
    devices: tuple[int, ...]
    kernel_count: int
    kernel_time_ns: int
    exposed_ns: int | None
    label: str = ""  # how outputs name it ("" : `rank N`, by its place among the ranks)
    host: str | None = None

    @property
    def pid(self) -> int:
        """The process id: the low 24 bits of `proc`."""
        return self.proc & PID_MASK


@dataclass(frozen=True, eq=False)
class NcclRecord:
    """The ranks of a capture (by process id; a rank folder's in its order), the collectives'
    names, every NCCL kernel with a start and an end as rows of KERNEL_COLUMNS (int64: its rank
    and collective as indices into those; step and phase: its launching call's step's row in
    census.steps and phase row in its phases, -1 for none), and per step row its rank (-1: a
    process without kernels) and exposed NCCL ns, per phase row its exposed NCCL ns."""

    ranks: tuple[RankInfo, ...]
    collectives: tuple[str, ...]
    kernels: Any  # (n, len(KERNEL_COLUMNS)) int64
    step_rank: Any  # (steps,) int64
    step_exposed_ns: Any  # (steps,) int64, or object past int64
    phase_exposed_ns: Any  # (phases,)
    # False when the ranks' exports come from separate nsys sessions whose clocks could not be
    # set on one (an export without systemClockNs): their kernels are then never matched
    aligned: bool = True

    def column(self, name: str) -> Any:
        """One column of `kernels` by its KERNEL_COLUMNS name, one int64 per NCCL kernel."""
        return self.kernels[:, KERNEL_COLUMNS.index(name)]

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, NcclRecord):
            return NotImplemented
        return (self.ranks, self.collectives, self.aligned) == (
            other.ranks,
            other.collectives,
            other.aligned,
        ) and all(getattr(self, k).tolist() == getattr(other, k).tolist() for k in _ARRAYS)

    def __hash__(self) -> int:
        return hash((self.ranks, self.collectives, len(self.kernels)))

    def to_record(self, column: Column = listed) -> dict[str, Any]:
        """Its ranks and collectives as JSON-able data, each array as `column` writes it."""
        return {"ranks": [list(r) for r in self.ranks], "collectives": list(self.collectives),
                "rows": len(self.kernels), **{k: column(getattr(self, k)) for k in _ARRAYS},
                "aligned": self.aligned}  # fmt: skip

    @classmethod
    def from_record(cls, data: dict[str, Any], column: Column = as_given) -> NcclRecord:
        """The NcclRecord to_record wrote `data` of (each array read back by `column`)."""
        from census.model.step_table import int_array

        ranks = _RANKS(data["ranks"], column)
        arrays = [int_array(column(data[k])) for k in _ARRAYS]
        kernels = arrays[0].reshape(data["rows"], len(KERNEL_COLUMNS))
        return cls(ranks, tuple(data["collectives"]), kernels, *arrays[1:], data["aligned"])


_ARRAYS = ("kernels", "step_rank", "step_exposed_ns", "phase_exposed_ns")
_RANKS = reader(tuple[RankInfo, ...])  # the ranks read back from their lists


def merge_records(records: Sequence[NcclRecord | None], steps: Sequence[int],
                  phases: Sequence[int], labels: Sequence[str],
                  hosts: Sequence[str | None],
                  clocks: Sequence[int | None]) -> NcclRecord | None:  # fmt: skip
    """The records of a rank folder's exports as one, in order (`steps`, `phases`: each
    export's step and phase rows, as census.model.step_table.concat joins them; `labels`, `hosts`:
    each export's), its ranks named by their export's label (`label:pid` where an export holds
    several); an export without a record (no kernels) adds no rank. None when none has one.
    `clocks`: each export's clock origin (ns on the wall clock of its trace clock's zero): its
    kernels' times are moved onto the earliest origin's clock, so that exports of separate nsys
    sessions line up; when an export with a record has none, the record is not `aligned`."""
    import numpy as np

    if all(r is None for r in records):
        return None
    known = [c for c, r in zip(clocks, records, strict=True) if r is not None]
    aligned = sum(r is not None for r in records) < 2 or None not in known
    origin = min((c for c in known if c is not None), default=0)
    names = tuple(sorted({c for r in records if r is not None for c in r.collectives}))
    ranks: list[RankInfo] = []
    blocks, step_rank, step_exposed, phase_exposed = [], [], [], []
    step_at = phase_at = 0
    for record, n_steps, n_phases, label, host, clock in zip(
            records, steps, phases, labels, hosts, clocks, strict=True):  # fmt: skip
        if record is None:
            step_rank.append(np.full(n_steps, -1, np.int64))
            step_exposed.append(np.zeros(n_steps, np.int64))
            phase_exposed.append(np.zeros(n_phases, np.int64))
        else:
            k = record.kernels.copy()
            if aligned and clock is not None:
                for col in (KERNEL_COLUMNS.index("start_ns"), KERNEL_COLUMNS.index("end_ns")):
                    k[:, col] += clock - origin
            k[:, 0] += len(ranks)
            k[:, 1] = np.array([names.index(c) for c in record.collectives], np.int64)[k[:, 1]]
            for col, at in ((4, step_at), (5, phase_at)):
                k[:, col] = np.where(k[:, col] >= 0, k[:, col] + at, -1)
            blocks.append(k)
            step_rank.append(np.where(record.step_rank >= 0, record.step_rank + len(ranks), -1))
            step_exposed.append(record.step_exposed_ns)
            phase_exposed.append(record.phase_exposed_ns)
            alone = len(record.ranks) == 1
            ranks += [r._replace(label=label if alone else f"{label}:{r.pid}", host=host)
                      for r in record.ranks]  # fmt: skip
        step_at, phase_at = step_at + n_steps, phase_at + n_phases
    kernels = np.concatenate(blocks) if blocks else np.zeros((0, len(KERNEL_COLUMNS)), np.int64)
    return NcclRecord(tuple(ranks), names, kernels, *map(_joined, (step_rank, step_exposed,
                                                                   phase_exposed)), aligned)  # fmt: skip


def _joined(parts: list) -> Any:
    import numpy as np

    if any(p.dtype == object for p in parts):
        return np.concatenate([p.astype(object) for p in parts])
    return np.concatenate(parts).astype(np.int64, copy=False) if parts else np.zeros(0, np.int64)

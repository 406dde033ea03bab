"""What the kernel pass keeps per process for the distributed view (#46): each process's kernels
(count and time, per device it ran them on) and every NCCL kernel it launched (its name's ids,
start, end and the step or segment its launching call starts in).

An accumulator, self-contained: `add` a batch of kernels, `merge` another range's, `finish` into
RankColumns. NCCL kernels are few (tens per step), so they are kept whole; the rest of the
kernels only add to per-(process, device) sums. The kernel pass (census.load.kernels) feeds it
the columns it has already read: no second scan of the kernel table.
"""

from __future__ import annotations

import numpy as np

from census.load.figures import add_rows
from census.load.intervals import group_rows

# The columns of an NCCL kernel, in RankColumns.nccl's order.
NCCL_COLUMNS = ("proc", "demangled_id", "short_id", "start_ns", "end_ns", "key")


class RankColumns:
    """Per (process, device) with kernels: `pairs` (rows of proc, deviceId, kernel count, kernel
    time ns; deviceId INT_NULL where unknown); every NCCL kernel with a start and an end:
    `nccl`, (kernels, NCCL_COLUMNS) int64 in the order read (name ids INT_NULL where NULL;
    key: its step's or segment's index, NO_STEP outside every step)."""

    def __init__(self, pairs: np.ndarray, nccl: np.ndarray) -> None:
        self.pairs = pairs
        self.nccl = nccl

    def column(self, name: str) -> np.ndarray:
        """One of NCCL_COLUMNS, over every NCCL kernel."""
        return self.nccl[:, NCCL_COLUMNS.index(name)]


class RankKernels:
    """The accumulator: add a batch, merge another, finish."""

    def __init__(self) -> None:
        self.sums: dict[tuple[int, int], list[int]] = {}  # (proc, dev) -> [count, time_ns]
        self.parts: list[np.ndarray] = []  # blocks of NCCL kernels, (k, NCCL_COLUMNS)

    def add(self, proc: np.ndarray, dev: np.ndarray, dur: np.ndarray, nccl: np.ndarray,
            columns: tuple[np.ndarray, ...]) -> None:  # fmt: skip
        """One batch: its kernels' process, device and duration (0 where unknown); `nccl` marks
        the NCCL kernels with a start and an end, whose NCCL_COLUMNS[1:] are `columns`."""
        if not len(proc):
            return
        (procs, devs), pair = group_rows(proc, dev)
        both = np.stack([np.ones(len(dur), np.int64), dur], axis=1)
        sums = add_rows(pair, len(procs), both).tolist()
        keys = zip(procs.tolist(), devs.tolist(), strict=True)
        for key, (count, time_ns) in zip(keys, sums, strict=True):
            found = self.sums.setdefault(key, [0, 0])
            found[0] += count
            found[1] += time_ns
        rows = np.flatnonzero(nccl)
        if len(rows):
            self.parts.append(np.stack([proc[rows], *(c[rows] for c in columns)], axis=1))

    def merge(self, other: RankKernels) -> None:
        """Another range's, read after this one's."""
        for key, (count, time_ns) in other.sums.items():
            found = self.sums.setdefault(key, [0, 0])
            found[0] += count
            found[1] += time_ns
        self.parts += other.parts

    def finish(self) -> RankColumns:
        """Each process's kernel count and time per device, and its NCCL kernels, as columns."""
        rows = [(*key, *v) for key, v in sorted(self.sums.items())]
        pairs = np.array(rows, object if _wide(rows) else np.int64).reshape(-1, 4)
        width = len(NCCL_COLUMNS)
        nccl = np.concatenate(self.parts) if self.parts else np.zeros((0, width), np.int64)
        return RankColumns(pairs, nccl.astype(np.int64, copy=False))


def _wide(rows: list[tuple[int, ...]]) -> bool:
    """Whether a sum went past int64 (a corrupt export's durations)."""
    return any(abs(v) >= 1 << 63 for row in rows for v in row)

"""The API map's compact form for one process: which correlationIds are calls (a bitmap) and
the step each started in (runs of equal steps), instead of a sorted column of both.

CUPTI hands out correlationIds in call order, and the runtime rows of a rowid range come in
that order too, so a range's calls are a strictly increasing run of ids with a few other calls'
ids between them (cuKernelGetName, ...), and their steps change only at step and phase
boundaries. At 10^7 kernels that is 3 MB of bits and 5 MB of runs instead of 98 MB of columns,
in census's process and in every worker that inherits it. Anything else (ids out of order, a
bitmap that would not be smaller) keeps the columns (census.load.api_calls.ApiMap).
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np

from census.load.intervals import NO_STEP, unique
from census.paths import write_arrays

_RUN_BYTES = 12  # a run: its first correlationId (int64) and its step (int32)
_COLUMN_BYTES = 8  # a call in the columns: a uint32 correlationId and an int32 step
_MASK_BYTES = 1 << 23  # ids marked at a time, one byte each, before they are packed to bits


@dataclass(frozen=True)
class CompactCalls:
    """Calls with correlationIds first..last: bit (c - lo) % 8 of byte (c - lo) // 8 of `bits`
    is set for each call c (lo: first rounded down to a multiple of 8, so that bitmaps of
    consecutive ranges line up byte by byte); run k holds the calls from run_corr[k] (a call's
    id) up to the next run, all started in step run_step[k]."""

    first: int
    last: int
    bits: np.ndarray | SpilledBits  # uint8
    run_corr: np.ndarray  # int64, strictly increasing
    run_step: np.ndarray  # int32

    @property
    def lo(self) -> int:
        """The correlationId of bit 0 of the bitmap: `first` rounded down to a multiple of 8."""
        return self.first - self.first % 8

    @classmethod
    def of(cls, corr: np.ndarray, step: np.ndarray) -> CompactCalls | None:
        """The calls `corr` (strictly increasing) with their steps; None when there are none,
        or when the columns would take less memory."""
        if not len(corr):
            return None
        first, last = int(corr[0]), int(corr[-1])
        lo = first - first % 8
        if (last - lo) // 8 > _COLUMN_BYTES * len(corr):  # sparse ids: the columns are smaller
            return None
        starts = np.flatnonzero(np.r_[True, step[1:] != step[:-1]])
        if ((last - lo) // 8 + 1) + _RUN_BYTES * len(starts) >= _COLUMN_BYTES * len(corr):
            return None
        bits = np.zeros((last - lo) // 8 + 1, np.uint8)
        width = min(_MASK_BYTES, 8 * len(bits))  # a bounded mask at a time
        for at in range(0, len(bits), width // 8):
            a, b = np.searchsorted(corr, [lo + 8 * at, lo + 8 * at + width])
            mask = np.zeros(width, bool)
            mask[corr[a:b] - (lo + 8 * at)] = True
            packed = np.packbits(mask, bitorder="little")
            bits[at : at + len(packed)] = packed[: len(bits) - at]
        run_corr = corr[starts].astype(np.int64)
        return cls(first, last, bits, run_corr, step[starts].astype(np.int32))

    @classmethod
    def joined(cls, parts: list[CompactCalls]) -> CompactCalls:
        """The calls of `parts`, each range after the one before (part.last < next.first); a
        part's first run is dropped where it carries on the step of the run before it (the same
        runs as `of` over all the calls at once)."""
        lo = parts[0].lo
        bits = np.zeros((parts[-1].lo - lo) // 8 + len(parts[-1].bits), np.uint8)
        for p in parts:  # neighbours may share a byte: or-ed
            at = (p.lo - lo) // 8
            bits[at : at + len(p.bits)] |= p.bits
        run_corr = np.concatenate([p.run_corr for p in parts])
        run_step = np.concatenate([p.run_step for p in parts])
        new = np.r_[True, run_step[1:] != run_step[:-1]]
        return cls(parts[0].first, parts[-1].last, bits, run_corr[new], run_step[new])

    def lookup(self, corr: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(is a call, its step or NO_STEP) for each correlationId (int64)."""
        found = np.zeros(len(corr), bool)
        step = np.full(len(corr), NO_STEP, np.int64)
        rows = np.flatnonzero((corr >= self.first) & (corr <= self.last))
        off = corr[rows] - self.lo
        rows = rows[((self.bits[off >> 3] >> (off & 7).astype(np.uint8)) & 1) == 1]
        found[rows] = True
        step[rows] = self.run_step[np.searchsorted(self.run_corr, corr[rows], "right") - 1]
        return found, step

    def columns(self) -> tuple[np.ndarray, np.ndarray]:
        """The calls as columns: (correlationIds, increasing; their steps, int32)."""
        bits = self.bits.array() if isinstance(self.bits, SpilledBits) else self.bits
        corr = np.flatnonzero(np.unpackbits(bits, bitorder="little")) + self.lo
        return corr, self.run_step[np.searchsorted(self.run_corr, corr, "right") - 1]

    def spilled(self, path: str) -> CompactCalls:
        """The same calls with the bitmap in file `path` (written now), read as lookups need
        it: at 3x10^7 kernels the bitmap is 78 MiB that neither census nor its workers hold."""
        if isinstance(self.bits, SpilledBits):
            return self
        write_arrays(path, [self.bits], "wb")
        return replace(self, bits=SpilledBits(path, len(self.bits)))


SPAN_BYTES = 1 << 22  # the bytes a lookup reads at once (a batch's calls span ~256 KiB)


class SpilledBits:
    """A bitmap in a file, indexed like the array: a lookup reads the bytes from the lowest to
    the highest it asks for at once where they lie within SPAN_BYTES, else each 64 KiB block
    it touches (a batch's calls are a few neighbouring blocks; a stray call far away, one
    block more)."""

    def __init__(self, path: str, size: int) -> None:
        self.path, self.size = path, size

    def __len__(self) -> int:
        return self.size

    def _read(self, at: int, count: int) -> np.ndarray:
        return np.fromfile(self.path, np.uint8, min(count, self.size - at), offset=at)

    def __getitem__(self, offsets: np.ndarray) -> np.ndarray:
        if not len(offsets):
            return np.zeros(0, np.uint8)
        lo, hi = int(offsets.min()), int(offsets.max())
        if hi - lo < SPAN_BYTES:
            return self._read(lo, hi - lo + 1)[offsets - lo]
        block = offsets >> 16
        touched = unique(block)
        data = np.concatenate([self._read(int(b) << 16, 1 << 16) for b in touched.tolist()])
        return data[(np.searchsorted(touched, block) << 16) + (offsets & 0xFFFF)]

    def array(self) -> np.ndarray:
        """The whole bitmap."""
        return self._read(0, self.size)

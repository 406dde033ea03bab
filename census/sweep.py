"""One streaming pass over GPU activity ordered by start time.

SQLite sorts; this pass keeps a running maximum end per partition, so each interval adds only
what lies beyond everything before it: the union of the intervals is the sum of those additions.
It yields, at once: kernel count and time per name and per step; the union of
non-NCCL kernels, of NCCL kernels and of all kernels, per device, for the capture and per step;
and GPU busy time per step (every kernel, memcpy and memset of the step's process, clipped to
the step's range). Only plain tuples stream through; nothing is kept per row.
"""

from __future__ import annotations

from bisect import bisect_right
from collections.abc import Iterable
from dataclasses import dataclass, field

KERNEL, OTHER_GPU = 0, 1
NON_NCCL, NCCL_CLASS = 0, 1


@dataclass
class SweepResult:
    # (demangled id, short id, has API row) -> [count, time_ns, count in steps, time in steps]
    groups: dict[tuple, list[int]] = field(default_factory=dict)
    # step -> [count, time_ns, NCCL count, NCCL time_ns]
    step_kernels: dict[int, list[int]] = field(default_factory=dict)
    # class ("non_nccl", "nccl", "all") -> step (None: the capture) -> union ns
    unions: dict[str, dict[int | None, int]] = field(
        default_factory=lambda: {"non_nccl": {None: 0}, "nccl": {None: 0}, "all": {None: 0}}
    )
    busy_ns: dict[int, int] = field(default_factory=dict)


class _Windows:
    """The step ranges of one process, for clipping busy pieces."""

    def __init__(self, ranges: list[tuple[int, int, int]]) -> None:
        self.ranges = sorted(ranges, key=lambda r: r[1])
        self.starts = [r[1] for r in self.ranges]

        self.last = -1  # index of the window the previous piece fell in

    def add(self, lo: int, hi: int, busy: dict[int, int]) -> None:
        i = self.last
        if i >= 0:  # pieces arrive in time order: usually inside the same window again
            idx, start, end = self.ranges[i]
            if start <= lo and hi <= end:
                busy[idx] = busy.get(idx, 0) + hi - lo
                return
        i = max(0, bisect_right(self.starts, lo) - 1)
        self.last = i
        while i < len(self.ranges):
            idx, start, end = self.ranges[i]
            if start >= hi:
                break
            overlap = min(hi, end) - max(lo, start)
            if overlap > 0:
                busy[idx] = busy.get(idx, 0) + overlap
            i += 1


def sweep(
    rows: Iterable[tuple], steps: Iterable[tuple[int, int, int, int]], any_nccl: bool = True
) -> SweepResult:
    """rows: (kind, device, proc, start, end, step, nccl, demangled id, short id, has_api),
    ordered by start (NULL starts first); steps: (idx, proc, start, end). Without NCCL kernels
    the union of all kernels is the non-NCCL union and is not tracked separately."""
    res = SweepResult()
    groups = res.groups
    per_step = res.step_kernels
    u_non, u_nccl, u_all = res.unions["non_nccl"], res.unions["nccl"], res.unions["all"]
    by_proc: dict[int, list[tuple[int, int, int]]] = {}
    for idx, proc, start, end in steps:
        by_proc.setdefault(proc, []).append((idx, start, end))
    windows = {p: _Windows(r) for p, r in by_proc.items()}
    busy = res.busy_ns
    high: dict = {}  # partition -> running maximum end
    # The hot loop inlines the running-maximum update (see _extend) for speed.
    for kind, dev, proc, s, e, st, nccl, dn, sn, has_api in rows:
        if kind == KERNEL:
            key = (dn, sn, has_api)
            g = groups.get(key)
            if g is None:
                groups[key] = g = [0, 0, 0, 0]
            dur = e - s if s is not None and e is not None else 0
            g[0] += 1
            g[1] += dur
            if st is not None:
                g[2] += 1
                g[3] += dur
                k = per_step.get(st)
                if k is None:
                    per_step[st] = k = [0, 0, 0, 0]
                k[0] += 1
                k[1] += dur
                if nccl:
                    k[2] += 1
                    k[3] += dur
            if s is None or e is None or e <= s:
                continue  # no extent: counted, adds nothing to a union
            cls_union = u_nccl if nccl else u_non
            pk = (nccl, dev)
            m = high.get(pk)
            if m is None or e > m:
                high[pk] = e
                cls_union[None] += e - (s if m is None or s > m else m)
            if st is not None:
                pk = (nccl, st, dev)
                m = high.get(pk)
                if m is None or e > m:
                    high[pk] = e
                    cls_union[st] = cls_union.get(st, 0) + e - (s if m is None or s > m else m)
            if any_nccl:
                u_all[None] += _extend(high, ("all", dev), s, e)
                if st is not None:
                    u_all[st] = u_all.get(st, 0) + _extend(high, ("all", st, dev), s, e)
        elif s is None or e is None or e <= s:
            continue
        w = windows.get(proc)
        if w is not None:
            pk = ("busy", proc)
            m = high.get(pk)
            if m is None or e > m:
                high[pk] = e
                w.add(s if m is None or s > m else m, e, busy)
    if not any_nccl:
        res.unions["all"] = dict(u_non)
    return res


def _extend(high: dict, key: tuple, s: int, e: int) -> int:
    """What [s, e) adds beyond the running maximum end of its partition; updates the maximum."""
    m = high.get(key)
    if m is None or e > m:
        high[key] = e
        return e - (s if m is None or s > m else m)
    return 0

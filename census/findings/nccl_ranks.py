"""The distributed view of a Census (#46): each rank's NCCL kernel time split into waiting and
transfer (census.findings.nccl_wait, over the census's NcclRecord), per rank, per step and per phase, its
exposed NCCL time, the straggler, and the sentences every format says of them. Pure on a Census:
a notebook gets the same from census.findings.nccl_ranks.split_ranks(census).

Ranks of one report are the processes that launched kernels, by process id (`rank 0`, ...: the
order torchrun starts them in, not a rank any launcher recorded); a rank folder's are its exports.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from census.metrics import DURATION_NS, STEP_TIME_NS
from census.units import fmt_count, fmt_ns

if TYPE_CHECKING:
    from census.findings.nccl_wait import Straggler
    from census.model.census import Census


@dataclass(frozen=True)
class RankRow:
    """One rank's figures over the whole capture (ns, counts). wait_ns + transfer_ns +
    unmatched_ns = nccl_time_ns; wait, transfer, last arrivals and caused wait are None when
    the ranks are on several hosts (nothing matched)."""

    label: str
    pid: int
    host: str | None
    devices: tuple[int, ...]
    kernel_count: int
    kernel_time_ns: int
    nccl_kernel_count: int
    nccl_time_ns: int
    wait_ns: int | None
    transfer_ns: int | None
    unmatched_ns: int
    last_arrivals: int | None
    caused_wait_ns: int | None
    exposed_ns: int | None  # None: a device of its ran another rank's kernels too
    step_rows: Any  # its rows in census.steps (int64)


@dataclass(frozen=True, eq=False)
class NcclRanks:
    """The split of a census of several ranks. Per step row of the census (its rank's step)
    and per phase row: NCCL time, wait, transfer, last arrivals (int64 columns) and exposed
    NCCL; `waited_for[r, s]`: rank r's wait over the occurrences rank s arrived last in."""

    ranks: tuple[RankRow, ...]
    occurrences: int  # matched occurrences
    unmatched: tuple[tuple[str, tuple[int, ...]], ...]  # collective, each rank's count
    straggler: Straggler | None
    hosts: tuple[str, ...]  # the hosts, when several: nothing matched
    waited_for: Any
    steps: dict[str, Any]  # STEP_COLUMNS, and step_time_ns
    phases: dict[str, Any]  # STEP_COLUMNS
    # separate nsys sessions whose clocks cannot be set on one: nothing matched
    unaligned: bool = False
    # the ranks whose trace does not say its host (PyTorch profiler traces): nothing matched
    unplaced: tuple[str, ...] = ()
    tracer: str | None = None  # the trace's tracer (census.model.census.Source.tracer); None: nsys

    @property
    def matched(self) -> bool:
        """Whether the ranks' NCCL kernels were matched: one host, known, and clocks set on
        one."""
        return not self.hosts and not self.unaligned and not self.unplaced

    def rank_means(self, r: int) -> dict[str, float] | None:
        """Rank r's means over its steps of the per-step columns; None without steps."""
        rows = self.ranks[r].step_rows
        if not len(rows):
            return None
        return {k: sum(v[rows].tolist()) / len(rows) for k, v in self.steps.items()}


STEP_COLUMNS = ("nccl_time_ns", "wait_ns", "transfer_ns", "last_arrivals", "exposed_ns")


def split_ranks(census: Census) -> NcclRanks | None:
    """The split of a census with two ranks or more; None with fewer."""
    import numpy as np

    from census.findings.nccl_wait import NcclKernels, split_nccl_time, sum_by_key, unmatched_split

    record = census.nccl
    if record is None or len(record.ranks) < 2:
        return None
    rank = record.column("rank")
    picks = [np.flatnonzero(rank == r) for r in range(len(record.ranks))]
    kernels = [NcclKernels(*(record.column(c)[p] for c in ("collective", "start_ns", "end_ns")))
               for p in picks]  # fmt: skip
    hosts = [r.host for r in record.ranks]
    known = None if None in hosts else hosts
    # a trace names its host or not: one whose host is unknown is matched with no other
    unplaced = tuple(r.label or f"rank {i}" for i, r in enumerate(record.ranks)
                     if r.host is None) if census.source.tracer else ()  # fmt: skip
    # separate sessions whose clocks could not be set on one: nothing matched
    split = (split_nccl_time(kernels, known) if record.aligned and not unplaced  # type: ignore[arg-type]
             else unmatched_split(kernels))  # fmt: skip
    steps, phases = len(census.steps), len(census.steps.phases)
    step, phase = record.column("step"), record.column("phase")
    columns: dict[str, dict[str, Any]] = {"steps": {}, "phases": {}}
    dur = record.column("end_ns") - record.column("start_ns")
    for name, values in (("nccl_time_ns", [dur[p] for p in picks]),
                         ("wait_ns", [s.wait_ns for s in split.ranks]),
                         ("transfer_ns", [s.transfer_ns for s in split.ranks]),
                         ("last_arrivals", [s.arrived_last for s in split.ranks])):  # fmt: skip
        every = np.zeros(len(rank), np.int64)
        for p, v in zip(picks, values, strict=True):
            every[p] = v
        columns["steps"][name] = sum_by_key(every, step, steps)
        columns["phases"][name] = sum_by_key(every, phase, phases)
    columns["steps"]["exposed_ns"] = record.step_exposed_ns
    columns["steps"][STEP_TIME_NS] = census.steps.column(DURATION_NS)
    columns["phases"]["exposed_ns"] = record.phase_exposed_ns
    matched = not split.hosts and record.aligned and not unplaced
    rows = tuple(_row(census, r, info, split.ranks[r].totals, matched)
                 for r, info in enumerate(record.ranks))  # fmt: skip
    unmatched = tuple((record.collectives[u.collective], u.counts) for u in split.unmatched)
    return NcclRanks(rows, split.occurrences, unmatched, split.straggler, split.hosts,
                     split.waited_for, columns["steps"], columns["phases"],
                     not record.aligned, unplaced, census.source.tracer)  # fmt: skip


def _row(census: Census, r: int, info: Any, totals: Any, matched: bool) -> RankRow:
    import numpy as np

    def known(value: int) -> int | None:
        return value if matched else None

    return RankRow(
        info.label or f"rank {r}", info.pid, info.host, info.devices, info.kernel_count,
        info.kernel_time_ns, totals.kernel_count, totals.nccl_ns, known(totals.wait_ns),
        known(totals.transfer_ns), totals.unmatched_ns, known(totals.last_arrivals),
        known(totals.caused_wait_ns), info.exposed_ns,
        np.flatnonzero(census.nccl.step_rank == r),
    )  # fmt: skip


# -- what every format says ------------------------------------------------------------------
def straggler_line(view: NcclRanks) -> str | None:
    """The straggler: who arrived last most often, how often, the wait it caused; and the rank
    that caused the most wait, where that is another."""
    s = view.straggler
    if s is None:
        return None
    label = view.ranks[s.rank].label
    text = (f"straggler: {label}, last to arrive in {fmt_count(s.last_arrivals)} of "
            f"{fmt_count(view.occurrences)} matched collectives, making the others wait "
            f"{fmt_ns(s.caused_wait_ns)}")  # fmt: skip
    most = max(range(len(view.ranks)), key=lambda r: (view.ranks[r].caused_wait_ns or 0, -r))
    row = view.ranks[most]
    if most != s.rank and (row.caused_wait_ns or 0) > s.caused_wait_ns:
        text += (f"; but {row.label} made the others wait longer: {fmt_ns(row.caused_wait_ns)} "
                 f"in its {fmt_count(row.last_arrivals)} last arrivals")  # fmt: skip
    return text


def unmatched_line(view: NcclRanks) -> str | None:
    """The collectives not matched (their counts differ between ranks), or the hosts."""
    if view.hosts:
        return (f"ranks on {len(view.hosts)} hosts ({', '.join(view.hosts)}): their clocks "
                "differ, so NCCL kernels are not matched across ranks and no wait is split")  # fmt: skip
    if view.unplaced:
        return (f"the traces of {', '.join(view.unplaced)} do not say their host (no host_name, "
                "and not named by tensorboard_trace_handler `HOST_PID.TIME.pt.trace.json`): "
                "ranks are matched only on one host's clock, so NCCL kernels are not matched "
                "across ranks and no wait is split")  # fmt: skip
    if view.unaligned and view.tracer:
        return ("not every trace says the wall-clock time its times count from "
                "(baseTimeNanoseconds): their times cannot be set on one clock, so NCCL kernels "
                "are not matched across ranks and no wait is split")  # fmt: skip
    if view.unaligned:
        return ("the ranks' exports come from separate nsys sessions, and not every one records "
                "its trace clock's start (TARGET_INFO_SESSION_START_TIME.systemClockNs, newer "
                "nsys): their times cannot be set on one clock, so NCCL kernels are not matched "
                "across ranks and no wait is split")  # fmt: skip
    if not view.unmatched:
        return None
    parts = "; ".join(f"{name} ({', '.join(f'{r.label} {n}' for r, n in zip(view.ranks, counts, strict=True))})"
                      for name, counts in view.unmatched)  # fmt: skip
    return (f"not matched (the ranks launched different numbers, so their time is not split "
            f"into wait and transfer): {parts}")  # fmt: skip


def rank_table(view: NcclRanks, per_step: bool) -> tuple[list[str], list[list[str]]]:
    """One row per rank: kernels, (with steps) steps and step time, NCCL time = wait + transfer
    (+ unmatched), exposed NCCL, last arrivals; per step (means over its steps) or over the
    whole capture."""
    unmatched = any(r.unmatched_ns for r in view.ranks)
    steps = per_step and any(len(r.step_rows) for r in view.ranks)
    head = ["rank", "GPU", "kernels", *(["steps", "step time"] if steps else []), "NCCL time",
            "wait", "transfer", *(["unmatched"] if unmatched else []), "exposed",
            "last"]  # fmt: skip
    rows = []
    for r, row in enumerate(view.ranks):
        figures = _rank_figures(view, r, view.rank_means(r) if per_step else None)
        rows.append([row.label, ", ".join(map(str, row.devices)) or "?",
                     fmt_count(row.kernel_count),
                     *([fmt_count(len(row.step_rows)), _ns(figures[STEP_TIME_NS])]
                       if steps else []),
                     *(_ns(figures[k]) for k in ("nccl_time_ns", "wait_ns", "transfer_ns")),
                     *([_ns(figures["unmatched_ns"])] if unmatched else []),
                     _ns(figures["exposed_ns"]), _count(figures["last_arrivals"])])  # fmt: skip
    return head, rows


LEGEND = ("wait: from a rank's NCCL kernel start to the last rank's start of the same "
          "collective (its k-th on every rank); transfer: the rest; exposed: its NCCL kernels' "
          "union not overlapped by its other kernels; last: how often it arrived last")  # fmt: skip


def _ns(value: float | None) -> str:
    return "—" if value is None else fmt_ns(value)


def _count(value: float | None) -> str:
    if value is None:
        return "—"
    return fmt_count(int(value)) if float(value).is_integer() else f"{value:.2f}"


def _rank_figures(view: NcclRanks, r: int, means: dict[str, float] | None) -> dict[str, Any]:
    """Rank r's table figures: its per-step means, or its whole capture's."""
    row = view.ranks[r]
    if means is None:
        return {STEP_TIME_NS: None, "nccl_time_ns": row.nccl_time_ns, "wait_ns": row.wait_ns,
                "transfer_ns": row.transfer_ns, "unmatched_ns": row.unmatched_ns,
                "exposed_ns": row.exposed_ns, "last_arrivals": row.last_arrivals}  # fmt: skip
    nccl, wait, transfer = means["nccl_time_ns"], means["wait_ns"], means["transfer_ns"]
    return {**means, STEP_TIME_NS: means.get(STEP_TIME_NS),
            "unmatched_ns": nccl - wait - transfer,
            **({} if view.matched else {"wait_ns": None, "transfer_ns": None,
                                         "last_arrivals": None})}  # fmt: skip

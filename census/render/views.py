"""What a rendering shows, computed before it: one view per kind of result.

A renderer formats; it computes nothing that every format must agree on. The tail steps and the
limiter of a summary, the explanation of a diff, the verdict and warnings of an experiment and
the spread over ranks are computed once, by census.api, and carried here to every format.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from census.compare.ab.experiment import Experiment, Explanation
    from census.compare.diff import CensusDiff
    from census.findings.limiter import Limiter
    from census.findings.nccl_ranks import NcclRanks
    from census.findings.spread import Spread
    from census.findings.tails import Tail
    from census.model.census import Census


@dataclass(frozen=True)
class SummaryView:
    """One capture's census and what is said about it."""

    census: Census
    tail: Tail | None  # the tail steps (census.findings.tails); None without steps
    limiter: Limiter | None  # what limits the step (census.findings.limiter); None without steps
    lead: str  # the first line in every format: run-ahead, then the limiter ("" without steps)
    label: str  # its name on a page's title
    shown: str | None = None  # what the user named it (else the export's path is shown)
    overhead: dict | None = None  # the capture overhead against its calibration run, if any
    # with several ranks: their NCCL time split into wait and transfer (census.findings.nccl_ranks)
    ranks: NcclRanks | None = None


@dataclass(frozen=True)
class DiffView:
    """A diff, its explanation (headline first) and the summaries of its two sides (the JSON
    document carries them)."""

    diff: CensusDiff
    explanation: list[str]
    a: SummaryView
    b: SummaryView
    sources: tuple[str, str] | None = None  # what the user named the sides (a page's subtitle)


@dataclass(frozen=True)
class ExperimentView:
    """An A/B experiment, its explanation (verdict, warnings, findings) and the diff of its
    captures explained as the experiment (None without captures)."""

    experiment: Experiment
    explanation: Explanation
    diff: DiffView | None


@dataclass(frozen=True)
class RanksView:
    """A rank folder: the merged summary, each rank's, and the spread over ranks."""

    merged: SummaryView
    labels: list[str]
    ranks: list[SummaryView]
    spread: dict[str, Spread]  # per key: min, median and max over ranks
    hosts: list[str | None] = field(default_factory=list)  # each rank's host, where known

    @property
    def host_count(self) -> int:
        """How many hosts the ranks ran on (unknown hosts aside)."""
        return len({h for h in self.hosts if h is not None})

    @property
    def census(self) -> Census:
        """The merged census of the ranks."""
        return self.merged.census


@dataclass(frozen=True)
class CaptureView:
    """A capture census just made: its summary (a launcher's ranks' as a RanksView), its folder
    and its record (run.json: the command, nsys's, the machine, the calibration run)."""

    summary: SummaryView | RanksView
    folder: str
    run: dict | None

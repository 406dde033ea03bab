"""The JSON of the distributed view (#46, docs/json.md): a report's ranks (`ranks`, each with
its summary's `nccl`), a rank folder's ranks' `nccl` gaining the same fields, and `nccl_ranks`
(matched or not, the unmatched collectives, the straggler, who waited for whom)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from census.findings.nccl_ranks import STEP_COLUMNS
from census.metrics import KERNEL_COUNT, KERNEL_TIME_NS, STEP_TIME_NS

if TYPE_CHECKING:
    from census.findings.nccl_ranks import NcclRanks
    from census.model.census import Census
    from census.render.views import SummaryView

_SPLIT = ("wait_ns", "transfer_ns", "last_arrivals")  # null when nothing is matched


def report_ranks_json(view: SummaryView) -> dict[str, Any]:
    """`ranks` and `nccl_ranks` of one report holding several ranks ({} otherwise): per rank
    what the report holds of it alone (its kernels, steps and NCCL figures)."""
    ranks = view.ranks
    if ranks is None:
        return {}
    out = []
    for r, row in enumerate(ranks.ranks):
        means = ranks.rank_means(r)
        out.append({"rank": row.label, "host": row.host, "pid": row.pid,
                    "gpus": list(row.devices),
                    "summary": {"totals": {KERNEL_COUNT: row.kernel_count,
                                           KERNEL_TIME_NS: row.kernel_time_ns},
                                "step_count": len(row.step_rows),
                                "per_step": None if means is None else
                                {STEP_TIME_NS: means[STEP_TIME_NS]},
                                "nccl": rank_nccl_json(view.census, ranks, r)}})  # fmt: skip
    return {"ranks": out, "nccl_ranks": nccl_ranks_json(ranks)}


def rank_nccl_json(census: Census, ranks: NcclRanks, r: int, prefix: str = "") -> dict[str, Any]:
    """Rank r's NCCL figures: over the whole capture, per step (means over its steps) and in
    each of its steps and their phases (`prefix`: what its step names carry in `census`, a
    rank folder's `label: `, left out)."""
    row = ranks.ranks[r]
    means = ranks.rank_means(r)
    return {
        KERNEL_COUNT: row.nccl_kernel_count, "time_ns": row.nccl_time_ns,
        "wait_ns": row.wait_ns, "transfer_ns": row.transfer_ns, "unmatched_ns": row.unmatched_ns,
        "last_arrivals": row.last_arrivals, "caused_wait_ns": row.caused_wait_ns,
        "exposed_ns": row.exposed_ns,
        "per_step": None if means is None else _known(ranks, {k: means[k] for k in STEP_COLUMNS}),
        "steps": _steps(census, ranks, row.step_rows.tolist(), prefix),
    }  # fmt: skip


def _known(ranks: NcclRanks, figures: dict[str, Any]) -> dict[str, Any]:
    """The figures, the split's null where nothing is matched."""
    return figures if ranks.matched else {**figures, **dict.fromkeys(_SPLIT)}


def _steps(census: Census, ranks: NcclRanks, rows: list[int], prefix: str) -> list[dict]:
    table = census.steps
    bounds = table.bounds.tolist()
    step_values = {k: ranks.steps[k].tolist() for k in STEP_COLUMNS}
    phase_values = {k: ranks.phases[k].tolist() for k in STEP_COLUMNS}
    names = table.names
    out = []
    for i in rows:
        name = names[i][len(prefix) :] if prefix and names[i].startswith(prefix) else names[i]
        phases = [{"name": table.phases.names[p],
                   **_known(ranks, {k: phase_values[k][p] for k in STEP_COLUMNS})}
                  for p in range(bounds[i], bounds[i + 1])]  # fmt: skip
        out.append({"name": name, **_known(ranks, {k: step_values[k][i] for k in STEP_COLUMNS}),
                    "phases": phases})  # fmt: skip
    return out


def nccl_ranks_json(ranks: NcclRanks) -> dict[str, Any]:
    """Whether the ranks were matched (one host), the hosts when several, the matched
    occurrences, the unmatched collectives with each rank's count, the straggler, and
    waited_for[r][s]: rank r's wait over the occurrences rank s arrived last in."""
    labels = [r.label for r in ranks.ranks]
    s = ranks.straggler
    return {
        "matched": ranks.matched,
        "hosts": list(ranks.hosts),
        "one_clock": not ranks.unaligned,
        "hosts_unknown": list(ranks.unplaced),
        "occurrences": ranks.occurrences,
        "unmatched": [{"collective": name, "counts": dict(zip(labels, counts, strict=True))}
                      for name, counts in ranks.unmatched],
        "straggler": None if s is None else {"rank": labels[s.rank],
                                             "last_arrivals": s.last_arrivals,
                                             "caused_wait_ns": s.caused_wait_ns},
        "waited_for": {a: dict(zip(labels, row, strict=True))
                       for a, row in zip(labels, ranks.waited_for.tolist(), strict=True)}
        if ranks.matched else None,
    }  # fmt: skip


def folder_ranks_json(merged: SummaryView, labels: list[str], rows: list[dict]) -> dict:
    """A rank folder's: each rank's summary's `nccl` (rows: spread_json's `ranks`) gains its
    split, found by label; and `nccl_ranks`. {} with fewer than two ranks."""
    ranks = merged.ranks
    if ranks is None:
        return {}
    index = {row.label: r for r, row in enumerate(ranks.ranks)}
    for label, entry in zip(labels, rows, strict=True):
        if label in index:
            extra = rank_nccl_json(merged.census, ranks, index[label], f"{label}: ")
            entry["summary"]["nccl"].update(extra)
    return {"nccl_ranks": nccl_ranks_json(ranks)}

"""Multi-rank captures: one export per rank (`rank0.sqlite`, ...), parsed in parallel.

`merge_census` folds the ranks into one Census exactly as a single report holding every rank
would read (totals summed, each rank's steps kept, kernels joined by name), so summary and diff
work unchanged; `rank_spread` shows the min / median / max over ranks, so a straggler stands out.
"""

from __future__ import annotations

import os
import re
import statistics
from collections.abc import Callable
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, fields, replace
from pathlib import Path

from census.model import (
    ApiStat,
    Census,
    ClassStat,
    CollectiveStat,
    KernelStat,
    MemoryStat,
    Metrics,
    Source,
)

SPREAD_KEYS = ("step_time_ns", "gpu_busy_ns", "nccl_kernel_time_ns", "non_nccl_union_ns")
_RANK = re.compile(r"rank[_-]?(\d+)", re.IGNORECASE)


def rank_files(folder: Path) -> list[tuple[str, Path]]:
    """(label, export) for each rank in a capture folder, ordered by rank number."""
    found = sorted(folder.glob("*.sqlite"))

    def order(p: Path) -> tuple[int, str]:
        m = _RANK.search(p.stem)
        return (int(m.group(1)) if m else 1 << 30, p.name)

    return [(p.stem, p) for p in sorted(found, key=order)]


def is_multi_rank(path: Path) -> bool:
    return path.is_dir() and len(list(path.glob("*.sqlite"))) > 1


def _one(args: tuple[Path, str, int]) -> Census:
    from census.pipeline import summarize

    path, steps_regex, skip_first, workers = args
    return summarize(path, steps_regex, skip_first, workers=workers)


def summarize_ranks(
    files: list[tuple[str, Path]],
    steps_regex: str,
    skip_first: int,
    progress: Callable[[str], None] | None = None,
    workers: int | None = None,
) -> list[Census]:
    """Each rank's census, in a process pool (exports are parsed independently)."""
    workers = workers or min(len(files), os.cpu_count() or 1)
    # ranks already run in parallel: each reads its export with the cores left to it
    inner = max(1, (os.cpu_count() or 1) // workers) if workers > 1 else None
    jobs = [(p, steps_regex, skip_first, inner) for _, p in files]
    if progress:
        progress(f"{len(jobs)} ranks on {workers} worker(s)")
    if workers <= 1 or len(jobs) == 1:
        return [_one(j) for j in jobs]
    with ProcessPoolExecutor(max_workers=workers) as pool:
        return list(pool.map(_one, jobs))


def _sum(items: list, cls: type, key: str) -> tuple:
    acc: dict[str, list[int]] = {}
    numeric = [f.name for f in fields(cls) if f.name != key and f.type in ("int", int)]
    extra: dict[str, dict] = {}
    for it in items:
        k = getattr(it, key)
        row = acc.setdefault(k, [0] * len(numeric))
        for i, name in enumerate(numeric):
            row[i] += getattr(it, name)
        extra.setdefault(
            k, {f.name: getattr(it, f.name) for f in fields(cls) if f.name not in numeric}
        )
    return tuple(cls(**extra[k], **dict(zip(numeric, v, strict=True))) for k, v in acc.items())


def merge_census(labels: list[str], ranks: list[Census], folder: Path) -> Census:
    totals = Metrics(
        **{f.name: sum(getattr(c.totals, f.name) for c in ranks) for f in fields(Metrics)}
    )
    steps = tuple(
        replace(s, name=f"{label}: {s.name}")
        for label, c in zip(labels, ranks, strict=True)
        for s in c.steps
    )
    kernels = sorted(_sum([k for c in ranks for k in c.kernels], KernelStat, "name"),
                     key=lambda k: (-k.time_ns, k.name))  # fmt: skip
    gpus = tuple(g for c in ranks for g in c.source.gpus)
    versions = {c.source.nsys_version for c in ranks}
    return Census(
        source=Source(
            str(folder),
            ", ".join(sorted(v or "?" for v in versions)),
            ranks[0].source.schema_version,
            gpus,
        ),
        totals=totals,
        steps=steps,
        classes=_sum([x for c in ranks for x in c.classes], ClassStat, "cls"),
        kernels=tuple(kernels),
        memory=_sum([x for c in ranks for x in c.memory], MemoryStat, "kind"),
        launch_apis=_sum([x for c in ranks for x in c.launch_apis], ApiStat, "api"),
        warnings=tuple(
            f"{label}: {w}" for label, c in zip(labels, ranks, strict=True) for w in c.warnings
        ),
        graph_trace_mode=any(c.graph_trace_mode for c in ranks),
        sliced=any(c.sliced for c in ranks),
        collectives=_sum([x for c in ranks for x in c.collectives], CollectiveStat, "collective"),
        nccl_overlap_ns=sum(c.nccl_overlap_ns for c in ranks),
    )


@dataclass(frozen=True)
class Spread:
    min: float
    median: float
    max: float
    min_rank: str
    max_rank: str


def rank_spread(labels: list[str], ranks: list[Census]) -> dict[str, Spread]:
    """Per-step means per rank (whole capture without steps): min / median / max over ranks."""
    out: dict[str, Spread] = {}
    for key in SPREAD_KEYS:
        values = []
        for label, c in zip(labels, ranks, strict=True):
            per = {**(c.per_step() or c.totals.as_dict()), **(c.per_step_timing() or {})}
            if key in per and per[key] is not None:
                values.append((float(per[key]), label))
        if values:
            lo, hi = min(values), max(values)
            out[key] = Spread(lo[0], statistics.median(v for v, _ in values), hi[0], lo[1], hi[1])
    return out


def spread_json(labels: list[str], ranks: list[Census]) -> dict:
    from census.model import summary_json

    return {
        "ranks": [
            {"rank": label, "summary": summary_json(c)}
            for label, c in zip(labels, ranks, strict=True)
        ],
        "spread": {k: vars(v) for k, v in rank_spread(labels, ranks).items()},
    }

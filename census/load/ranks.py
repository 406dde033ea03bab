"""Multi-rank captures: one export per rank (`rank0.sqlite`, ...) in one folder.

The ranks are parsed in parallel (census.load.pool.map_processes); census.census.merge_census folds
them into one Census and rank_spread shows the min / median / max over ranks.
"""

from __future__ import annotations

import re
from pathlib import Path

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

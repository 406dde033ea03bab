"""The NCCL wait split's definition by brute force, with plain loops (#46): shared by the tests
of census.findings.nccl_wait and of the distributed view through the CLI; and each process's NCCL kernels
of a real export, read with SQL."""

from __future__ import annotations

import sqlite3
from pathlib import Path

from census.definitions import nccl_collective

Kernel = tuple[int, int, int]  # collective, start_ns, end_ns


def brute_force(ranks: list[list[Kernel]]) -> dict:
    """Every kernel's wait, transfer, last arrival and matched flag; the unmatched collectives;
    each rank's last arrivals and caused wait; the straggler (rank, last arrivals, caused)."""
    out = {
        "wait": [[0] * len(k) for k in ranks],
        "transfer": [[0] * len(k) for k in ranks],
        "last": [[False] * len(k) for k in ranks],
        "matched": [[False] * len(k) for k in ranks],
        "last_count": [0] * len(ranks),
        "caused": [0] * len(ranks),
        "unmatched": {},
        "occurrences": 0,
        "waited_for": [[0] * len(ranks) for _ in ranks],
    }
    by_rank = []
    for kernels in ranks:
        groups: dict[int, list[tuple[int, int, int]]] = {}
        for i, (c, s, e) in enumerate(kernels):
            groups.setdefault(c, []).append((s, e, i))
        by_rank.append({c: sorted(v) for c, v in groups.items()})
    for c in sorted({c for groups in by_rank for c in groups}):
        counts = [len(groups.get(c, [])) for groups in by_rank]
        if len(set(counts)) > 1:
            out["unmatched"][c] = counts
            continue
        for k in range(counts[0]):
            brute_occurrence(out, [groups[c][k] for groups in by_rank])
    out["straggler"] = None
    if len(ranks) >= 2 and out["occurrences"]:
        best = max(range(len(ranks)), key=lambda r: (out["last_count"][r], out["caused"][r], -r))
        out["straggler"] = (best, out["last_count"][best], out["caused"][best])
    return out


def brute_occurrence(out: dict, row: list[tuple[int, int, int]]) -> None:
    """One occurrence: row[r] is rank r's (start, end, index) of it."""
    out["occurrences"] += 1
    last_arrival = max(s for s, _, _ in row)
    waits = []
    for r, (s, e, i) in enumerate(row):
        reached = min(e, last_arrival)
        out["wait"][r][i] = reached - s
        out["transfer"][r][i] = e - reached
        out["last"][r][i] = s == last_arrival
        out["matched"][r][i] = True
        waits.append(reached - s)
    for r, (s, _, _) in enumerate(row):
        if s == last_arrival:
            out["last_count"][r] += 1
            out["caused"][r] += sum(waits) - waits[r]
            for other, wait in enumerate(waits):
                if other != r:
                    out["waited_for"][other][r] += wait


def read_nccl_kernels(path: Path) -> list[list[Kernel]]:
    """Each process's NCCL kernels (processes by pid: globalPid >> 24), collectives numbered by
    name."""
    conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        rows = conn.execute(
            "SELECT k.globalPid >> 24, k.start, k.end, s.value FROM CUPTI_ACTIVITY_KIND_KERNEL k "
            "JOIN StringIds s ON s.id = k.shortName ORDER BY k.rowid"
        ).fetchall()
    finally:
        conn.close()
    names = sorted({c for *_, n in rows if (c := nccl_collective(n))})
    ranks: dict[int, list[Kernel]] = {pid: [] for pid, *_ in sorted(rows)}
    for pid, start, end, name in rows:
        if collective := nccl_collective(name):
            ranks[pid].append((names.index(collective), start, end))
    return [k for k in ranks.values() if k]

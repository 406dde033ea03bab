"""Build large nsys-shaped exports by replicating a real export's rows.

Copy i of every kernel, runtime, memcpy, memset and NVTX row is shifted by i x (the source's time
span + a gap) and its correlationId by i x (the largest correlationId + 1), so links between API
calls and GPU work, step ranges and per-step figures stay consistent: a census of the result is
the source's census repeated. StringIds and metadata are copied once. A source that is census's
export of a Kineto trace (census.sources.kineto.export) has its op ranges replicated too.

    python bench/generate.py --kernels 1000000 -o bench/out/eager-1e6.sqlite [--source FILE]
    python bench/generate.py --kernels 1000000 -o bench/out/ops-1e6.sqlite --source EXPORT
        (EXPORT: census.sources.export.resolve_sqlite of a Kineto trace, e.g. HTA's NCCL
        sample in tests/data/kineto: its op ranges come along; docs/performance.md)
"""

from __future__ import annotations

import argparse
import math
import shutil
import sqlite3
import sys
import time
from pathlib import Path

REPLICATED = (
    "CUPTI_ACTIVITY_KIND_KERNEL",
    "CUPTI_ACTIVITY_KIND_RUNTIME",
    "CUPTI_ACTIVITY_KIND_MEMCPY",
    "CUPTI_ACTIVITY_KIND_MEMSET",
    "NVTX_EVENTS",
    "KINETO_OP_RANGES",  # a Kineto trace's export's op ranges (#56), where the source has them
)
GAP_NS = 1_000_000


def default_source() -> Path:
    from census.sources.samples import sample_path

    return sample_path("eager") / "capture.sqlite"


def generate(source: Path, target: Path, kernels: int) -> dict:
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = target.with_suffix(".part")
    shutil.copy(source, tmp)
    conn = sqlite3.connect(tmp)
    conn.execute("PRAGMA journal_mode = OFF")
    conn.execute("PRAGMA synchronous = OFF")
    tables = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
    base = conn.execute("SELECT COUNT(*) FROM CUPTI_ACTIVITY_KIND_KERNEL").fetchone()[0]
    copies = max(1, math.ceil(kernels / base))
    lo, hi, corr = _extent(conn, tables)
    span = hi - lo + GAP_NS
    conn.execute(
        "CREATE TEMP TABLE copies AS WITH RECURSIVE c(i) AS "
        "(SELECT 1 UNION ALL SELECT i + 1 FROM c WHERE i < ?) SELECT i FROM c",
        (copies - 1,),
    )
    for table in REPLICATED:
        if table not in tables:
            continue
        cols = [r[1] for r in conn.execute(f'PRAGMA table_info("{table}")')]
        exprs = []
        for c in cols:
            if c in ("start", "end"):
                exprs.append(f'"{c}" + c.i * {span}')
            elif c == "correlationId":
                exprs.append(f'"{c}" + c.i * {corr}')
            else:
                exprs.append(f'"{c}"')
        conn.execute(f'CREATE TEMP TABLE src AS SELECT * FROM "{table}"')
        conn.execute(
            f'INSERT INTO "{table}" ({", ".join(cols)}) '
            f"SELECT {', '.join(exprs)} FROM temp.copies c CROSS JOIN temp.src"
        )
        conn.execute("DROP TABLE temp.src")
        conn.commit()
    conn.close()
    tmp.replace(target)
    return {"copies": copies, "kernels": copies * base}


def _extent(conn: sqlite3.Connection, tables: set[str]) -> tuple[int, int, int]:
    lo, hi, corr = None, None, 0
    for table in REPLICATED:
        if table not in tables:
            continue
        a, b = conn.execute(
            f'SELECT MIN(start), MAX(COALESCE(end, start)) FROM "{table}"'
        ).fetchone()
        if a is not None:
            lo = a if lo is None else min(lo, a)
            hi = b if hi is None else max(hi, b)
        if table not in ("NVTX_EVENTS", "KINETO_OP_RANGES"):
            c = conn.execute(f'SELECT MAX(correlationId) FROM "{table}"').fetchone()[0]
            corr = max(corr, (c or 0) + 1)
    return lo or 0, hi or 0, corr


def main() -> None:
    p = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("--kernels", type=int, required=True)
    p.add_argument("--source", type=Path, default=None)
    p.add_argument("-o", "--output", type=Path, required=True)
    args = p.parse_args()
    t0 = time.monotonic()
    info = generate(args.source or default_source(), args.output, args.kernels)
    print(
        f"{args.output}: {info['kernels']:,} kernels ({info['copies']} copies), "
        f"{args.output.stat().st_size / 2**20:,.0f} MiB in {time.monotonic() - t0:.1f}s",
        file=sys.stderr,
    )


if __name__ == "__main__":
    main()

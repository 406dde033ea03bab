"""Compare what two tracers said of the same workload (#55, #56), for scripts/gpu_proof.sh.

python scripts/tracer_pair.py E_NSYS.json C_NSYS.json E_TORCH.json C_TORCH.json
    summaries (census summary --json), in the order the shell's brace expansion gives
    (eager-nsys, eager-torch, compiled-nsys, compiled-torch): per step, the counts that must
    be equal between nsys and torch.profiler, and the totals
python scripts/tracer_pair.py --ops DIFF_NSYS.json DIFF_TORCH.json
    two diffs (census diff --json): kernel counts per operation on each side, nsys against
    torch.profiler
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

KEYS = ("kernel_count", "launch_api_count", "d2d_count", "d2d_bytes", "h2d_count", "memset_count")


def steps(pair: list[str]) -> None:
    """Per step and in total, the keys of both summaries side by side; says equal or not."""
    docs = [json.loads(Path(p).read_text()) for p in pair]
    print(f"{pair[0]}  vs  {pair[1]}")
    for key in KEYS:
        rows = [[s.get(key) for s in d["steps"]] for d in docs]
        same = rows[0] == rows[1]
        print(
            f"  {key:18} per step nsys {rows[0]}  torch {rows[1]}  {'EQUAL' if same else 'DIFFER'}"
        )
    for key in KEYS:
        a, b = (d["totals"].get(key) for d in docs)
        print(f"  totals {key:18} {a} {b} {'EQUAL' if a == b else 'DIFFER'}")


def _row_key(row: dict) -> tuple:
    def names(ops: list) -> tuple:
        return tuple(sorted(f"{o['op']}{' (bwd)' if o.get('backward') else ''}" for o in ops))

    return names(row.get("a_ops") or []), names(row.get("b_ops") or [])


def ops(pair: list[str]) -> None:
    """The diffs' Operations rows (A ops -> B groups) with kernels per step on each side,
    nsys's against torch.profiler's: equal or not, row by row."""
    tables = []
    for p in pair:
        rows = (json.loads(Path(p).read_text()).get("ops") or {}).get("rows") or []
        tables.append({_row_key(r): (r["kernel_count"]["a"], r["kernel_count"]["b"]) for r in rows})
        print(f"{p}: {len(rows)} operation rows")
    keys = sorted(set(tables[0]) | set(tables[1]), key=str)
    same = 0
    for k in keys:
        a, b = tables[0].get(k), tables[1].get(k)
        same += a == b
        print(f"  {'EQUAL ' if a == b else 'DIFFER'} nsys {a} torch {b}  {k[0]} -> {k[1]}"[:230])
    print(f"  {same} of {len(keys)} rows equal (kernels per step, A and B)")


def main() -> None:
    """Summaries two by two, or two diffs with --ops."""
    args = sys.argv[1:]
    if args and args[0] == "--ops":
        ops(args[1:])
        return
    for i in range(0, len(args), 2):
        steps(args[i : i + 2])


if __name__ == "__main__":
    main()

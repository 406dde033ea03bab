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


def ops(pair: list[str]) -> None:
    """The diffs' operation rows: kernels per step on each side, by label."""
    tables = []
    for p in pair:
        doc = json.loads(Path(p).read_text())
        rows = doc.get("ops") or []
        tables.append(rows)
        print(f"{p}: {len(rows)} operation rows")
    for row in tables[0][:40]:
        print("  nsys ", json.dumps(row)[:200])
    for row in tables[1][:40]:
        print("  torch", json.dumps(row)[:200])


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

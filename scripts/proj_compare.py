"""census's GPU spans beside nsys's nvtx_gpu_proj_trace, range by range.

    python scripts/proj_compare.py CAPTURE.sqlite PROJ.csv

PROJ.csv is `nsys stats -r nvtx_gpu_proj_trace -f csv -o - CAPTURE.sqlite`. nsys projects a range
onto the GPU from the ops launched on the range's own thread; census from the ops launched in the
range on any thread of its process (autograd launches backward from a thread of its own).
"""

from __future__ import annotations

import csv
import sys
from pathlib import Path

import census


def main(capture: Path, proj: Path) -> None:
    nsys: dict[tuple[str, str], tuple[int, int]] = {}
    step = ""
    for row in csv.DictReader(proj.read_text(encoding="utf-8").splitlines()):
        if "Name" not in row or not row["Name"]:
            continue
        name = row["Name"].split(":", 1)[-1]
        step = name if name.startswith("step") else step
        nsys[(step, "" if name == step else name)] = (
            int(row["Projected Duration (ns)"]),
            int(row["NumGPUOps"]),
        )
    c = census.summarize(capture, use_cache=False)
    print(f"{'range':24} {'census span':>14} {'nsys projection':>16} {'nsys ops':>9}  equal")
    for s in c.steps:
        rows = [("", s.gpu_span_ns)] + [(p.name, p.gpu_span_ns) for p in s.phases]
        for phase, span in rows:
            theirs, ops = nsys.get((s.name, phase), (None, None))
            label = f"{s.name} {phase}".strip()
            same = "yes" if theirs == span else "NO"
            cells = (_cell(span), _cell(theirs), _cell(ops))
            print(f"{label:24} {cells[0]:>14} {cells[1]:>16} {cells[2]:>9}  {same}")
    timing = c.per_step_timing() or {}
    print(f"host_ran_ahead {c.host_ran_ahead()}; mean NVTX step {timing.get('step_time_ns')}; "
          f"mean GPU span {timing.get('gpu_span_ns')}")  # fmt: skip


def _cell(value: int | None) -> str:
    return "-" if value is None else str(value)


if __name__ == "__main__":
    main(Path(sys.argv[1]), Path(sys.argv[2]))

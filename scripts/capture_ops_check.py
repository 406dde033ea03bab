"""Check a `census capture --ops` folder on the GPU machine (#56), one JSON line per folder.

python scripts/capture_ops_check.py FOLDER...
    op_ranges: who recorded them (run.json); aten_ranges / aten_in_steps: the export's NVTX
    ranges named `aten::...` in all and inside the census `step N` ranges (0 means --ops did not
    reach the captured run); top: the most frequent op names inside the steps. With an
    inductor_map.json (a compiled run): map_kernels, the kernels the map names; triton_kernels,
    the distinct triton_* kernel names the GPU ran; in_map, those the map names; not_in_map, a
    few it does not (every Triton kernel the GPU ran should be in the map, unless the run set
    $TORCHINDUCTOR_CACHE_DIR itself).
"""

from __future__ import annotations

import json
import sqlite3
import sys
from pathlib import Path


def _names(db: sqlite3.Connection, table: str, column: str) -> list[tuple]:
    cols = [r[1] for r in db.execute(f"PRAGMA table_info({table})")]
    text = f"COALESCE(e.{column}, s.value)" if "textId" in cols else f"e.{column}"
    join = "LEFT JOIN StringIds s ON s.id = e.textId" if "textId" in cols else ""
    query = f"SELECT {text}, e.start, e.end FROM {table} e {join} WHERE e.end IS NOT NULL"
    return db.execute(query).fetchall()


def check(folder: Path) -> dict:
    """What FOLDER's export and map say (module docstring)."""
    info = json.loads((folder / "run.json").read_text())
    export = next(folder.glob("*.sqlite"))
    db = sqlite3.connect(f"file:{export}?mode=ro", uri=True)
    rows = _names(db, "NVTX_EVENTS", "text")
    aten = [r for r in rows if r[0] and r[0].startswith("aten::")]
    steps = [r for r in rows if r[0] and r[0].startswith("step ")]
    inside = [r for r in aten if any(s[1] <= r[1] and r[2] <= s[2] for s in steps)]
    counts: dict[str, int] = {}
    for r in inside:
        counts[r[0].split(",")[0]] = counts.get(r[0].split(",")[0], 0) + 1
    out = {"folder": str(folder), "op_ranges": info.get("op_ranges"), "steps": len(steps),
           "aten_ranges": len(aten), "aten_in_steps": len(inside),
           "top": sorted(counts.items(), key=lambda kv: -kv[1])[:8]}  # fmt: skip
    path = folder / "inductor_map.json"
    if path.exists():
        kernels = json.loads(path.read_text())
        ran = {r[0] for r in db.execute("SELECT s.value FROM CUPTI_ACTIVITY_KIND_KERNEL k "
                                        "JOIN StringIds s ON s.id = k.shortName")}  # fmt: skip
        triton = sorted(n for n in ran if n.startswith("triton_"))
        out.update(map_kernels=len(kernels), triton_kernels=len(triton),
                   in_map=sum(n in kernels for n in triton),
                   not_in_map=[n for n in triton if n not in kernels][:5])  # fmt: skip
    return out


if __name__ == "__main__":
    for name in sys.argv[1:]:
        print(json.dumps(check(Path(name))))

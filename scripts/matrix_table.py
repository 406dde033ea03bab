"""Issue #58's capture-matrix table from a results folder of scripts/gpu_matrix.sh.

Usage: python3 scripts/matrix_table.py DIR, where DIR holds manifest.tsv (mode, reference mode,
nsys command line) and each mode's census JSON, stderr and exit codes. Prints one row per mode
against its reference (per step: means over the steps found) and writes DIR/matrix.json.
"""

import json
import sys
from pathlib import Path

r = Path(sys.argv[1])
modes = [line.split("\t") for line in (r / "manifest.tsv").read_text().splitlines()]


def load(name):
    try:
        return json.loads((r / f"{name}.json").read_text())
    except (OSError, ValueError):
        return None


def facts(name):
    d = load(name)
    nrc = (r / f"{name}.nsys-rc").read_text().strip() if (r / f"{name}.nsys-rc").exists() else "?"
    crc = (
        (r / f"{name}.census-rc").read_text().strip() if (r / f"{name}.census-rc").exists() else "?"
    )
    err = (r / f"{name}.err").read_text() if (r / f"{name}.err").exists() else ""
    f = {"nsys": nrc, "census": crc, "traceback": "Traceback" in err}
    if d is None:
        f["error"] = err.strip().splitlines()[-1][:160] if err.strip() else "no JSON"
        return f
    t, ps = d["totals"], d.get("per_step") or {}
    f.update(
        steps=len((d.get("timing") or {}).get("steps") or []),
        kernels=t["kernel_count"],
        launches=t["launch_api_count"],
        graphs=t["graph_launch_count"],
        d2d=t["d2d_count"],
        h2d=t["h2d_count"],
        step_kernels=ps.get("kernel_count"),
        step_launches=ps.get("launch_api_count"),
        step_d2d=ps.get("d2d_count"),
        step_graphs=ps.get("graph_launch_count"),
        limiter=d.get("limiter"),
        busy=((d.get("timing") or {}).get("per_step") or {}).get("gpu_busy_ns"),
        step_ns=((d.get("timing") or {}).get("per_step") or {}).get("step_time_ns"),
        warnings=[w if isinstance(w, str) else json.dumps(w) for w in d.get("warnings") or []],
    )
    return f


KEYS = ("step_kernels", "step_launches", "step_d2d", "step_graphs", "limiter")
head = (
    "mode | nsys rc | census rc | steps | kernels | launches | graph launches | d2d | "
    "per step k/l/d2d/g | limiter | busy/step ms | same per step as ref?"
)
print(head)
out = {}
for name, ref, _cmd in modes:
    f, g = facts(name), facts(ref)
    out[name] = f
    if "error" in f:
        print(
            f"{name} | {f['nsys']} | {f['census']} | - | - | - | - | - | - | - | - | {f['error']}"
        )
        continue
    same = (
        "ref"
        if name == ref
        else (
            "no ref"
            if "error" in g
            else ", ".join(f"{k} {f[k]} vs {g[k]}" for k in KEYS if f[k] != g[k]) or "yes"
        )
    )
    per = "/".join("-" if f[k] is None else f"{f[k]:g}" for k in KEYS[:4])
    busy = f"{f['busy'] / 1e6:.2f}/{f['step_ns'] / 1e6:.2f}" if f["busy"] is not None else "-"
    print(
        f"{name} | {f['nsys']} | {f['census']} | {f['steps']} | {f['kernels']} | {f['launches']} | "
        f"{f['graphs']} | {f['d2d']} | {per} | {f['limiter']} | {busy} | {same}"
        + (" | TRACEBACK" if f["traceback"] else "")
    )
    for w in f["warnings"]:
        print(f"    warning: {w[:300]}")
(r / "matrix.json").write_text(json.dumps(out, indent=1))

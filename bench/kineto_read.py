"""Time census's Kineto reader beside HTA's `TraceAnalysis` load, `json.load` and `gzip -dc`,
on the same trace, in one run: each in a process of its own (its peak RSS its own), one after
the other, with the machine's load average before each. Prints one JSON line per reader and
the ratios; `--out FILE` keeps the lines as they come (a long HTA run may be cut short).

    python bench/kineto_generate.py --kernels 1000000 -o bench/out/kineto-1e6
    python bench/kineto_read.py bench/out/kineto-1e6/rank0.pt.trace.json.gz --out bench/out/read.jsonl

Readers: `census-stream` (census.sources.kineto.iter_batches, the batches dropped once
counted: the streaming pass alone), `census` (read_kineto: every table's columns kept),
`census-summary` (census.summarize: the trace made an nsys-shaped export, then the engine;
`export_s` the export's part),
`json` (gzip + json.load), `gunzip` (gzip -dc > /dev/null: the decompression alone), `hta`
(hta.trace_analysis.TraceAnalysis on a folder holding the trace alone; PyPI `traceinsight`).
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

CHILD = r"""
import json, resource, sys, time
reader, path = sys.argv[1], sys.argv[2]
sys.path.insert(0, sys.argv[3])
t0 = time.perf_counter()
if reader == "census-stream":
    from census.sources.kineto import iter_batches
    kernels = kernel_ns = 0
    for tables in iter_batches(path):
        k = tables.get("kernels")
        if k is not None:
            kernels += len(k["start_ns"])
            kernel_ns += int((k["end_ns"] - k["start_ns"]).sum())
    result = {"kernels": kernels, "kernel_ns": kernel_ns}
elif reader == "census":
    from census.sources.kineto import read_kineto
    k = read_kineto(path).tables["kernels"]
    result = {"kernels": len(k["start_ns"]), "kernel_ns": int((k["end_ns"] - k["start_ns"]).sum())}
elif reader == "census-summary":  # the export, then the engine (a fresh cache folder)
    import census
    from census.sources.kineto.export import export_kineto
    from pathlib import Path
    t1 = time.perf_counter()
    export_kineto(Path(path))
    exported = time.perf_counter() - t1
    totals = census.summarize(path, use_cache=False).totals
    result = {"kernels": totals.kernel_count, "kernel_ns": totals.kernel_time_ns,
              "export_s": round(exported, 2)}
elif reader == "json":
    import gzip
    with gzip.open(path, "rb") as fh:
        doc = json.load(fh)
    ks = [e for e in doc["traceEvents"] if e.get("cat") == "kernel"]
    result = {"kernels": len(ks)}
elif reader == "hta":
    from hta.trace_analysis import TraceAnalysis
    analysis = TraceAnalysis(trace_dir=sys.argv[4])
    df = analysis.t.get_trace(0)
    result = {"events": len(df)}
seconds = time.perf_counter() - t0
use = resource.getrusage(resource.RUSAGE_SELF)
print(json.dumps({"seconds": round(seconds, 2), "cpu_s": round(use.ru_utime + use.ru_stime, 2),
                  "peak_rss_mb": round(use.ru_maxrss / 1024), **result}))
"""


def run_reader(reader: str, trace: Path, folder: Path) -> dict:
    """One reader in a process of its own; its line of figures."""
    load = os.getloadavg()[0]
    if reader == "gunzip":
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        t0 = time.perf_counter()
        subprocess.run(["gzip", "-dc", str(trace)], stdout=subprocess.DEVNULL, check=True)
        use = resource.getrusage(resource.RUSAGE_CHILDREN)
        cpu = use.ru_utime + use.ru_stime - before.ru_utime - before.ru_stime
        out = {"seconds": round(time.perf_counter() - t0, 2), "cpu_s": round(cpu, 2)}
    else:
        repo = str(Path(__file__).resolve().parent.parent)
        env = {**os.environ, "CENSUS_CACHE_DIR": str(folder.with_name(folder.name + "-cache"))}
        done = subprocess.run(
            [sys.executable, "-c", CHILD, reader, str(trace), repo, str(folder)],
            capture_output=True, text=True, check=False, env=env,
        )  # fmt: skip
        if done.returncode != 0:
            return {"reader": reader, "error": done.stderr.strip().splitlines()[-1:], "load": load}
        out = json.loads(done.stdout.strip().splitlines()[-1])
    return {"reader": reader, "load_avg_1min": round(load, 1), **out}


def main(argv: list[str] | None = None) -> int:
    """Run the readers in turn and print each one's figures, then the ratios to census."""
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("trace", type=Path)
    ap.add_argument("--readers", default="census-stream,census,census-summary,gunzip,json,hta")
    ap.add_argument("--out", type=Path)
    args = ap.parse_args(argv)
    folder = Path(tempfile.mkdtemp(prefix="kineto-hta-"))
    try:
        os.symlink(args.trace.resolve(), folder / args.trace.name)  # HTA reads a folder
        rows = []
        for reader in args.readers.split(","):
            row = run_reader(reader, args.trace, folder)
            rows.append(row)
            line = json.dumps(row)
            print(line, flush=True)
            if args.out:
                with args.out.open("a") as fh:
                    fh.write(line + "\n")
        base = next((r for r in rows if r["reader"] == "census" and "seconds" in r), None)
        if base:
            for r in rows:
                if "seconds" in r:
                    print(f"{r['reader']:>14}: {r['seconds'] / base['seconds']:.1f}x census's time")
    finally:
        shutil.rmtree(folder, ignore_errors=True)
        shutil.rmtree(folder.with_name(folder.name + "-cache"), ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())

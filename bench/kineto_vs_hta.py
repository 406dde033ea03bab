"""census beside HTA on one Kineto trace, paired: in each pair census's streaming read, then
`census summary`'s work (the export and the engine, fresh cache), then HTA's `TraceAnalysis`
load, each in a process of its own (the order reversed every other pair, so a slow moment of the
shared machine falls on both sides); wall seconds, CPU seconds and peak RSS of each, the
1-minute load average before each, and per pair HTA's ratios to census's. A watchdog polls
`MemAvailable` and kills a reader (its process group) when it drops below `--min-available-gib`
(3) or after `--limit-s`, recording the kill, the time and the peak RSS seen so far (VmHWM):
other sessions share the machine's memory.

    python bench/kineto_generate.py --kernels 100000 -o /tmp/k1e5
    python bench/kineto_vs_hta.py /tmp/k1e5/rank0.pt.trace.json.gz --pairs 2 --out pairs.jsonl

The readers are bench/kineto_read.py's (`census-stream`, `census-summary`, `hta`; HTA is PyPI
`traceinsight`).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from kineto_read import CHILD

READERS = ("census-stream", "census-summary", "hta")


def available_bytes() -> int:
    """The kernel's estimate of memory available to a new process (/proc/meminfo)."""
    for line in Path("/proc/meminfo").read_text().splitlines():
        if line.startswith("MemAvailable:"):
            return int(line.split()[1]) * 1024
    raise RuntimeError("no MemAvailable in /proc/meminfo")


def high_water_bytes(pid: int) -> int:
    """A running process's peak resident set so far (VmHWM), 0 once it is gone."""
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) * 1024
    except OSError:
        pass
    return 0


def run_watched(reader: str, trace: Path, folder: Path, floor_bytes: int, limit_s: float) -> dict:
    """One reader in a process group of its own, killed when memory or time runs short."""
    repo = str(Path(__file__).resolve().parent.parent)
    cache = tempfile.mkdtemp(prefix="kineto-vs-hta-cache-")
    env = {**os.environ, "CENSUS_CACHE_DIR": cache, "PYTHONPATH": repo}
    load = os.getloadavg()[0]
    t0 = time.perf_counter()
    proc = subprocess.Popen(
        [sys.executable, "-c", CHILD, reader, str(trace), repo, str(folder)],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env,
        start_new_session=True,
    )  # fmt: skip
    killed, low, peak = None, available_bytes(), 0
    while proc.poll() is None:
        time.sleep(0.5)
        low = min(low, available_bytes())
        peak = max(peak, high_water_bytes(proc.pid))
        if low < floor_bytes:
            killed = f"MemAvailable {low / 2**30:.1f} GiB"
        elif time.perf_counter() - t0 > limit_s:
            killed = f"over {limit_s:.0f} s"
        if killed:
            os.killpg(proc.pid, signal.SIGKILL)
            break
    out, err = proc.communicate()
    shutil.rmtree(cache, ignore_errors=True)
    row = {"reader": reader, "load_avg_1min": round(load, 1),
           "min_available_gib": round(low / 2**30, 1)}  # fmt: skip
    if killed:
        return {**row, "killed": killed, "seconds": f"> {time.perf_counter() - t0:.0f}",
                "peak_rss_mb": f">= {peak >> 20}"}  # fmt: skip
    if proc.returncode != 0:
        return {**row, "error": err.strip().splitlines()[-1:]}
    return {**row, **json.loads(out.strip().splitlines()[-1])}


def ratios(rows: list[dict]) -> list[str]:
    """Per pair, HTA's wall, CPU and peak RSS over each census reader's; then the medians."""
    by_pair: dict[int, dict[str, dict]] = {}
    for r in rows:
        by_pair.setdefault(r["pair"], {})[r["reader"]] = r
    lines, seen = [], {}
    for pair, got in sorted(by_pair.items()):
        hta = got.get("hta", {})
        for name in ("census-stream", "census-summary"):
            mine = got.get(name, {})
            if not all(isinstance(d.get("seconds"), float) for d in (hta, mine)):
                continue
            r = tuple(hta[k] / mine[k] for k in ("seconds", "cpu_s", "peak_rss_mb"))
            seen.setdefault(name, []).append(r)
            lines.append(
                f"pair {pair} hta/{name}: wall {r[0]:.1f}x cpu {r[1]:.1f}x rss {r[2]:.1f}x"
            )
    for name, rs in seen.items():
        med = [statistics.median(x[i] for x in rs) for i in range(3)]
        lines.append(f"median hta/{name}: wall {med[0]:.1f}x cpu {med[1]:.1f}x rss {med[2]:.1f}x")
    return lines


def main(argv: list[str] | None = None) -> int:
    """Run the pairs, printing each reader's line as it comes, then the ratios."""
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("trace", type=Path)
    ap.add_argument("--pairs", type=int, default=2)
    ap.add_argument("--min-available-gib", type=float, default=3.0)
    ap.add_argument("--limit-s", type=float, default=1800, help="kill a reader after this long")
    ap.add_argument("--out", type=Path, help="append each line here as it comes")
    args = ap.parse_args(argv)
    folder = Path(tempfile.mkdtemp(prefix="kineto-vs-hta-"))
    rows = []
    try:
        os.symlink(args.trace.resolve(), folder / args.trace.name)  # HTA reads a folder
        for pair in range(1, args.pairs + 1):
            order = READERS if pair % 2 else READERS[::-1]
            for reader in order:
                floor = int(args.min_available_gib * 2**30)
                row = {"pair": pair, **run_watched(reader, args.trace, folder, floor, args.limit_s)}
                rows.append(row)
                print(json.dumps(row), flush=True)
                if args.out:
                    with args.out.open("a") as fh:
                        fh.write(json.dumps(row) + "\n")
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    print("\n".join(ratios(rows)))
    return 0


if __name__ == "__main__":
    sys.exit(main())

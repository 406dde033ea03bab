"""Benchmark: census against nsys's own reports and the SQL floor, side by side, as ratios.

For each size it builds (or reuses) two exports with bench/generate.py, one replicating the
bundled eager capture and one the compiled capture, then measures in one run:
  floor      the minimal scans census needs: one pass over each table it reads
  nsys       `nsys stats` with the kernel, API and memory-size reports (2022.4 names, or the
             current ones with --nsys-new-names)
  summary    `census summary --json`, cold (empty cache), then again (cached)
  diff       `census diff eager compiled`, cold, then again (cached)
Wall time and peak RSS come from each child process (os.wait4).

    python bench/run.py --sizes 1e5 1e6 1e7 [--nsys PATH]
"""

from __future__ import annotations

import argparse
import os
import shutil
import sqlite3
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))
sys.path.insert(0, str(HERE))

from generate import generate  # noqa: E402

TABLES = (
    "CUPTI_ACTIVITY_KIND_KERNEL",
    "CUPTI_ACTIVITY_KIND_RUNTIME",
    "CUPTI_ACTIVITY_KIND_MEMCPY",
    "CUPTI_ACTIVITY_KIND_MEMSET",
    "NVTX_EVENTS",
)


def run(cmd: list[str], env: dict[str, str] | None = None) -> tuple[float, int]:
    """Wall seconds and peak RSS (bytes) of one child process."""
    t0 = time.perf_counter()
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=env)
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - t0
    err = proc.stderr.read().decode(errors="replace") if proc.stderr else ""
    proc.stderr.close()
    if os.waitstatus_to_exitcode(status) != 0:
        raise SystemExit(f"benchmark command failed: {' '.join(cmd)}\n{err[-2000:]}")
    return wall, usage.ru_maxrss * 1024


def floor(path: Path) -> float:
    conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    t0 = time.perf_counter()
    have = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
    for table in TABLES:
        if table in have:
            conn.execute(f'SELECT COUNT(*), SUM("end" - start) FROM "{table}"').fetchone()
    conn.close()
    return time.perf_counter() - t0


def samples() -> tuple[Path, Path]:
    from census.samples import sample_path

    return sample_path("eager") / "capture.sqlite", sample_path("compiled") / "capture.sqlite"


def find_nsys(explicit: str | None) -> str | None:
    if explicit:
        return explicit
    local = sorted((HERE / ".nsys").glob("**/target-linux-x64/nsys"))
    return str(local[0]) if local else shutil.which("nsys")


def kernels_in(path: Path) -> int:
    conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    n = conn.execute("SELECT COUNT(*) FROM CUPTI_ACTIVITY_KIND_KERNEL").fetchone()[0]
    conn.close()
    return n


def main() -> None:
    p = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("--sizes", nargs="+", default=["1e5", "1e6", "1e7"])
    p.add_argument("--out", type=Path, default=HERE / "out")
    p.add_argument("--nsys", default=None)
    p.add_argument(
        "--nsys-new-names", action="store_true", help="cuda_gpu_kern_sum,... (nsys >= 2023)"
    )
    args = p.parse_args()
    nsys = find_nsys(args.nsys)
    reports = (
        "cuda_gpu_kern_sum,cuda_api_sum,cuda_gpu_mem_size_sum"
        if args.nsys_new_names
        else "gpukernsum,cudaapisum,gpumemsizesum"
    )
    eager_src, compiled_src = samples()
    census = [sys.executable, "-m", "census"]
    rows = []
    for size in args.sizes:
        n = int(float(size))
        files = {}
        for label, src in (("eager", eager_src), ("compiled", compiled_src)):
            target = args.out / f"{label}-{size}.sqlite"
            if not target.exists():
                print(f"generating {target} ...", file=sys.stderr)
                generate(src, target, n)
            files[label] = target
        e, c = files["eager"], files["compiled"]
        subprocess.run(
            ["cat", str(e), str(c)], stdout=subprocess.DEVNULL, check=True
        )  # warm the page cache
        row = {
            "size": size,
            "kernels": kernels_in(e),
            "mib": e.stat().st_size / 2**20,
            "floor": floor(e),
        }
        if nsys:
            with tempfile.TemporaryDirectory() as tmp:
                row["nsys"], row["nsys_rss"] = run(
                    [nsys, "stats", "-q", "-r", reports, "-f", "csv", "--force-export=false",
                     "-o", f"{tmp}/r", str(e)]
                )  # fmt: skip
        cache = tempfile.mkdtemp(prefix="census-bench-cache-")
        env = {**os.environ, "CENSUS_CACHE_DIR": cache}
        row["summary"], row["summary_rss"] = run([*census, "summary", str(e), "--json"], env)
        row["summary_cached"], _ = run([*census, "summary", str(e), "--json"], env)
        shutil.rmtree(cache)
        cache = tempfile.mkdtemp(prefix="census-bench-cache-")
        env = {**os.environ, "CENSUS_CACHE_DIR": cache}
        row["diff"], row["diff_rss"] = run(
            [*census, "diff", str(e), str(c), "--format", "json"], env
        )
        row["diff_cached"], _ = run([*census, "diff", str(e), str(c), "--format", "json"], env)
        shutil.rmtree(cache)
        rows.append(row)
        print(format_row(row), file=sys.stderr)
    table = format_table(rows, nsys)
    print(table)
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "results.md").write_text(table + "\n", encoding="utf-8")


def format_row(r: dict) -> str:
    return ", ".join(f"{k}={v:.3g}" if isinstance(v, float) else f"{k}={v}" for k, v in r.items())


def format_table(rows: list[dict], nsys: str | None) -> str:
    mib = 2**20
    head = (
        "| kernels | file | SQL floor | nsys stats (3 reports) | census summary | summary / nsys | "
        "summary / floor | summary RSS | cached summary | census diff (2 files) | diff RSS | cached diff |\n"
        "| ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"
    )
    lines = [head]
    for r in rows:
        nsys_cell = f"{r['nsys']:.2f} s ({r['nsys_rss'] / mib:,.0f} MiB)" if "nsys" in r else "n/a"
        ratio = f"{r['summary'] / r['nsys']:.2f}x" if "nsys" in r else "n/a"
        lines.append(
            f"| {r['kernels']:,} | {r['mib']:,.0f} MiB | {r['floor']:.2f} s | {nsys_cell} | "
            f"{r['summary']:.2f} s | {ratio} | {r['summary'] / r['floor']:.1f}x | "
            f"{r['summary_rss'] / mib:,.0f} MiB | {r['summary_cached']:.2f} s | {r['diff']:.2f} s | "
            f"{r['diff_rss'] / mib:,.0f} MiB | {r['diff_cached']:.2f} s |"
        )
    lines.append("")
    lines.append(f"nsys: {nsys or 'not found'}; machine: {os.cpu_count()} cores")
    return "\n".join(lines)


if __name__ == "__main__":
    main()

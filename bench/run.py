"""Benchmark: census against nsys's own reports and the SQL floor, side by side, as ratios.

For each size it builds (or reuses) two exports with bench/generate.py, one replicating the
bundled eager capture and one the compiled capture, then measures, in one run, on the same
files, with the page cache warm:
  floor      the minimal SQL scans census needs: one plain pass over each table census reads,
             reading every column it reads (COUNT and MAX of each), one connection, in turn;
             `start, end only` is the same pass reading two columns, for reference
  aggregation the three SQL statements for the totals nsys's reports give (bench/peers.py)
  nsys       `nsys stats` with the kernel, API and memory-size reports (2022.4 names, or the
             current ones with --nsys-new-names)
  nsys-ai    `nsys-ai summary`, cold and warm, and `nsys-ai diff` once (bench/peers.py)
  summary    `census summary --json`, cold (empty cache), then again (cached); and cold with
             CENSUS_READER=sql (every column read as group_concat text, as before the page
             reader), and with --no-idle
  diff       `census diff eager compiled`, cold, then again (cached)
  idle pairs `census summary --json` and the same with --no-idle, --pairs times each, one right
             after the other (AB, then BA, ...), cold: the idle split's cost is the median of the
             pairs' ratios (their lowest and highest beside it), so that a slow moment of the
             machine falls on both sides of a pair, not on one side of the comparison
Each command runs --repeat times, alternating with the others (census's in a rotated order each time);
the table shows medians.
census's modules are compiled to bytecode first (`compileall`), as `pip install` leaves them: with
PYTHONDONTWRITEBYTECODE set (as on this machine), every process would compile them anew (0.08 s).
Wall time comes from the parent; CPU time is user + system of the whole process tree; memory
is the peak, over 20 ms samples, of the summed PSS (proportional set size: shared pages split
between the processes sharing them) of the process and all its descendants.

    python bench/run.py --sizes 1e5 1e6 1e7 [--repeat 3] [--pairs 6] [--nsys PATH]
                        [--nsys-ai PATH] [--nsys-ai-limit SECONDS]
"""

from __future__ import annotations

import argparse
import contextlib
import os
import shutil
import signal
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))
sys.path.insert(0, str(HERE))

import peers  # noqa: E402
from generate import generate  # noqa: E402

# Every column census reads, per table (census/columns.py reads them as integers).
COLUMNS = {
    "CUPTI_ACTIVITY_KIND_KERNEL": (
        "start", '"end"', "deviceId", "globalPid", "correlationId", "demangledName", "shortName",
    ),
    "CUPTI_ACTIVITY_KIND_RUNTIME": ("start", '"end"', "globalTid", "correlationId", "nameId"),
    "CUPTI_ACTIVITY_KIND_MEMCPY": (
        "start", '"end"', "globalPid", "correlationId", "bytes", "copyKind",
    ),
    "CUPTI_ACTIVITY_KIND_MEMSET": ("start", '"end"', "globalPid", "correlationId", "bytes"),
    "NVTX_EVENTS": ("start", '"end"', "eventType", "text", "textId", "globalTid"),
}  # fmt: skip
MIB = 2**20


class TreeSampler(threading.Thread):
    """Peak summed PSS of a process and its descendants, sampled every 20 ms."""

    def __init__(self, pid: int) -> None:
        super().__init__(daemon=True)
        self.root = pid
        self.peak = 0
        self.done = threading.Event()

    def run(self) -> None:
        while not self.done.is_set():
            self.peak = max(self.peak, sum(_pss(p) for p in _tree(self.root)))
            self.done.wait(0.02)


def _tree(root: int) -> list[int]:
    parents: dict[int, int] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat") as fh:
                    parents[int(entry)] = int(fh.read().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                continue
    tree, frontier = [root], [root]
    while frontier:
        frontier = [p for p, pp in parents.items() if pp in frontier]
        tree += frontier
    return tree


def _pss(pid: int) -> int:
    try:
        with open(f"/proc/{pid}/smaps_rollup") as fh:
            for line in fh:
                if line.startswith("Pss:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return 0


def measure(cmd: list[str], env: dict[str, str] | None = None, memory: bool = False,
            limit: float | None = None) -> dict:  # fmt: skip
    """Wall seconds and CPU seconds of the tree of one command; with `memory`, its peak tree PSS
    instead (sampling /proc costs CPU, so timed runs do not sample); with `limit`, {"over":
    limit} where it ran past `limit` seconds: it runs in a session of its own, whose process
    group is then killed, as it is when the bench is interrupted."""
    t0 = time.perf_counter()
    with tempfile.TemporaryFile() as err:  # (a pipe would block a command that writes much)
        proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=err, env=env,
                                start_new_session=limit is not None)  # fmt: skip
        sampler = TreeSampler(proc.pid)
        if memory:
            sampler.start()
        with _killed_after(proc.pid, limit):
            _, status, usage = os.wait4(proc.pid, 0)
        proc.returncode = os.waitstatus_to_exitcode(status)
        wall = time.perf_counter() - t0
        if memory:
            sampler.done.set()
            sampler.join()
        if limit is not None and proc.returncode == -signal.SIGKILL and wall >= limit:
            return {"over": limit}
        if proc.returncode != 0:
            err.seek(0)
            tail = err.read().decode(errors="replace")[-2000:]
            raise SystemExit(f"benchmark command failed: {' '.join(cmd)}\n{tail}")
    if memory:
        return {"pss": sampler.peak}
    # wait4's usage covers the process and every descendant it waited for
    return {"wall": wall, "cpu": usage.ru_utime + usage.ru_stime}


@contextlib.contextmanager
def _killed_after(pid: int, limit: float | None) -> Iterator[None]:
    """Kill the process group of `pid` after `limit` seconds (None: never), or as soon as the
    block raises (an interrupted bench)."""
    if limit is None:
        yield
        return
    timer = threading.Timer(limit, _kill_group, (pid,))
    timer.daemon = True
    timer.start()
    try:
        yield
    except BaseException:
        _kill_group(pid)
        raise
    finally:
        timer.cancel()


def _kill_group(pid: int) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.killpg(pid, signal.SIGKILL)


def warm(*paths: Path) -> None:
    """Read the inputs right before a measured command, so every command starts from the same
    page cache (this machine kind keeps about 2 GiB of it)."""
    subprocess.run(["cat", *map(str, paths)], stdout=subprocess.DEVNULL, check=True)


def floor(path: Path, columns: dict[str, tuple[str, ...]]) -> float:
    """Seconds for one plain pass over each table, reading every column given."""
    return peers.timed_statements(path, [
        ((table,), f'SELECT COUNT(*), {", ".join(f"MAX({c})" for c in cols)} FROM "{table}"')
        for table, cols in columns.items()])  # fmt: skip


def samples() -> tuple[Path, Path]:
    from census.sources.samples import sample_path

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


def bench_size(size: str, args, nsys: str | None, reports: str, nsys_ai: str | None) -> dict:
    n = int(float(size))
    files = {}
    for label, src in zip(("eager", "compiled"), samples(), strict=True):
        target = args.out / f"{label}-{size}.sqlite"
        if not target.exists():
            print(f"generating {target} ...", file=sys.stderr)
            generate(src, target, n)
        files[label] = target
    e, c = files["eager"], files["compiled"]
    census = [sys.executable, "-m", "census"]
    scratch = Path(tempfile.mkdtemp(prefix="census-bench-"))
    nsys_cmd = None
    if nsys:  # each run writes its CSVs to a fresh prefix in the scratch folder
        nsys_cmd = [nsys, "stats", "-q", "-r", reports, "-f", "csv", "--force-export=false",
                    "-o", "PREFIX", str(e)]  # fmt: skip
    commands = {
        "summary": ([*census, "summary", str(e), "--json"], (e,), {}),
        # the same read with SQL (group_concat text) instead of the file's pages
        "summary_sql": ([*census, "summary", str(e), "--json"], (e,), {"CENSUS_READER": "sql"}),
        # the same without the idle split (on by default): what the split costs
        "summary_no_idle": ([*census, "summary", str(e), "--json", "--no-idle"], (e,), {}),
        "diff": ([*census, "diff", str(e), str(c), "--format", "json"], (e, c), {}),
    }
    runs: dict[str, list[dict]] = {}
    narrow = {t: ("start", '"end"') for t in COLUMNS}
    links = peers.linked(scratch, files) if nsys_ai else {}
    for r in range(args.repeat):
        warm(e)
        runs.setdefault("floor", []).append({"wall": floor(e, COLUMNS)})
        warm(e)
        runs.setdefault("floor_narrow", []).append({"wall": floor(e, narrow)})
        warm(e)
        runs.setdefault("aggregation", []).append({"wall": peers.aggregation_floor(e)})
        if nsys_ai:  # cold (no cache of its own), then warm (the cache that run built)
            peers.drop_caches(links)
            for key in ("nsysai", "nsysai_warm"):
                warm(e)
                runs.setdefault(key, []).append(measure(peers.summary_cmd(nsys_ai, links["eager"])))
        if nsys_cmd:
            warm(e)
            runs.setdefault("nsys", []).append(measure(_prefixed(nsys_cmd, scratch)))
        # census's commands in a rotated order each repeat: none always runs right after nsys
        # (whose freed memory this VM takes back, so the next process faults its pages in anew)
        names = list(commands)
        for name in names[r % len(names) :] + names[: r % len(names)]:
            cmd, inputs, extra = commands[name]
            cache = tempfile.mkdtemp(prefix="census-bench-cache-")
            env = {**os.environ, "CENSUS_CACHE_DIR": cache, **extra}
            warm(*inputs)
            runs.setdefault(name, []).append(measure(cmd, env))
            runs.setdefault(f"{name}_cached", []).append(measure(cmd, env))
            shutil.rmtree(cache)
    row_pairs = idle_pairs(commands, args.pairs)
    # one more run of each, sampling memory
    if nsys_cmd:
        warm(e)
        runs["nsys"][0].update(measure(_prefixed(nsys_cmd, scratch), memory=True))
    if nsys_ai:
        peers.drop_caches(links)
        warm(e)
        runs["nsysai"][0].update(measure(peers.summary_cmd(nsys_ai, links["eager"]), memory=True))
        peers.drop_caches(links)
        warm(e, c)
        diff = measure(
            peers.diff_cmd(nsys_ai, links["eager"], links["compiled"]), limit=args.nsys_ai_limit
        )
        runs["nsysai_diff"] = [diff]
    for name, (cmd, inputs, extra) in commands.items():
        cache = tempfile.mkdtemp(prefix="census-bench-cache-")
        warm(*inputs)
        env = {**os.environ, "CENSUS_CACHE_DIR": cache, **extra}
        runs[name][0].update(measure(cmd, env, True))
        shutil.rmtree(cache)
    shutil.rmtree(scratch)
    row = {"size": size, "kernels": kernels_in(e), "mib": e.stat().st_size / MIB}
    for name, results in runs.items():
        for key in results[0]:
            row[f"{name}_{key}"] = statistics.median(r[key] for r in results if key in r)
    row.update(row_pairs)
    print(format_row(row), file=sys.stderr)
    return row


def idle_pairs(commands: dict, pairs: int) -> dict:
    """The idle split's cost from `pairs` cold runs of the default summary and of --no-idle one
    right after the other (AB, BA, AB, ...): the median of the pairs' ratios, and their range."""
    ratios = []
    for k in range(pairs):
        walls = {}
        for name in ("summary", "summary_no_idle")[:: 1 if k % 2 == 0 else -1]:
            cmd, inputs, extra = commands[name]
            cache = tempfile.mkdtemp(prefix="census-bench-cache-")
            warm(*inputs)
            walls[name] = measure(cmd, {**os.environ, "CENSUS_CACHE_DIR": cache, **extra})["wall"]
            shutil.rmtree(cache)
        ratios.append(walls["summary"] / walls["summary_no_idle"])
    if not ratios:
        return {}
    return {"idle_ratio": statistics.median(ratios), "idle_ratio_low": min(ratios),
            "idle_ratio_high": max(ratios), "idle_pairs": len(ratios)}  # fmt: skip


def compile_census() -> None:
    """census's modules as bytecode, as an installed package has them (compileall writes them
    whatever PYTHONDONTWRITEBYTECODE says; __pycache__ is ignored by git)."""
    subprocess.run([sys.executable, "-m", "compileall", "-q", str(HERE.parent / "census")],
                   stdout=subprocess.DEVNULL, check=True)  # fmt: skip


def _prefixed(cmd: list[str], scratch: Path) -> list[str]:
    prefix = tempfile.mkdtemp(dir=scratch)
    return [f"{prefix}/r" if a == "PREFIX" else a for a in cmd]


def main() -> None:
    p = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("--sizes", nargs="+", default=["1e5", "1e6", "1e7"])
    p.add_argument("--repeat", type=int, default=3)
    p.add_argument("--pairs", type=int, default=6, help="summary / --no-idle pairs")
    p.add_argument("--out", type=Path, default=HERE / "out")
    p.add_argument("--nsys", default=None)
    p.add_argument("--nsys-ai", default=None, help="nsys-ai (default: bench/.nsys-ai, PATH)")
    p.add_argument("--nsys-ai-limit", type=float, default=600,
                   help="seconds after which nsys-ai's diff is stopped")  # fmt: skip
    p.add_argument(
        "--nsys-new-names", action="store_true", help="cuda_gpu_kern_sum,... (nsys >= 2023)"
    )
    args = p.parse_args()
    nsys = find_nsys(args.nsys)
    nsys_ai = peers.find_nsys_ai(args.nsys_ai)
    compile_census()
    reports = (
        "cuda_gpu_kern_sum,cuda_api_sum,cuda_gpu_mem_size_sum"
        if args.nsys_new_names
        else "gpukernsum,cudaapisum,gpumemsizesum"
    )
    rows = [bench_size(size, args, nsys, reports, nsys_ai) for size in args.sizes]
    table = format_table(rows, nsys, args.repeat) + "\n\n" + peers.table(rows, nsys_ai)
    print(table)
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "results.md").write_text(table + "\n", encoding="utf-8")


def format_row(r: dict) -> str:
    return ", ".join(f"{k}={v:.3g}" if isinstance(v, float) else f"{k}={v}" for k, v in r.items())


def format_table(rows: list[dict], nsys: str | None, repeat: int) -> str:
    def s(x: float) -> str:
        return f"{x:.2f} s"

    def m(x: float) -> str:
        return f"{x / MIB:,.0f} MiB"

    head = (
        "| kernels | file | SQL floor | floor, start/end only | nsys stats (3 reports) | nsys PSS "
        "| census summary | summary / nsys | summary / floor | summary CPU / floor | summary PSS "
        "| summary read with SQL | SQL / pages "
        "| summary --no-idle | idle split cost (summary / --no-idle) "
        "| idle split cost, paired (lowest-highest) | --no-idle PSS "
        "| cached summary | census diff (2 files) | diff / summary | diff PSS | cached diff |\n"
        "|" + " ---: |" * 22
    )
    lines = [head]
    for r in rows:
        has = "nsys_wall" in r
        cells = [
            f"{r['kernels']:,}",
            f"{r['mib']:,.0f} MiB",
            s(r["floor_wall"]),
            s(r["floor_narrow_wall"]),
            s(r["nsys_wall"]) if has else "n/a",
            m(r["nsys_pss"]) if has else "n/a",
            s(r["summary_wall"]),
            f"{r['summary_wall'] / r['nsys_wall']:.2f}x" if has else "n/a",
            f"{r['summary_wall'] / r['floor_wall']:.2f}x",
            f"{r['summary_cpu'] / r['floor_wall']:.2f}x",
            m(r["summary_pss"]),
            s(r["summary_sql_wall"]),
            f"{r['summary_sql_wall'] / r['summary_wall']:.2f}x",
            s(r["summary_no_idle_wall"]),
            f"{r['summary_wall'] / r['summary_no_idle_wall']:.2f}x",
            _paired(r),
            m(r["summary_no_idle_pss"]),
            s(r["summary_cached_wall"]),
            s(r["diff_wall"]),
            f"{r['diff_wall'] / r['summary_wall']:.2f}x",
            m(r["diff_pss"]),
            s(r["diff_cached_wall"]),
        ]
        lines.append("| " + " | ".join(cells) + " |")
    lines.append("")
    lines.append(
        f"nsys: {nsys or 'not found'}; machine: {os.cpu_count()} cores; times: medians of "
        f"{repeat} alternating runs, inputs read into the page cache before each; paired: the "
        "median of the ratios of back-to-back pairs (AB, BA, ...); PSS: one more run of each, "
        "sampled every 20 ms"
    )
    return "\n".join(lines)


def _paired(r: dict) -> str:
    if "idle_ratio" not in r:
        return "n/a"
    return (f"{r['idle_ratio']:.3f}x ({r['idle_ratio_low']:.3f}-{r['idle_ratio_high']:.3f}, "
            f"{r['idle_pairs']} pairs)")  # fmt: skip


if __name__ == "__main__":
    main()

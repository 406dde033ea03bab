"""Benchmark: `census summary DIR` of a rank folder in the process pool against a Dask cluster.

It builds a folder of --ranks rank-sized exports (bench/generate.py replicating the bundled eager
capture to --kernels kernels, then copied: each rank its own file, as nsys writes them) with the
run.json `census capture` writes under torchrun, starts a `distributed.LocalCluster` of --workers
worker processes (one thread each) on this machine, and times, alternating, --repeat times:
  pool       `census summary DIR --json`: the ranks in census's process pool
  dask       the same with `--scheduler ADDRESS`: one task per rank on the cluster
each cold (the census caches of this process and of the workers emptied first), then once more
cached (what a second `census summary DIR` costs, reading the caches the first one wrote); on a
cluster whose workers have Dask's own environment, then on one whose workers keep glibc's malloc
defaults (ENVIRONS).
The merged JSON of both must be identical. Wall time comes from the parent (bench/run.py's
measure); the cluster's start is not timed (it outlives runs).

    python bench/ranks.py [--ranks 16] [--kernels 100000] [--workers N] [--repeat 3]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))
sys.path.insert(0, str(HERE))

from generate import default_source, generate  # noqa: E402
from run import measure, warm  # noqa: E402


def build_ranks(out: Path, ranks: int, kernels: int) -> Path:
    """out/ranks-R-K/ with rank0.sqlite ... and its run.json (reused when already built)."""
    folder = out / f"ranks-{ranks}-{kernels:.0e}".replace("+", "")
    exports = [folder / f"rank{i}.sqlite" for i in range(ranks)]
    if all(p.exists() for p in exports):
        return folder
    folder.mkdir(parents=True, exist_ok=True)
    t0 = time.monotonic()
    generate(default_source(), exports[0], kernels)
    for target in exports[1:]:
        shutil.copyfile(exports[0], target)
    ranks_map = {str(i): p.name for i, p in enumerate(exports)}
    record = {"calibration": None, "ranks": ranks_map, "world_size": ranks}
    (folder / "run.json").write_text(json.dumps(record), encoding="utf-8")
    size = sum(p.stat().st_size for p in exports) / 2**20
    print(f"{folder}: {ranks} exports, {size:,.0f} MiB in {time.monotonic() - t0:.1f}s",
          file=sys.stderr)  # fmt: skip
    return folder


def summary_command(folder: Path, scheduler: str | None) -> list[str]:
    more = ["--scheduler", scheduler] if scheduler else []
    return [sys.executable, "-m", "census", "summary", str(folder), "--json", *more]


def output_of(cmd: list[str], env: dict[str, str]) -> str:
    return subprocess.run(cmd, env=env, capture_output=True, text=True, check=True).stdout


def bench(folder: Path, scheduler: str, caches: dict[str, Path], repeat: int) -> dict:
    """Median wall seconds of each side, cold and cached; the sides' JSON compared once."""
    exports = sorted(folder.glob("*.sqlite"))
    env = {**CLEAN_ENVIRON, "CENSUS_CACHE_DIR": str(caches["pool"])}
    commands = {"pool": summary_command(folder, None), "dask": summary_command(folder, scheduler)}
    times: dict[str, list[float]] = {f"{s}_{k}": [] for s in commands for k in ("cold", "cached")}
    for _ in range(repeat):
        for side, cmd in commands.items():
            for cache in caches.values():
                shutil.rmtree(cache, ignore_errors=True)
            for kind in ("cold", "cached"):
                warm(*exports)
                times[f"{side}_{kind}"].append(measure(cmd, env)["wall"])
    for cache in caches.values():
        shutil.rmtree(cache, ignore_errors=True)
    if output_of(commands["pool"], env) != output_of(commands["dask"], env):
        raise SystemExit("the pool's and Dask's `census summary --json` differ")
    return {k: statistics.median(v) for k, v in times.items()}


# Dask starts its worker processes with MALLOC_TRIM_THRESHOLD_=65536 (its config's
# distributed.nanny.pre-spawn-environ), which fixes glibc's mmap threshold at 128 KiB: every
# array census frees is unmapped, and the next one faults its pages in afresh.
# A Nanny sets those variables in its own process too (before it spawns a worker): the commands
# measured, and the next cluster's workers, start from the environment as it was.
CLEAN_ENVIRON = dict(os.environ)
ENVIRONS = {
    "Dask's worker environment": None,
    "glibc's malloc defaults": {"MALLOC_TRIM_THRESHOLD_": None},
}


def on_cluster(folder: Path, caches: dict[str, Path], args, environ: dict | None) -> dict:
    import dask
    from distributed import LocalCluster

    changes = {f"distributed.nanny.pre-spawn-environ.{k}": v for k, v in (environ or {}).items()}
    with dask.config.set(changes), LocalCluster(
        n_workers=args.workers, threads_per_worker=1, processes=True, dashboard_address=None,
        env={"CENSUS_CACHE_DIR": str(caches["dask"])},
    ) as cluster:  # fmt: skip
        try:
            return bench(folder, cluster.scheduler_address, caches, args.repeat)
        finally:
            os.environ.clear()
            os.environ.update(CLEAN_ENVIRON)


def main() -> None:
    p = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("--ranks", type=int, default=16)
    p.add_argument("--kernels", type=int, default=100_000, help="kernels per rank")
    p.add_argument("--workers", type=int, default=os.cpu_count() or 1, help="Dask workers")
    p.add_argument("--repeat", type=int, default=3)
    p.add_argument("--out", type=Path, default=HERE / "out")
    args = p.parse_args()
    folder = build_ranks(args.out, args.ranks, args.kernels)
    caches = {"pool": args.out / "cache-pool", "dask": args.out / "cache-workers"}
    rows = {name: on_cluster(folder, caches, args, env) for name, env in ENVIRONS.items()}
    size = sum(q.stat().st_size for q in folder.glob("*.sqlite")) / 2**20
    print(f"{args.ranks} ranks x {args.kernels:,} kernels ({size:,.0f} MiB), {args.workers} Dask "
          f"workers x 1 thread, {os.cpu_count()} cores, median of {args.repeat}")  # fmt: skip
    print("| Dask workers with | | pool | Dask | Dask / pool |\n| --- | --- | ---: | ---: | ---: |")
    for name, r in rows.items():
        for kind in ("cold", "cached"):
            pool, dask = r[f"pool_{kind}"], r[f"dask_{kind}"]
            print(f"| {name} | {kind} | {pool:.2f} s | {dask:.2f} s | {dask / pool:.2f}x |")


if __name__ == "__main__":
    main()

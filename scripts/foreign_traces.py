"""Hold `census summary TRACE --json` to an independent reading of docs/definitions.md's Kineto
definitions (tests/helpers/kineto_census.py: json, gzip, Decimal; none of census's code) on real
torch.profiler traces from other projects, kept outside the repository (docs/kineto.md lists
them and their sources).

    PYTHONPATH=$PWD python scripts/foreign_traces.py /work/foreign-traces/*/* \
        --out rows.jsonl --sources /work/foreign-traces/SOURCES.tsv

For each trace: census's exit code (a trace census refuses must get one `Error:` line and the
documented exit code 1, never a traceback), then every key of `totals` and, step by step (matched
by name and start), every census key, against the independent reading. Prints one row per trace
and each mismatch; exits 1 when any trace disagrees.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from tests.helpers.kineto_census import KEYS, independent_census
from tests.helpers.kineto_oracle import oracle_events


def run_census(path: Path, cache: str) -> tuple[int, dict | None, str]:
    """census summary --json in a process of its own: exit code, document, stderr."""
    repo = str(Path(__file__).resolve().parent.parent)
    env = {**os.environ, "PYTHONPATH": repo, "CENSUS_CACHE_DIR": cache}
    done = subprocess.run([sys.executable, "-m", "census", "summary", str(path), "--json"],
                          capture_output=True, text=True, env=env, check=False)  # fmt: skip
    doc = json.loads(done.stdout) if done.returncode == 0 else None
    return done.returncode, doc, done.stderr


def compare(doc: dict, want: dict) -> list[str]:
    """Each key of totals and of every step where census and the reading differ."""
    bad = [f"totals.{k}: census {doc['totals'].get(k)} independent {want['totals'][k]}"
           for k in KEYS if doc["totals"].get(k) != want["totals"][k]]  # fmt: skip
    got = {(s["name"], s["start_ns"]): s for s in doc["steps"]}
    mine = {(s["name"], s["start_ns"]): s for s in want["steps"]}
    for key in sorted(set(got) | set(mine), key=lambda k: (k[1], k[0])):
        if key not in got or key not in mine:
            bad.append(f"step {key}: only in {'census' if key in got else 'the reading'}")
            continue
        bad += [f"step {key[0]}.{k}: census {got[key].get(k)} independent {mine[key][k]}"
                for k in (*KEYS, "end_ns") if got[key].get(k) != mine[key][k]]  # fmt: skip
    return bad


def describe(path: Path) -> dict:
    """What the trace says of itself: schema, events, rank, first GPU, CUDA runtime."""
    doc, _ = oracle_events(path)
    return {"events": len(doc.get("traceEvents", [])),
            "schema": doc.get("schemaVersion"),
            "rank": (doc.get("distributedInfo") or {}).get("rank"),
            "gpu": ((doc.get("deviceProperties") or [{}])[0]).get("name"),
            "cuda": doc.get("cuda_runtime_version")}  # fmt: skip


def check(path: Path, cache: str) -> dict:
    """One trace: census's result against the independent reading, or its refusal."""
    rc, doc, err = run_census(path, cache)
    row = {"trace": str(path), "rc": rc}
    if rc != 0:
        errors = [ln for ln in err.splitlines() if ln.startswith("Error:")]
        ok = rc == 1 and len(errors) == 1 and "Traceback" not in err
        return {**row, "result": "refused" if ok else "BAD REFUSAL", "error": err.strip()[-300:]}
    try:
        want = independent_census(path)
        row.update(describe(path))
    except (ValueError, KeyError, AssertionError, TypeError) as exc:
        return {**row, "result": f"reading failed: {type(exc).__name__}: {exc}"}
    bad = compare(doc, want)
    row.update(kernels=want["totals"]["kernel_count"], steps=len(want["steps"]),
               unattributed=want["unattributed"], no_call=want["no_call"],
               no_bytes=want["no_bytes"], mismatches=bad)  # fmt: skip
    row["result"] = "equal" if not bad else f"{len(bad)} mismatches"
    return row


def _no_bytes(count: int) -> str:
    """The result's note on copies and memsets without `args.bytes` (counted as 0)."""
    return f", {count} {'copy' if count == 1 else 'copies'} without bytes" if count else ""


def markdown(rows: list[dict], sources: Path) -> list[str]:
    """docs/kineto.md's table: each trace's source (SOURCES.tsv: file, repository, path, commit,
    date of the file's last change), what it holds and the result."""
    known = {}
    for line in sources.read_text().splitlines():
        name, repo, path, commit, date = line.split("\t")
        known[name] = (repo, path, commit, date)
    out = ["| repository | path (commit, date) | GPU | events | kernels | steps | result |",
           "| --- | --- | --- | ---: | ---: | ---: | --- |"]  # fmt: skip
    for r in rows:
        name = "/".join(Path(r["trace"]).parts[-2:])
        repo, path, commit, date = known.get(name, ("?", name, "?", "?"))
        cells = [
            repo,
            f"`{path}` ({commit}, {date})",
            r.get("gpu") or "",
            f"{r['events']:,}" if "events" in r else "",
            f"{r['kernels']:,}" if "kernels" in r else "",
            str(r.get("steps", "")),
            r["result"] + _no_bytes(r.get("no_bytes", 0)),
        ]
        out.append("| " + " | ".join(cells) + " |")
    return out


def main(argv: list[str] | None = None) -> int:
    """Check every trace given; print a row each and the mismatches; 1 when any differs."""
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("traces", nargs="+", type=Path)
    ap.add_argument("--out", type=Path, help="write the rows here as JSON lines")
    ap.add_argument("--sources", type=Path, help="SOURCES.tsv: print a markdown table from it")
    args = ap.parse_args(argv)
    failed, rows = 0, []
    with tempfile.TemporaryDirectory(prefix="foreign-traces-") as cache:
        for path in args.traces:
            row = check(path, cache)
            rows.append(row)
            failed += row["result"] not in ("equal", "refused")
            print(json.dumps({k: v for k, v in row.items() if k != "mismatches"}), flush=True)
            for line in row.get("mismatches", [])[:20]:
                print("   ", line)
            if args.out:
                with args.out.open("a") as fh:
                    fh.write(json.dumps(row) + "\n")
    if args.sources:
        print("\n".join(markdown(rows, args.sources)))
    print(f"{len(args.traces) - failed} of {len(args.traces)} traces agree or are refused cleanly")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())

"""The bench's peers beside census: the SQL aggregation statements and nsys-ai.

aggregation  the three statements sqlite3 needs for the totals nsys's own reports give (#25's
             "SQL aggregation floor"): kernels grouped by name (count, time), the runtime API
             calls that launched a kernel (a semi-join on correlationId: a call counts once
             however many kernels it launched) grouped by API name (count, time), memcpys and
             memsets grouped by kind (count, bytes, time); one connection, in turn. Like the
             scan floor, a lower bound: it matches calls to kernels on correlationId alone,
             where census also matches the process (the bench's files have one)
nsys-ai      `nsys-ai summary FILE` (its kernel summary) and `nsys-ai diff A B --no-ai --format
             json` (its two-run diff), from bench/.nsys-ai (bash bench/install_nsys_ai.sh) or
             --nsys-ai PATH. nsys-ai keeps a Parquet cache beside each profile it opens
             (NAME.nsys-cache): it is given links to the inputs in a scratch folder, so its
             cache goes there; "cold" runs start with no cache, "warm" ones with the cache the
             run before built. A diff is run once (163 s at 10^6 on this machine) and stopped
             after --nsys-ai-limit seconds (its whole process group: run.measure), shown as
             "> LIMIT s".
"""

from __future__ import annotations

import shutil
import sqlite3
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent

KERNEL, RUNTIME = "CUPTI_ACTIVITY_KIND_KERNEL", "CUPTI_ACTIVITY_KIND_RUNTIME"
MEMCPY, MEMSET = "CUPTI_ACTIVITY_KIND_MEMCPY", "CUPTI_ACTIVITY_KIND_MEMSET"
AGGREGATION = (
    ((KERNEL,), f'SELECT shortName, COUNT(*), SUM("end" - start) FROM {KERNEL} GROUP BY shortName'),
    ((RUNTIME, KERNEL),
     f'SELECT nameId, COUNT(*), SUM("end" - start) FROM {RUNTIME} '
     f"WHERE correlationId IN (SELECT correlationId FROM {KERNEL}) GROUP BY nameId"),
    ((MEMCPY, MEMSET),
     f'SELECT copyKind, COUNT(*), SUM(bytes), SUM("end" - start) FROM {MEMCPY} GROUP BY copyKind '
     f'UNION ALL SELECT -1, COUNT(*), SUM(bytes), SUM("end" - start) FROM {MEMSET}'),
)  # fmt: skip


def aggregation_floor(path: Path) -> float:
    """Seconds for the three aggregation statements."""
    return timed_statements(path, AGGREGATION)


def timed_statements(path: Path, statements) -> float:
    """Seconds for the statements, (tables, sql) each, whose tables the file has: one
    read-only connection, one after another, every row fetched."""
    conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    t0 = time.perf_counter()
    have = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
    for tables, sql in statements:
        if have.issuperset(tables):
            conn.execute(sql).fetchall()
    conn.close()
    return time.perf_counter() - t0


def find_nsys_ai(explicit: str | None) -> str | None:
    if explicit:
        return explicit
    local = HERE / ".nsys-ai" / "bin" / "nsys-ai"
    return str(local) if local.exists() else shutil.which("nsys-ai")


def linked(scratch: Path, files: dict[str, Path]) -> dict[str, Path]:
    """Links to the inputs in `scratch`, where nsys-ai will keep its caches."""
    out = {}
    for label, target in files.items():
        link = scratch / f"{label}.sqlite"
        link.symlink_to(target.resolve())
        out[label] = link
    return out


def drop_caches(links: dict[str, Path]) -> None:
    """nsys-ai's caches of the linked inputs (NAME.nsys-cache and its build lock)."""
    for link in links.values():
        for cache in link.parent.glob(f"{link.stem}.nsys-cache*"):
            if cache.is_dir():
                shutil.rmtree(cache)
            else:
                cache.unlink()


def summary_cmd(nsys_ai: str, link: Path) -> list[str]:
    return [nsys_ai, "summary", str(link)]


def diff_cmd(nsys_ai: str, before: Path, after: Path) -> list[str]:
    return [nsys_ai, "diff", str(before), str(after), "--no-ai", "--format", "json"]


MIB = 2**20
_TIMES = ("floor_wall", "aggregation_wall", "nsys_wall", "nsysai_wall", "nsysai_warm_wall")


def table(rows: list[dict], nsys_ai: str | None) -> str:
    """census beside every peer on the same file: the SQL scan floor, the SQL aggregation
    statements, nsys stats and nsys-ai, as census's time over theirs."""
    head = (
        "| kernels | SQL floor (scan) | SQL aggregation (3 statements) | nsys stats "
        "| nsys-ai summary, cold | nsys-ai summary, warm | nsys-ai PSS | census summary "
        "| / floor | / aggregation | / nsys stats | / nsys-ai cold | / nsys-ai warm "
        "| cached summary / nsys-ai warm | census diff | nsys-ai diff | diff / nsys-ai diff |\n"
        "|" + " ---: |" * 17
    )
    lines = [head, *("| " + " | ".join(_cells(r)) + " |" for r in rows), ""]
    lines.append(
        f"nsys-ai: {nsys_ai or 'not found'} (`summary`, cold: no cache of its own; warm: the "
        "cache it built; `diff --no-ai --format json` once, cold); the SQL aggregation: "
        "bench/peers.py; the other columns as in the table above"
    )
    return "\n".join(lines)


def _cells(r: dict) -> list[str]:
    summary, diff = r["summary_wall"], r.get("nsysai_diff_wall")
    limit = r.get("nsysai_diff_over")
    return [
        f"{r['kernels']:,}",
        *(f"{r[k]:.2f} s" if k in r else "n/a" for k in _TIMES),
        f"{r['nsysai_pss'] / MIB:,.0f} MiB" if "nsysai_pss" in r else "n/a",
        f"{summary:.2f} s",
        *(f"{summary / r[k]:.2f}x" if k in r else "n/a" for k in _TIMES),
        (f"{r['summary_cached_wall'] / r['nsysai_warm_wall']:.3f}x"
         if "nsysai_warm_wall" in r else "n/a"),
        f"{r['diff_wall']:.2f} s",
        f"{diff:.2f} s" if diff is not None else f"> {limit:g} s" if limit is not None else "n/a",
        (f"{r['diff_wall'] / diff:.3f}x" if diff is not None
         else f"< {r['diff_wall'] / limit:.3f}x" if limit else "n/a"),
    ]  # fmt: skip

"""A capture of several ranks: each rank's `nsys profile` under census's per-rank wrapper
(census.cli.on_rank), under any launcher census knows (census.capture.launcher), and what the
ranks left in the capture folder read back: one export per rank (`rankN.sqlite`), each rank's
place in the job (its host, local rank, node, GPUs), and the ranks that left nothing named with
their hosts.

The capture folder is assembled where every node must see it (the output folder); a rank's node
that cannot write there says so in one line (CANNOT_WRITE), runs its program without nsys (so that
the other ranks are not left waiting in a collective) and fails: the capture names those ranks.
"""

from __future__ import annotations

import contextlib
import json
import re
import signal
import sqlite3
import subprocess
import sys
import urllib.parse
from pathlib import Path
from typing import Any

from census.capture.launcher import CANNOT_WRITE, PLACE, Launch, per_rank_command
from census.capture.records import rank_list, said_lines, where_and_why
from census.errors import CaptureError

WRAPPER = "census.cli.on_rank"
STOPPING = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)


def wrapper_command(work: Path, nsys: str, trace: str, summarize_into: Path | None,
                    program: tuple[str, ...]) -> list[str]:  # fmt: skip
    """One rank's command: census.cli.on_rank around its program (its module docstring)."""
    summarize = ["--summarize", str(summarize_into)] if summarize_into is not None else []
    return [sys.executable, "-m", WRAPPER, str(work), "--nsys", nsys, "--trace", trace,
            *summarize, "--", *program]  # fmt: skip


def distributed_profile_command(
    nsys: str, work: Path, launch: Launch, trace: str, summarize_into: Path | None = None
) -> list[str]:
    """The launcher's command with census.cli.on_rank as each rank's: it finds the rank, writes
    its place, runs its `nsys profile --output=WORK/rankN`; with `summarize_into` (where the
    capture folder will be: --summarize-on-ranks) it then computes that rank's census."""
    per_rank = wrapper_command(work, nsys, trace, summarize_into, launch.program)
    return per_rank_command(launch, per_rank)


def run_rank(command: list[str]) -> int:
    """The command's exit status (128 + N for signal N, as a shell says it); a stop signal that
    came meanwhile (128 + it) when the command itself ended well. The launcher signals the
    rank's whole process group, so the command gets the signal itself: this waits for it."""
    proc = subprocess.Popen(command)
    stopped: list[int] = []
    previous = {s: signal.signal(s, lambda signum, _: stopped.append(signum)) for s in STOPPING}
    try:
        status = proc.wait()
    finally:
        for s, handler in previous.items():
            signal.signal(s, handler)
    status = 128 - status if status < 0 else status
    return 128 + stopped[0] if stopped and status == 0 else status


def read_places(work: Path) -> dict[int, dict[str, Any]]:
    """Each rank's place, as its wrapper wrote it into `work` (PLACE), the files removed once
    read (a capture folder holds only what census writes into it)."""
    places = {}
    pattern = re.compile(re.escape(PLACE).replace(r"\{rank\}", r"(\d+)"))
    for path in sorted(work.glob(".rank*.json")):
        m = pattern.fullmatch(path.name)
        if m:
            with contextlib.suppress(OSError, ValueError):
                place = json.loads(path.read_text(encoding="utf-8"))
                if isinstance(place, dict):
                    places[int(m.group(1))] = place
        with contextlib.suppress(OSError):
            path.unlink()
    for part in work.glob(".rank*.part"):
        with contextlib.suppress(OSError):
            part.unlink()
    return places


def check_ranks(stems: list[str], places: dict[int, dict], launch: Launch, tail: str,
                command: list[str], suffix: str = ".sqlite") -> int:  # fmt: skip
    """The world size; a CaptureError naming the ranks of 0 .. world − 1 that left no export (an
    nsys export, or with `suffix` a torch.profiler trace), with their hosts and the cause where
    their lines in the output say them."""
    ranks = {int(s.removeprefix("rank")) for s in stems}
    said = said_lines(CANNOT_WRITE, tail)
    worlds = [p.get("world_size") for p in places.values() if isinstance(p.get("world_size"), int)]
    world = max([launch.world_size or 0, max(ranks, default=-1) + 1, *worlds,
                 *(w for _, w, _, _ in said)])  # fmt: skip
    missing = [r for r in range(world) if r not in ranks]
    if not missing:
        return world
    named = unwritten(tail, command, missing, world, suffix)
    if named is not None:
        raise named
    hosts_seen = sorted({str(p["host"]) for p in places.values() if p.get("host")})
    seen = f" (the ranks that did ran on {', '.join(hosts_seen)})" if hosts_seen else ""
    where = "census.steps" + (" / cudaProfilerStart" if suffix == ".sqlite" else "")
    raise CaptureError(f"{_missing_head(missing, world, suffix)}{seen}: did every rank reach the "
                       f"capture range ({where})?", command)  # fmt: skip


def _missing_head(missing: list[int], world: int, suffix: str = ".sqlite") -> str:
    what = "nsys export" if suffix == ".sqlite" else "torch.profiler trace"
    return f"{rank_list(missing)} of {world} left no {what} in the capture folder"


def unwritten(tail: str, command: list[str], missing: list[int] | None = None,
              world: int | None = None, suffix: str = ".sqlite") -> CaptureError | None:  # fmt: skip
    """The error naming the ranks whose node could not write into the capture folder (their
    CANNOT_WRITE lines in `tail`), with their hosts and the cause; None without such lines."""
    said = said_lines(CANNOT_WRITE, tail)
    if not said:
        return None
    world = world or max(w for _, w, _, _ in said)
    missing = missing if missing is not None else sorted({r for r, *_ in said})
    where, why = where_and_why(said, missing)
    return CaptureError(f"{_missing_head(missing, world, suffix)}: {where} the rank could not write into "
                        f"it ({why}): every node must see the capture folder: give -o a folder "
                        "on a filesystem that every node shares (docs/cluster.md)", command)  # fmt: skip


def rank_info(work: Path, stems: list[str], places: dict[int, dict], world: int,
              suffix: str = ".sqlite") -> dict:  # fmt: skip
    """What run.json records of the ranks: the world size, each rank's export (`suffix`: an nsys
    export, or a torch.profiler trace), the hosts and their ranks, and each rank's place with
    the GPUs its export saw (null for a trace: not read here)."""
    ranks = {int(s.removeprefix("rank")): f"{s}{suffix}" for s in stems}
    export = suffix == ".sqlite"
    hosts: dict[str, list[int]] = {}
    out = {}
    for rank in sorted(ranks):
        place = {k: v for k, v in places.get(rank, {}).items() if k not in ("rank", "world_size")}
        place["gpus"] = export_gpus(work / ranks[rank]) if export else None
        host = place.get("host") or (export_host(work / ranks[rank]) if export else None)
        place["host"] = host
        hosts.setdefault(str(host), []).append(rank)
        out[str(rank)] = place
    return {"world_size": world, "ranks": {str(r): name for r, name in sorted(ranks.items())},
            "hosts": hosts, "rank_places": out}  # fmt: skip


def _query(path: Path, sql: str) -> list[tuple]:
    """Rows of `sql` on an export nsys has just written into the work folder, read-only and
    without locks; [] where it cannot be read (said when it is read as an export)."""
    uri = f"file:{urllib.parse.quote(str(path.absolute()))}?mode=ro&immutable=1"
    try:
        conn = sqlite3.connect(uri, uri=True)
    except sqlite3.Error:
        return []
    try:
        return conn.execute(sql).fetchall()
    except sqlite3.Error:
        return []
    finally:
        conn.close()


def export_gpus(path: Path) -> list[dict[str, Any]]:
    """The GPUs nsys saw for the rank (TARGET_INFO_GPU: id, name, uuid); [] where not said."""
    rows = _query(path, "SELECT id, name, uuid FROM TARGET_INFO_GPU ORDER BY id")
    return [{"id": i, "name": name, "uuid": uuid} for i, name, uuid in rows]


def export_host(path: Path) -> str | None:
    """The host name nsys recorded for the export (TARGET_INFO_SYSTEM_ENV's Hostname)."""
    rows = _query(path, "SELECT value FROM TARGET_INFO_SYSTEM_ENV WHERE name = 'Hostname' LIMIT 1")
    return str(rows[0][0]) if rows else None

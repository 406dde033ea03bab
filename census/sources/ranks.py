"""Multi-rank captures: one export per rank (`rank0.sqlite`, ...) in one folder.

A folder of several exports is read as the ranks of one run only when it says so: a census capture
folder whose run.json maps ranks to files, or the user's `--ranks`. Anything else (a folder of
unrelated exports) is refused, naming the files and how they differ, instead of being summed.
The ranks are parsed in parallel (census.load.scheduler: a process pool, or a Dask cluster);
census.load.finish.merge_census folds them into one Census and rank_spread shows the min / median / max over ranks.

Each rank's export has its links resolved once, here: a file is read wherever its links lead; a
loop of links, a dangling link, a link to the folder or one above it (a loop), to a folder out
of its tree, and a folder named as an export are refused in one line naming it. So a rank is
always a file, and reading one never reads a rank folder again (`ln -s . DIR/rank1.sqlite`
once started a pool at every level, for ever).
"""

from __future__ import annotations

import os
import re
import sqlite3
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import TypeVar

from census.errors import InputError
from census.sources import schema as sc
from census.sources.kineto.ranks import folder_traces, trace_place, trace_rank_files
from census.sources.readonly import SQLITE_MAGIC

T = TypeVar("T")
_RANK = re.compile(r"rank[_-]?(\d+)", re.IGNORECASE)


def is_multi_rank(path: Path) -> bool:
    """Whether `path` is a folder of more than one .sqlite export or PyTorch profiler trace
    (both kinds together: rank_files refuses it)."""
    if not path.is_dir():
        return False
    sqlites = len(list(path.glob("*.sqlite")))
    return sqlites > 1 or sqlites + len(folder_traces(path)) > 1


def rank_files(folder: Path, declared: bool = False) -> list[tuple[str, Path]]:
    """(label, export or trace) for each rank of a multi-rank folder, ordered by rank number:
    the files its run.json names, the ranks its traces' distributedInfo name
    (census.sources.kineto.ranks), or (when `declared`, the user's --ranks) every .sqlite in
    it. Without a run.json naming its ranks, a folder holding both exports and traces is
    refused in one line (exit 1)."""
    recorded = _recorded_ranks(folder)
    if recorded is not None:
        return recorded
    traces = folder_traces(folder)
    sqlites = sorted(folder.glob("*.sqlite"))
    if traces and sqlites:
        raise InputError(
            f"{folder}: holds both nsys exports ({_names(sqlites)}) and PyTorch profiler traces "
            f"({_names(traces)}): a rank folder holds one kind, one file per rank; give a "
            "folder of one kind, or name one file"
        )
    named = trace_rank_files(folder, traces, declared) if traces else None
    if named is not None:
        return named
    # exports, or (--ranks) traces that name no rank: by the rank number in their names
    found = traces or [checked_export(folder, p) for p in sqlites]
    if not declared:
        names = _names(found)
        differ = _differences(found)
        raise InputError(
            f"{folder}: {len(found)} exports ({names}) in a folder that is not a census capture "
            f"(no run.json naming its ranks){differ}: pass --ranks to read them as the ranks "
            "of one run, or give one export"
        )

    def order(p: Path) -> tuple[int, str]:
        m = _RANK.search(p.stem)
        return (int(m.group(1)) if m else 1 << 30, p.name)

    return [(p.name.removesuffix(".gz").removesuffix(".json").removesuffix(".sqlite"), p)
            for p in sorted(found, key=order)]  # fmt: skip


def _names(paths: list[Path]) -> str:
    return ", ".join(p.name for p in paths[:6]) + (", …" if len(paths) > 6 else "")


def _recorded_ranks(folder: Path) -> list[tuple[str, Path]] | None:
    """The rank -> file map of a census capture's run.json; None when it has none."""
    from census.capture.records import read_run_info

    info = read_run_info(folder)
    ranks = (info or {}).get("ranks")
    if ranks is None:
        return None
    record = folder / "run.json"
    if not isinstance(ranks, dict) or not ranks or not all(
        isinstance(k, str) and k.isdigit() and isinstance(v, str) for k, v in ranks.items()
    ):  # fmt: skip
        raise InputError(f"{record}: `ranks` is not a map of rank numbers to export files")
    out = []
    for rank, name in sorted(ranks.items(), key=lambda kv: int(kv[0])):
        path = folder / name
        if path.parent != folder or not os.path.lexists(path):
            raise InputError(f"{record}: rank {rank}'s export {name} is not in the folder")
        out.append((f"rank{rank}", checked_export(folder, path)))
    return out


def checked_export(folder: Path, path: Path) -> Path:
    """`path`, an export of rank folder `folder`, once its links are resolved (once): a file,
    wherever they lead; an InputError (exit 1) naming it where they loop, lead nowhere, or lead
    to a folder: the rank folder or one above it (a loop), one out of its tree, or one in it."""
    try:
        real = Path(os.path.realpath(path, strict=True))
        home = Path(os.path.realpath(folder, strict=True))
    except OSError as exc:  # a loop of links (ELOOP), a dangling link
        raise InputError(f"{path}: {exc.strerror or exc}: not an export census can read") from None
    if not real.is_dir():
        return path  # a file, wherever a link puts it (a folder of links to each node's export)
    if real == home or real in home.parents:
        where = "the rank folder itself" if real == home else "a folder above the rank folder"
        raise InputError(f"{path}: a symbolic link to {real}, {where}: a loop; a rank folder "
                         "holds one export per rank (.sqlite files)")  # fmt: skip
    if home not in real.parents:
        raise InputError(f"{path}: a symbolic link to a folder out of the rank folder's tree "
                         f"({real}); a rank folder holds one export per rank (.sqlite files)")  # fmt: skip
    raise InputError(f"{path}: a folder, not an export; a rank folder holds one export per "
                     "rank (.sqlite files)")  # fmt: skip


def _differences(files: list[Path]) -> str:
    """How a folder's exports differ (nsys versions, GPU models, hosts), as a clause; '' when
    alike or when one cannot be read (reading it will then say why)."""
    from census.sources.readonly import open_readonly

    versions, gpus, hosts = set(), set(), set()
    for path in files:
        try:
            conn = open_readonly(path)
        except InputError:
            return ""
        try:
            schema = sc.read_schema(conn)
            versions.add(schema.nsys_version or "?")
            names = sorted({name or "unknown" for _, name in sc.read_gpus(conn, schema, set())})
            gpus.add(", ".join(names) or "unknown")
            hosts.add(_host(conn, schema) or "unknown")
        except sqlite3.Error:
            return ""
        finally:
            conn.close()
    parts = []
    if len(versions) > 1:
        parts.append("nsys " + " vs ".join(sorted(versions)))
    if len(gpus) > 1:
        parts.append("GPUs " + " vs ".join(sorted(gpus)))
    if len(hosts) > 1:
        parts.append("hosts " + " vs ".join(sorted(hosts)))
    return f"; they differ ({'; '.join(parts)})" if parts else ""


def _host(conn: sqlite3.Connection, schema: sc.Schema) -> str | None:
    """The host name nsys recorded for the capture."""
    if not (schema.has_column(sc.SYSTEM_ENV, "name") and schema.has_column(sc.SYSTEM_ENV, "value")):
        return None
    row = conn.execute(
        f"SELECT value FROM \"{sc.SYSTEM_ENV}\" WHERE name = 'Hostname' LIMIT 1"
    ).fetchone()
    return None if row is None else str(row[0])


def rank_places(folder: Path, exports: list[Path]) -> tuple[list[str | None], list[int | None]]:
    """(each export's host, each export's clock origin), each export opened once. The host: as
    the capture's run.json records its rank's place (census capture across nodes), else as nsys
    recorded it in the export (its Hostname); None where neither says it. The clock origin: the
    wall-clock time (ns since the epoch) of its trace clock's zero, utcEpochNs − systemClockNs
    of TARGET_INFO_SESSION_START_TIME, so that the times of exports from separate nsys sessions
    on one host can be set on one clock (each session keeps its own trace clock); None where the
    export records no systemClockNs (older nsys): its times cannot be aligned with another
    session's."""
    from census.capture.records import read_run_info

    info = read_run_info(folder) or {}
    places = info.get("rank_places") if isinstance(info.get("rank_places"), dict) else {}
    named = {str(name): rank for rank, name in (info.get("ranks") or {}).items()} if isinstance(
        info.get("ranks"), dict) else {}  # fmt: skip
    hosts: list[str | None] = []
    clocks: list[int | None] = []
    for path in exports:
        place = places.get(named.get(path.name, ""), {})
        recorded = place.get("host") if isinstance(place, dict) else None
        recorded = recorded if isinstance(recorded, str) else None
        if _is_sqlite(path):
            host, clock = _read_export(path, partial(_place, recorded)) or (recorded, None)
        else:  # a trace: what it and its name say (census.sources.kineto.ranks)
            host, clock = trace_place(path, recorded)
        hosts.append(host)
        clocks.append(clock)
    return hosts, clocks


def _is_sqlite(path: Path) -> bool:
    try:
        with path.open("rb") as fh:
            return fh.read(len(SQLITE_MAGIC)) == SQLITE_MAGIC
    except OSError:
        return True  # opening it as an export names the problem


def _place(recorded: str | None, conn: sqlite3.Connection, schema: sc.Schema):
    """(the host: `recorded`, else the export's Hostname; the export's clock origin)."""
    return (recorded if recorded is not None else _host(conn, schema)), _clock_origin(conn, schema)


def _clock_origin(conn: sqlite3.Connection, schema: sc.Schema) -> int | None:
    """utcEpochNs − systemClockNs of the export's session start; None where not recorded."""
    if not schema.has_column(sc.SESSION_START, "systemClockNs"):
        return None
    row = conn.execute(
        f'SELECT utcEpochNs, systemClockNs FROM "{sc.SESSION_START}" LIMIT 1'
    ).fetchone()
    if row is None or not all(isinstance(v, int) for v in row):
        return None
    return row[0] - row[1]


def _read_export(path: Path, read: Callable[[sqlite3.Connection, sc.Schema], T]) -> T | None:
    """`read` of the export at `path` (its connection and schema); None where it cannot be
    opened or read."""
    from census.sources.readonly import open_readonly

    try:
        conn = open_readonly(path)
    except InputError:
        return None
    try:
        return read(conn, sc.read_schema(conn))
    except sqlite3.Error:
        return None
    finally:
        conn.close()

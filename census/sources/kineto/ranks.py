"""A folder of per-rank PyTorch profiler traces read as a rank folder (census/sources/ranks.py):
one trace per rank, recognised by content, each trace's rank and world size from its
`distributedInfo.rank` / `world_size`, its host and clock origin for the NCCL split.

- The rank: read from the trace's top-level keys before its events (where Kineto writes
  `distributedInfo`); where a trace writes it after them, from its export's META_DATA_EXPORT
  (census/sources/kineto/export.py; the export is cached, and the rank's summary reads it).
- Two traces of one rank, or different world sizes: refused in one line. Ranks of the world
  with no trace are said in one line (missing_ranks_note); the ranks read are summed.
- The host: the trace's `host_name` key where Kineto wrote one; else the name that
  torch.profiler.tensorboard_trace_handler gives its file, `{worker}.{time}.pt.trace.json[.gz]`
  with the worker `{hostname}_{pid}` by default, read from the file's name or its `traceName`;
  else unknown (None). distributedInfo names no host, and process_name is the program's.
- The clock origin: the wall-clock ns the trace's `ts` count from (`baseTimeNanoseconds`; 0 for
  an older trace that counts from the epoch): Kineto takes its times from the system clock, so
  one host's traces share it once each is moved by its origin.
"""

from __future__ import annotations

import re
from functools import lru_cache
from pathlib import Path

from census.errors import InputError

NOT_TRACES = (".sqlite", ".nsys-rep", ".qdstrm")  # never opened to look for a trace
_TENSORBOARD = re.compile(r"^(?P<worker>.+)\.\d+\.pt\.trace\.json(?:\.gz)?$")
_WORKER = re.compile(r"^(?P<host>.+)_\d+$")


def folder_traces(folder: Path) -> list[Path]:
    """The Kineto traces in `folder` (by content, any name), by name."""
    from census.sources.kineto.reader import is_kineto

    try:
        entries = sorted(folder.iterdir(), key=lambda p: p.name)
    except OSError:
        return []
    return [p for p in entries if p.suffix not in NOT_TRACES and is_kineto(p)]


def trace_rank_files(folder: Path, traces: list[Path],
                     declared: bool) -> list[tuple[str, Path]] | None:  # fmt: skip
    """(label `rankN`, trace) for each rank, by rank: the ranks the traces' distributedInfo
    name. InputError (exit 1) where two traces say one rank or their world sizes differ, and,
    unless `declared` (--ranks: then None, and they are taken as exports are), where one names
    no rank."""
    said = {p: trace_rank(p) for p in traces}
    unnamed = [p.name for p, rank in said.items() if rank is None]
    if unnamed:
        if declared:
            return None
        raise InputError(
            f"{folder}: {len(traces)} PyTorch profiler traces, and {_names(unnamed)} name no "
            "rank (no distributedInfo.rank): pass --ranks to read them as the ranks of one run, "
            "or give one trace"
        )
    worlds = sorted({world for _, world in said.values() if world is not None})
    if len(worlds) > 1:
        raise InputError(f"{folder}: the traces say different world sizes "
                         f"({', '.join(map(str, worlds))}): not the ranks of one run")  # fmt: skip
    by_rank: dict[int, list[Path]] = {}
    for path, (rank, _) in said.items():  # type: ignore[misc]
        by_rank.setdefault(rank, []).append(path)
    for rank, paths in sorted(by_rank.items()):
        if len(paths) > 1:
            raise InputError(f"{folder}: rank {rank} has {len(paths)} traces "
                             f"({_names([p.name for p in paths])}): a rank folder holds one "
                             "trace per rank")  # fmt: skip
    return [(f"rank{rank}", paths[0]) for rank, paths in sorted(by_rank.items())]


def missing_ranks_note(files: list[tuple[str, Path]]) -> str | None:
    """The line naming the ranks of the traces' world that have no trace in the folder; None
    when every rank has one, or the traces name no rank, or the files are exports."""
    from census.capture.records import rank_list
    from census.sources.kineto.reader import is_kineto

    if not all(is_kineto(p) for _, p in files):  # a rank folder of exports
        return None
    said = [trace_rank(p) for _, p in files]
    if any(s is None for s in said):
        return None
    worlds = {world for _, world in said if world is not None}  # type: ignore[misc]
    world = max([*worlds, *(rank + 1 for rank, _ in said)])  # type: ignore[misc]
    missing = sorted(set(range(world)) - {rank for rank, _ in said})  # type: ignore[misc]
    if not missing:
        return None
    return (f"{rank_list(missing)} of {world} have no trace in the folder: the figures are "
            f"those of the {len(files)} ranks read")  # fmt: skip


def trace_rank(path: Path) -> tuple[int, int | None] | None:
    """(rank, world size or None) that the trace's distributedInfo says; None without a rank."""
    stat = path.stat()
    return _trace_rank(path, stat.st_size, stat.st_mtime_ns)


@lru_cache(maxsize=4096)
def _trace_rank(path: Path, size: int, mtime_ns: int) -> tuple[int, int | None] | None:
    info = _header(path).get("distributedInfo")
    if isinstance(info, dict):
        rank, world = _int(info.get("rank")), _int(info.get("world_size"))
    else:  # written after the events, if anywhere: the export holds what the whole trace says
        meta = export_meta(path)
        rank, world = _int(meta.get("KINETO_RANK")), _int(meta.get("KINETO_WORLD_SIZE"))
    return None if rank is None else (rank, world)


def trace_place(path: Path, recorded: str | None) -> tuple[str | None, int | None]:
    """(the trace's host: `recorded` (a census capture's run.json), else what the trace or its
    name says, else None; its clock origin, None where unknown)."""
    meta = export_meta(path)
    host = recorded or meta.get("KINETO_HOST_NAME") or host_of_name(path.name)
    if host is None and meta.get("KINETO_TRACENAME"):
        host = host_of_name(Path(meta["KINETO_TRACENAME"]).name)
    return host, _int(meta.get("KINETO_CLOCK_ORIGIN_NS"))


def host_of_name(name: str) -> str | None:
    """The host in a file name that tensorboard_trace_handler made
    (`{hostname}_{pid}.{time}.pt.trace.json[.gz]`); None for any other name."""
    m = _TENSORBOARD.match(name)
    worker = _WORKER.match(m["worker"]) if m else None
    return worker["host"] if worker else None


def export_meta(path: Path) -> dict[str, str]:
    """The META_DATA_EXPORT of the trace's export (made unless cached)."""
    from census.sources.kineto.export import export_kineto
    from census.sources.readonly import open_readonly

    conn = open_readonly(export_kineto(path))
    try:
        return {str(k): str(v) for k, v in conn.execute("SELECT name, value FROM META_DATA_EXPORT")}
    finally:
        conn.close()


def _header(path: Path) -> dict:
    """The trace's top-level keys before its events: from its first MiB where they end there
    (as the sniff reads it), else from the stream (its first batch read, no more)."""
    from census.sources.kineto.decoder import decoder
    from census.sources.kineto.reader import iter_batches, sniff

    head = sniff(path)
    at = head.find(b'"traceEvents"')
    keys = head[:at].rstrip().removesuffix(b",") + b"}" if at > 0 else b""
    dec = decoder()
    try:
        meta = dec.value(keys)
        if isinstance(meta, dict):
            return meta
    except dec.malformed:  # a key's text holds the word, or the header is longer
        pass
    batches = iter_batches(path)
    events = iter(batches)
    try:
        next(events, None)
    finally:
        events.close()  # type: ignore[attr-defined]
    return batches.meta


def _int(value: object) -> int | None:
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    return int(value) if isinstance(value, str) and value.lstrip("-").isdigit() else None


def _names(names: list[str]) -> str:
    return ", ".join(names[:6]) + (", …" if len(names) > 6 else "")

"""The step-times record a timed run writes (census.capture.steps, census.capture.timing), read
back and checked field by field before any number of it is used: one record for a single
process, one per rank (`PATH.rankN`) under a launcher of several ranks. A rank that wrote none
is named, with its host and the cause where the run's output says them (CANNOT_WRITE lines).
A capture's run.json is read back here too (read_run_info), with the capture overhead it gives.
"""

from __future__ import annotations

import glob
import json
import re
import sys
from pathlib import Path
from typing import Any

from census.capture.launcher import PRECEDENCE
from census.capture.steps import CANNOT_WRITE, ENV_STEP_TIMES, RANK_SUFFIX
from census.capture.timing import THROTTLE_REASONS
from census.errors import CaptureError
from census.metrics import GPU_SPAN_NS, STEP_TIME_NS
from census.units import clip

RECORD_BYTES = 64 << 20  # a million steps' record is about 30 MB
MAX_NS = 1 << 62  # 146 years: beyond it a number is not a time
CLOCKS = ("cuda_events", "host")
ENV_NUMBERS = ("cpu_share", "other_cpu_cores", "load1")


def read_records(path: Path, what: str, command: list[str], tail: str = "") -> list[dict] | None:
    """The run's step-times records in rank order, each checked (check_record): its one record
    at `path`, or with several ranks every rank's (`path.rankN`); None when it wrote none. A
    CaptureError naming the ranks (and their hosts, from the run's output `tail`) when some of
    ranks 0 to world size − 1 wrote none."""
    prefix = path.name + RANK_SUFFIX
    ranked = {int(p.name[len(prefix) :]): p for p in path.parent.glob(glob.escape(prefix) + "*")
              if p.name[len(prefix) :].isascii() and p.name[len(prefix) :].isdigit()}  # fmt: skip
    if not ranked:
        record = _read_one(path, what, command)
        return None if record is None else [record]
    records = {rank: _read_one(ranked[rank], f"{what}, rank {rank}", command)
               for rank in sorted(ranked)}  # fmt: skip
    unwritten = cannot_write(tail)
    world = max(max(records) + 1, *((r or {}).get("world_size") or 1 for r in records.values()),
                *(w for _, w, _, _ in unwritten))  # fmt: skip
    missing = [rank for rank in range(world) if records.get(rank) is None]
    if missing:
        raise CaptureError(f"{what}: {missing_ranks(missing, world, list(records.values()), unwritten)}",
                           command)  # fmt: skip
    for rank, record in records.items():
        said = (record.get("rank"), record.get("world_size"))  # type: ignore[union-attr]
        if said != (rank, world):
            raise _bad_record(f"{what}, rank {rank}", command, f"it says rank {said[0]} of "
                              f"{said[1]}, in the file of rank {rank} of {world}")  # fmt: skip
    return [records[rank] for rank in range(world)]  # type: ignore[misc]


def said_lines(line: str, tail: str) -> list[tuple[int, int, str, str]]:
    """(rank, world, host, reason) of every `line` (a format of rank, world and host, followed
    by `: REASON: ...`, as census.capture.steps.CANNOT_WRITE) in a run's output."""
    pattern = re.compile(re.escape(line).replace(r"\{rank\}", r"(\d+)")
                         .replace(r"\{world\}", r"(\d+)").replace(r"\{host\}", r"(\S+)")
                         + r": ([^:]*): ")  # fmt: skip
    return [(int(m[1]), int(m[2]), m[3], m[4]) for m in pattern.finditer(tail)]


def cannot_write(tail: str) -> list[tuple[int, int, str, str]]:
    """(rank, world, host, reason) of every rank whose CANNOT_WRITE line is in the run's output."""
    return said_lines(CANNOT_WRITE, tail)


def where_and_why(said: list[tuple[int, int, str, str]], missing: list[int]) -> tuple[str, str]:
    """Of the `missing` ranks that `said` why (said_lines): where they ran (`on HOST (ranks
    ...)`, by host) and the reasons, each once; ('', '') when none did."""
    hosts: dict[str, list[int]] = {}
    reasons: dict[str, None] = {}
    for rank, _, host, why in sorted(said):
        if rank in missing and rank not in hosts.get(host, ()):
            hosts.setdefault(host, []).append(rank)
            reasons[why] = None
    where = "; ".join(f"on {host} ({rank_list(rs)})" for host, rs in hosts.items())
    return where, "; ".join(reasons)


def missing_ranks(
    missing: list[int], world: int, records: list[dict | None],
    unwritten: list[tuple[int, int, str, str]],
) -> str:  # fmt: skip
    """Why ranks `missing` of `world` have no record: their hosts and cause where their lines
    say them, else the hosts of the ranks that wrote one."""
    head = f"{rank_list(missing)} of {world} wrote no step-times record"
    where, why = where_and_why(unwritten, missing)
    if where:
        told = {rank for rank, *_ in unwritten}
        unknown = [r for r in missing if r not in told]
        rest = f"; {rank_list(unknown)} said nothing" if unknown else ""
        return (f"{head}: {where} census.steps could not write it ({why}){rest}: every node "
                "must see the experiment folder: give -o a folder on a filesystem that every "
                "node shares (docs/cluster.md)")  # fmt: skip
    seen = sorted({str(r.get("host")) for r in records if r and r.get("host")})
    wrote = f" (the ranks that wrote one ran on {', '.join(seen)})" if seen else ""
    return (f"{head}{wrote}: every rank must run its loop in census.steps(), and every node "
            "must see the experiment folder (-o; docs/cluster.md)")  # fmt: skip


def rank_list(ranks: list[int]) -> str:
    """`rank 3`, `ranks 2, 3`; runs of 4 or more as `ranks 8-15`."""
    runs: list[list[int]] = []
    for r in ranks:
        if runs and r == runs[-1][-1] + 1:
            runs[-1].append(r)
        else:
            runs.append([r])
    parts = [f"{run[0]}-{run[-1]}" if len(run) > 3 else ", ".join(map(str, run)) for run in runs]
    return f"rank{'s' if len(ranks) > 1 else ''} {', '.join(parts)}"


def read_record(path: Path, what: str, command: list[str]) -> dict | None:
    """The run's step-times record, checked (read_records): under torchrun rank 0's, every
    rank's checked; None when it wrote none."""
    records = read_records(path, what, command)
    return records[0] if records else None


def _read_one(path: Path, what: str, command: list[str]) -> dict | None:
    """The step-times record at `path` (census.capture.timing), checked field by field: None
    when there is none; a CaptureError naming the arm and the first bad field when it is not a
    record census.steps writes."""
    try:
        size = path.stat().st_size
        if size > RECORD_BYTES:
            raise _bad_record(
                what, command, f"{size:,} bytes, more than a record's {RECORD_BYTES:,}"
            )
        record = json.loads(path.read_bytes())
    except FileNotFoundError:
        return None
    except (OSError, ValueError, RecursionError) as exc:
        raise _bad_record(what, command, f"not JSON ({clip(str(exc), 120)})") from None
    try:
        check_record(record)
    except ValueError as exc:
        raise _bad_record(what, command, str(exc)) from None
    return record


def _bad_record(what: str, command: list[str], why: str) -> CaptureError:
    return CaptureError(f"{what}: its step-times record (${ENV_STEP_TIMES}) is damaged: {why}",
                        command)  # fmt: skip


def check_record(record: Any) -> None:
    """ValueError naming the first field of `record` that census.steps would not have written."""
    if not isinstance(record, dict):
        raise ValueError(f"it is {shown(record)}, not a JSON object")
    steps = _field(record, STEP_TIME_NS, list)
    if not steps:
        return  # no steps: said as such by the caller
    for i, t in enumerate(steps):
        check_count(t, f"step_time_ns[{i}]", positive=True)
    if record.get("clock") not in CLOCKS:
        raise ValueError(f'clock is {shown(record.get("clock"))}, not "cuda_events" or "host"')
    host = _field(record, "host_step_time_ns", list, optional=True) or []
    for i, t in enumerate(host):
        check_count(t, f"host_step_time_ns[{i}]")
    if host and len(host) != len(steps):
        raise ValueError(f"host_step_time_ns has {len(host)} steps, step_time_ns {len(steps)}")
    for name, times in (_field(record, "phase_time_ns", dict, optional=True) or {}).items():
        if not isinstance(times, list) or len(times) != len(steps):
            raise ValueError(f"phase_time_ns[{shown(name)}] is not a list of {len(steps)} times")
        for i, t in enumerate(times):
            check_count(t, f"phase_time_ns[{shown(name)}][{i}]")
    for key in ("peak_allocated_bytes", "peak_reserved_bytes"):
        if record.get(key) is not None:
            check_count(record[key], key)
    dynamo = _field(record, "dynamo", dict, optional=True) or {}
    for key in ("frames_compiled", "graph_breaks"):
        if key in dynamo:
            check_count(dynamo[key], f"dynamo.{key}")
    _check_calls(record, len(steps))


def _check_calls(record: dict, steps: int) -> None:
    """census.record's values, census.count's sums, the env, the rank and the world size."""
    for name, row in (_field(record, "values", dict, optional=True) or {}).items():
        if not isinstance(row, list) or len(row) != steps:
            raise ValueError(f"values[{shown(name)}] is not a list of {steps} values")
        for i, v in enumerate(row):
            if v is not None and not _finite(v):
                raise ValueError(f"values[{shown(name)}][{i}] is {shown(v)}, not a finite "
                                 "number or null")  # fmt: skip
    for name, total in (_field(record, "counts", dict, optional=True) or {}).items():
        check_count(total, f"counts[{shown(name)}]")
    if record.get("env") is not None:
        check_env(record["env"], "env")
    world, rank = record.get("world_size"), record.get("rank")
    if world is not None:
        check_count(world, "world_size", positive=True)
    if rank is not None:
        check_count(rank, "rank")
        if world is not None and rank >= world:
            raise ValueError(f"rank is {rank}, not below world_size {world}")
    check_place(record, "")
    gpu = _field(record, "gpu", dict, optional=True)
    if gpu is not None:
        check_count(gpu.get("index"), "gpu.index")
        for key in ("uuid", "name", "visible_devices"):
            check_text(gpu.get(key), f"gpu.{key}")


HOST_CHARS = 255  # a host name's most (RFC 1035), and of the texts a record carries beside
NOTE_CHARS = 1000
LAUNCHERS = tuple(v.name for v in PRECEDENCE)


def check_place(record: dict, prefix: str) -> None:
    """ValueError naming the first of a rank's place fields (census.capture.steps.write_record:
    local_rank, node, pid, host, launcher, launcher_note) that is not as census writes it; a
    field that is absent or null is not said (a record from before census kept it)."""
    for key in ("local_rank", "node", "pid"):
        if record.get(key) is not None:
            check_count(record[key], f"{prefix}{key}")
    check_text(record.get("host"), f"{prefix}host", HOST_CHARS)
    check_text(record.get("launcher_note"), f"{prefix}launcher_note", NOTE_CHARS)
    launcher = record.get("launcher")
    if launcher is not None and launcher not in LAUNCHERS:
        raise ValueError(f"{prefix}launcher is {shown(launcher)}, not one of "
                         f"{', '.join(LAUNCHERS)} or null")  # fmt: skip


def check_text(value: Any, name: str, most: int = HOST_CHARS) -> None:
    """Null, or a text of at most `most` characters with no control character."""
    if value is None:
        return
    if not isinstance(value, str) or len(value) > most or not value.isprintable():
        raise ValueError(f"{name} is {shown(value)}, not a text of at most {most} printable "
                         "characters or null")  # fmt: skip


def check_env(env: Any, name: str) -> None:
    """ValueError naming the first field of the record's `env` (called `name`) that
    census.capture.timing would not have written."""
    if not isinstance(env, dict):
        raise ValueError(f"{name} is {shown(env)}, not a JSON object")
    for key in ENV_NUMBERS:
        if env.get(key) is not None:
            check_number(env[key], f"{name}.{key}")
    if env.get("gpu_sm_clock_mhz") is not None:
        check_count(env["gpu_sm_clock_mhz"], f"{name}.gpu_sm_clock_mhz")
    if env.get("pgid") is not None:
        check_count(env["pgid"], f"{name}.pgid")
    if env.get("group_cpu_cores") is not None:
        check_number(env["group_cpu_cores"], f"{name}.group_cpu_cores")
    reasons = env.get("gpu_throttle")
    known = THROTTLE_REASONS.values()
    if reasons is not None and (not isinstance(reasons, list) or
                                any(r not in known for r in reasons)):  # fmt: skip
        raise ValueError(f"{name}.gpu_throttle is {shown(reasons)}, not a list of NVML "
                         f"throttle reasons ({', '.join(known)})")  # fmt: skip


def _field(record: dict, key: str, kind: type, optional: bool = False) -> Any:
    value = record.get(key)
    if value is None and (optional or key not in record):
        return None
    if not isinstance(value, kind):
        what = "a JSON list" if kind is list else "a JSON object"
        raise ValueError(f"{key} is {shown(value)}, not {what}")
    return value


def check_count(value: Any, name: str, positive: bool = False) -> None:
    """An integer in [0, 2^62) (above 0 when `positive`): not a boolean, a real, NaN or a text."""
    low = 1 if positive else 0
    if type(value) is not int or not low <= value < MAX_NS:
        kind = "a positive integer" if positive else "an integer, 0 or more"
        raise ValueError(f"{name} is {shown(value)}, not {kind}")


def check_number(value: Any, name: str, positive: bool = False) -> None:
    """A finite number, 0 or more (above 0 when `positive`): not a boolean, NaN or a text."""
    if not _finite(value) or value < 0 or (positive and value == 0):
        kind = "a positive number" if positive else "a finite number, 0 or more"
        raise ValueError(f"{name} is {shown(value)}, not {kind}")


def _finite(value: Any) -> bool:
    """An int or a float that is a finite double (NaN fails every comparison)."""
    return type(value) in (int, float) and abs(value) <= sys.float_info.max


def shown(value: Any) -> str:
    """A value as the record spells it (NaN, Infinity, true), clipped."""
    return clip(json.dumps(value), 40)


def read_run_info(folder: Path) -> dict | None:
    """A capture folder's run.json; None when there is none; an InputError naming it when it
    is not a census capture record."""
    from census.errors import InputError

    path = folder / "run.json"
    try:
        info = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return None
    except (OSError, ValueError) as exc:
        raise InputError(f"{path}: unreadable capture record ({exc})") from None
    calibration = info.get("calibration") if isinstance(info, dict) else None
    if not isinstance(info, dict) or not isinstance(calibration, dict | None):
        raise InputError(f"{path}: not a census capture record (a JSON object with a calibration)")
    return info


def capture_overhead(
    folder: Path, per_step_timing: dict[str, float] | None, clock: str = "host"
) -> dict | None:
    """Captured step time against the calibration run's uncaptured step time: the step ranges
    against the host's clock, or (clock "gpu", a host that ran ahead of its GPU) the GPU spans
    against the CUDA-event clock; `tracer`: the profiler that made the capture (run.json); with
    `op_ranges` where the run recorded them (--ops)."""
    info = read_run_info(folder) if folder.is_dir() else None
    gpu = clock == "gpu"
    key = "uncaptured_gpu_mean_step_time_ns" if gpu else "uncaptured_mean_step_time_ns"
    uncaptured = ((info or {}).get("calibration") or {}).get(key)
    captured = (per_step_timing or {}).get(GPU_SPAN_NS if gpu else STEP_TIME_NS)
    if not isinstance(uncaptured, int | float) or not uncaptured or not captured:
        return None
    ops = (info or {}).get("op_ranges")
    return {
        "clock": clock,
        "tracer": (info or {}).get("profiler") or "nsys",
        "captured_mean_step_time_ns": captured,
        "uncaptured_mean_step_time_ns": uncaptured,
        "overhead_ratio": captured / uncaptured,
        **({"op_ranges": ops} if isinstance(ops, str) else {}),
    }

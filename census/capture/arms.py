"""The arms of an A/B experiment: fresh processes run without nsys, in a fixed order.

One warm arm (side A) runs first and is discarded (it fills the compile caches, the page cache
and the GPU's clocks); then the measured arms run in blocks of four, ABBA BAAB ABBA ... Each arm
is the user's command with $CENSUS_WARMUP, $CENSUS_ACTIVE and $CENSUS_STEP_TIMES set, so that
census.steps() times the measured steps (census.capture.timing) and writes them down.

An arm runs silently in its own process group (census.capture.process), which is stopped however
the arm ends: nothing it started outlives it, and only the tail of its output is kept, for the
error when it fails. Its record is checked field by field before any number of it is used.

Under torchrun every rank writes its own record (`PATH.rankN`, census.capture.steps); ranks 0 to
WORLD_SIZE − 1 must all have written one, of as many steps, on one clock. The arm is their merge:
- `step_time_ns`: per step, the slowest rank's time (no rank's next step starts before the
  slowest has joined the collectives: the step took that long for all);
- `phase_time_ns`: per step, the phase times of the rank slowest in that step (the first of
  equals): the phases that made the step's time, adding up as that rank's did;
- `values`: rank 0's; `counts`: per name, each rank's sum in rank order (0 where a rank counted
  none of it);
- `recompiles`, `graph_breaks`: the sum over ranks; None when any rank's is None (torch._dynamo
  not loaded there), 0 only when every rank's is 0;
- `peak_allocated_bytes`, `peak_reserved_bytes`: the highest rank's (None when none had CUDA);
- `env`: rank 0's CPU figures, with the lowest SM clock of any rank and the throttle reasons
  seen on any (one slow GPU slows every rank's step). The ranks are the arm's own processes, not
  other load: torchrun starts each rank in a process group of its own, so each rank's
  `other_cpu_cores` (rank 0's here, and every rank's in `ranks`) is taken less the CPU cores of
  every other rank's process group (its `group_cpu_cores`, once per group);
- `ranks`: each rank's own figures (census.model.RankRecord); () for a single process.
"""

from __future__ import annotations

import dataclasses
import glob
import json
import os
import sys
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from census.capture.process import run_group
from census.capture.steps import ENV_ACTIVE, ENV_STEP_TIMES, ENV_WARMUP, RANK_SUFFIX
from census.capture.timing import THROTTLE_REASONS
from census.errors import CaptureError
from census.model import Arm, ArmEnv, RankRecord, percentile
from census.paths import owner_tag
from census.units import clip

BLOCKS = (("a", "b", "b", "a"), ("b", "a", "a", "b"))


def arm_order(arms: int) -> list[str]:
    """The side of every arm in run order: the discarded warm arm (A) first, then `arms`
    measured arms in ABBA BAAB blocks."""
    if arms < 4 or arms % 4:
        raise ValueError(f"--arms {arms}: give a multiple of 4 (at least 4)")
    return ["a", *(s for i in range(arms // 4) for s in BLOCKS[i % 2])]


@dataclass(frozen=True)
class ArmsSpec:
    commands: dict[str, tuple[str, ...]]  # side ("a", "b") -> argv
    labels: tuple[str, str]
    arms: int = 8
    warmup: int | None = None
    active: int | None = None  # measured steps per arm
    env: tuple[tuple[str, str], ...] = ()


LOOK_EVERY = 8  # a rule is asked after each ABBA BAAB pair of blocks


class ArmRule(Protocol):
    """When to stop adding arms (`--arms auto`: census.compare.auto_arms.AutoRule): start()
    before the first arm, warm_done() after the discarded one, rule(arms so far): whether to
    go on, asked after each LOOK_EVERY measured arms (and once at the most, where it is moot);
    record(): what ab.json keeps of it as "sequential" (a dataclass)."""

    def start(self) -> None: ...
    def warm_done(self) -> None: ...
    def __call__(self, arms: list[Arm]) -> bool: ...
    def record(self) -> Any: ...


def run_arms(spec: ArmsSpec, progress: Callable[[str], None] | None = None,
             rule: ArmRule | None = None) -> list[Arm]:  # fmt: skip
    """Every arm in run order, the warm one first (discarded). With `rule` (`--arms auto`:
    spec.arms is then the most), after each LOOK_EVERY measured arms short of the most
    `rule(arms so far)` says whether to run the next ones."""
    order = arm_order(spec.arms)
    out: list[Arm] = []
    upto = f" (up to {spec.arms})" if rule else f"/{spec.arms}"
    if rule:
        rule.start()
    # census-PID-HOST-*, as a pass's spill folder: left by a census killed outright, it is
    # removed by the next pass that spills (census.load.pool)
    with tempfile.TemporaryDirectory(prefix=f"census-{owner_tag()}-") as tmp:
        for index, side in enumerate(order):
            if rule and index > 1 and (index - 1) % LOOK_EVERY == 0 and not rule(out):
                break
            label = spec.labels[0 if side == "a" else 1]
            what = "warm arm (discarded)" if index == 0 else f"arm {index}{upto}"
            if progress:
                progress(f"{what}: {label}")
            out.append(_run_arm(spec, side, label, index, Path(tmp) / f"arm{index}.json"))
            if rule and index == 0:
                rule.warm_done()  # the measured arms' durations are timed from here
        if rule and len(out) == len(order):
            rule(out)  # the last look, at the most arms
    return out


def _run_arm(spec: ArmsSpec, side: str, label: str, index: int, times: Path) -> Arm:
    command = list(spec.commands[side])
    env = {**os.environ, **dict(spec.env), ENV_STEP_TIMES: str(times)}
    if spec.warmup is not None:
        env[ENV_WARMUP] = str(spec.warmup)
    if spec.active is not None:
        env[ENV_ACTIVE] = str(spec.active)
    named = label if label == side.upper() else f"{side.upper()}, {label}"
    what = f"arm {index} ({named}{', the discarded warm arm' if index == 0 else ''})"
    run_group(command, env, what)  # silently: a failed arm's tail is printed as lines
    records = read_records(times, what, command) or []
    _check_ranks_agree(records, what, command)
    return arm_from_records(side, index, records)


def _check_ranks_agree(records: list[dict], what: str, command: list[str]) -> None:
    """A CaptureError unless the ranks' records hold steps, as many each, on one clock."""
    steps = [len(r.get("step_time_ns") or ()) for r in records]
    for rank, n in enumerate(steps):
        if n != steps[0]:
            raise CaptureError(f"{what}: rank {rank} recorded {n} measured steps, rank 0 "
                               f"{steps[0]}: every rank must run the same steps", command)  # fmt: skip
    if not steps or not steps[0]:
        raise CaptureError(
            f"{what} recorded no steps: wrap the training loop in census.steps() "
            f"(`for batch in census.steps(loader): ...`): {' '.join(command)}",
            command,
        )
    for rank, r in enumerate(records):
        if r["clock"] != records[0]["clock"]:
            raise CaptureError(f"{what}: rank {rank} timed its steps by {r['clock']}, rank 0 "
                               f"by {records[0]['clock']}: every rank must use one clock", command)  # fmt: skip


def arm_from_records(side: str, index: int, records: list[dict]) -> Arm:
    """The arm of its ranks' checked records, in rank order (one without torchrun), merged as
    the module says."""
    first = records[0]
    times = [r["step_time_ns"] for r in records]
    # per step, the slowest rank (the first of equals)
    slowest = [max(range(len(times)), key=[t[i] for t in times].__getitem__)
               for i in range(len(times[0]))]  # fmt: skip
    single, envs = len(records) == 1, rank_envs(records)
    return Arm(
        side=side,
        index=index,
        discarded=index == 0,
        step_time_ns=tuple(times[k][i] for i, k in enumerate(slowest)),
        peak_allocated_bytes=_highest(records, "peak_allocated_bytes"),
        peak_reserved_bytes=_highest(records, "peak_reserved_bytes"),
        recompiles=_dynamo_total(records, "frames_compiled"),
        graph_breaks=_dynamo_total(records, "graph_breaks"),
        clock=first["clock"],
        phase_time_ns=_slowest_phases(records, slowest),
        values={name: tuple(row) for name, row in (first.get("values") or {}).items()},
        counts=_per_rank_counts(records),
        env=_merged_env(envs),
        ranks=() if single else tuple(map(_rank_record, range(len(records)), records, envs)),
    )


def _slowest_phases(records: list[dict], slowest: list[int]) -> dict[str, tuple[int, ...]]:
    phases = [r.get("phase_time_ns") or {} for r in records]
    names = dict.fromkeys(name for p in phases for name in p)
    return {name: tuple(phases[k][name][i] if name in phases[k] else 0
                        for i, k in enumerate(slowest)) for name in names}  # fmt: skip


def _per_rank_counts(records: list[dict]) -> dict[str, tuple[int, ...]]:
    counts = [r.get("counts") or {} for r in records]
    names = dict.fromkeys(name for c in counts for name in c)
    return {name: tuple(c.get(name, 0) for c in counts) for name in names}


def _highest(records: list[dict], key: str) -> int | None:
    found = [r[key] for r in records if r.get(key) is not None]
    return max(found) if found else None


def _dynamo_total(records: list[dict], key: str) -> int | None:
    found = [(r.get("dynamo") or {}).get(key) for r in records]
    return None if any(v is None for v in found) else sum(found)


def rank_envs(records: list[dict]) -> list[ArmEnv | None]:
    """Each rank's ArmEnv, its other_cpu_cores less the group_cpu_cores of every process group
    of another rank that is not its own (each group once: ranks of one group read it alike; a
    rank whose record has no pgid, from before it was kept, is left as it was)."""
    groups: dict[int, float] = {}
    for r in records:
        env = r.get("env") or {}
        if env.get("pgid") is not None and env.get("group_cpu_cores") is not None:
            pgid = env["pgid"]
            groups[pgid] = max(groups.get(pgid, 0.0), float(env["group_cpu_cores"]))
    out = []
    for r in records:
        env, own = arm_env(r.get("env")), (r.get("env") or {}).get("pgid")
        if env is not None and env.other_cpu_cores is not None and own is not None:
            ranks = sum(c for g, c in groups.items() if g != own)
            env = dataclasses.replace(env, other_cpu_cores=max(0.0, env.other_cpu_cores - ranks))
        out.append(env)
    return out


def _merged_env(envs: list[ArmEnv | None]) -> ArmEnv | None:
    if envs[0] is None or len(envs) == 1:
        return envs[0]
    clocks = [e.gpu_sm_clock_mhz for e in envs if e and e.gpu_sm_clock_mhz is not None]
    seen = {reason for e in envs if e for reason in e.gpu_throttle}
    return dataclasses.replace(envs[0], gpu_sm_clock_mhz=min(clocks) if clocks else None,
                               gpu_throttle=tuple(r for r in THROTTLE_REASONS.values()
                                                  if r in seen))  # fmt: skip


def _rank_record(rank: int, record: dict, env: ArmEnv | None) -> RankRecord:
    dynamo = record.get("dynamo") or {}
    return RankRecord(rank, percentile(record["step_time_ns"], 50),
                      dynamo.get("frames_compiled"), dynamo.get("graph_breaks"),
                      record.get("peak_allocated_bytes"), record.get("peak_reserved_bytes"),
                      env)  # fmt: skip


def arm_env(env: dict | None) -> ArmEnv | None:
    """The ArmEnv of a checked record's `env` (check_env); None without one."""
    if env is None:
        return None
    cpu, other, load1 = (None if env.get(k) is None else float(env[k]) for k in ENV_NUMBERS)
    return ArmEnv(cpu, other, load1, env.get("gpu_sm_clock_mhz"),
                  tuple(env.get("gpu_throttle") or ()))  # fmt: skip


# -- the record an arm writes -------------------------------------------------------------------
RECORD_BYTES = 64 << 20  # a million steps' record is about 30 MB
MAX_NS = 1 << 62  # 146 years: beyond it a number is not a time
CLOCKS = ("cuda_events", "host")
ENV_NUMBERS = ("cpu_share", "other_cpu_cores", "load1")


def read_records(path: Path, what: str, command: list[str]) -> list[dict] | None:
    """The run's step-times records in rank order, each checked (check_record): its one record
    at `path`, or under torchrun every rank's (`path.rankN`); None when it wrote none. A
    CaptureError naming the rank when one of ranks 0 to WORLD_SIZE − 1 wrote none."""
    prefix = path.name + RANK_SUFFIX
    ranked = {int(p.name[len(prefix) :]): p for p in path.parent.glob(glob.escape(prefix) + "*")
              if p.name[len(prefix) :].isascii() and p.name[len(prefix) :].isdigit()}  # fmt: skip
    if not ranked:
        record = _read_one(path, what, command)
        return None if record is None else [record]
    records = {rank: _read_one(ranked[rank], f"{what}, rank {rank}", command)
               for rank in sorted(ranked)}  # fmt: skip
    world = max(max(records) + 1, *((r or {}).get("world_size") or 1 for r in records.values()))
    missing = next((rank for rank in range(world) if records.get(rank) is None), None)
    if missing is not None:
        raise CaptureError(f"{what}: rank {missing} of {world} wrote no step-times record "
                           "(every rank must run its loop in census.steps())", command)  # fmt: skip
    for rank, record in records.items():
        said = (record.get("rank"), record.get("world_size"))  # type: ignore[union-attr]
        if said != (rank, world):
            raise _bad_record(f"{what}, rank {rank}", command, f"it says rank {said[0]} of "
                              f"{said[1]}, in the file of rank {rank} of {world}")  # fmt: skip
    return [records[rank] for rank in range(world)]  # type: ignore[misc]


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
    steps = _field(record, "step_time_ns", list)
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

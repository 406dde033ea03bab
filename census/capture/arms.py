"""The arms of an A/B experiment: fresh processes run without nsys, in a fixed order.

One warm arm (side A) runs first and is discarded (it fills the compile caches, the page cache
and the GPU's clocks); then the measured arms run in blocks of four, ABBA BAAB ABBA ... Each arm
is the user's command with $CENSUS_WARMUP, $CENSUS_ACTIVE and $CENSUS_STEP_TIMES set, so that
census.steps() times the measured steps (census.capture.timing) and writes them down.

An arm runs silently in its own process group (census.capture.process), which is stopped however
the arm ends: nothing it started outlives it, and only the tail of its output is kept, for the
error when it fails. Its record is checked field by field before any number of it is used.

Under a launcher of several ranks (torchrun, srun, mpirun: census.capture.launcher) every rank
writes its own record (`PATH.rankN`, census.capture.steps) into the records folder, which every
node must see (census ab's experiment folder); ranks 0 to world size − 1 must all have written
one, of as many steps, on one clock. A rank that wrote none stops the experiment with one line
naming the ranks, their hosts where the arm's output says them (census.capture.steps.CANNOT_WRITE)
and the cause. Each rank's step times are durations on its own host's clock: no absolute time of
one rank is ever compared with another's. The arm is their merge:
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
- `ranks`: each rank's own figures and place in the job (census.model.ab.RankRecord: host, local
  rank, node, pid, GPU, launcher); () for a single process.
- `wall_ns`: the arm's process from start to end; `census_ns`: census's own time reading,
  checking and merging the arm's records.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from census.capture.launcher import forwarded
from census.capture.process import run_group
from census.capture.records import ENV_NUMBERS, cannot_write, missing_ranks, read_records
from census.capture.steps import ENV_ACTIVE, ENV_RUN, ENV_STEP_TIMES, ENV_WARMUP
from census.capture.timing import THROTTLE_REASONS
from census.errors import CaptureError
from census.metrics import STEP_TIME_NS
from census.model.ab import Arm, ArmEnv, RankRecord
from census.model.step import percentile
from census.paths import owner_tag

BLOCKS = (("a", "b", "b", "a"), ("b", "a", "a", "b"))


def arm_order(arms: int) -> list[str]:
    """The side of every arm in run order: the discarded warm arm (A) first, then `arms`
    measured arms in ABBA BAAB blocks."""
    if arms < 4 or arms % 4:
        raise ValueError(f"--arms {arms}: give a multiple of 4 (at least 4)")
    return ["a", *(s for i in range(arms // 4) for s in BLOCKS[i % 2])]


@dataclass(frozen=True)
class ArmsSpec:
    """What run_arms runs: each side's command and label, the measured arms, the warm-up and
    measured steps per arm ($CENSUS_WARMUP, $CENSUS_ACTIVE; None: unset), more environment for every
    arm, and the records folder."""

    commands: dict[str, tuple[str, ...]]  # side ("a", "b") -> argv
    labels: tuple[str, str]
    arms: int = 8
    warmup: int | None = None
    active: int | None = None  # measured steps per arm
    env: tuple[tuple[str, str], ...] = ()
    # where the ranks write their records: a folder every node sees (census ab: the experiment's
    # folder being made); None: a temporary folder of this machine (one node only)
    records: Path | None = None


LOOK_EVERY = 8  # a rule is asked after each ABBA BAAB pair of blocks


class ArmRule(Protocol):
    """When to stop adding arms (`--arms auto`: census.compare.ab.auto_arms.AutoRule): start()
    before the first arm, warm_done() after the discarded one, rule(arms so far): whether to
    go on, asked after each LOOK_EVERY measured arms (and once at the most, where it is moot);
    record(): what ab.json keeps of it as "sequential" (a dataclass)."""

    def start(self) -> None:
        """Before the first arm."""

    def warm_done(self) -> None:
        """After the discarded warm arm: the measured arms' time starts here."""

    def __call__(self, arms: list[Arm]) -> bool: ...

    def record(self) -> Any:
        """What ab.json keeps of the rule as "sequential" (a dataclass)."""


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
    with _records_folder(spec.records) as tmp:
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


@contextlib.contextmanager
def _records_folder(folder: Path | None):
    """`folder` (made, and its records removed once the arms are done), else a temporary one:
    census-PID-HOST-*, as a pass's spill folder, so that one left by a census killed outright
    is removed by the next pass that spills (census.load.pool)."""
    if folder is None:
        with tempfile.TemporaryDirectory(prefix=f"census-{owner_tag()}-") as tmp:
            yield tmp
        return
    folder = folder.absolute()  # a rank may run in another folder
    folder.mkdir(parents=True, exist_ok=True)
    try:
        yield folder
    finally:
        for record in folder.glob("arm*.json*"):
            with contextlib.suppress(OSError):
                record.unlink()
        with contextlib.suppress(OSError):
            folder.rmdir()


def arm_env_vars(spec: ArmsSpec, times: Path) -> dict[str, str]:
    """What census sets for an arm: where its records go, its steps, that census runs it, and
    Open MPI told to pass them to the ranks (census.capture.launcher.forwarded)."""
    env = {**dict(spec.env), ENV_STEP_TIMES: str(times), ENV_RUN: "arm"}
    if spec.warmup is not None:
        env[ENV_WARMUP] = str(spec.warmup)
    if spec.active is not None:
        env[ENV_ACTIVE] = str(spec.active)
    return forwarded(env)


def _run_arm(spec: ArmsSpec, side: str, label: str, index: int, times: Path) -> Arm:
    command = list(spec.commands[side])
    env = {**os.environ, **arm_env_vars(spec, times)}
    named = label if label == side.upper() else f"{side.upper()}, {label}"
    what = f"arm {index} ({named}{', the discarded warm arm' if index == 0 else ''})"
    started = time.monotonic_ns()
    tail = run_group(command, env, what)  # silently: a failed arm's tail is printed as lines
    ended = time.monotonic_ns()
    records = read_records(times, what, command, tail) or []
    _check_ranks_agree(records, what, command, tail)
    arm = arm_from_records(side, index, records)
    return dataclasses.replace(arm, wall_ns=ended - started,
                               census_ns=time.monotonic_ns() - ended)  # fmt: skip


def _check_ranks_agree(records: list[dict], what: str, command: list[str], tail: str) -> None:
    """A CaptureError unless the ranks' records hold steps, as many each, on one clock."""
    steps = [len(r.get(STEP_TIME_NS) or ()) for r in records]
    for rank, n in enumerate(steps):
        if n != steps[0]:
            raise CaptureError(f"{what}: rank {rank} recorded {n} measured steps, rank 0 "
                               f"{steps[0]}: every rank must run the same steps", command)  # fmt: skip
    if not steps or not steps[0]:
        unwritten = cannot_write(tail)
        if not records and unwritten:
            world = max(w for _, w, _, _ in unwritten)
            ranks = sorted({r for r, *_ in unwritten})
            raise CaptureError(f"{what}: {missing_ranks(ranks, world, [], unwritten)}", command)
        raise CaptureError(
            f"{what} recorded no steps: wrap the training loop in census.steps() "
            f"(`for batch in census.steps(loader): ...`){_launcher_hint(command)}: "
            f"{' '.join(command)}",
            command,
        )
    for rank, r in enumerate(records):
        if r["clock"] != records[0]["clock"]:
            raise CaptureError(f"{what}: rank {rank} timed its steps by {r['clock']}, rank 0 "
                               f"by {records[0]['clock']}: every rank must use one clock", command)  # fmt: skip


def _launcher_hint(command: list[str]) -> str:
    """Where the arm's launcher may have kept census's variables from the ranks."""
    from census.capture.launcher import MPI_LAUNCHERS, SLURM_LAUNCHERS

    name = Path(command[0]).name if command else ""
    if name in MPI_LAUNCHERS:
        return (f", and have {name} pass census's variables to the ranks (Open MPI: `-x "
                f"{ENV_STEP_TIMES} -x {ENV_WARMUP} -x {ENV_ACTIVE} -x {ENV_RUN}`)")  # fmt: skip
    if name in SLURM_LAUNCHERS:
        return ", and let srun pass the environment to the ranks (no `--export=NONE`)"
    return ""


def arm_from_records(side: str, index: int, records: list[dict]) -> Arm:
    """The arm of its ranks' checked records, in rank order (one without torchrun), merged as
    the module says."""
    first = records[0]
    times = [r[STEP_TIME_NS] for r in records]
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
    dynamo, gpu = record.get("dynamo") or {}, record.get("gpu") or {}
    return RankRecord(rank, percentile(record[STEP_TIME_NS], 50),
                      dynamo.get("frames_compiled"), dynamo.get("graph_breaks"),
                      record.get("peak_allocated_bytes"), record.get("peak_reserved_bytes"),
                      env, record.get("host"), record.get("local_rank"), record.get("node"),
                      record.get("pid"), gpu.get("index"), gpu.get("uuid"),
                      record.get("launcher"), record.get("launcher_note"))  # fmt: skip


def arm_env(env: dict | None) -> ArmEnv | None:
    """The ArmEnv of a checked record's `env` (check_env); None without one."""
    if env is None:
        return None
    cpu, other, load1 = (None if env.get(k) is None else float(env[k]) for k in ENV_NUMBERS)
    return ArmEnv(cpu, other, load1, env.get("gpu_sm_clock_mhz"),
                  tuple(env.get("gpu_throttle") or ()))  # fmt: skip

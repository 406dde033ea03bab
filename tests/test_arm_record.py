"""What an arm's record keeps beside its step times: census.record's values and census.count's
counters (inside the measured steps only), the environment read at the window's open and close,
one record per rank under torchrun merged into one arm, each field checked, and the arm's round
trip through ab.json (an ab.json from before these fields reads as arms without them)."""

from __future__ import annotations

import dataclasses
import json
import os
import sys
import time
from collections.abc import Callable
from pathlib import Path
from types import SimpleNamespace

import pytest

import census
from census.capture import steps as steps_module
from census.capture.ab import _arm_record
from census.capture.arms import ArmsSpec, run_arms
from census.capture.records import check_record
from census.capture.timing import (
    Reading,
    env_between,
    group_cpu_ns,
    machine_busy_ns,
    open_nvml,
    read_gpu,
)
from census.errors import CaptureError, InputError
from census.model.ab import Arm, ArmEnv, RankRecord
from census.sources.experiment import read_experiment

Body = Callable[[int, Callable[[int], None]], None]


def timed_loop(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, body: Body,
               env: dict[str, str] | None = None) -> Path:  # fmt: skip
    """Steps 0 to 4 in census.steps (warm-up 1, 3 measured) on a virtual clock `body(i, spend)`
    advances; the record's path."""
    path = tmp_path / "times.json"
    monkeypatch.setenv("CENSUS_STEP_TIMES", str(path))
    for name in ("RANK", "WORLD_SIZE"):
        monkeypatch.delenv(name, raising=False)
    for name, value in (env or {}).items():
        monkeypatch.setenv(name, value)
    now = [10**12]
    monkeypatch.setattr(time, "perf_counter_ns", lambda: now[0])

    def spend(ns: int) -> None:
        now[0] += ns

    for i in census.steps(range(5), warmup=1, active=3):
        body(i, spend)
    return path


def test_values_and_counts_are_kept_per_measured_step(tmp_path, monkeypatch) -> None:
    census.record("loss", 1.0)  # no timed run: nothing happens
    census.count("eager_region")

    def body(i: int, spend: Callable[[int], None]) -> None:
        census.count("eager_region")
        census.count("twice", 2)
        with census.phase("forward"):
            spend(1000 * (i + 1))
        if i != 2:
            census.record("loss", 10.0 + i)
        if i == 3:
            census.record("loss", 99)  # the step's last value wins
        if i in (0, 4):  # the warm-up step and the step after the window
            census.record("outside", 1.0)
            census.count("outside")
        spend(5)

    record = json.loads(timed_loop(tmp_path, monkeypatch, body).read_text())
    assert record["step_time_ns"] == [2005, 3005, 4005]
    assert record["phase_time_ns"] == {"forward": [2000, 3000, 4000]}
    assert record["values"] == {"loss": [11.0, None, 99.0]}
    assert type(record["values"]["loss"][2]) is float
    assert record["counts"] == {"eager_region": 3, "twice": 6}
    assert (record["rank"], record["world_size"]) == (0, 1)
    check_record(record)
    env = record["env"]
    assert set(env) == {"cpu_share", "other_cpu_cores", "load1", "gpu_sm_clock_mhz",
                        "gpu_throttle", "pgid", "group_cpu_cores"}  # fmt: skip
    assert env["cpu_share"] >= 0 and env["load1"] >= 0
    assert env["pgid"] == os.getpgid(0) and env["group_cpu_cores"] >= 0
    assert (env["gpu_sm_clock_mhz"], env["gpu_throttle"]) == (None, [])  # no CUDA here


def test_a_tensor_is_kept_detached_and_read_when_the_window_closes(tmp_path, monkeypatch):
    torch = pytest.importorskip("torch", reason="a tensor value needs torch")
    weight = torch.tensor(2.0, requires_grad=True)
    kept = []

    def body(i: int, spend: Callable[[int], None]) -> None:
        spend(10)
        census.record("loss", weight * (i + 1))
        kept.append(steps_module._ACTIVE.recorded[-1][2] if i == 2 else None)

    record = json.loads(timed_loop(tmp_path, monkeypatch, body).read_text())
    assert record["values"] == {"loss": [4.0, 6.0, 8.0]}
    assert isinstance(kept[2], torch.Tensor) and not kept[2].requires_grad


def test_a_nan_is_kept_as_none_and_a_text_stops_the_run(tmp_path, monkeypatch) -> None:
    def body(i: int, spend: Callable[[int], None]) -> None:
        spend(10)
        census.record("loss", [float("nan"), float("inf"), 1][i - 1] if i < 4 else 0.0)

    record = json.loads(timed_loop(tmp_path, monkeypatch, body).read_text())
    assert record["values"] == {"loss": [None, None, 1.0]}

    def bad(i: int, spend: Callable[[int], None]) -> None:
        spend(10)
        census.record("loss", "0.5" if i == 2 else 0.5)

    (tmp_path / "bad").mkdir()
    with pytest.raises(TypeError) as info:
        timed_loop(tmp_path / "bad", monkeypatch, bad)
    assert not (tmp_path / "bad" / "times.json").exists()
    assert str(info.value) == ("census.record('loss', value) in measured step 1: '0.5' is not a "
                               "number (give a Python number or a one-element tensor)")  # fmt: skip


def test_a_count_that_is_not_whole_stops_the_run(tmp_path, monkeypatch) -> None:
    with pytest.raises(ValueError) as info:
        timed_loop(tmp_path, monkeypatch, lambda i, spend: census.count("half", 0.5))
    assert str(info.value) == ("census.count('half', n): its n add up to 1.5, not a whole "
                               "number, 0 or more")  # fmt: skip


@pytest.mark.parametrize(("env", "name"), [({"RANK": "1", "WORLD_SIZE": "2"}, "times.json.rank1"),
                                           ({"RANK": "0", "WORLD_SIZE": "1"}, "times.json")])  # fmt: skip
def test_every_rank_writes_its_own_record(tmp_path, monkeypatch, env, name) -> None:
    timed_loop(tmp_path, monkeypatch, lambda i, spend: spend(7), env)
    assert sorted(p.name for p in tmp_path.iterdir()) == [name]
    record = json.loads((tmp_path / name).read_text())
    assert (record["rank"], record["world_size"]) == (int(env["RANK"]), int(env["WORLD_SIZE"]))


# The environment, from the readings at the window's open and close


def test_the_environment_between_two_readings() -> None:
    start = Reading(wall_ns=0, cpu_ns=0, busy_ns=10_000, group_ns=None, pgid=7, load1=0.5,
                    sm_clock_mhz=1980, throttle_bits=0x4 | 0x1)  # fmt: skip
    end = Reading(wall_ns=2_000, cpu_ns=1_000, busy_ns=15_000, group_ns=None, pgid=7, load1=1.25,
                  sm_clock_mhz=1755, throttle_bits=0x40 | 0x2)  # fmt: skip
    # 5000 ns busy, 1000 of them this process's, over 2000 ns; idle and application-clock bits
    # are no slowdown
    assert env_between(start, end) == {"cpu_share": 0.5, "other_cpu_cores": 2.0, "load1": 1.25,
                                       "gpu_sm_clock_mhz": 1755,
                                       "gpu_throttle": ["sw_power_cap", "hw_thermal"],
                                       "pgid": 7, "group_cpu_cores": None}  # fmt: skip
    alone = dataclasses.replace(end, busy_ns=10_500, sm_clock_mhz=None, throttle_bits=None)
    assert env_between(start, alone)["other_cpu_cores"] == 0.0  # /proc/stat's ticks are coarse
    assert env_between(start, alone)["gpu_sm_clock_mhz"] == 1980
    unknown = dataclasses.replace(start, busy_ns=None, sm_clock_mhz=None, throttle_bits=None)
    assert env_between(unknown, alone) == {"cpu_share": 0.5, "other_cpu_cores": None,
                                           "load1": 1.25, "gpu_sm_clock_mhz": None,
                                           "gpu_throttle": [], "pgid": 7,
                                           "group_cpu_cores": None}  # fmt: skip
    assert env_between(start, start)["cpu_share"] is None  # no wall time
    # the arm's process group (its children, the other ranks) used 3000 ns of the 5000: the
    # other processes 2000 ns over 2000 ns of wall time
    group = (dataclasses.replace(start, group_ns=40_000), dataclasses.replace(end, group_ns=43_000))
    assert env_between(*group)["other_cpu_cores"] == 1.0
    assert env_between(*group)["group_cpu_cores"] == 1.5
    assert env_between(*group)["cpu_share"] == 0.5  # still this process's own
    # a group read only once: this process's time alone is the arm's
    assert env_between(group[0], end)["other_cpu_cores"] == 2.0


def test_the_cpu_time_of_a_process_group_is_read_from_proc(tmp_path: Path) -> None:
    def process(pid: int, command: str, pgrp: int, times: tuple[int, int, int, int]) -> None:
        (tmp_path / str(pid)).mkdir()
        fields = ["S", "1", str(pgrp), "7", "0", "-1", "0", "1", "2", "3", "4", *map(str, times)]
        (tmp_path / str(pid) / "stat").write_text(f"{pid} ({command}) {' '.join(fields)} 20 0\n")

    process(10, "python", 10, (100, 20, 5, 1))
    process(11, "pt_main (worker) 1", 10, (30, 4, 0, 0))  # a ")" in the command is skipped
    process(12, "hog", 12, (999, 999, 999, 999))  # another group
    (tmp_path / "13").mkdir()  # ended between the listing and the read: no stat left
    (tmp_path / "self").mkdir()
    tick_ns = 1_000_000_000 // os.sysconf("SC_CLK_TCK")
    assert group_cpu_ns(10, str(tmp_path)) == (100 + 20 + 5 + 1 + 30 + 4) * tick_ns
    assert group_cpu_ns(99, str(tmp_path)) == 0
    assert group_cpu_ns(10, str(tmp_path / "absent")) is None
    # and this process's own group holds at least this process's time
    assert group_cpu_ns(os.getpgid(0)) >= time.process_time_ns() - tick_ns * os.cpu_count()


def test_machine_busy_time_is_read_from_proc_stat(tmp_path: Path) -> None:
    stat = tmp_path / "stat"
    stat.write_text("cpu  100 20 30 1000 50 5 5 7 40 0\ncpu0 1 2 3 4 5 6 7 8 9 0\n")
    tick_ns = 1_000_000_000 // os.sysconf("SC_CLK_TCK")
    assert machine_busy_ns(str(stat)) == (100 + 20 + 30 + 5 + 5) * tick_ns
    assert machine_busy_ns(str(tmp_path / "absent")) is None
    stat.write_text("intr 1 2\n")
    assert machine_busy_ns(str(stat)) is None


def test_without_nvml_or_its_gpu_the_gpu_reads_are_none() -> None:
    def no_gpu() -> int:
        raise RuntimeError("no CUDA GPUs are available")

    assert open_nvml(SimpleNamespace(cuda=SimpleNamespace(current_device=no_gpu))) is None
    assert read_gpu(None) == (None, None)


# One record per rank, merged into one arm by the arm runner

WRITE_RANKS = ("import os, sys; p = os.environ['CENSUS_STEP_TIMES']; "
               "[open(p + '.rank%d' % i, 'w').write(t) for i, t in enumerate(sys.argv[1:])]")  # fmt: skip
ENV0 = {"cpu_share": 0.9, "other_cpu_cores": 1.0, "load1": 2.0, "gpu_sm_clock_mhz": 1980,
        "gpu_throttle": ["hw_thermal"]}  # fmt: skip
ENV1 = {**ENV0, "cpu_share": 0.8, "gpu_sm_clock_mhz": 1800, "gpu_throttle": ["sw_power_cap"]}
RANK0 = {"clock": "cuda_events", "step_time_ns": [10, 30, 20], "phase_time_ns": {"fwd": [4, 10, 8]},
         "values": {"loss": [1.0, None, 3.0]}, "counts": {"x": 3}, "peak_allocated_bytes": 100,
         "peak_reserved_bytes": 200, "dynamo": {"frames_compiled": 1, "graph_breaks": 0},
         "env": ENV0, "rank": 0, "world_size": 2}  # fmt: skip
RANK1 = {**RANK0, "step_time_ns": [20, 10, 20], "phase_time_ns": {"fwd": [5, 2, 9], "bwd": [1] * 3},
         "values": {"loss": [7.0] * 3}, "counts": {"x": 1, "y": 2}, "peak_allocated_bytes": 150,
         "peak_reserved_bytes": 180, "dynamo": {"frames_compiled": 2, "graph_breaks": 0},
         "env": ENV1, "rank": 1}  # fmt: skip


def arms_of(*records: dict) -> list[Arm]:
    command = (sys.executable, "-c", WRITE_RANKS, *map(json.dumps, records))
    return run_arms(ArmsSpec({"a": command, "b": command}, ("A", "B"), arms=4))


def test_the_ranks_records_merge_into_one_arm() -> None:
    arm = arms_of(RANK0, RANK1)[1]
    assert arm.step_time_ns == (20, 30, 20)  # the slowest rank's: 1, 0, 0 (the first of equals)
    assert arm.phase_time_ns == {"fwd": (5, 10, 8), "bwd": (1, 0, 0)}  # that rank's phases
    assert arm.values == {"loss": (1.0, None, 3.0)}  # rank 0's
    assert arm.counts == {"x": (3, 1), "y": (0, 2)}
    assert (arm.recompiles, arm.graph_breaks) == (3, 0)
    assert (arm.peak_allocated_bytes, arm.peak_reserved_bytes) == (150, 200)
    assert arm.clock == "cuda_events"
    # rank 0's CPU figures; the lowest SM clock and every throttle reason, in NVML's bit order
    assert arm.env == ArmEnv(0.9, 1.0, 2.0, 1800, ("sw_power_cap", "hw_thermal"))
    env0, env1 = ArmEnv(0.9, 1.0, 2.0, 1980, ("hw_thermal",)), ArmEnv(0.8, 1.0, 2.0, 1800,
                                                                      ("sw_power_cap",))  # fmt: skip
    assert arm.ranks == (RankRecord(0, 20.0, 1, 0, 100, 200, env0),
                         RankRecord(1, 20.0, 2, 0, 150, 180, env1))  # fmt: skip
    one = arms_of({**RANK0, "rank": 0, "world_size": 1})[1]  # as a single process writes it
    assert one.ranks == () and one.counts == {"x": (3,)} and one.env == env0


def test_the_other_ranks_process_groups_are_not_other_load() -> None:
    """torchrun starts each rank in a process group of its own: each rank's other_cpu_cores is
    taken less the other ranks' groups (once per group), never its own or a shared one."""
    from census.capture.arms import rank_envs

    def rank(pgid: int | None, group: float | None, other: float = 3.0) -> dict:
        return {"env": {**ENV0, "other_cpu_cores": other, "pgid": pgid, "group_cpu_cores": group}}

    # ranks 0 and 1 in groups of their own (1.25 and 0.75 cores), rank 2 in rank 1's (it reads
    # the group alike, 0.5 cores: the larger reading of a group counts)
    envs = rank_envs([rank(10, 1.25), rank(11, 0.75), rank(11, 0.5)])
    assert [e.other_cpu_cores for e in envs] == [2.25, 1.75, 1.75]
    # never below 0; a rank without the readings (an older record) is left as it was
    envs = rank_envs([rank(10, 1.25, other=0.5), rank(11, 4.0), rank(None, None)])
    assert [e.other_cpu_cores for e in envs] == [0.0, 1.75, 3.0]
    assert rank_envs([rank(10, 1.25)])[0].other_cpu_cores == 3.0  # one process: nothing to take
    # the merged arm: rank 0's, so taken less rank 1's group
    arm = arms_of({**RANK0, **rank(10, 0.5)}, {**RANK1, **rank(11, 0.25)})[1]
    assert arm.env is not None and arm.env.other_cpu_cores == 2.75
    assert [r.env.other_cpu_cores for r in arm.ranks if r.env] == [2.75, 2.5]


def test_a_rank_without_dynamo_leaves_the_arms_recompiles_unknown() -> None:
    arm = arms_of(RANK0, {**RANK1, "dynamo": None})[1]
    assert (arm.recompiles, arm.graph_breaks) == (None, None)
    assert (arm.ranks[0].recompiles, arm.ranks[1].recompiles) == (1, None)


DAMAGED = ", rank 1: its step-times record ($CENSUS_STEP_TIMES) is damaged: "


@pytest.mark.parametrize(
    ("records", "why"),
    [
        ((RANK0,), ": rank 1 of 2 wrote no step-times record: every rank must run its loop in "
                   "census.steps(), and every node must see the experiment folder (-o; "
                   "docs/cluster.md)"),
        ((RANK0, RANK1, {**RANK1, "rank": 2, "world_size": 7}), ": ranks 3-6 of 7 wrote no"),
        ((RANK0, RANK1, {**RANK1, "rank": 2, "world_size": 4}), ": rank 3 of 4 wrote no"),
        ((RANK0, {**RANK1, "step_time_ns": [5, 5], "phase_time_ns": {}, "values": {}}),
         ": rank 1 recorded 2 measured steps, "
                                                      "rank 0 3: every rank must run the same"),
        ((RANK0, {**RANK1, "clock": "host", "phase_time_ns": {}}), ": rank 1 timed its steps "
         "by host, rank 0 by cuda_events: every rank must use one clock"),
        ((RANK0, {**RANK1, "rank": 0}), DAMAGED + "it says rank 0 of 2, in the file of rank 1 "
                                                  "of 2"),
        ((RANK0, {**RANK1, "counts": {"x": -1}}), DAMAGED + 'counts["x"] is -1, not an '
                                                             "integer, 0 or more"),
    ],
)  # fmt: skip
def test_ranks_that_do_not_make_one_arm_are_a_one_line_error(records, why) -> None:
    with pytest.raises(CaptureError) as info:
        arms_of(*records)
    assert str(info.value).startswith("arm 0 (A, the discarded warm arm)" + why)
    assert "\n" not in str(info.value)


# Every new field of a record is checked


GOOD = {"clock": "host", "step_time_ns": [5, 6, 7], "values": {"loss": [1.5, None, -2]},
        "counts": {"x": 0}, "env": {**ENV0, "other_cpu_cores": 0}, "rank": 1,
        "world_size": 2}  # fmt: skip


@pytest.mark.parametrize(
    ("change", "why"),
    [
        ({"values": {"loss": [1, 2]}}, 'values["loss"] is not a list of 3 values'),
        ({"values": {"loss": [1, float("nan"), 3]}}, 'values["loss"][1] is NaN, not a finite '
                                                      "number or null"),
        ({"values": {"loss": [1, "2", 3]}}, 'values["loss"][1] is "2", not a finite number'),
        ({"values": {"loss": [True, 2, 3]}}, 'values["loss"][0] is true, not a finite number'),
        ({"values": [1]}, "values is [1], not a JSON object"),
        ({"counts": {"x": -1}}, 'counts["x"] is -1, not an integer, 0 or more'),
        ({"counts": {"x": 1.5}}, 'counts["x"] is 1.5, not an integer, 0 or more'),
        ({"env": [1]}, "env is [1], not a JSON object"),
        ({"env": {"cpu_share": -0.5}}, "env.cpu_share is -0.5, not a finite number, 0 or more"),
        ({"env": {"load1": float("inf")}}, "env.load1 is Infinity, not a finite number, 0 or"),
        ({"env": {"other_cpu_cores": "1"}}, 'env.other_cpu_cores is "1", not a finite number'),
        ({"env": {"gpu_sm_clock_mhz": 1.5}}, "env.gpu_sm_clock_mhz is 1.5, not an integer, 0 or"),
        ({"env": {"gpu_throttle": ["melting"]}}, 'env.gpu_throttle is ["melting"], not a list of '
         "NVML throttle reasons (sw_power_cap, hw_slowdown, sync_boost, sw_thermal, hw_thermal, "
         "hw_power_brake, display_clock)"),
        ({"env": {"gpu_throttle": "hw_thermal"}}, 'env.gpu_throttle is "hw_thermal", not a list'),
        ({"rank": -1}, "rank is -1, not an integer, 0 or more"),
        ({"world_size": 0}, "world_size is 0, not a positive integer"),
        ({"rank": 2}, "rank is 2, not below world_size 2"),
    ],
)  # fmt: skip
def test_a_damaged_new_field_names_itself(change: dict, why: str) -> None:
    check_record(GOOD)
    with pytest.raises(ValueError) as info:
        check_record({**GOOD, **change})
    assert str(info.value).startswith(why)


# The arm's round trip through ab.json

ARM = Arm("b", 1, False, (20, 30, 20), 150, 200, 3, 0, "cuda_events", {"fwd": (5, 10, 8)},
          {"loss": (1.0, None, 3.0)}, {"x": (3, 1)},
          ArmEnv(0.9, 1.0, 2.0, 1800, ("sw_power_cap", "hw_thermal")),
          (RankRecord(0, 20.0, 1, 0, 100, 200, ArmEnv(0.9, 1.0, 2.0, 1980, ("hw_thermal",))),
           RankRecord(1, 20.5, 2, 0, 150, 180, None)))  # fmt: skip


def write_ab(folder: Path, arms: list[dict]) -> Path:
    folder.mkdir(exist_ok=True)
    record = {"labels": ["A", "B"], "commands": {"a": ["x"], "b": ["y"]}, "arms": arms}
    (folder / "ab.json").write_text(json.dumps(record, indent=1))
    return folder


def test_an_arm_reads_back_from_ab_json_as_it_was(tmp_path: Path) -> None:
    single = dataclasses.replace(ARM, counts={"x": (3,)}, ranks=(), env=None)
    folder = write_ab(tmp_path, [_arm_record(ARM), _arm_record(single)])
    assert read_experiment(folder).arms == (ARM, single)


def test_an_ab_json_from_before_the_new_fields_reads_as_arms_without_them(tmp_path) -> None:
    old = _arm_record(ARM)
    for key in ("values", "counts", "env", "ranks"):
        del old[key]
    (arm,) = read_experiment(write_ab(tmp_path, [old])).arms
    assert arm == dataclasses.replace(ARM, values={}, counts={}, env=None, ranks=())


@pytest.mark.parametrize(
    ("change", "why"),
    [
        ({"counts": {"x": [1]}}, 'counts["x"] is not a list of 2 (one per rank)'),
        ({"counts": {"x": [1, -1]}}, 'counts["x"][1] is -1, not an integer, 0 or more'),
        ({"counts": [1]}, "counts is [1], not a JSON object"),
        ({"values": {"loss": [1, 2]}}, 'values["loss"] is not a list of 3 values'),
        ({"env": {"load1": -1}}, "env.load1 is -1, not a finite number, 0 or more"),
        ({"ranks": "x"}, 'ranks is "x", not a JSON list'),
        ({"ranks": [7]}, "ranks[0] is 7, not a JSON object"),
        ({"ranks": [{**_arm_record(ARM)["ranks"][1], "rank": 1}]}, "ranks[0].rank is 1, not 0"),
        ({"ranks": [{"rank": 0, "median_ns": 0}]}, "ranks[0].median_ns is 0, not a positive "
                                                   "number"),
        ({"ranks": [{"rank": 0, "median_ns": 5, "recompiles": -1}]}, "ranks[0].recompiles is "
                                                                     "-1, not an integer, 0 or more"),
        ({"ranks": [{"rank": 0, "median_ns": 5, "env": {"cpu_share": "x"}}]},
         'ranks[0].env.cpu_share is "x", not a finite number, 0 or more'),
    ],
)  # fmt: skip
def test_a_damaged_ab_json_field_is_one_line(tmp_path: Path, change: dict, why: str) -> None:
    arm = {**_arm_record(ARM), **change}  # a rank's damage is found before the counts'
    folder = write_ab(tmp_path, [json.loads(json.dumps(arm))])
    with pytest.raises(InputError) as info:
        read_experiment(folder)
    assert str(info.value) == (f"{folder / 'ab.json'}: not a census experiment record "
                               f"(arm 0: {why})")  # fmt: skip

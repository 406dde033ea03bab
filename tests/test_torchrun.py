"""`census ab` arms under torchrun: a real two-rank gloo run on the CPU (tests/helpers/sleep_train.py
--dist), every rank writing its own record, merged into one arm by census's own arm runner.

Each rank spends its steps on a virtual clock census reads (--fake-clock), so the merge is checked
with exact values: rank 0 is the slower in odd steps (4 ms against 3.5 ms), rank 1 in even ones
(4.5 ms against 3 ms), and rank 1's backward is 0.5 ms longer."""

from __future__ import annotations

import sys

import pytest

from census.capture.arms import ArmsSpec, run_arms
from census.model.ab import Arm
from tests.helpers.files import SLEEP_TRAIN

pytest.importorskip("torch", reason="torchrun arms need torch (torch.distributed, gloo)")

MS = 1_000_000
COMMAND = (sys.executable, "-m", "torch.distributed.run", "--nproc-per-node", "2",
           "--standalone", SLEEP_TRAIN, "--dist", "--fake-clock", "--skew", "1", "--record",
           "--steps", "5")  # fmt: skip


@pytest.fixture(scope="module")
def arms() -> list[Arm]:
    spec = ArmsSpec({"a": COMMAND, "b": COMMAND}, ("A", "B"), arms=4, warmup=1, active=4,
                    env=(("OMP_NUM_THREADS", "1"),))  # fmt: skip
    return run_arms(spec)


def test_every_arm_is_the_merge_of_its_two_ranks(arms: list[Arm]) -> None:
    assert [a.side for a in arms] == ["a", "a", "b", "b", "a"]
    for arm in arms:
        # measured steps 1 to 4: the slowest rank's time in each (rank 0, 1, 0, 1)
        assert arm.step_time_ns == (4 * MS, 4_500_000, 4 * MS, 4_500_000)
        assert arm.clock == "host"
        # the phases of the step's slowest rank, not each phase's slowest
        assert arm.phase_time_ns == {"forward": (3 * MS,) * 4,
                                     "backward": (MS, 1_500_000, MS, 1_500_000)}  # fmt: skip
        assert [r.rank for r in arm.ranks] == [0, 1]
        assert [r.median_ns for r in arm.ranks] == [3_500_000, 4 * MS]


def test_values_are_rank_0s_and_counts_each_ranks(arms: list[Arm]) -> None:
    for arm in arms:
        # step 2 recorded no loss; each step's last value; a tensor read as a float
        assert arm.values == {"loss": (1.5, None, 3.5, 4.5)}
        # 1 a step on rank 0, 2 on rank 1, over 4 measured steps; nothing before the loop
        assert arm.counts == {"eager_region": (4, 8), "rank1_only": (0, 4)}


def test_every_rank_reads_its_environment(arms: list[Arm]) -> None:
    for arm in arms:
        assert arm.env is not None and arm.env == arm.ranks[0].env
        for env in (r.env for r in arm.ranks):
            assert env is not None and env.cpu_share is not None and env.cpu_share >= 0
            assert env.load1 is not None and env.load1 >= 0
            assert (env.gpu_sm_clock_mhz, env.gpu_throttle) == (None, ())  # no CUDA here
        assert arm.peak_allocated_bytes is None and arm.ranks[1].peak_reserved_bytes is None
        assert arm.recompiles == (None if arm.ranks[0].recompiles is None else 0)

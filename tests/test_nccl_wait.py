"""The NCCL wait split (#46) against a brute-force reading of its definition, written here with
plain loops: on the real 2-GPU fixtures, on built ranks with a known straggler, and on random
ranks (hypothesis)."""

from __future__ import annotations

import random

import numpy as np
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from census.findings.nccl_wait import (
    NcclKernels,
    NcclWait,
    RankTotals,
    Straggler,
    Unmatched,
    split_nccl_time,
    sum_by_key,
)
from tests.helpers.files import fixture_file
from tests.helpers.nccl import Kernel, brute_force, read_nccl_kernels


def as_kernels(kernels: list[Kernel]) -> NcclKernels:
    columns = list(zip(*kernels, strict=True)) if kernels else [(), (), ()]
    return NcclKernels(*(np.array(c, np.int64) for c in columns))


def split(ranks: list[list[Kernel]], hosts: list[str] | None = None) -> NcclWait:
    return split_nccl_time([as_kernels(k) for k in ranks], hosts)


def assert_brute_force(ranks: list[list[Kernel]], found: NcclWait) -> dict:
    """`found` equals the brute force of `ranks`, kernel by kernel and in every total."""
    want = brute_force(ranks)
    assert [s.wait_ns.tolist() for s in found.ranks] == want["wait"]
    assert [s.transfer_ns.tolist() for s in found.ranks] == want["transfer"]
    assert [s.arrived_last.tolist() for s in found.ranks] == want["last"]
    assert [s.matched.tolist() for s in found.ranks] == want["matched"]
    assert found.unmatched == tuple(Unmatched(c, tuple(n)) for c, n in want["unmatched"].items())
    assert found.occurrences == want["occurrences"]
    assert found.waited_for.tolist() == want["waited_for"]
    assert found.straggler == (Straggler(*want["straggler"]) if want["straggler"] else None)
    for r, kernels in enumerate(ranks):
        loose = [e - s for (_, s, e), m in zip(kernels, want["matched"][r], strict=True) if not m]
        assert found.ranks[r].totals == RankTotals(
            kernel_count=len(kernels),
            nccl_ns=sum(e - s for _, s, e in kernels),
            wait_ns=sum(want["wait"][r]),
            transfer_ns=sum(want["transfer"][r]),
            last_arrivals=want["last_count"][r],
            caused_wait_ns=want["caused"][r],
            unmatched_count=len(loose),
            unmatched_ns=sum(loose),
        )
    return want


# -- the real 2-GPU fixtures ----------------------------------------------------------------
# per rank: (kernels, NCCL time, wait, transfer, last arrivals), from the brute force above
FIXTURES = {
    "nsysai_mfu_2gpu_before.sqlite": [
        (33, 17_172_652, 10_898_336, 6_274_316, 11),
        (33, 8_229_100, 2_477_480, 5_751_620, 22),
    ],
    "nsysai_mfu_2gpu_after.sqlite": [
        (31, 9_989_016, 4_266_638, 5_722_378, 15),
        (31, 23_753_085, 18_218_556, 5_534_529, 16),
    ],
}


@pytest.mark.fixtures
@pytest.mark.parametrize("name", sorted(FIXTURES))
def test_the_real_fixtures_match_the_brute_force(name: str) -> None:
    ranks = read_nccl_kernels(fixture_file(name))
    found = split(ranks)
    assert_brute_force(ranks, found)
    assert found.unmatched == ()
    assert [
        (t.kernel_count, t.nccl_ns, t.wait_ns, t.transfer_ns, t.last_arrivals)
        for t in (s.totals for s in found.ranks)
    ] == FIXTURES[name]


# -- built ranks: a known straggler ---------------------------------------------------------
DELAY_NS = 5_000
OCCURRENCES = 40


def jitter_ns(rank: int, k: int) -> int:
    """How late rank `rank` starts occurrence k, below DELAY_NS."""
    return (rank * 737 + k * 311) % DELAY_NS


def straggling_ranks(rank_count: int, straggler: int) -> list[list[Kernel]]:
    """Collective 0, OCCURRENCES times: every rank starts at base + its jitter, the straggler at
    base + DELAY_NS; rank r's kernel ends 1000 + r ns after the straggler's start. Each rank's
    kernels are given shuffled."""
    rng = np.random.default_rng(rank_count)
    ranks = []
    for r in range(rank_count):
        kernels = []
        for k in range(OCCURRENCES):
            base = 1_000_000 * k
            late = DELAY_NS if r == straggler else jitter_ns(r, k)
            kernels.append((0, base + late, base + DELAY_NS + 1_000 + r))
        ranks.append([kernels[i] for i in rng.permutation(OCCURRENCES)])
    return ranks


@pytest.mark.parametrize(("rank_count", "straggler"), [(8, 5), (16, 0), (16, 15)])
def test_an_injected_straggler_is_named_and_every_wait_is_exact(
    rank_count: int, straggler: int
) -> None:
    ranks = straggling_ranks(rank_count, straggler)
    found = split(ranks)
    assert_brute_force(ranks, found)
    others = [r for r in range(rank_count) if r != straggler]
    caused = sum(DELAY_NS - jitter_ns(r, k) for r in others for k in range(OCCURRENCES))
    assert found.straggler == Straggler(straggler, OCCURRENCES, caused)
    for r, (kernels, got) in enumerate(zip(ranks, found.ranks, strict=True)):
        occurrence = [s // 1_000_000 for _, s, _ in kernels]
        late = [DELAY_NS if r == straggler else jitter_ns(r, k) for k in occurrence]
        assert got.wait_ns.tolist() == [DELAY_NS - x for x in late]
        assert got.transfer_ns.tolist() == [1_000 + r] * OCCURRENCES
        assert got.arrived_last.tolist() == [r == straggler] * OCCURRENCES
        assert got.totals.last_arrivals == (OCCURRENCES if r == straggler else 0)


def test_unequal_counts_leave_a_collective_unmatched_and_say_so() -> None:
    ranks = straggling_ranks(8, 3)
    for r, kernels in enumerate(ranks):  # collective 1: rank 6 one short; collective 2: equal
        kernels += [(1, 10 * i + r, 10 * i + 20) for i in range(5 if r == 6 else 6)]
        kernels += [(2, 30 if r == 3 else 7 + r, 40)]
    found = split(ranks)
    assert_brute_force(ranks, found)
    assert found.unmatched == (Unmatched(1, (6, 6, 6, 6, 6, 6, 5, 6)),)
    assert found.occurrences == OCCURRENCES + 1
    for r, got in enumerate(found.ranks):
        loose = [i for i, (c, _, _) in enumerate(ranks[r]) if c == 1]
        assert np.flatnonzero(~got.matched).tolist() == loose
        assert got.wait_ns[loose].tolist() == got.transfer_ns[loose].tolist() == [0] * len(loose)
        t = got.totals
        assert t.unmatched_ns == sum(e - s for c, s, e in ranks[r] if c == 1)
        assert t.wait_ns + t.transfer_ns + t.unmatched_ns == t.nccl_ns
    assert found.straggler == Straggler(3, OCCURRENCES + 1, found.ranks[3].totals.caused_wait_ns)


def test_a_rank_without_a_collective_leaves_it_unmatched() -> None:
    found = split([[(4, 0, 10)], []])
    assert found.unmatched == (Unmatched(4, (1, 0)),)
    assert (found.occurrences, found.straggler) == (0, None)
    assert found.ranks[0].totals.unmatched_ns == 10


def test_ties_count_for_every_rank_at_the_latest_start() -> None:
    # ranks 1 and 2 arrive last together twice; rank 0 once, alone
    ranks = [[(0, 0, 50), (0, 100, 150), (0, 300, 350)],
             [(0, 20, 50), (0, 120, 150), (0, 200, 350)],
             [(0, 20, 50), (0, 120, 150), (0, 250, 350)]]  # fmt: skip
    found = split(ranks)
    assert_brute_force(ranks, found)
    assert [s.totals.last_arrivals for s in found.ranks] == [1, 2, 2]
    assert [s.totals.caused_wait_ns for s in found.ranks] == [150, 40, 40]
    assert found.straggler == Straggler(1, 2, 40)  # tied with rank 2: the first


def test_tied_last_arrivals_go_to_the_rank_that_caused_more_wait() -> None:
    # ranks 0 and 1 arrive last once each: rank 0 first, making the others wait 80 + 80;
    # rank 1 next, making them wait 101 + 200
    ranks = [[(0, 80, 90), (0, 99, 290)], [(0, 0, 90), (0, 200, 290)], [(0, 0, 90), (0, 0, 290)]]
    found = split(ranks)
    assert_brute_force(ranks, found)
    assert [s.totals.last_arrivals for s in found.ranks] == [1, 1, 0]
    assert [s.totals.caused_wait_ns for s in found.ranks] == [160, 301, 0]
    assert found.straggler == Straggler(1, 1, 301)


def test_a_kernel_that_ends_before_the_last_arrival_only_waits() -> None:
    found = split([[(0, 0, 30)], [(0, 50, 80)]])
    assert found.ranks[0].wait_ns.tolist() == [30]
    assert found.ranks[0].transfer_ns.tolist() == [0]
    assert found.ranks[1].wait_ns.tolist() == [0]
    assert found.ranks[1].transfer_ns.tolist() == [30]


def test_ranks_on_several_hosts_are_not_matched() -> None:
    ranks = straggling_ranks(4, 1)
    found = split(ranks, ["node-b", "node-a", "node-a", "node-b"])
    assert found.hosts == ("node-a", "node-b")
    assert (found.unmatched, found.occurrences, found.straggler) == ((), 0, None)
    for kernels, got in zip(ranks, found.ranks, strict=True):
        assert not got.matched.any() and not got.wait_ns.any() and not got.transfer_ns.any()
        assert got.totals.unmatched_ns == got.totals.nccl_ns == sum(e - s for _, s, e in kernels)
    same = split(ranks, ["node-a"] * 4)
    assert same.hosts == () and same.straggler == split(ranks).straggler


def test_one_rank_or_none() -> None:
    assert split([]).ranks == ()
    alone = split([[(0, 5, 9), (0, 1, 2)]])
    assert alone.straggler is None and alone.occurrences == 2
    assert alone.ranks[0].wait_ns.tolist() == [0, 0]
    assert alone.ranks[0].transfer_ns.tolist() == [4, 1]


def test_floats_and_uneven_columns_are_refused() -> None:
    with pytest.raises(TypeError, match="ints"):
        NcclKernels(np.zeros(1, np.int64), np.array([0.5]), np.ones(1, np.int64))
    with pytest.raises(TypeError, match="fit int64"):
        NcclKernels(np.zeros(1, np.int64), np.array([2**63], np.uint64), np.ones(1, np.int64))
    with pytest.raises(ValueError, match="length"):
        NcclKernels(np.zeros(2, np.int64), np.zeros(1, np.int64), np.ones(1, np.int64))
    with pytest.raises(ValueError, match="hosts"):
        split([[]], ["a", "b"])


def test_sums_by_step_add_up_to_the_step_nccl_time() -> None:
    ranks = straggling_ranks(8, 2)
    steps = [np.array([s // 10_000_000 if s < 35_000_000 else -1 for _, s, _ in k]) for k in ranks]
    for kernels, got, step in zip(ranks, split(ranks).ranks, steps, strict=True):
        duration = np.array([e - s for _, s, e in kernels])
        nccl = sum_by_key(duration, step, 4)
        assert (sum_by_key(got.wait_ns, step, 4) + sum_by_key(got.transfer_ns, step, 4)
                == nccl).all()  # fmt: skip
        assert nccl.tolist() == [sum(duration[step == i]) for i in range(4)]
        assert sum_by_key(got.arrived_last, step, 4).sum() == got.arrived_last[step >= 0].sum()


# -- laws on random ranks -------------------------------------------------------------------
@st.composite
def random_ranks(draw: st.DrawFn, min_duration_ns: int = 0) -> list[list[Kernel]]:
    """1 to 5 ranks sharing a multiset of collectives (sometimes one rank has extras), each
    kernel's start and length drawn small so that starts tie, kernels overlap and some last
    0 ns."""
    shared = draw(st.lists(st.integers(0, 2), max_size=8))
    ranks = []
    for _ in range(draw(st.integers(1, 5))):
        extra = draw(st.lists(st.integers(0, 3), max_size=2)) if draw(st.booleans()) else []
        collectives = draw(st.permutations([*shared, *extra]))
        kernels = []
        for c in collectives:
            start = draw(st.integers(0, 30))
            kernels.append((c, start, start + draw(st.integers(min_duration_ns, 12))))
        ranks.append(kernels)
    return ranks


@settings(max_examples=300, deadline=None)
@given(random_ranks())
@example([[(0, 5, 5), (0, 5, 9)], [(0, 5, 7), (0, 5, 5)]])
@example([[(1, 0, 4)], [(1, 0, 4)], [(0, 1, 2)]])
def test_random_ranks_match_the_brute_force_and_its_laws(ranks: list[list[Kernel]]) -> None:
    found = split(ranks)
    assert_brute_force(ranks, found)
    for kernels, got in zip(ranks, found.ranks, strict=True):
        duration = np.array([e - s for _, s, e in kernels], np.int64)
        both = got.wait_ns + got.transfer_ns
        assert (both[got.matched] == duration[got.matched]).all()
        assert (got.wait_ns >= 0).all() and (got.transfer_ns >= 0).all()
        assert (got.wait_ns[got.arrived_last] == 0).all()
        t = got.totals
        assert t.wait_ns + t.transfer_ns + t.unmatched_ns == t.nccl_ns


@settings(max_examples=150, deadline=None)
@given(random_ranks(min_duration_ns=-4))
def test_negative_durations_keep_the_identity(ranks: list[list[Kernel]]) -> None:
    found = split(ranks)
    assert_brute_force(ranks, found)
    for kernels, got in zip(ranks, found.ranks, strict=True):
        duration = np.array([e - s for _, s, e in kernels], np.int64)
        assert ((got.wait_ns + got.transfer_ns)[got.matched] == duration[got.matched]).all()


@settings(max_examples=150, deadline=None)
@given(random_ranks(), st.randoms(use_true_random=False))
def test_permuting_the_ranks_permutes_the_results(
    ranks: list[list[Kernel]], rng: random.Random
) -> None:
    order = list(range(len(ranks)))
    rng.shuffle(order)
    found, moved = split(ranks), split([ranks[r] for r in order])
    for new, old in enumerate(order):
        a, b = found.ranks[old], moved.ranks[new]
        assert a.totals == b.totals
        for column in ("wait_ns", "transfer_ns", "arrived_last", "matched"):
            assert getattr(a, column).tolist() == getattr(b, column).tolist()
    assert [(u.collective, [u.counts[r] for r in order]) for u in found.unmatched] == [
        (u.collective, list(u.counts)) for u in moved.unmatched
    ]
    if found.straggler:
        assert found.straggler[1:] == moved.straggler[1:]
        top = [r for r, s in enumerate(found.ranks) if s.totals.last_arrivals == found.straggler[1]
               and s.totals.caused_wait_ns == found.straggler[2]]  # fmt: skip
        assert order[moved.straggler.rank] in top

"""The API map's compact form (census.load.call_map) and the runtime pass's merge of compact
and column parts (census.load.api_calls.merge_runtime), against a brute-force dictionary; the
launch totals' dense columns (census.load.launch_totals) against summed dictionaries."""

from __future__ import annotations

import numpy as np
from hypothesis import example, given, settings
from hypothesis import strategies as st

from census.load.api_calls import Calls, RangeCalls, RuntimePart, merge_runtime
from census.load.call_map import CompactCalls
from census.load.figures import LAUNCH_SUMS
from census.load.intervals import INT_NULL, NO_STEP
from census.load.launch_totals import LaunchTotals

# call id -> step, in id order: a step drawn per id (drawing 300 steps for every example, most
# of them unused, was most of these tests' time: 42 s of 67 s for the file on a busy machine)
calls_st = st.dictionaries(
    st.integers(-(1 << 40), 1 << 40) | st.integers(0, 600),
    st.integers(-1, 3),
    min_size=1,
    max_size=300,
).map(lambda calls: dict(sorted(calls.items())))


def _columns(calls: dict[int, int]) -> tuple[np.ndarray, np.ndarray]:
    corr = np.array(sorted(calls), np.int64)
    return corr, np.array([calls[c] for c in corr.tolist()], np.int32)


def _probes(calls: dict[int, int]) -> np.ndarray:
    ids = list(calls)
    near = [c + d for c in ids[:50] for d in (-9, -8, -1, 1, 7, 8)]
    return np.array([*ids, *near, 0, -1, (1 << 62), -(1 << 62)], np.int64)


@settings(max_examples=200)
@given(calls_st)
def test_compact_lookup_and_columns_match_brute_force(calls: dict[int, int]) -> None:
    corr, step = _columns(calls)
    compact = CompactCalls.of(corr, step)
    if compact is None:  # sparse ids: the columns are smaller, and kept
        assert (corr[-1] - corr[0]) // 8 > 4 or len(corr) < 8
        return
    probes = _probes(calls)
    found, got = compact.lookup(probes)
    assert found.tolist() == [int(c) in calls for c in probes.tolist()]
    assert got.tolist() == [calls.get(int(c), NO_STEP) for c in probes.tolist()]
    back = compact.columns()
    assert back[0].tolist() == corr.tolist() and back[1].tolist() == step.tolist()


def test_dense_ids_are_compact_and_sparse_ones_are_not() -> None:
    dense = np.arange(0, 3000, 2, dtype=np.int64)  # every other id a call, 3 steps
    steps = np.repeat(np.arange(3, dtype=np.int32), 500)
    compact = CompactCalls.of(dense, steps)
    assert compact is not None and len(compact.run_corr) == 3 and compact.bits.nbytes == 375
    assert CompactCalls.of(dense * 1000, steps) is None  # a bitmap 125x the calls
    alternating = np.arange(3000, dtype=np.int32) % 2  # a run per call: columns are smaller
    assert CompactCalls.of(np.arange(3000, dtype=np.int64), alternating) is None


def _part(calls: dict[int, int], compact: bool, proc: int = 5) -> RuntimePart:
    part = RangeCalls()
    corr, step = _columns(calls)
    c = CompactCalls.of(corr, step) if compact else None
    if c is not None:
        part.compact[proc] = c
    else:
        part.corr[proc], part.step[proc] = [corr], [step]
        part.increasing[proc] = True
    return RuntimePart(Calls([part]))


@settings(max_examples=150)
@given(st.lists(st.tuples(calls_st, st.booleans()), min_size=1, max_size=4))
@example(parts=[({-5: 2, 3: 1}, False)])  # -5, the probe for an absent call once, is a call
def test_merged_parts_look_up_as_their_union(parts: list) -> None:
    """Parts whose ranges follow one another join compact; overlapping ones (calls of several
    threads) are sorted as columns; a call in two parts is a duplicate (legacy exports)."""
    runtime = [_part(calls, compact) for calls, compact in parts]
    api, _, duplicated, _ = merge_runtime(runtime)
    every: dict[int, int] = {}
    seen: list[int] = []
    for calls, _ in parts:
        every.update(calls)
        seen += list(calls)
    assert duplicated == (len(seen) != len(set(seen)))
    if duplicated:
        return
    probes = np.array([*every, *(c + 1 for c in every), -5], np.int64)
    found, step = api.lookup(np.full(len(probes), 5), probes)
    assert found.tolist() == [int(c) in every for c in probes.tolist()]
    assert step.tolist() == [every.get(int(c), NO_STEP) for c in probes.tolist()]
    more = {5: (np.array([max(every) + 100], np.int64), np.array([2], np.int64))}
    absent = min(every) - 1  # a call in no part (-5 can be one)
    found, step = api.extended(more).lookup(np.array([5, 5]), np.array([max(every) + 100, absent]))
    assert found.tolist() == [True, False] and step.tolist() == [2, NO_STEP]


def test_following_compact_parts_stay_compact() -> None:
    a = {i: i // 100 for i in range(0, 1000, 3)}
    b = {i: i // 100 for i in range(1001, 2000, 3)}
    api, _, duplicated, _ = merge_runtime([_part(a, True), _part(b, True)])
    assert not duplicated and 5 in api.compact and 5 not in api.corr
    found, step = api.lookup(np.array([5, 5, 5, INT_NULL]), np.array([999, 1001, 1002, 3]))
    assert found.tolist() == [True, True, False, False] and step.tolist() == [9, 10, -1, -1]


@settings(max_examples=150)
@given(
    st.lists(
        st.tuples(st.integers(-1, 4), st.integers(0, 2), st.integers(0, 1 << 40), st.booleans()),
        max_size=60,
    ),
    st.integers(1, 3),
)
def test_launch_totals_match_summed_dictionaries(calls: list, batches: int) -> None:
    apis = ("cudaLaunchKernel", "cuLaunchKernelEx", "cudaLaunchKernel")  # two codes, one API
    totals = LaunchTotals.of(apis, 5)
    for k in range(batches):
        chunk = calls[k::batches]
        step, code, dur, graph = (np.array([c[i] for c in chunk], np.int64) for i in range(4))
        part = LaunchTotals.of(apis, 5)
        part.add(step, code, np.where(dur % 7 == 0, INT_NULL, dur), graph)
        totals.merge(part.sparse() if k % 2 else part)  # workers send their rows with calls
    whole, by_api, per_step = _summed(totals, 5)
    want: dict = {}
    for step, code, dur, _graph in calls:
        t = 0 if dur % 7 == 0 else dur
        cell = want.setdefault(apis[code], [0, 0, 0, 0])
        cell[0] += 1
        cell[1] += t
        cell[2] += step != NO_STEP
        cell[3] += t if step != NO_STEP else 0
    assert by_api == want
    assert whole == [len(calls), sum(v[1] for v in want.values()),
                     sum(int(c[3]) for c in calls)]  # fmt: skip
    for s in range(5):
        mine = [c for c in calls if c[0] == s]
        assert per_step[s].tolist() == [len(mine), sum(0 if c[2] % 7 == 0 else c[2] for c in mine),
                                        sum(int(c[3]) for c in mine)]  # fmt: skip


def _summed(totals: LaunchTotals, keys: int) -> tuple[list, dict, np.ndarray]:
    """(the whole capture's launch sums, per API, per key as rows): total, by_api, finish."""
    per_key = totals.finish(keys)
    assert list(per_key) == list(LAUNCH_SUMS) and list(totals.total()) == list(LAUNCH_SUMS)
    return (list(totals.total().values()), totals.by_api(keys),
            np.stack(list(per_key.values()), axis=1))  # fmt: skip


def test_launch_totals_stay_exact_past_int64() -> None:
    totals = LaunchTotals.of(("cudaLaunchKernel",), 1)
    for _ in range(3):  # three calls of 2^62 ns each in step 0: 3 x 2^62 > 2^63
        totals.add(np.array([0]), np.array([0]), np.array([1 << 62]), np.array([0]))
    whole, by_api, per_step = _summed(totals, 1)
    assert whole[1] == 3 << 62 and by_api["cudaLaunchKernel"][1] == 3 << 62
    assert per_step[0].tolist() == [3, 3 << 62, 0]


def test_ranges_that_share_a_byte_of_the_bitmap_keep_both_calls() -> None:
    a = {i: 0 for i in range(0, 11)}  # ids 0..10 and 12..20: byte 1 holds both parts' ids
    b = {i: 1 for i in range(12, 21)}
    api, _, duplicated, _ = merge_runtime([_part(a, True), _part(b, True)])
    assert not duplicated and 5 in api.compact
    probes = np.arange(-1, 23)
    found, step = api.lookup(np.full(len(probes), 5), probes)
    assert found.tolist() == [c in a or c in b for c in probes.tolist()]
    assert step.tolist() == [0 if c in a else 1 if c in b else NO_STEP for c in probes.tolist()]


def test_a_call_in_two_compact_parts_is_a_duplicate() -> None:
    a = {i: 0 for i in range(0, 100)}
    b = {i: 1 for i in range(99, 200)}  # 99 in both
    assert merge_runtime([_part(a, True), _part(b, True)])[2]


def test_repeated_keys_in_one_batch_widen_before_they_overflow() -> None:
    totals = LaunchTotals.of(("cudaLaunchKernel",), 1)
    n = 20  # 20 x 2^59 in one cell of one batch: past 2^63
    totals.add(np.zeros(n, np.int64), np.zeros(n, np.int64), np.full(n, 1 << 59),
               np.zeros(n, np.int64))  # fmt: skip
    assert _summed(totals, 1)[2][0].tolist() == [n, n << 59, 0]


def test_bitmaps_marked_a_bounded_piece_at_a_time(monkeypatch):
    """CompactCalls.of marks ids in bounded masks: ids across many of them land in place."""
    import census.load.call_map as call_map

    calls = {c: c // 50 for c in range(3, 700, 3)}
    corr, step = _columns(calls)
    whole = CompactCalls.of(corr, step)
    for size in (8, 16, 24, 1 << 23):
        monkeypatch.setattr(call_map, "_MASK_BYTES", size)
        compact = CompactCalls.of(corr, step)
        assert compact is not None and whole is not None
        assert compact.bits.tolist() == whole.bits.tolist()
        found, step_of = compact.lookup(np.arange(-2, 710))
        assert found.tolist() == [c in calls for c in range(-2, 710)]
        assert step_of.tolist() == [calls.get(c, NO_STEP) for c in range(-2, 710)]


batches_st = st.lists(
    st.tuples(
        st.lists(st.integers(0, 3000) | st.integers(0, 1 << 40), min_size=1, max_size=60),
        st.integers(0, 3),
        st.sampled_from(["up", "up", "sorted", "drawn"]),
    ),
    min_size=1,
    max_size=12,
)


def _batch_ids(drawn: list[int], mode: str, last: int) -> list[int]:
    """ "up": after `last`, gaps of the drawn numbers mod 9 (the first may be 0: `last` again);
    "sorted": the drawn ids sorted; "drawn": as drawn (repeats dropped)."""
    if mode == "up":
        ids = [last + drawn[0] % 9]
        for d in drawn[1:]:
            ids.append(ids[-1] + 1 + d % 9)
        return ids
    return sorted(set(drawn)) if mode == "sorted" else list(dict.fromkeys(drawn))


@settings(max_examples=300)
@given(batches_st)
def test_calls_compacted_batch_by_batch_look_up_as_their_columns(batches: list) -> None:
    """A worker compacts each batch's calls while they increase (census.load.api_calls.
    RangeCalls.keep), and keeps columns from the first batch that does not: either way the part
    looks up every id as a dictionary of all its calls; calls that increase throughout come out
    as CompactCalls.of over all of them would make them (the same runs)."""
    part, seen, columns = RangeCalls(), {}, ([], [])
    last = 0
    for drawn, step, mode in batches:
        ids = _batch_ids(drawn, mode, last)
        last = max(last, *ids)
        steps = [step + (i % 2 if len(ids) > 30 else 0) for i in range(len(ids))]
        corr, step_col = np.array(ids, np.int64), np.array(steps, np.int32)
        part.keep(5, corr, step_col)
        columns[0].append(corr)
        columns[1].append(step_col)
        for c, s in zip(ids, steps, strict=True):
            seen.setdefault(c, []).append(s)
    part.close()
    api, _, duplicated, _ = merge_runtime([RuntimePart(Calls([part]))])
    assert duplicated == any(len(v) > 1 for v in seen.values())
    if duplicated:
        return  # an id seen twice: the runtime pass reads those again (read_runtime_grouped)
    calls = {c: v[0] for c, v in seen.items()}
    probes = _probes(calls)
    found, step = api.lookup(np.full(len(probes), 5, np.int64), probes)
    assert found.tolist() == [c in calls for c in probes.tolist()]
    assert step.tolist() == [calls.get(c, NO_STEP) for c in probes.tolist()]
    corr, steps = np.concatenate(columns[0]), np.concatenate(columns[1])
    if 5 in part.compact and bool(np.all(corr[1:] > corr[:-1])):
        whole = CompactCalls.of(corr, steps)
        if whole is not None:
            got = part.compact[5]
            assert (got.first, got.last, got.run_corr.tolist(), got.run_step.tolist()) == (
                whole.first,
                whole.last,
                whole.run_corr.tolist(),
                whole.run_step.tolist(),
            )
            assert np.array_equal(got.bits, whole.bits)


def test_launch_totals_set_aside_come_back_unchanged(tmp_path) -> None:
    """spilled_while: the table in a file of the folder while inside (none in memory), the same
    table after, the file gone; nothing moves without a folder or for Python ints."""
    from census.load.launch_totals import spilled_while

    totals = LaunchTotals.of(("cudaLaunchKernel", "cuLaunchKernelEx"), 4)
    totals.add(np.array([0, 3, 3, NO_STEP]), np.array([0, 1, 1, 0]),
               np.array([5, 7, INT_NULL, 9]), np.array([0, 1, 0, 0]))  # fmt: skip
    before = totals.sums.values.copy()
    with spilled_while(totals, str(tmp_path)):
        assert totals.sums.values.size == 0 and len(list(tmp_path.iterdir())) == 1
    assert np.array_equal(totals.sums.values, before) and not list(tmp_path.iterdir())
    assert _summed(totals, 4)[0] == [4, 21, 1]
    with spilled_while(totals, None):
        assert np.array_equal(totals.sums.values, before)
    totals.sums.values = totals.sums.values.astype(object)
    with spilled_while(totals, str(tmp_path)):
        assert totals.sums.values.dtype == object and not list(tmp_path.iterdir())


def test_spilled_bitmaps_look_up_as_in_memory(tmp_path, monkeypatch) -> None:
    """CompactCalls.spilled (the bitmap read from a file as lookups need it, a span at once or
    a block at a time) finds the same calls and steps as the bitmap in memory, and gives the
    same columns; ApiMap.spilled moves every compact process's bitmap."""
    import census.load.call_map as call_map

    rng = np.random.default_rng(5)
    corr = np.unique(rng.integers(0, 2_000_000, 60_000))  # a 250 KB bitmap: 4 blocks
    step = np.repeat(np.arange(40), len(corr) // 40 + 1)[: len(corr)]
    calls = CompactCalls.of(corr, step)
    assert calls is not None
    spilled = calls.spilled(str(tmp_path / "bits.bin"))
    assert spilled.spilled("unused") is spilled and not (tmp_path / "unused").exists()
    for span in (1 << 22, 1 << 10, 1):  # one read, or the blocks (a far call among near ones)
        monkeypatch.setattr(call_map, "SPAN_BYTES", span)
        for probes in (rng.integers(-5, 2_000_010, 5000), corr[100:900] + rng.integers(0, 2, 800),
                       np.array([corr[0], corr[-1], corr[-1] + 1]), np.zeros(0, np.int64)):  # fmt: skip
            want = calls.lookup(probes)
            got = spilled.lookup(probes)
            assert got[0].tolist() == want[0].tolist() and got[1].tolist() == want[1].tolist()
    assert all(
        np.array_equal(a, b) for a, b in zip(spilled.columns(), calls.columns(), strict=True)
    )
    api, _, _, _ = merge_runtime([_part({int(c): 0 for c in corr[:500]}, True)])
    moved = api.spilled(str(tmp_path))
    assert list(moved.compact) == list(api.compact) and len(list(tmp_path.glob("calls-*"))) == 1
    probes = corr[:600]
    assert [a.tolist() for a in moved.lookup(np.full(600, 5), probes)] == [
        a.tolist() for a in api.lookup(np.full(600, 5), probes)
    ]

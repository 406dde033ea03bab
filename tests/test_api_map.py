"""The API map: which step each (process, correlationId) started in, as sorted columns, its
correlationIds narrowed to uint32 when they all fit (census.load.api_calls)."""

from __future__ import annotations

import numpy as np
from hypothesis import given
from hypothesis import strategies as st

from census.load.api_calls import ApiMap, narrow
from census.load.api_names import TABLE_IDS, ApiNames
from census.load.intervals import INT_NULL, NO_STEP

U32 = (1 << 32) - 1
ids = st.integers(0, U32) | st.integers(-(1 << 40), 1 << 40)


def brute(map_: dict[int, dict[int, int]], proc: list[int], corr: list[int]) -> tuple[list, list]:
    found = [c in map_.get(p, {}) for p, c in zip(proc, corr, strict=True)]
    step = [map_.get(p, {}).get(c, NO_STEP) for p, c in zip(proc, corr, strict=True)]
    return found, step


@given(
    st.dictionaries(st.integers(0, 2), st.dictionaries(ids, st.integers(0, 50), max_size=20)),
    st.lists(st.tuples(st.integers(0, 3), ids), max_size=40),
)
def test_lookup_matches_brute_force_whatever_the_ids(given_map: dict, probes: list) -> None:
    api = ApiMap()
    for p, calls in given_map.items():
        corr = np.array(sorted(calls), np.int64)
        api.corr[p] = narrow(corr)
        api.step[p] = np.array([calls[c] for c in sorted(calls)], np.int32)
    # probes past 2^32 whose low 32 bits are a stored id must not match a narrowed map
    probes += [(p, c + (1 << 32)) for p, calls in given_map.items() for c in list(calls)[:2]]
    proc = np.array([p for p, _ in probes], np.int64)
    corr = np.array([c for _, c in probes], np.int64)
    found, step = api.lookup(proc, corr)
    assert (found.tolist(), step.tolist()) == brute(given_map, proc.tolist(), corr.tolist())


def test_narrow_only_when_every_id_fits() -> None:
    assert narrow(np.array([0, 5, U32], np.int64)).dtype == np.uint32
    assert narrow(np.array([0, U32 + 1], np.int64)).dtype == np.int64
    assert narrow(np.array([-1, 3], np.int64)).dtype == np.int64
    assert narrow(np.zeros(0, np.int64)).dtype == np.int64
    api = ApiMap({1: narrow(np.array([3, 7], np.int64))}, {1: np.array([0, 1], np.int32)})
    found, step = api.lookup(np.array([1, 1, INT_NULL, 1]), np.array([7, INT_NULL, 3, -5]))
    assert found.tolist() == [True, False, False, False] and step.tolist() == [1, -1, -1, -1]


names_ids = st.integers(0, 80) | st.integers(-(1 << 62), 1 << 62)


@given(
    st.sets(st.integers(0, 60), max_size=8),
    st.sets(st.integers(0, 60), max_size=3),
    st.lists(names_ids, max_size=60),
    st.booleans(),
)
def test_name_lookups_are_membership_whatever_the_ids(
    candidates: set, syncs: set, probes: list, big: bool
) -> None:
    """launch_code, is_candidate and is_sync by table equal their definitions on any id: NULL,
    negative, past the largest id read, and near int64's ends; `big`: the ids are too large
    for a table (the search path)."""
    shift = TABLE_IDS if big else 0
    cands = sorted(c + shift for c in candidates)
    launch = np.array([c for c in cands if c % 3], np.int64)
    sync = tuple(sorted(s + shift for s in syncs))
    names = ApiNames(tuple(cands), launch, ("x",) * len(launch), np.zeros(len(launch), np.int64),
                     sync, True)  # fmt: skip
    name = np.array([*probes, *cands, INT_NULL, np.iinfo(np.int64).max], np.int64)
    assert (names._tables is None) == (big and bool(cands or sync))
    rows = name.tolist()
    code = [launch.tolist().index(n) if n in launch.tolist() else -1 for n in rows]
    assert names.launch_code(name).tolist() == code
    assert names.is_candidate(name).tolist() == [n in cands for n in rows]
    assert names.is_sync(name).tolist() == [n in sync for n in rows]

"""Per-key figures as columns (census.load.figures): keys summed into cells in one numpy
operation give exactly the sums one Python loop per key gives, past int64 too."""

from __future__ import annotations

import numpy as np
from hypothesis import given
from hypothesis import strategies as st

from census.load.accumulators import key_table
from census.load.figures import (
    NO_END,
    NO_START,
    SPAN,
    Columns,
    Spans,
    Sums,
    add_columns,
    add_rows,
    fit_rows,
    gpu_spans,
    int64_or_objects,
    named,
    sum_keys,
)
from census.metrics import IDLE_KEYS, METRIC_KEYS
from census.model.step import IdleSplit, Metrics

BIG = 1 << 62


def test_int64_or_objects_keeps_int64_below_2_60_and_python_ints_beyond() -> None:
    assert int64_or_objects([[1, 2], [3, -4]]).dtype == np.int64
    wide = int64_or_objects([1, 1 << 60])
    assert wide.dtype == object and wide.tolist() == [1, 1 << 60]
    huge = int64_or_objects([1 << 70, 5])
    assert huge.dtype == object and huge.tolist() == [1 << 70, 5]


def test_add_rows_never_overflows() -> None:
    values = np.array([[BIG, 1], [BIG, 2], [BIG, 3], [5, 4]], np.int64)
    out = add_rows(np.array([0, 0, 0, 1]), 3, values)
    assert out.tolist() == [[3 * BIG, 6], [5, 4], [0, 0]]
    small = add_rows(np.array([1, 1]), 2, np.array([[2], [3]], np.int64))
    assert small.dtype == np.int64 and small.tolist() == [[0], [5]]


def spans_of(n: int, given: dict[int, list[int]]) -> Spans:
    """Spans of n keys, each given key spanning [first, last]."""
    out = Spans(n)
    for key, (first, last) in given.items():
        out.add(np.array([key, key]), np.array([first, last]), np.array([first, last]))
    return out


def test_fit_rows_pads_with_zeros_or_cuts() -> None:
    values = np.array([[1, 2], [3, 4]])
    assert fit_rows(values, 3).tolist() == [[1, 2], [3, 4], [0, 0]]
    assert fit_rows(values, 1).tolist() == [[1, 2]]
    assert fit_rows(np.array([[BIG * 4]], object), 2).tolist() == [[BIG * 4], [0]]


def _spans(table: Columns) -> tuple[list, list]:
    """(per key its GPU start, per key its GPU span), None where it launched no GPU work."""
    gpu, launched = gpu_spans(table)
    return tuple([v if on else None for v, on in zip(col, launched.tolist(), strict=True)]
                 for col in gpu.T.tolist())  # fmt: skip


def test_finished_spans_mark_keys_without_gpu_work() -> None:
    table = spans_of(2, {0: [5, 5]}).finish(3)
    assert _spans(table) == ([5, None, None], [0, None, None])  # key 2: past the spans
    table = spans_of(3, {2: [10, 40], 0: [5, 5]}).finish(3)
    assert _spans(table) == ([5, None, 10], [0, None, 30])
    assert (table["first_start_ns"][1], table["last_end_ns"][1]) == (NO_START, NO_END)


def test_spans_fold_by_minimum_and_maximum() -> None:
    a, b = spans_of(3, {0: [5, 9], 1: [7, 8]}), spans_of(3, {0: [2, 6], 2: [1, 1]})
    a.merge(b)
    assert a.first.tolist() == [2, 7, 1] and a.last.tolist() == [9, 8, 1]


@given(
    st.lists(st.tuples(st.integers(0, 3), st.integers(-BIG, BIG)), max_size=20), st.integers(1, 4)
)
def test_sums_are_the_python_sums_in_any_batches(rows: list, batches: int) -> None:
    """Added batch by batch and merged, into int64 while that is safe, Python ints beyond."""
    halves = [Sums(4, 1), Sums(4, 1)]
    for i in range(batches):
        mine = rows[i::batches]
        keys = sorted({k for k, _ in mine})
        sums = [[sum(v for k, v in mine if k == key)] for key in keys]
        halves[i % 2].add_keys(np.array(keys, np.int64), int64_or_objects(sums).reshape(-1, 1))
    halves[0].merge(halves[1])
    assert halves[0].values[:, 0].tolist() == [
        sum(v for k, v in rows if k == key) for key in range(4)
    ]
    if all(abs(v) < 1000 for _, v in rows):
        assert halves[0].values.dtype == np.int64


def test_key_table_is_the_columns_side_by_side_uncopied() -> None:
    values = np.array([[1, 2], [3, 4]])
    table = key_table([named(("a", "b"), values), Spans(1).finish(2)])
    assert list(table) == ["a", "b", *SPAN] and table["b"].tolist() == [2, 4]
    assert np.shares_memory(table["a"], values)


keyed = st.lists(
    st.tuples(
        st.integers(0, 4),  # the cell
        st.lists(st.integers(-BIG, BIG), min_size=2, max_size=2),
        st.one_of(st.none(), st.tuples(st.integers(0, 1000), st.integers(0, 1000))),
    ),
    max_size=30,
)


@given(keyed)
def test_summed_is_the_python_sum_and_the_widest_span(rows: list) -> None:
    spans = {i: [min(s), max(s)] for i, (_, _, s) in enumerate(rows) if s is not None}
    values = int64_or_objects([v for _, v, _ in rows]).reshape(-1, 2)
    table = named(("x", "y"), values) | spans_of(len(rows), spans).finish(len(rows))
    out = sum_keys(table, np.array([c for c, _, _ in rows], int), 5)
    for cell in range(5):
        mine = [i for i, (c, _, _) in enumerate(rows) if c == cell]
        assert [out["x"][cell], out["y"][cell]] == [sum(rows[i][1][j] for i in mine)
                                                    for j in (0, 1)]  # fmt: skip
        got = [spans[i] for i in mine if i in spans]
        first = min((s[0] for s in got), default=None)
        span = None if first is None else max(s[1] for s in got) - first
        assert (_spans(out)[0][cell], _spans(out)[1][cell]) == (first, span)
    assert list(out) == ["x", "y", *SPAN] and len(out["x"]) == 5


def test_as_dict_is_in_key_order() -> None:
    """Metrics and IdleSplit.as_dict copy the field dict: the fields are declared in key order."""
    assert list(Metrics(*range(len(METRIC_KEYS))).as_dict().items()) == list(
        zip(METRIC_KEYS, range(len(METRIC_KEYS)), strict=True)
    )
    assert list(IdleSplit(*range(5)).as_dict()) == list(IDLE_KEYS)


def test_sums_stay_int64_for_small_rows_given_as_python_ints() -> None:
    sums = Sums(3, 1)
    sums.add_keys(np.array([0, 2]), np.array([[4], [5]], object))  # add_rows' cautious objects
    assert sums.values.dtype == np.int64 and sums.values[:, 0].tolist() == [4, 0, 5]
    sums.add_keys(np.array([1]), np.array([[BIG * 8]], object))
    assert sums.values.dtype == object and sums.values[:, 0].tolist() == [4, BIG * 8, 5]


def test_add_rows_a_chunk_at_a_time_is_the_python_sum(monkeypatch) -> None:
    """add_rows sums SUM_ROWS rows at a time (a key's rows split across chunks add up), with
    `more` zero columns after the sums; add_columns sums columns apart with one sort."""
    import census.load.figures as figures

    rng = np.random.default_rng(3)
    for chunk in (1, 3, 7, 1 << 16):
        monkeypatch.setattr(figures, "SUM_ROWS", chunk)
        for trial in range(30):
            m, n = int(rng.integers(0, 40)), int(rng.integers(1, 9))
            index = rng.integers(0, n, m)
            index = np.sort(index) if trial % 2 else index
            values = rng.integers(-1000, 1000, (m, 3))
            more = int(rng.integers(0, 3))
            want = np.zeros((n, 3 + more), np.int64)
            np.add.at(want[:, :3], index, values)
            got = add_rows(index, n, values, more)
            assert got.dtype == np.int64 and got.tolist() == want.tolist()
        big = add_rows(np.array([1, 1, 0]), 2, np.array([[BIG], [BIG], [1]]), 1)
        assert big.tolist() == [[1, 0], [2 * BIG, 0]]
        index = rng.integers(0, 4, 25)
        columns = [rng.integers(-1000, 1000, 25), np.array([BIG] * 25, np.int64)]
        got = add_columns(index, 4, columns)
        for values, out in zip(columns, got, strict=True):
            assert out.tolist() == [sum(values[index == k].tolist()) for k in range(4)]
        assert got[0].dtype == np.int64 and got[1].dtype == object

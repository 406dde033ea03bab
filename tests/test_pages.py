"""The page reader (census/sqlite/pages.py, plan.py) against SQLite's own reading (the SQL path),
batch for batch, on the shared exports and on built files that reach every case of the format
it reads or declines."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import numpy as np
import pytest

from census.errors import ColumnError, InputError
from census.sources import schema as sc
from census.sources.readonly import open_readonly
from census.sqlite import columns as C
from census.sqlite.pages import Unreadable, open_table
from census.sqlite.plan import page_plan
from tests.helpers.files import FIXTURES, fixture_file

KERNEL_COLUMNS = {**C.TIMED, "dev": "deviceId", "proc": "globalPid >> 24",
                  "corr": "correlationId", "dn": "demangledName", "sn": "shortName"}  # fmt: skip
READS = [
    (sc.KERNEL, KERNEL_COLUMNS, ""),
    (
        sc.RUNTIME,
        {**C.TIMED, "proc": "globalTid >> 24", "corr": "correlationId", "name": "nameId"},
        "nameId IN (NAMES)",
    ),
    (sc.MEMCPY, {**C.TIMED, "proc": "globalPid >> 24", "bytes": "bytes", "kind": "copyKind"}, ""),
    (sc.MEMSET, {**C.TIMED, "proc": "globalPid >> 24", "bytes": "bytes", "kind": "7"}, ""),
]
SQL = C._sql_batches  # SQLite's own reading, whatever a test patches
EXPORTS = sorted(p.name for p in FIXTURES.glob("*.sqlite"))


def both(conn, table, columns, rows, where="", batch_rows=C.BATCH_ROWS):
    """(pages, SQL): every column of the batches concatenated, and the batches' tops."""
    out = []
    for read in (C.read_batches, SQL):
        batches = list(read(conn, table, columns, rows, where, batch_rows))
        joined = {k: np.concatenate([b[k] for b, _ in batches] or [np.zeros(0, np.int64)])
                  for k in columns}  # fmt: skip
        out.append((joined, [top for _, top in batches]))
    return out


def assert_same(pages, sql):
    assert pages[0].keys() == sql[0].keys()
    for k in sql[0]:
        assert pages[0][k].dtype == np.int64
        np.testing.assert_array_equal(pages[0][k], sql[0][k], err_msg=k)


@pytest.mark.parametrize("name", EXPORTS)
def test_the_shared_exports_read_the_same_from_their_pages(name, fallbacks):
    conn = open_readonly(fixture_file(name))
    rng = np.random.default_rng(7)
    for table, columns, where in READS:
        whole = C.rowid_range(conn, table) if sc.read_schema(conn).has(table) else None
        if whole is None:
            continue
        if "NAMES" in where:
            ids = [i for (i,) in conn.execute(f"SELECT DISTINCT nameId FROM {table} LIMIT 4")]
            where = where.replace("NAMES", ",".join(map(str, ids)))
        page_plan(conn, table, columns, where)  # the pages are read (else: Unreadable)
        ranges = [whole, *(C.split(whole, 3))]
        cut = sorted(rng.integers(whole.lo, whole.hi + 1, 2).tolist())
        ranges.append(C.RowidRange(cut[0], cut[1]))
        for rows in ranges:
            for batch_rows in (7, 1000, C.BATCH_ROWS):
                pages, sql = both(conn, table, columns, rows, where, batch_rows)
                assert_same(pages, sql)
                if pages[1]:
                    assert pages[1][-1] <= rows.hi
    assert fallbacks == []  # every batch came from the pages


def build(path: Path, rows: list[tuple], ddl="a INTEGER, b INTEGER, c INTEGER", page_size=512):
    conn = sqlite3.connect(path)
    conn.execute(f"PRAGMA page_size = {page_size}")
    conn.execute(f"CREATE TABLE t ({ddl})")
    marks = ",".join("?" * len(rows[0]))
    conn.executemany(f"INSERT INTO t VALUES ({marks})", rows)
    conn.commit()
    conn.close()
    return open_readonly(path)


def whole(conn):
    return C.rowid_range(conn, "t")


# every width SQLite stores an integer in (1, 2, 3, 4, 6, 8 bytes), both signs, 0 and 1 (no
# bytes), NULL
EDGES = [0, 1, -1, 2, 127, -128, 128, 32767, -32768, 32768, 2**23 - 1, -(2**23), 2**23,
         2**31 - 1, -(2**31), 2**31, 2**47 - 1, -(2**47), 2**47, 2**63 - 1, -(2**63) + 1, None]  # fmt: skip


def test_every_integer_width_and_null_in_a_deep_tree(tmp_path, fallbacks):
    rng = np.random.default_rng(3)
    values = [EDGES[i] for i in rng.integers(0, len(EDGES), 3 * 20_000)]
    rows = [tuple(values[i : i + 3]) for i in range(0, len(values), 3)]
    conn = build(tmp_path / "w.sqlite", rows)
    conn2 = sqlite3.connect(tmp_path / "w.sqlite")
    conn2.execute("DELETE FROM t WHERE rowid % 7 = 0 OR rowid BETWEEN 5000 AND 9000")
    conn2.commit()
    conn2.close()
    conn = open_readonly(tmp_path / "w.sqlite")
    pages = open_table(conn, "t")
    assert len(pages.layout.leaves.page) > 100  # interior pages on more than one level
    columns = {"a": "a", "b": '"b"', "c": "c >> 3", "d": "NULL", "e": "-5"}
    for rows in (whole(conn), C.RowidRange(4999, 9001), C.RowidRange(6, 19_993)):
        for batch_rows in (1, 333, 100_000):
            assert_same(*both(conn, "t", columns, rows, "", batch_rows))
    assert_same(*both(conn, "t", columns, whole(conn), "b IN (1, 0, -128)", 50))
    assert_same(*both(conn, "t", columns, whole(conn), "0", 50))
    assert fallbacks == []


def test_a_difference_that_overflows_is_not_an_integer(tmp_path):
    conn = build(tmp_path / "o.sqlite", [(0, 5, 1), (-(2**62), 2**62, 1)], 'start, "end", c')
    plan = page_plan(conn, "t", C.TIMED, "")
    assert plan is not None
    errors = []
    for read in (C.read_batches, C._sql_batches):
        with pytest.raises(ColumnError) as exc:
            list(read(conn, "t", C.TIMED, whole(conn), "", 10))
        errors.append(str(exc.value))
    assert errors[0] == errors[1] == "t.end - start holds values that are not integers"


@pytest.mark.parametrize("bad", [1.5, "x", b"\x00", 2.0**70])
def test_a_value_that_is_not_an_integer_is_an_error_in_both_readers(tmp_path, bad):
    conn = build(tmp_path / "b.sqlite", [(1, 2, 3), (4, bad, 6)])
    for read in (C.read_batches, C._sql_batches):
        with pytest.raises(ColumnError, match=r"^t\.b holds values that are not integers$"):
            list(read(conn, "t", {"a": "a", "b": "b"}, whole(conn), "", 10))
    # outside the condition it is read by neither, and matches it in neither
    assert_same(*both(conn, "t", {"a": "a", "c": "c"}, whole(conn), "b IN (2)", 10))


def declined_midway(tmp_path, fallbacks, row, ddl):
    """A file whose 3,000th row is one the page reader declines: the batches before it come from
    the pages, the rest from SQL, and together they are SQL's."""
    rows = [(i, i * 3, -i) for i in range(6000)]
    rows[3000] = row
    conn = build(tmp_path / "d.sqlite", rows, ddl)
    page_plan(conn, "t", {"a": "a", "c": "c"}, "")  # read from the pages (else: Unreadable)
    assert_same(*both(conn, "t", {"a": "a", "c": "c"}, whole(conn), "", 500))
    assert len(fallbacks) == 1 and 2500 <= fallbacks[0].lo < 3001  # SQL from the last batch on


def test_an_overflowing_payload_is_read_with_sql(tmp_path, fallbacks):
    declined_midway(tmp_path, fallbacks, (1, "z" * 5000, 3), "a INTEGER, b, c INTEGER")


def test_a_long_text_before_a_wanted_column_is_read_with_sql(tmp_path, fallbacks):
    declined_midway(tmp_path, fallbacks, (1, "y" * 100, 3), "a INTEGER, b, c INTEGER")


def test_rows_with_fewer_columns_than_the_table_are_read_with_sql(tmp_path):
    conn = build(tmp_path / "f.sqlite", [(i, i, i) for i in range(2000)])
    writer = sqlite3.connect(tmp_path / "f.sqlite")
    writer.execute("ALTER TABLE t ADD COLUMN d INTEGER DEFAULT 9")
    writer.commit()
    writer.close()
    conn = open_readonly(tmp_path / "f.sqlite")
    assert_same(*both(conn, "t", {"a": "a", "d": "d"}, whole(conn), "", 100))


def test_an_integer_primary_key_is_left_to_sql(tmp_path, fallbacks):
    """It may be the rowid (its value not in the record) or not (declared DESC)."""
    conn = build(tmp_path / "k.sqlite", [(i * 5, i) for i in range(1, 3000)],
                 "id INTEGER PRIMARY KEY, v INTEGER")  # fmt: skip
    with pytest.raises(Unreadable, match=r"^column id: an INTEGER PRIMARY KEY or REAL column$"):
        page_plan(conn, "t", {"id": "id"}, "")
    page_plan(conn, "t", {"v": "v"}, "")
    assert_same(*both(conn, "t", {"v": "v"}, whole(conn), "", 250))
    assert fallbacks == []


def test_what_the_page_reader_does_not_read_is_left_to_sql(tmp_path, monkeypatch):
    conn = build(tmp_path / "n.sqlite", [(1, 2)], "a INTEGER, b")
    conn.close()
    writer = sqlite3.connect(tmp_path / "n.sqlite")
    writer.execute("CREATE TABLE w (a INTEGER PRIMARY KEY, b) WITHOUT ROWID")
    writer.execute("INSERT INTO w VALUES (1, 2)")
    writer.commit()
    writer.close()
    conn = open_readonly(tmp_path / "n.sqlite")
    refused = [
        ("w", {"a": "a"}, "", "a table without rowids"),
        ("t", {"a": "a + 1"}, "", r"an expression the page reader does not evaluate \(a \+ 1\)"),
        ("t", {"a": "a"}, "b > 1", r"a condition the page reader does not evaluate \(b > 1\)"),
        ("t", {"a": "nope"}, "", "column nope: not one of its columns"),  # SQL says it is missing
    ]
    for table, columns, where, why in refused:
        with pytest.raises(Unreadable, match=f"^{why}$"):
            page_plan(conn, table, columns, where)
    page_plan(conn, "t", {"a": "a"}, "")
    monkeypatch.setenv("CENSUS_READER", "sql")
    with pytest.raises(Unreadable, match=r"^\$CENSUS_READER is sql$"):
        page_plan(conn, "t", {"a": "a"}, "")


def test_a_file_changed_while_it_is_read_is_an_error(tmp_path):
    conn = build(tmp_path / "c.sqlite", [(i, i, i) for i in range(5000)])
    batches = C.read_batches(conn, "t", {"a": "a"}, whole(conn), "", 100)
    next(batches)
    writer = sqlite3.connect(tmp_path / "c.sqlite")
    writer.execute("UPDATE t SET a = 0")
    writer.commit()
    writer.close()
    with pytest.raises(InputError, match="the file changed while census read it"):
        list(batches)


def test_the_page_reader_keeps_the_last_files_tables_only(tmp_path):
    """A process that reads many exports (a Dask worker, a rank folder) holds one file's leaves."""
    from census.sqlite import plan

    first = build(tmp_path / "a.sqlite", [(i, i, i) for i in range(500)])
    page_plan(first, "t", {"a": "a"}, "")
    second = build(tmp_path / "b.sqlite", [(i, i, i) for i in range(500)])
    page_plan(second, "t", {"a": "a"}, "")
    assert {Path(k[0]).name for k in plan._opened} == {"b.sqlite"}


def _varint(v: int) -> list[int]:
    """SQLite's varint of v (its 64 bits): big-endian 7-bit groups, the 9th byte all 8 bits."""
    v &= (1 << 64) - 1
    if v >= 1 << 56:
        tail, v = v & 0xFF, v >> 8
        return [0x80 | (v >> (7 * k)) & 0x7F for k in range(7, -1, -1)] + [tail]
    out = [v & 0x7F]
    while v := v >> 7:
        out.insert(0, 0x80 | (v & 0x7F))
    return out


def _decode(data: list[int], at: int) -> tuple[int, int]:
    """The varint at `at`, byte by byte: (value, length)."""
    v = 0
    for k in range(8):
        v = (v << 7) | (data[at + k] & 0x7F)
        if data[at + k] < 0x80:
            return v, k + 1
    return ((v << 8) | data[at + 8]) & ((1 << 64) - 1), 9


def test_varints_of_every_length_and_of_any_bytes():
    """btree.varints (whole-array bit arithmetic) against a byte-by-byte decoder: the varints
    of values of every bit length 0..64, and any bytes read as varints."""
    from census.sqlite.btree import varints

    rng = np.random.default_rng(7)
    values = [0, 127, 128, 16383, 16384, (1 << 56) - 1, 1 << 56, (1 << 63), (1 << 64) - 1]
    values += [
        int(rng.integers(0, 1 << 62)) >> (62 - bits) for bits in range(63) for _ in range(20)
    ]
    data, at = [], []
    for v in values:
        at.append(len(data))
        data += _varint(v)
    junk = len(data)
    data += rng.integers(0, 256, 4000).tolist()
    at += range(junk, junk + 3990)
    buf = np.array([*data, *[0] * 16], np.uint8)
    got, length = varints(buf, np.array(at, np.int64))
    _, only_length = varints(buf, np.array(at, np.int64), values=False)
    want = [_decode(data + [0] * 16, a) for a in at]
    assert [(int(v) & ((1 << 64) - 1), int(n)) for v, n in zip(got, length, strict=True)] == want
    assert only_length.tolist() == length.tolist()
    assert [w for w, _ in want[: len(values)]] == [v & ((1 << 64) - 1) for v in values]

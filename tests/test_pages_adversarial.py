"""The page reader (census/sqlite/pages.py, plan.py) against SQLite's own reading on files built to
break it: every page size, reserved bytes, auto-vacuum, fragmented and vacuumed files, extreme
rowids, payloads at the overflow threshold, logs beside the file, odd file names, odd schemas,
odd values and damaged pages. Each read must give SQL's rows (or SQL's error), never a traceback,
a hang, a mixed read, or a changed input."""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import random
import shutil
import signal
import sqlite3
from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

from census.cli import app
from census.sources.readonly import open_readonly
from census.sources.readonly import opened_file as database_file
from census.sqlite import columns as C
from census.sqlite import pages as P
from census.sqlite.pages import Unreadable, open_table
from census.sqlite.plan import page_plan
from tests.nsysdb import Export

SQL = C._sql_batches  # SQLite's own reading, whatever a test patches
N = 1 << 63
NSYS = {"start": "start", "dur": '"end" - start', "proc": "globalPid >> 24", "x": "NULL", "k": "7"}
WHERES = ["", "nameId IN (1,2)", "0"]


def outcome(read, conn, table, columns, rows, where="", batch_rows=100):
    """The columns of all batches concatenated, or (the error's type, its message)."""
    try:
        batches = list(read(conn, table, columns, rows, where, batch_rows))
    except Exception as exc:  # any error is an outcome to compare, never the test's crash
        return type(exc).__name__, str(exc)
    return {k: np.concatenate([b[k] for b, _ in batches] or [np.zeros(0, np.int64)]).tolist()
            for k in columns}  # fmt: skip


def assert_as_sql(conn, table, columns, rows, where="", batch_rows=100):
    """read_batches gives SQL's rows, or SQL's error (a damaged file: SQLite's error or census's
    one-line InputError)."""
    got = outcome(C.read_batches, conn, table, columns, rows, where, batch_rows)
    want = outcome(SQL, conn, table, columns, rows, where, batch_rows)
    if isinstance(want, tuple) and want[0] == "DatabaseError" and isinstance(got, tuple):
        assert got[0] in ("DatabaseError", "InputError"), got
        return
    assert got == want, (rows, where, batch_rows)


def build(path: Path, ddl: str, rows=(), page_size=4096, reserve=0, pragmas=(), after=()) -> Path:
    """A file with table t; `reserve` bytes at the end of every page (set in the header of the
    empty file, then laid out by VACUUM: PRAGMA cannot set it)."""
    conn = sqlite3.connect(path)
    conn.execute(f"PRAGMA page_size = {page_size}")
    for p in pragmas:
        conn.execute(p)
    conn.execute("VACUUM")
    conn.close()
    if reserve:
        with open(path, "r+b") as fh:
            fh.seek(20)
            fh.write(bytes([reserve]))
    conn = sqlite3.connect(path)
    conn.execute("VACUUM")
    conn.execute(f"CREATE TABLE t ({ddl})")
    rows = list(rows)
    if rows:
        conn.executemany(f"INSERT INTO t VALUES ({','.join('?' * len(rows[0]))})", rows)
    conn.commit()
    for sql in after:
        conn.execute(sql)
        conn.commit()
    assert conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
    conn.close()
    return path


def whole(conn, table="t"):
    return C.rowid_range(conn, table)


def sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


# A table's b-tree read here, independently of census, to damage chosen pages


def _root(path: Path, table="t") -> tuple[int, int]:
    conn = sqlite3.connect(path)
    root = conn.execute("SELECT rootpage FROM sqlite_master WHERE name = ?", (table,)).fetchone()
    size = conn.execute("PRAGMA page_size").fetchone()[0]
    conn.close()
    return root[0], size


def _children(page: bytes) -> list[int]:
    count = int.from_bytes(page[3:5], "big")
    cells = [int.from_bytes(page[12 + 2 * i : 14 + 2 * i], "big") for i in range(count)]
    return [int.from_bytes(page[c : c + 4], "big") for c in cells] + [
        int.from_bytes(page[8:12], "big")
    ]


def leaf_pages(path: Path, table="t") -> list[int]:
    root, size = _root(path, table)
    data = path.read_bytes()
    level = [root]
    while data[(level[0] - 1) * size] != 0x0D:
        level = [c for p in level for c in _children(data[(p - 1) * size : p * size])]
    return level


def patch(path: Path, page: int, offset: int, data: bytes) -> None:
    size = _root(path)[1]
    with open(path, "r+b") as fh:
        fh.seek((page - 1) * size + offset)
        fh.write(data)


@contextlib.contextmanager
def deadline(seconds: float):
    """A read still going after `seconds` raises TimeoutError (a hang is a failure, not a stall
    of the suite)."""

    def expired(*_):
        raise TimeoutError(f"no answer in {seconds} s")

    old = signal.signal(signal.SIGALRM, expired)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old)


# The file format: every page size, reserved bytes, auto-vacuum, fragmentation


NSYS_DDL = 'globalPid INTEGER, start INTEGER, "end" INTEGER, nameId INTEGER, txt TEXT'
EDGES = [0, 1, -1, 2, 127, -128, 128, 32767, -32768, 32768, 2**23 - 1, -(2**23), 2**23,
         2**31 - 1, -(2**31), 2**31, 2**47 - 1, -(2**47), 2**47, 2**62, -(2**62), None]  # fmt: skip


def nsys_rows(n: int, seed: int, rowids="dense", texts=True) -> list[tuple]:
    """Rows (rowid, globalPid, start, end, nameId, txt) in a random order: values of every
    width, NULLs, the constants 0 and 1, texts short and long (overflow pages on small pages)."""
    rng = random.Random(seed)
    out, seen = [], set()
    for i in range(n):
        if rowids == "dense":
            rid = i + 1
        elif rowids == "sparse":
            rid = rng.randrange(-N + 1, N)
        else:  # the ends of the range, then around 0
            ends = [-N + 1, N - 1, -N + 2, N - 2, 0, -1, 1]
            rid = ends[i] if i < len(ends) else rng.randrange(-(2**40), 2**40)
        if rid in seen:
            continue
        seen.add(rid)
        start = rng.choice(EDGES)
        end = None if start is None or rng.random() < 0.1 else start + rng.choice([0, 1, 2**33])
        texts_ = [None, "", "ab", "x" * 57, "y" * 58, "z" * 300]
        out.append((rid, rng.choice(EDGES), start, end, rng.choice([0, 1, 2, 3, None, -1, 2**31]),
                    rng.choice(texts_) if texts else None))  # fmt: skip
    rng.shuffle(out)  # inserted out of rowid order: leaves split everywhere
    return out


def nsys_table(path: Path, rows, **kw) -> Path:
    build(path, NSYS_DDL, (), **kw)
    conn = sqlite3.connect(path)
    conn.executemany(
        'INSERT INTO t (rowid, globalPid, start, "end", nameId, txt) VALUES (?,?,?,?,?,?)', rows
    )
    conn.commit()
    conn.close()
    return path


def ranges_of(conn) -> list[C.RowidRange]:
    w = whole(conn)
    rng = random.Random(5)
    cut = sorted(rng.randrange(w.lo, w.hi + 1) for _ in range(2))
    return [w, C.RowidRange(*cut), *C.split(w, 3), C.RowidRange(-5, 5)]


@pytest.mark.parametrize(
    ("page_size", "reserve", "vacuum"),
    [
        (512, 0, "full"),
        (512, 32, None),
        (1024, 32, "incremental"),
        (2048, 0, None),
        (4096, 255, "incremental"),
        (8192, 0, "full"),
        (32768, 17, None),
        (65536, 0, None),
        (65536, 255, "full"),
    ],
)
def test_every_page_size_with_reserved_bytes_and_auto_vacuum(
    tmp_path, fallbacks, page_size, reserve, vacuum
):
    path = tmp_path / "f.sqlite"
    pragmas = [f"PRAGMA auto_vacuum = {vacuum}"] if vacuum else []
    nsys_table(path, nsys_rows(1500, page_size + reserve), page_size=page_size, reserve=reserve,
               pragmas=pragmas)  # fmt: skip
    writer = sqlite3.connect(path)
    writer.execute("DELETE FROM t WHERE rowid % 5 = 1 OR rowid BETWEEN 100 AND 600")  # free blocks
    writer.commit()
    if vacuum == "incremental":
        writer.execute("PRAGMA incremental_vacuum(10)")
        writer.commit()
    writer.close()
    head = path.read_bytes()[:100]
    assert int.from_bytes(head[16:18], "big") == (1 if page_size == 65536 else page_size)
    assert head[20] == reserve
    conn = open_readonly(path)
    page_plan(conn, "t", NSYS, "")  # read from the pages (else: Unreadable)
    for rows in ranges_of(conn):
        for where in WHERES:
            for batch_rows in (7, 100_000):
                assert_as_sql(conn, "t", NSYS, rows, where, batch_rows)
    assert_as_sql(conn, "t", {"n": "nameId", "k": "1"}, whole(conn), "nameId IN (0, -1)", 50)
    assert fallbacks == []  # every row from the pages


@pytest.mark.parametrize("rowids", ["sparse", "ends"])
@pytest.mark.parametrize("vacuumed", [False, True])
def test_rowids_across_the_whole_int64_range(tmp_path, fallbacks, rowids, vacuumed):
    path = nsys_table(tmp_path / "r.sqlite", nsys_rows(1500, 11, rowids, texts=False),
                      page_size=512, after=["VACUUM"] if vacuumed else ())  # fmt: skip
    conn = open_readonly(path)
    rows = [*ranges_of(conn), C.RowidRange(-N + 1, N - 1), C.RowidRange(N - 3, N - 1)]
    for r in rows:
        for where in WHERES:
            for batch_rows in (1, 1000):
                assert_as_sql(conn, "t", NSYS, r, where, batch_rows)
    assert fallbacks == []


def test_chunks_of_a_few_pages_cut_anywhere(tmp_path, monkeypatch, fallbacks):
    """Leaves decoded a few at a time: the rowid bounds of a chunk's edge leaves hold."""
    path = nsys_table(tmp_path / "c.sqlite", nsys_rows(3000, 3, texts=False), page_size=512)
    conn = open_readonly(path)
    for chunk in (1, 3):
        monkeypatch.setattr(P, "CHUNK_BYTES", chunk * 512)
        for r in ranges_of(conn):
            for batch_rows in (1, 50, 100_000):
                assert_as_sql(conn, "t", NSYS, r, "nameId IN (1, 2)", batch_rows)
    assert fallbacks == []


@pytest.mark.parametrize(("page_size", "reserve"), [(512, 0), (512, 32), (4096, 200), (65536, 1)])
def test_payloads_at_the_overflow_threshold(tmp_path, fallbacks, page_size, reserve):
    """A payload of U - 35 bytes (U: the page size less the reserved bytes) is on its leaf and
    read from the pages; one byte more spills to an overflow page and is read with SQL."""
    usable = page_size - reserve
    rows, payloads = [], []
    for payload in range(usable - 38, usable - 31):
        for n in range(payload - 8, payload):
            blob_type = 1 if 12 + 2 * n < 128 else 2 if 12 + 2 * n < 16384 else 3
            # header: its size, a's type, b's (9: the constant 1), the blob's; body: a, the blob
            if 3 + blob_type + 1 + n == payload:
                rows.append((len(rows) + 1, 1, bytes(n)))
                payloads.append(payload)
                break
    path = build(tmp_path / "p.sqlite", "a INTEGER, b INTEGER, pad BLOB", rows,
                 page_size=page_size, reserve=reserve)  # fmt: skip
    conn = open_readonly(path)
    assert_as_sql(conn, "t", {"a": "a", "b": "b"}, whole(conn), "", 1)
    first_spilled = next(i for i, p in enumerate(payloads, 1) if p > usable - 35)
    assert payloads[first_spilled - 2] == usable - 35
    assert [f.lo for f in fallbacks] == [first_spilled - 1]


# Logs, names, the input left as it was


def test_wal_mode_without_a_log_is_read_from_its_pages_and_left_alone(tmp_path, fallbacks):
    path = build(tmp_path / "w.sqlite", "a INTEGER, b INTEGER", [(i, -i) for i in range(3000)],
                 after=["PRAGMA journal_mode = wal"])  # fmt: skip
    before, listing = sha(path), sorted(os.listdir(tmp_path))
    conn = open_readonly(path)
    page_plan(conn, "t", {"a": "a"}, "")  # read from the pages (else: Unreadable)
    assert_as_sql(conn, "t", {"a": "a", "b": "b"}, whole(conn), "", 100)
    conn.close()
    assert fallbacks == []
    assert sha(path) == before and sorted(os.listdir(tmp_path)) == listing


def test_a_log_or_a_journal_beside_the_file_is_read_with_sql(tmp_path):
    path = build(tmp_path / "w.sqlite", "a INTEGER, b INTEGER", [(i, -i) for i in range(3000)],
                 after=["PRAGMA journal_mode = wal"])  # fmt: skip
    writer = sqlite3.connect(path)  # a writer at work: its changes are only in the log
    writer.execute("PRAGMA wal_autocheckpoint = 0")
    writer.execute("UPDATE t SET a = a + 1000000 WHERE rowid % 2 = 0")
    writer.commit()
    conn = open_readonly(path)  # reads a private copy of the file and its log
    with pytest.raises(Unreadable, match=r"^a write-ahead log or hot journal beside the file$"):
        page_plan(conn, "t", {"a": "a"}, "")
    assert_as_sql(conn, "t", {"a": "a"}, whole(conn), "", 100)
    assert outcome(C.read_batches, conn, "t", {"a": "a"}, whole(conn))["a"][1] == 1000001
    writer.close()
    plain = build(tmp_path / "j.sqlite", "a INTEGER", [(1,), (2,)])
    Path(f"{plain}-journal").write_bytes(b"\0" * 512)
    conn = sqlite3.connect(plain)
    with pytest.raises(Unreadable):
        open_table(conn, "t")


def test_a_non_utf8_name_a_link_and_the_input_left_alone(tmp_path, fallbacks):
    path = Path(os.fsdecode(os.fsencode(str(tmp_path)) + b"/\xff\xfe name?#%.sqlite"))
    build(path, "a INTEGER, b INTEGER", [(i, -i) for i in range(3000)])
    link = tmp_path / "link.sqlite"
    link.symlink_to(path)
    before, stat, listing = sha(path), path.stat(), sorted(os.listdir(tmp_path))
    for name in (path, link):
        conn = open_readonly(name)
        assert database_file(conn) == path
        assert_as_sql(conn, "t", {"a": "a", "b": "b >> 1"}, whole(conn), "a IN (5, 7)", 100)
        conn.close()
    assert fallbacks == []
    assert sha(path) == before and path.stat().st_mtime_ns == stat.st_mtime_ns
    assert sorted(os.listdir(tmp_path)) == listing  # no -wal, -shm or -journal made


def test_a_truncated_file_reads_as_sql_reads_it(tmp_path):
    base = build(tmp_path / "b.sqlite", "a INTEGER, b INTEGER", [(i, i) for i in range(5000)],
                 page_size=512)  # fmt: skip
    size = base.stat().st_size
    for cut in (size - 512, size - 100, size // 2 + 7):
        path = tmp_path / f"t{cut}.sqlite"
        shutil.copy(base, path)
        with open(path, "r+b") as fh:
            fh.seek(92)
            fh.write(b"\0\0\0\0")  # the in-header page count is not trusted
            fh.truncate(cut)
        conn = open_readonly(path)
        for rows in (C.RowidRange(0, 5000), C.RowidRange(4000, 5000)):
            assert_as_sql(conn, "t", {"a": "a"}, rows, "", 1000)


# Schemas


@pytest.mark.parametrize(
    "ddl",
    [
        "id INTEGER, v INTEGER, PRIMARY KEY (id DESC)",  # an alias of the rowid all the same
        "id integer primary key asc, v INTEGER",
        "id INT PRIMARY KEY, v INTEGER",  # not an alias: INT is not INTEGER
        '"id" "INTEGER" PRIMARY KEY, v INTEGER',
    ],
)
def test_primary_keys_that_are_and_are_not_the_rowid(tmp_path, ddl):
    conn = open_readonly(build(tmp_path / "k.sqlite", ddl, [(10 * i, i) for i in range(1, 400)]))
    cols = {"id": "id", "v": "v", "s": "id >> 1", "d": "id - v"}
    assert_as_sql(conn, "t", cols, whole(conn), "", 50)
    assert_as_sql(conn, "t", cols, whole(conn), "id IN (10, 3000, 7)", 50)


def test_without_rowid_however_spelled_is_read_with_sql(tmp_path):
    path = build(tmp_path / "w.sqlite", "a INTEGER PRIMARY KEY, v INTEGER) WITHOUT\tROWID --",
                 [(10 * i, i) for i in range(1, 500)])  # fmt: skip
    conn = open_readonly(path)
    with pytest.raises(Unreadable, match=r"^a table without rowids$"):
        page_plan(conn, "t", {"a": "a"}, "")
    assert_as_sql(conn, "t", {"a": "a", "v": "v"}, C.RowidRange(0, 10**9))


def test_added_columns_virtual_generated_columns_and_utf16(tmp_path):
    path = build(tmp_path / "a.sqlite", "a INTEGER, b INTEGER", [(i, i) for i in range(2000)],
                 after=["ALTER TABLE t ADD COLUMN c INTEGER DEFAULT 9",
                        "ALTER TABLE t ADD COLUMN e INTEGER",
                        "UPDATE t SET c = 1 WHERE rowid % 10 = 0"])  # fmt: skip
    conn = open_readonly(path)
    assert_as_sql(conn, "t", {"a": "a", "c": "c", "e": "e"}, whole(conn), "", 100)
    assert_as_sql(conn, "t", {"a": "a"}, whole(conn), "c IN (9)", 100)
    path = build(tmp_path / "g.sqlite",
                 "a INTEGER, g INTEGER GENERATED ALWAYS AS (a * 2) VIRTUAL, c INTEGER",
                 after=["INSERT INTO t (a, c) VALUES (1, 1001), (2, 1002), (3, 1003)"])  # fmt: skip
    conn = open_readonly(path)
    assert_as_sql(conn, "t", {"a": "a", "c": "c", "g": "g"}, whole(conn), "c IN (1002)")
    conn = sqlite3.connect(tmp_path / "u.sqlite")
    conn.execute("PRAGMA encoding = 'UTF-16le'")
    conn.execute("CREATE TABLE t (a INTEGER, s TEXT, b INTEGER)")
    conn.executemany(
        "INSERT INTO t VALUES (?, ?, ?)", [(i, "é" * (i % 30), -i) for i in range(3000)]
    )
    conn.commit()
    conn.close()
    conn = open_readonly(tmp_path / "u.sqlite")
    page_plan(conn, "t", {"a": "a"}, "")  # read from the pages (else: Unreadable)
    assert_as_sql(conn, "t", {"a": "a", "b": "b"}, whole(conn), "", 100)


def test_empty_tables_one_null_row_constants_and_odd_ranges(tmp_path):
    conn = open_readonly(build(tmp_path / "e.sqlite", "a INTEGER"))
    for rows in (C.RowidRange(-10, 10), C.RowidRange(-N + 1, N - 1)):
        assert_as_sql(conn, "t", {"a": "a"}, rows)
    conn = open_readonly(build(tmp_path / "n.sqlite", "a INTEGER, b", [(None, None)]))
    assert_as_sql(conn, "t", {"a": "a", "b": "b", "k": "1", "x": "NULL"}, whole(conn))
    rows = [(i % 2, (i // 2) % 2, None if i % 3 == 0 else 1) for i in range(2000)]
    conn = open_readonly(build(tmp_path / "c.sqlite", "a INTEGER, b INTEGER, c INTEGER", rows))
    cols = {"a": "a", "b": "B", "c": '"c"', "d": "c - a", "s": "b >> 1"}
    for where in ("c IN (1)", "c IN (0)", "A IN (1)", ""):
        assert_as_sql(conn, "t", cols, whole(conn), where, 64)
    for rows in (C.RowidRange(10, 10), C.RowidRange(10, 5), C.RowidRange(2000, 3000)):
        assert_as_sql(conn, "t", cols, rows)


# What fails now


def test_integer_primary_key_desc_is_not_the_rowid(tmp_path):
    rows = [(10 * i, i) for i in range(1, 50)]
    conn = open_readonly(
        build(tmp_path / "k.sqlite", "id INTEGER PRIMARY KEY DESC, v INTEGER", rows)
    )
    assert_as_sql(conn, "t", {"id": "id", "v": "v"}, whole(conn))


def test_a_stored_generated_column_keeps_the_columns_in_place(tmp_path):
    path = build(tmp_path / "g.sqlite",
                 "a INTEGER, g INTEGER GENERATED ALWAYS AS (a * 2) STORED, c INTEGER",
                 after=["INSERT INTO t (a, c) VALUES (1, 1001), (2, 1002), (3, 1003)"])  # fmt: skip
    conn = open_readonly(path)
    assert_as_sql(conn, "t", {"a": "a", "c": "c"}, whole(conn))
    assert_as_sql(conn, "t", {"a": "a"}, whole(conn), "c IN (1002)")


def _virtual(path: Path, table: str) -> None:
    conn = sqlite3.connect(path)
    cols = [r[1] for r in conn.execute(f'PRAGMA table_info("{table}")')]
    conn.execute(f'ALTER TABLE "{table}" RENAME TO old')
    conn.execute(f'CREATE VIRTUAL TABLE "{table}" USING fts5({", ".join(cols)})')
    conn.execute(f'INSERT INTO "{table}" SELECT * FROM old')
    conn.execute("DROP TABLE old")
    conn.commit()
    conn.close()


def test_a_virtual_table_is_read_with_sql(tmp_path):
    path = build(tmp_path / "v.sqlite", "a INTEGER, b INTEGER", [(1, 2), (3, 4)])
    _virtual(path, "t")
    conn = open_readonly(path)
    assert_as_sql(conn, "t", {"a": "a"}, C.RowidRange(0, 5))


def three_level_table(tmp_path: Path) -> Path:
    """Table t of 4,000 rows (a = rowid - 1 < 2^12, b, c) on 512-byte pages: a root, interior
    pages and about 100 leaves."""
    return build(tmp_path / "d.sqlite", "a INTEGER, b INTEGER, c INTEGER",
                 [(i, i % 100, -i) for i in range(4000)], page_size=512)  # fmt: skip


def damaged(tmp_path: Path, page_of, offset: int, data: bytes) -> None:
    path = three_level_table(tmp_path)
    page = page_of(path)
    patch(path, page, offset, data)
    conn = open_readonly(path)
    with deadline(5):
        assert_as_sql(conn, "t", {"a": "a", "c": "c"}, C.RowidRange(0, 4000), "", 100_000)


def test_an_interior_page_that_is_its_own_child_is_no_hang(tmp_path):
    path = three_level_table(tmp_path)
    root = _root(path)[0]
    patch(path, root, 3, b"\0\0")  # no cells
    patch(path, root, 8, root.to_bytes(4, "big"))  # the right child: itself
    conn = open_readonly(path)
    with deadline(2):
        assert_as_sql(conn, "t", {"a": "a"}, C.RowidRange(0, 100))


def test_a_child_page_number_0_is_sqls_error(tmp_path):
    damaged(tmp_path, lambda p: _root(p)[0], 8, b"\0\0\0\0")


def test_an_interior_cell_count_past_the_page_is_sqls_error(tmp_path):
    damaged(tmp_path, lambda p: _root(p)[0], 3, b"\xff\xff")


def test_a_leaf_cell_count_past_the_page_is_sqls_error(tmp_path):
    damaged(tmp_path, lambda p: leaf_pages(p)[-1], 3, b"\xff\xff")


def test_a_leaf_emptied_by_damage_is_sqls_error(tmp_path):
    damaged(tmp_path, lambda p: leaf_pages(p)[len(leaf_pages(p)) // 2], 3, b"\0\0")


def test_a_record_longer_than_its_payload_is_sqls_error(tmp_path):
    path = three_level_table(tmp_path)
    leaf = leaf_pages(path)[1]
    page = path.read_bytes()[(leaf - 1) * 512 : leaf * 512]
    cell = int.from_bytes(page[8:10], "big")
    rowid_len = next(i for i in range(9) if page[cell + 1 + i] < 0x80) + 1
    at = cell + 1 + rowid_len + 1  # the first column's serial type
    assert page[at] in (1, 2)  # a one- or two-byte integer
    patch(path, leaf, at, b"\x06")
    conn = open_readonly(path)
    assert_as_sql(conn, "t", {"a": "a", "c": "c"}, C.RowidRange(0, 4000), "", 100_000)


def test_rowid_minus_2_63_is_outside_a_range_from_minus_2_63(tmp_path):
    conn = sqlite3.connect(tmp_path / "m.sqlite")
    conn.execute("CREATE TABLE t (a INTEGER)")
    conn.executemany("INSERT INTO t (rowid, a) VALUES (?, ?)", [(-N, 1), (5, 2), (N - 1, 3)])
    conn.commit()
    conn.close()
    conn = open_readonly(tmp_path / "m.sqlite")
    assert_as_sql(conn, "t", {"a": "a"}, C.RowidRange(-N, N - 1))


def test_a_stored_minus_2_63_shifted_is_not_null(tmp_path):
    conn = open_readonly(build(tmp_path / "s.sqlite", "g INTEGER", [(-N,), (5,)]))
    assert_as_sql(conn, "t", {"g": "g >> 24", "h": "g >> 64"}, whole(conn))


def test_a_difference_with_a_stored_minus_2_63_overflows(tmp_path):
    conn = open_readonly(build(tmp_path / "d.sqlite", 'start INTEGER, "end" INTEGER', [(1, -N)]))
    assert_as_sql(conn, "t", C.TIMED, whole(conn))


def test_null_matches_no_condition(tmp_path):
    conn = open_readonly(build(tmp_path / "n.sqlite", "a INTEGER, n INTEGER", [(1, None), (2, 3)]))
    assert_as_sql(conn, "t", {"a": "a"}, whole(conn), "n IN (-9223372036854775808)")


def test_constants_alone_need_no_integer_column(tmp_path):
    conn = open_readonly(build(tmp_path / "c.sqlite", "name TEXT, a INTEGER", [("x", 1), ("y", 2)]))
    assert_as_sql(conn, "t", {"x": "NULL", "k": "7"}, whole(conn))


def test_a_file_replaced_after_it_was_opened_is_no_mixed_read(tmp_path):
    a = build(tmp_path / "a.sqlite", "a INTEGER", [(i,) for i in range(1000)])
    b = build(tmp_path / "b.sqlite", "a INTEGER", [(-i,) for i in range(1000)])
    conn = open_readonly(a)
    rows = whole(conn)
    os.replace(b, a)
    got = outcome(C.read_batches, conn, "t", {"a": "a"}, rows)
    if isinstance(got, tuple):
        assert got[0] == "InputError", got  # the change seen: an error
    else:
        assert got == outcome(SQL, conn, "t", {"a": "a"}, rows)  # or the file that was opened


def test_rowids_far_apart_are_read_without_warnings(tmp_path):
    conn = sqlite3.connect(tmp_path / "f.sqlite")
    conn.execute("PRAGMA page_size = 512")
    conn.execute("CREATE TABLE t (a INTEGER)")
    rows = [(-(2**62) + i, i) for i in range(100)] + [(2**62 - 1 - i, i) for i in range(100)]
    conn.executemany("INSERT INTO t (rowid, a) VALUES (?, ?)", rows)
    conn.commit()
    conn.close()
    conn = open_readonly(tmp_path / "f.sqlite")
    assert_as_sql(conn, "t", {"a": "a"}, C.RowidRange(-(2**62) - 1, 2**62), "", 100)


# Values SQLite and the page reader read differently (SQLite's affinities): in some the SQL path is
# the lax one (text or a blob of digits read as a number, a text shifted as 0); either way the two
# readers differ.
AFFINITY = [
    ("a REAL, b INTEGER", [(1.0, 1), (2.0, 2)], {"a": "a"}, ""),  # stored as integers on disk
    ("a REAL, b INTEGER", [(1.0, 1), (2.0, 2)], {"d": "a - b"}, ""),
    ("a TEXT, b INTEGER", [("5", 1), ("3", 2)], {"a": "a"}, ""),
    ("a TEXT, b INTEGER", [("5", 1), ("3", 2)], {"b": "b"}, "a IN (5)"),
    ("a, b INTEGER", [(2.0, 1), (3, 2)], {"b": "b"}, "a IN (2)"),
    ("a INTEGER, b INTEGER", [(b"5", 1), (3, 2)], {"a": "a"}, ""),
    ("a INTEGER, b INTEGER", [("abc", 1), (2.5, 2)], {"p": "a >> 24"}, ""),
    ('start INTEGER, "end" INTEGER', [("abc", 5)], {"dur": '"end" - start'}, ""),
    ("rowid INTEGER, a INTEGER", [(100 - i, i) for i in range(20)], {"a": "a"}, ""),
]


@pytest.mark.parametrize(("ddl", "rows", "columns", "where"), AFFINITY)
def test_values_by_affinity(tmp_path, ddl, rows, columns, where):
    conn = open_readonly(build(tmp_path / "v.sqlite", ddl, rows))
    assert_as_sql(conn, "t", columns, C.RowidRange(0, 20), where)


# The command line on damaged and odd exports


runner = CliRunner()


def summary(path: Path, monkeypatch, reader: str) -> tuple[int, str, str]:
    monkeypatch.setenv("CENSUS_NO_CACHE", "1")
    monkeypatch.setenv("CENSUS_READER", reader)
    r = runner.invoke(app, ["summary", str(path), "--json"])
    return r.exit_code, r.stdout, r.stderr


def export(tmp_path: Path, kernels=400, page_size=512) -> Path:
    e = Export()
    e.range("step 0", 0, 10**9)
    for i in range(kernels):
        e.launch(f"k{i % 7}", 10 + 1000 * i, 100 + 1000 * i, 600 + 1000 * i)
    tmp_path.mkdir(parents=True, exist_ok=True)
    path = e.write(tmp_path / "x.sqlite")
    conn = sqlite3.connect(path)
    conn.execute(f"PRAGMA page_size = {page_size}")
    conn.execute("VACUUM")
    conn.close()
    return path


def test_the_command_line_reads_odd_formats_as_sql_does(tmp_path, monkeypatch):
    for page_size in (512, 65536):
        path = export(tmp_path / str(page_size), page_size=page_size)
        before = sha(path)
        pages, sql = summary(path, monkeypatch, ""), summary(path, monkeypatch, "sql")
        assert pages[0] == sql[0] == 0, pages[2]
        assert json.loads(pages[1]) == json.loads(sql[1])
        assert sha(path) == before


def test_the_command_line_on_a_virtual_kernel_table(tmp_path, monkeypatch):
    path = export(tmp_path / "v", kernels=20)
    _virtual(path, "CUPTI_ACTIVITY_KIND_KERNEL")
    pages, sql = summary(path, monkeypatch, ""), summary(path, monkeypatch, "sql")
    assert sql[0] == 0
    assert pages[0] == 0, pages[2]


def test_the_command_line_on_a_damaged_leaf_is_one_line_and_exit_1(tmp_path, monkeypatch):
    path = export(tmp_path / "d")
    leaves = leaf_pages(path, "CUPTI_ACTIVITY_KIND_KERNEL")
    assert len(leaves) > 8
    monkeypatch.setattr(P, "CHUNK_BYTES", 4 * 512)  # chunks of four leaves
    size = _root(path, "CUPTI_ACTIVITY_KIND_KERNEL")[1]
    with open(path, "r+b") as fh:
        fh.seek((leaves[3] - 1) * size + 3)
        fh.write(b"\xff\xff")
    sql = summary(path, monkeypatch, "sql")
    assert sql[0] == 1 and f"CUPTI_ACTIVITY_KIND_KERNEL, page {leaves[3]}: a leaf's cell" in sql[2]
    code, _, err = summary(path, monkeypatch, "")
    assert code == 1, err
    assert "internal error" not in err and len(err.strip().splitlines()) == 1


@pytest.mark.parametrize("page_size", [512, 4096, 65536])
def test_rows_older_than_many_added_columns_are_read_with_sql(tmp_path, page_size):
    """Rows written before ALTER TABLE ... ADD COLUMN have short headers: the column's header
    byte would lie past the record, here past the end of the only leaf page (an IndexError
    before, not a fallback); SQLite reads the added column as NULL."""
    added = [f"ALTER TABLE t ADD COLUMN c{i} INTEGER" for i in range(30)]
    path = build(tmp_path / "t.sqlite", "nameId INTEGER, x INTEGER", [(1, 2), (2, 3)],
                 page_size=page_size, after=[*added, "ALTER TABLE t ADD COLUMN start INTEGER"])  # fmt: skip
    conn = open_readonly(path)
    assert_as_sql(conn, "t", {"start": "start"}, whole(conn))
    assert_as_sql(conn, "t", {"start": "start"}, whole(conn), "nameId IN (1,2)")

"""Tables the page reader hands to SQL: a table WITHOUT ROWID is read in its primary key's order,
as a plain scan (the oracle's) reads it, and gives the census of its rows; every table read with
SQL instead of from the file's pages is said once, with why, on stderr and in the JSON's source.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import pytest

from census.load.finish import compute_census
from census.load.profile import load_profile
from census.sources import schema as sc
from census.sources.samples import sample_path
from tests.helpers.exports import without_rowid
from tests.oracle import oracle

# Primary keys that put the rows in another order than nsys wrote them (start order): the
# kernels' is not in start order at all (census then reads them in one batch)
KEYS = {
    sc.KERNEL: "correlationId DESC, start",
    sc.RUNTIME: "globalTid, start DESC, correlationId",
    sc.MEMCPY: "correlationId, start",
    sc.MEMSET: "correlationId DESC, start",
    sc.NVTX: "start DESC, globalTid, eventType",
    sc.STRINGS: "id DESC",
}
WHY = "a table without rowids"
NOTED = (sc.KERNEL, sc.RUNTIME, sc.MEMCPY, sc.MEMSET)  # what the passes read (NVTX: with SQL)


@pytest.fixture(scope="module")
def pair(tmp_path_factory) -> tuple[Path, Path]:
    """The bundled eager capture, and a copy of it whose tables have no rowids."""
    source = sample_path("eager") / "capture.sqlite"
    return source, without_rowid(source, tmp_path_factory.mktemp("wr") / "wr.sqlite", KEYS)


def json_of(path: Path, tmp_path: Path) -> tuple[dict, str, int]:
    env = {**os.environ, "CENSUS_CACHE_DIR": str(tmp_path / "cache")}
    out = subprocess.run([sys.executable, "-m", "census", "summary", str(path), "--json"],
                         capture_output=True, text=True, env=env, check=False)  # fmt: skip
    return json.loads(out.stdout or "null"), out.stderr, out.returncode


def test_tables_without_rowids_give_the_census_of_their_rows(pair, tmp_path: Path) -> None:
    """Was exit 1, `no such column: rowid`."""
    plain, wr = json_of(pair[0], tmp_path / "a"), json_of(pair[1], tmp_path / "b")
    assert wr[2] == 0, wr[1]
    note = ("read with SQL, not from the file's pages (slower; docs/performance.md): "
            + "; ".join(f"{t} ({WHY})" for t in sorted(NOTED)))  # fmt: skip
    assert wr[1].count("warning: ") == 1 and f"warning: {note}\n" in wr[1]
    assert wr[0]["source"] == {**plain[0]["source"], "path": str(pair[1]),
                               "read_with_sql": dict.fromkeys(sorted(NOTED), WHY)}  # fmt: skip
    assert wr[0]["warnings"] == [note, *plain[0]["warnings"]]
    strip = ("source", "warnings")
    assert {k: v for k, v in wr[0].items() if k not in strip} == {
        k: v for k, v in plain[0].items() if k not in strip
    }
    assert "read_with_sql" not in plain[0]["source"] and "read with SQL" not in plain[1]


def test_tables_without_rowids_agree_with_the_oracle_in_workers(pair) -> None:
    """Read by two worker processes in batches of 50 rows (their notes come back with their
    results), and in one: the census the oracle computes from a plain scan of each table."""
    censuses = []
    for workers, batch_rows in ((1, None), (2, 50)):
        profile = load_profile(pair[1], r"^(step\b|ProfilerStep#)", 0, None, workers, batch_rows)
        censuses.append(compute_census(profile))
    assert censuses[0] == censuses[1]
    c = censuses[0]
    assert dict(c.source.read_with_sql) == dict.fromkeys(NOTED, WHY)
    expected = oracle(pair[1])
    assert c.totals.as_dict() == expected["totals"]
    assert [s.metrics.as_dict() for s in c.steps] == expected["steps"]
    plain = compute_census(load_profile(pair[0], r"^(step\b|ProfilerStep#)", 0, None, 1))
    assert c == replace(plain, source=c.source, warnings=c.warnings)

"""Memsets per step and per phase (memset_count, memset_bytes), on real exports and on a small
exact database, against computations written here from the definition: a row of
CUPTI_ACTIVITY_KIND_MEMSET counts in the step (and phase) whose range holds the start of its
launching API call (same process, same correlationId; a call recorded twice: its earliest row),
as a copy does; the totals count every memset, with a call or without."""

from __future__ import annotations

import json
import lzma
import sqlite3
from pathlib import Path

import pytest
from typer.testing import CliRunner

import census
from census.cli import app
from census.compare.diff import diff_census
from tests.helpers.files import DATA, fixture_file
from tests.nsysdb import Export, gpid
from tests.oracle import _owned

KEYS = ("memset_count", "memset_bytes")
STEPS, PHASES = r"^(step\b|ProfilerStep#)", r"^(forward|backward|optimizer)\b"


def _memsets(path: Path) -> list[tuple[int, int | None, int]]:
    """(bytes, its call's start or None, its process) of every memset: the earliest runtime row
    of its process and correlationId."""
    conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    if not _has(conn, "CUPTI_ACTIVITY_KIND_MEMSET"):  # no memsets recorded
        return []
    rows = conn.execute(
        """SELECT COALESCE(m.bytes, 0), MIN(r.start), m.globalPid >> 24
           FROM CUPTI_ACTIVITY_KIND_MEMSET m LEFT JOIN CUPTI_ACTIVITY_KIND_RUNTIME r
             ON r.correlationId = m.correlationId AND (r.globalTid >> 24) = (m.globalPid >> 24)
           GROUP BY m.rowid"""
    ).fetchall()
    conn.close()
    return rows


def _has(conn: sqlite3.Connection, table: str) -> bool:
    return (
        conn.execute("SELECT 1 FROM sqlite_master WHERE name = ?", (table,)).fetchone() is not None
    )


def _expected(path: Path) -> tuple[dict[str, int], list[dict[str, int]], list[dict]]:
    """(the totals, per step, per step per phase) of KEYS: a memset counts in the step of its
    process whose range holds its call's start (of two that meet there, the later), and in the
    phase that owns that instant (tests/oracle._owned)."""
    conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    steps, owned, _ = _owned(conn, STEPS, PHASES) if _has(conn, "NVTX_EVENTS") else ([], [], 0)
    conn.close()
    totals = dict.fromkeys(KEYS, 0)
    per_step: list[dict[str, int]] = [dict.fromkeys(KEYS, 0) for _ in steps]
    per_phase: list[dict[str, dict[str, int]]] = [{} for _ in steps]
    for nbytes, called, proc in _memsets(path):
        at = [i for i, (a, b, p) in enumerate(steps)
              if called is not None and p == proc and a <= called <= b]  # fmt: skip
        rows = [totals]
        if at:
            i = at[-1]
            phase = [o for a, _, o in owned[i] if a <= called][-1]
            rows += [per_step[i], per_phase[i].setdefault(phase, dict.fromkeys(KEYS, 0))]
        for row in rows:
            row["memset_count"] += 1
            row["memset_bytes"] += nbytes
    return totals, per_step, per_phase


def _check(path: Path) -> census.Census:
    c = census.summarize(path, use_cache=False)
    totals, per_step, per_phase = _expected(path)
    assert {k: getattr(c.totals, k) for k in KEYS} == totals
    assert len(c.steps) == len(per_step)
    for s, want, phases in zip(c.steps, per_step, per_phase, strict=True):
        assert {k: getattr(s.metrics, k) for k in KEYS} == want
        got = {p.name: {k: getattr(p.metrics, k) for k in KEYS} for p in s.phases}
        assert got == {n: phases.get(n, dict.fromkeys(KEYS, 0)) for n in got}
        assert set(phases) <= set(got)
    memset = [m for m in c.memory if m.kind == "memset"]
    assert [(m.count, m.bytes) for m in memset] == ([tuple(totals.values())]
                                                    if totals["memset_count"] else [])  # fmt: skip
    return c


@pytest.mark.parametrize(
    "name",
    [
        "h200_eager_3steps.sqlite",
        "h200_compiled_3steps.sqlite",
        "nsysai_mfu_2gpu_before.sqlite",
        "nsysai_mfu_2gpu_after.sqlite",
        "nsysai_mock.sqlite",
        "pipit_saxpy-mpi-cuda_nsys_perlmutter0.sqlite",
        "flameox_nsight-2025.5.2_cudagraph.sqlite",
    ],
)
def test_shared_fixtures_memsets_match_sql(name: str) -> None:
    _check(fixture_file(name))


@pytest.mark.parametrize("side", ["eager", "compiled"])
def test_deepspeeds_memsets_per_step_and_phase(tmp_path: Path, side: str) -> None:
    path = tmp_path / f"ds-{side}.sqlite"
    xz = DATA / "deepspeed" / f"ds-{side}" / "capture.sqlite.xz"
    path.write_bytes(lzma.decompress(xz.read_bytes()))
    c = _check(path)
    assert len(c.steps) == 3 and all(s.metrics.memset_count > 0 for s in c.steps)


def _built(tmp_path: Path, name: str, last: bool = True) -> Path:
    """Three steps (the first two meet at 100), phases in the first; memsets launched in a
    step, run in the next, launched where two steps meet, between steps, without a call, of
    unknown size, in another process; a D2D copy beside them."""
    e = Export()
    e.range("step 0", 0, 100)
    e.range("forward", 0, 50)
    e.range("backward", 50, 100)
    e.range("step 1", 100, 200)
    e.range("step 2", 300, 400)
    e.set(64, 10, 20, 25)  # step 0, forward
    e.set(128, 60, 150, 160)  # launched in step 0 (backward), runs in step 1
    e.set(256, 100, 110, 120)  # launched where steps 0 and 1 meet: step 1
    e.set(1000, 250, 260, 270)  # between steps
    e.copy(8, 4096, 12, 30, 40)  # a D2D copy in step 0: no memset
    e.set(8, 20, 30, 35, pid=2)  # another process: in no step
    if last:
        e.set(0, 310, 320, 330)  # step 2; its bytes made unknown below
        e.memset[-1]["bytes"] = None
    e.memset.append({"start": 340, "end": 350, "deviceId": 0, "contextId": 1, "streamId": 7,
                     "correlationId": 999, "globalPid": gpid(1), "value": 0,
                     "bytes": 2048})  # fmt: skip  # no call: the totals only
    return e.write(tmp_path / name)


def test_built_export_memsets_are_exact(tmp_path: Path) -> None:
    path = _built(tmp_path, "a.sqlite")
    c = _check(path)
    assert [(s.metrics.memset_count, s.metrics.memset_bytes) for s in c.steps] == [
        (2, 192),
        (1, 256),
        (1, 0),
    ]
    assert (c.totals.memset_count, c.totals.memset_bytes) == (7, 64 + 128 + 256 + 1000 + 8 + 2048)
    phases = {p.name: (p.metrics.memset_count, p.metrics.memset_bytes) for p in c.steps[0].phases}
    assert (phases["forward"], phases["backward"]) == ((1, 64), (1, 128))
    assert (c.steps[0].metrics.d2d_count, c.steps[0].metrics.d2d_count) == (1, 1)
    stat = next(m for m in c.memory if m.kind == "memset")
    assert (stat.count, stat.bytes, stat.step_count, stat.step_bytes) == (7, 3504, 4, 448)


def test_memsets_reach_the_terminal_table_the_json_and_the_diff(tmp_path: Path) -> None:
    a, b = _built(tmp_path, "a.sqlite"), _built(tmp_path, "b.sqlite", last=False)
    env = {"COLUMNS": "160", "CENSUS_NO_CACHE": "1"}
    text = CliRunner().invoke(app, ["summary", str(a)], env=env).stdout
    row = next(line for line in text.splitlines() if "│ memsets " in line)
    assert [cell.strip() for cell in row.split("│")[2:4]] == ["7", "1.3"]  # total, per step
    doc = json.loads(CliRunner().invoke(app, ["summary", str(a), "--json"], env=env).stdout)
    assert doc["totals"]["memset_bytes"] == 3504
    assert [s["memset_count"] for s in doc["steps"]] == [2, 1, 1]
    assert [p["memset_bytes"] for p in doc["steps"][0]["phases"][:2]] == [64, 128]
    d = diff_census(census.summarize(a, use_cache=False), census.summarize(b, use_cache=False))
    assert (d.metrics["memset_count"].a, d.metrics["memset_count"].b) == (4 / 3, 3 / 3)
    out = CliRunner().invoke(app, ["diff", str(a), str(b), "--format", "json"], env=env).stdout
    assert json.loads(out)["metrics"]["memset_count"]["delta"] == pytest.approx(1 - 4 / 3)

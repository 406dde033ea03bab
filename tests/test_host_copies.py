"""Host<->device copies per step and per phase (h2d_*, d2h_*: census.metrics.COUNTED_COPIES), on
real exports, against computations written here from the definition: a memcpy of copyKind 1
(Host-to-Device) or 2 (Device-to-Host) counts in the step (and phase) whose range holds the start
of its launching API call (same process, same correlationId), as a D2D copy does.

tests/data/deepspeed (a third-party loop: HF Qwen3-MoE under DeepSpeed ZeRO-1 on an H200)
reads back over a thousand small values with `.item()`-style D2H copies; the shared 2-GPU
fixtures and the MPI saxpy copy whole buffers host to device (no steps there: totals only)."""

from __future__ import annotations

import lzma
import sqlite3
from pathlib import Path

import pytest

import census
from tests.helpers.files import DATA, fixture_file
from tests.oracle import _owned

KINDS = {1: "h2d", 2: "d2h"}


def _export(tmp_path: Path, side: str) -> Path:
    path = tmp_path / f"ds-{side}.sqlite"
    xz = DATA / "deepspeed" / f"ds-{side}" / "capture.sqlite.xz"
    path.write_bytes(lzma.decompress(xz.read_bytes()))
    return path


def _copies(path: Path) -> list[tuple[str, int, int, int]]:
    """(key prefix, bytes, its call's start, its process) of each H2D and D2H memcpy, joined to
    its launching call (same process and correlationId)."""
    conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    rows = conn.execute(
        """SELECT m.copyKind, m.bytes, r.start, r.globalTid >> 24
           FROM CUPTI_ACTIVITY_KIND_MEMCPY m JOIN CUPTI_ACTIVITY_KIND_RUNTIME r
             ON r.correlationId = m.correlationId AND (r.globalTid >> 24) = (m.globalPid >> 24)
           WHERE m.copyKind IN (1, 2)"""
    ).fetchall()
    conn.close()
    return [(KINDS[kind], nbytes, called, proc) for kind, nbytes, called, proc in rows]


def _expected(path: Path) -> tuple[list[dict[str, int]], list[dict[str, dict[str, int]]]]:
    """Per step, and per step per phase, each copy key's sum: a copy counts in the step of its
    process whose range holds its call's start, and in the phase that owns that instant (the
    slow reference's ownership, tests/oracle._owned: the latest-started phase covering it; at
    a boundary, the later stretch)."""
    conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    steps, owned, _ = _owned(conn, r"^(step\b|ProfilerStep#)", r"^(forward|backward|optimizer)\b")
    conn.close()
    per_step: list[dict[str, int]] = [{} for _ in steps]
    per_phase: list[dict[str, dict[str, int]]] = [{} for _ in steps]
    for key, nbytes, called, proc in _copies(path):
        at = [i for i, (a, b, p) in enumerate(steps) if p == proc and a <= called <= b]
        if not at:
            continue
        i = at[-1]  # of two steps that meet there, the one that begins there
        phase = [o for a, _, o in owned[i] if a <= called][-1]
        for row in (per_step[i], per_phase[i].setdefault(phase, {})):
            row[f"{key}_count"] = row.get(f"{key}_count", 0) + 1
            row[f"{key}_bytes"] = row.get(f"{key}_bytes", 0) + nbytes
    return per_step, per_phase


@pytest.mark.parametrize("side", ["eager", "compiled"])
def test_deepspeeds_host_copies_per_step_and_phase(tmp_path: Path, side: str) -> None:
    path = _export(tmp_path, side)
    c = census.summarize(path, use_cache=False)
    per_step, per_phase = _expected(path)
    keys = [f"{k}_{w}" for k in KINDS.values() for w in ("count", "bytes")]
    assert len(c.steps) == len(per_step) == 3
    for s, want in zip(c.steps, per_step, strict=True):
        assert {k: getattr(s.metrics, k) for k in keys} == {k: want.get(k, 0) for k in keys}
    for s, want in zip(c.steps, per_phase, strict=True):
        got = {p.name: {k: getattr(p.metrics, k) for k in keys} for p in s.phases}
        assert got == {name: {k: want.get(name, {}).get(k, 0) for k in keys} for name in got}
        assert set(want) <= set(got)
    # the .item() reads: every step reads back over a hundred values, a few bytes each
    d2h = [s.metrics.d2h_count for s in c.steps]
    assert min(d2h) > 100 and all(s.metrics.d2h_bytes < 100 * s.metrics.d2h_count
                                  for s in c.steps), d2h  # fmt: skip


def test_whole_captures_count_every_host_copy() -> None:
    """No steps: the totals hold every H2D and D2H copy of the export, exactly."""
    for name, want in [
        ("pipit_saxpy-mpi-cuda_nsys_perlmutter0.sqlite", (10, 2_621_440_000, 5, 1_310_720_000)),
        ("nsysai_mfu_2gpu_before.sqlite", (34, 272, 0, 0)),
        ("nsysai_mock.sqlite", (0, 0, 1, 4)),
    ]:
        t = census.summarize(fixture_file(name), use_cache=False).totals
        assert (t.h2d_count, t.h2d_bytes, t.d2h_count, t.d2h_bytes) == want, name

"""Operations on real nsys exports with op ranges (#56): the demo, eager and compiled, captured
on an H100 with `census capture --ops` (nsys's --pytorch=autograd-nvtx; tests/data/nsys_ops).
Each kernel's operation is computed here from the export with SQL alone (its launching call by
correlationId, the innermost `aten::` NVTX range around the call's start on the call's thread),
not with census's code."""

from __future__ import annotations

import lzma
import shutil
import sqlite3
from collections import Counter
from pathlib import Path

import pytest

import census
from census.findings.op_ranges import normalize_op_name

DATA = Path(__file__).parent / "data" / "nsys_ops"


@pytest.fixture(scope="module")
def captures(tmp_path_factory) -> Path:
    """The two capture folders as census capture left them (export, run.json, Inductor's map)."""
    root = tmp_path_factory.mktemp("nsys_ops")
    for side in ("eager", "compiled"):
        folder = root / side
        folder.mkdir()
        packed = DATA / f"d-{side}-nsys.sqlite.xz"
        (folder / "capture.sqlite").write_bytes(lzma.decompress(packed.read_bytes()))
        shutil.copy(DATA / f"d-{side}-nsys.run.json", folder / "run.json")
    shutil.copy(DATA / "inductor_map.json", root / "compiled" / "inductor_map.json")
    return root


def oracle_ops(export: Path) -> Counter[str | None]:
    """Kernels per innermost aten op (None: no aten range around the launch), from SQL."""
    conn = sqlite3.connect(f"file:{export}?mode=ro", uri=True)
    ranges = conn.execute(
        """SELECT n.start, n."end", n.globalTid, coalesce(n.text, s.value) FROM NVTX_EVENTS n
           LEFT JOIN StringIds s ON n.textId = s.id
           WHERE coalesce(n.text, s.value) LIKE 'aten::%' AND n."end" IS NOT NULL"""
    ).fetchall()
    by_thread: dict[int, list[tuple[int, int, str]]] = {}
    for start, end, tid, text in ranges:
        by_thread.setdefault(tid, []).append((start, end, normalize_op_name(text)))
    launches = conn.execute(
        """SELECT r.start, r.globalTid FROM CUPTI_ACTIVITY_KIND_KERNEL k
           JOIN CUPTI_ACTIVITY_KIND_RUNTIME r ON r.correlationId = k.correlationId
             AND r.globalTid >> 24 = k.globalPid >> 24"""
    ).fetchall()
    out: Counter[str | None] = Counter()
    for at, tid in launches:
        around = [(s, -(e - s), n) for s, e, n in by_thread.get(tid, ()) if s <= at < e]
        out[max(around)[2] if around else None] += 1
    conn.close()
    return out


def test_every_eager_kernels_operation_equals_the_oracle(captures: Path) -> None:
    export = captures / "eager" / "capture.sqlite"
    c = census.summarize(captures / "eager")
    ops = c.ops
    got: Counter[str | None] = Counter()
    for op, n in zip(ops.op, ops.total_kernel_count.tolist(), strict=True):
        got[op] += n
    assert +got == +oracle_ops(export)
    assert sum(got.values()) == c.totals.kernel_count == 1235
    per_step = ops.kernel_count.sum(axis=0).tolist()
    assert per_step == c.steps.column("kernel_count").tolist() == [247] * 5


def test_the_engines_calls_of_a_node_make_its_work_backward(captures: Path) -> None:
    """nsys names the engine's call `autograd::engine::evaluate_function: AddmmBackward0, op_id
    = N` (no seq); the bias gradients' sums run inside it after `AddmmBackward0, seq = N`
    ends. They are backward work (they were counted as forward, and then matched nothing)."""
    ops = census.summarize(captures / "eager").ops
    sums = [(b, n) for op, b, n in zip(ops.op, ops.backward, ops.total_kernel_count.tolist(),
                                       strict=True) if op == "aten::sum"]  # fmt: skip
    assert sums == [(True, 80)]


def test_the_diff_matches_every_eager_operation(captures: Path) -> None:
    """Every operation of eager has its compiled group and the reverse: before, `sum` and `cat
    (backward)` were only in eager and `stack + transpose (backward)` only in compiled."""
    rows = census.diff(captures / "eager", captures / "compiled").ops.rows
    assert [m for m in rows if not m.a_keys or not m.b_keys] == []
    assert sum(m.a_count for m in rows) == 1235 and sum(m.b_count for m in rows) == 1125

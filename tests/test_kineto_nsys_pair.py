"""The H200 demo workload traced twice, by nsys and by torch.profiler: the Kineto traces' kernel,
launch and copy totals read by census equal the nsys exports' (read here with SQL)."""

from __future__ import annotations

import sqlite3
from collections import Counter

import numpy as np
import pytest

from census.definitions import launch_api_kind
from census.sources.kineto import read_kineto
from tests.helpers.files import DATA, fixture_file

pytestmark = pytest.mark.fixtures


def nsys_totals(name: str) -> dict:
    conn = sqlite3.connect(f"file:{fixture_file(name)}?mode=ro", uri=True)
    names = conn.execute(
        "SELECT s.value FROM CUPTI_ACTIVITY_KIND_RUNTIME r JOIN StringIds s ON s.id = r.nameId"
    ).fetchall()
    d2d = conn.execute(
        "SELECT count(*), sum(bytes) FROM CUPTI_ACTIVITY_KIND_MEMCPY WHERE copyKind = 8"
    ).fetchone()
    return {
        "kernels": conn.execute("SELECT count(*) FROM CUPTI_ACTIVITY_KIND_KERNEL").fetchone()[0],
        "launches": Counter(k for (n,) in names if (k := launch_api_kind(n))),
        "d2d": tuple(d2d),
        "memsets": conn.execute("SELECT count(*) FROM CUPTI_ACTIVITY_KIND_MEMSET").fetchone()[0],
    }


@pytest.mark.parametrize("side", ["eager", "compiled"])
def test_kineto_and_nsys_totals_agree(side: str) -> None:
    want = nsys_totals(f"h200_{side}_3steps.sqlite")
    trace = read_kineto(DATA / "kineto" / f"h200_{side}_3steps.kineto.json.gz")
    api = trace.tables["api_calls"]
    launches = Counter(k for i in api["name"].tolist() if (k := launch_api_kind(trace.strings[i])))
    copies = trace.tables["memcpys"]
    d2d = copies["copy_kind"] == 8
    got = {
        "kernels": len(trace.tables["kernels"]["start_ns"]),
        "launches": launches,
        "d2d": (int(d2d.sum()), int(np.sum(copies["bytes"][d2d]))),
        "memsets": len(trace.tables["memsets"]["start_ns"]),
    }
    assert got == want
    if side == "eager":  # the fixtures README's `nsys stats` figures
        assert want["kernels"] == 861 and want["d2d"][0] == 39
        assert want["launches"] == {"cudaLaunchKernel": 669, "cuLaunchKernelEx": 192}

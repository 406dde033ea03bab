"""bench/kineto_generate.py states the totals it wrote: held to an independent reading of the
traces it writes (json with the times' text, Decimal), and census's reader to the same."""

from __future__ import annotations

import gzip
import json
import re
from decimal import Decimal
from pathlib import Path

from census.definitions import LAUNCH_APIS
from census.sources.kineto import read_kineto
from census.sources.kineto.links import step_of, step_ranges
from tests.helpers.files import REPO


def ns(text: str) -> int:
    return int(Decimal(text) * 1000)


def test_generated_totals_are_what_the_traces_hold(tmp_path: Path) -> None:
    import runpy

    generate = runpy.run_path(str(REPO / "bench" / "kineto_generate.py"))["main"]
    assert generate(["--kernels", "2500", "--ranks", "2", "-o", str(tmp_path)]) == 0
    for rank in (0, 1):
        path = tmp_path / f"rank{rank}.pt.trace.json.gz"
        stated = json.loads(Path(f"{path}.totals").read_text())
        with gzip.open(path, "rt") as fh:
            doc = json.load(fh, parse_float=str)
        events = doc["traceEvents"]
        by_cat: dict[str, list] = {}
        for e in events:
            by_cat.setdefault(e.get("cat"), []).append(e)
        of = by_cat.get
        kernels = of("kernel", [])
        launches = [
            e for e in of("cuda_runtime", []) + of("cuda_driver", []) if e["name"] in LAUNCH_APIS
        ]
        copies = {kind: [e for e in of("gpu_memcpy", []) if e["name"].startswith(f"Memcpy {name}")]
                  for kind, name in (("d2d", "DtoD"), ("h2d", "HtoD"), ("d2h", "DtoH"))}  # fmt: skip
        steps = [e for e in of("user_annotation", []) if re.match(r"ProfilerStep#\d+$", e["name"])]
        assert stated["kernel_count"] == len(kernels) == 2501  # the last step's NCCL kernel
        assert stated["kernel_time_ns"] == sum(ns(e["dur"]) for e in kernels)
        assert stated["nccl_count"] == sum(e["name"].startswith("ncclDevKernel") for e in kernels)
        assert stated["launch_count"] == len(launches)
        assert stated["launch_time_ns"] == sum(ns(e["dur"]) for e in launches)
        assert stated["memset_bytes"] == sum(e["args"]["bytes"] for e in of("gpu_memset", []))
        for kind, rows in copies.items():
            assert stated["copies"][kind] == {"count": len(rows),
                                              "bytes": sum(e["args"]["bytes"] for e in rows)}  # fmt: skip
        assert stated["step_count"] == len(steps) and stated["events"] == len(events)
        assert doc["distributedInfo"] == {"backend": "nccl", "rank": rank, "world_size": 2}

        trace = read_kineto(path)
        k = trace.tables["kernels"]
        assert (len(k["start_ns"]), int((k["end_ns"] - k["start_ns"]).sum())) == (
            stated["kernel_count"], stated["kernel_time_ns"])  # fmt: skip
        step = step_of(trace, "kernels", step_ranges(trace))
        assert [int((step == i).sum()) for i in range(stated["step_count"])] == stated[
            "step_kernels"
        ]
        assert (trace.rank, trace.world_size) == (rank, 2)

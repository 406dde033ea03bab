"""An independent reading of a Kineto trace for the tests: Python's json with the times' text
(`parse_float=str`) and Decimal arithmetic, event by event, none of census's code."""

from __future__ import annotations

import gzip
import json
from decimal import Decimal
from pathlib import Path

from tests.helpers.files import DATA

KINETO = DATA / "kineto"
CATEGORIES = {"kernel": "kernels", "gpu_memcpy": "memcpys", "gpu_memset": "memsets",
              "cuda_runtime": "api_calls", "cuda_driver": "api_calls",
              "user_annotation": "annotations", "gpu_user_annotation": "gpu_annotations",
              "cpu_op": "cpu_ops", "Kernel": "kernels", "Memcpy": "memcpys", "Memset": "memsets",
              "Runtime": "api_calls", "Operator": "cpu_ops"}  # fmt: skip


def ns(text: str | int) -> int:
    """Microseconds as written -> integer ns, exactly (every fixture has <= 3 decimals)."""
    value = Decimal(str(text)) * 1000
    assert value == value.to_integral_value(), text
    return int(value)


def oracle_events(name: str | Path) -> tuple[dict, list[dict]]:
    """The trace's document (gzipped or plain) and its complete events of the categories census
    reads."""
    path = KINETO / name
    with path.open("rb") as raw:
        gzipped = raw.read(2) == b"\x1f\x8b"
    with gzip.open(path, "rt") if gzipped else path.open() as fh:
        doc = json.load(fh, parse_float=str)
    events = [e for e in doc["traceEvents"] if e.get("ph") == "X" and e.get("cat") in CATEGORIES]
    for e in events:  # torch 1.8-1.9: the ops and the profiler's steps are both `Operator`
        if e["cat"] == "Operator" and str(e["name"]).startswith("ProfilerStep#"):
            e["cat"] = "user_annotation"
    return doc, events

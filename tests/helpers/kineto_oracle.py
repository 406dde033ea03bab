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
              "cpu_op": "cpu_ops"}  # fmt: skip


def ns(text: str | int) -> int:
    """Microseconds as written -> integer ns, exactly (every fixture has <= 3 decimals)."""
    value = Decimal(str(text)) * 1000
    assert value == value.to_integral_value(), text
    return int(value)


def oracle_events(name: str | Path) -> tuple[dict, list[dict]]:
    """The trace's document and its complete events of the categories census reads."""
    with gzip.open(KINETO / name, "rt") as fh:
        doc = json.load(fh, parse_float=str)
    return doc, [e for e in doc["traceEvents"] if e.get("ph") == "X" and e.get("cat") in CATEGORIES]

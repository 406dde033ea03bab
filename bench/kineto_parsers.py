"""The JSON parsers census could read Kineto traces with, timed on the same decompressed trace:
CPU seconds (the machine is shared: wall time says little) and MB/s of JSON, best of `--repeat`.

    python bench/kineto_parsers.py bench/out/kineto-1e5/rank0.pt.trace.json.gz

Parsers (each builds every event, except where said): json (stdlib), orjson, msgspec untyped,
msgspec typed (census's decoder: the fields census reads, the rest skipped unbuilt, times as
their decimal text), ijson with the yajl2_c backend (streaming, numbers as Decimal), pysimdjson
(parse, then the events' fields census reads taken from its lazy objects).
"""

from __future__ import annotations

import argparse
import gzip
import json
import resource
import sys
from pathlib import Path


def _cpu() -> float:
    use = resource.getrusage(resource.RUSAGE_SELF)
    return use.ru_utime + use.ru_stime


def parsers(text: bytes) -> dict:
    """Name -> a function that parses `text` into events (each returns the event count)."""
    import ijson
    import msgspec
    import orjson
    import simdjson

    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
    from census.sources.kineto.events import DECODE_EVENTS

    start = text.index(b"[", text.index(b'"traceEvents"'))
    events = text[start : text.rindex(b"]") + 1]
    simd = simdjson.Parser()

    def simd_fields() -> int:
        doc = simd.parse(text)
        n = 0
        for e in doc["traceEvents"]:
            e.get("cat"), e.get("ts"), e.get("dur"), e.get("name")
            n += 1
        return n

    return {
        "json": lambda: len(json.loads(text)["traceEvents"]),
        "orjson": lambda: len(orjson.loads(text)["traceEvents"]),
        "msgspec untyped": lambda: len(msgspec.json.decode(text)["traceEvents"]),
        "msgspec typed (census)": lambda: len(DECODE_EVENTS(events)),
        "ijson yajl2_c": lambda: sum(1 for _ in ijson.items(text, "traceEvents.item")),
        "pysimdjson + fields": simd_fields,
    }


def main(argv: list[str] | None = None) -> int:
    """Time each parser and print a line per parser."""
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("trace", type=Path)
    ap.add_argument("--repeat", type=int, default=2)
    args = ap.parse_args(argv)
    text = gzip.decompress(args.trace.read_bytes())
    for name, parse in parsers(text).items():
        best = float("inf")
        for _ in range(args.repeat):
            t0 = _cpu()
            count = parse()
            best = min(best, _cpu() - t0)
        row = {"parser": name, "cpu_s": round(best, 2), "mb_per_s": round(len(text) / best / 1e6)}
        print(json.dumps({**row, "events": count}), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""A PyTorch profiler (Kineto) trace read into int64 columns, streaming: `iter_batches` hands
each batch's tables on as it is decoded (memory bounded whatever the trace's length),
`read_kineto` gathers them into a KinetoTrace.

The JSON parser is msgspec (docs/performance.md, "Kineto traces": measured beside json,
orjson, ijson and pysimdjson): typed decoding into the few fields census reads skips the rest
of every event without building it, and `float_hook=str` hands the times' decimal text over.
Where msgspec is not installed, the standard library's json reads the same batches, with the
same results, slower (census.sources.kineto.decoder).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from census.errors import InputError
from census.sources.kineto.decoder import decoder
from census.sources.kineto.stream import TraceStream, read_events
from census.sources.kineto.tables import TABLES, Counts, Strings, batch_tables

SNIFF_BYTES = 1 << 20


@dataclass
class KinetoTrace:
    """One trace's tables (TABLES' names -> named int64 columns), its strings (a name column
    holds ids into them), its top-level metadata, and notes on what was set aside."""

    path: Path
    tables: dict[str, dict[str, np.ndarray]]
    strings: list[str]
    meta: dict[str, Any]
    notes: list[str] = field(default_factory=list)
    labels: dict[str, int] = field(default_factory=dict)  # non-numeric pids/tids -> their ids
    events: int = 0

    @property
    def rank(self) -> int | None:
        """distributedInfo's rank, if the trace has one."""
        return _info_int(self.meta, "rank")

    @property
    def world_size(self) -> int | None:
        """distributedInfo's world_size, if the trace has one."""
        return _info_int(self.meta, "world_size")


def _info_int(meta: dict[str, Any], key: str) -> int | None:
    info = meta.get("distributedInfo")
    value = info.get(key) if isinstance(info, dict) else None
    return value if isinstance(value, int) and not isinstance(value, bool) else None


class Batches:
    """The trace's batches of tables, read on iteration; the strings, labels, counts and
    metadata grow as they are read (complete once iteration ends)."""

    def __init__(self, path: Path) -> None:
        self.path = Path(path)
        self.strings = Strings()
        self.labels: dict[str, int] = {}
        self.counts = Counts()
        self.meta: dict[str, Any] = {}

    def __iter__(self) -> Iterator[dict[str, dict[str, np.ndarray]]]:
        _check_file(self.path)
        stream = TraceStream(self.path)
        try:
            yield from self._read(stream)
        except (UnicodeDecodeError, RecursionError) as exc:
            raise stream.error(f"unreadable text ({type(exc).__name__})") from None
        finally:
            stream.close()

    def _read(self, stream: TraceStream) -> Iterator[dict]:
        if stream.skip_ws() != ord("{"):
            raise stream.error("expected a JSON object with `traceEvents`")
        stream.pos += 1
        dec = decoder()
        first = True
        while True:
            c = stream.skip_ws()
            if c == ord("}"):
                raise stream.error("a JSON object without `traceEvents`")
            if not first:
                stream.expect(b",", "`,` between top-level keys")
            first = False
            key = stream.read_string()
            stream.expect(b":", "`:`")
            if key == "traceEvents":
                break
            self.meta[key] = stream.read_value()
        for events in read_events(stream, dec, self.meta):
            yield batch_tables(events, self.strings, self.labels, self.counts)


def iter_batches(path: Path) -> Batches:
    """The trace's tables batch by batch (see Batches); raises InputError, naming the file,
    where it is not a readable Kineto trace."""
    return Batches(path)


def read_kineto(path: Path) -> KinetoTrace:
    """The whole trace's tables (each table's batches joined), strings, metadata and notes."""
    batches = iter_batches(path)
    parts: dict[str, list[dict[str, np.ndarray]]] = {t: [] for t in TABLES}
    for tables in batches:
        for name, columns in tables.items():
            parts[name].append(columns)
    joined = {name: _join(chunks) for name, chunks in parts.items() if chunks}
    return KinetoTrace(
        path=Path(path),
        tables=joined,
        strings=batches.strings.table(),
        meta=batches.meta,
        notes=notes(batches.counts),
        labels=dict(batches.labels),
        events=batches.counts.events,
    )


def _join(chunks: list[dict[str, np.ndarray]]) -> dict[str, np.ndarray]:
    return {k: np.concatenate([c[k] for c in chunks]) for k in chunks[0]}


def notes(counts: Counts) -> list[str]:
    """One line for each kind of event set aside or changed, with its count."""
    out = []
    for what, by_table in (
        ("without a readable ts or dur, left out", counts.no_time),
        ("with a negative duration, left out", counts.negative),
        ("not complete events (ph other than X), left out", counts.not_complete),
    ):
        for table, n in sorted(by_table.items()):
            out.append(f"{n:,} {table} events {what}")
    if counts.rounded.count:
        out.append(f"{counts.rounded.count:,} times with digits below the nanosecond, rounded")
    return out


def _check_file(path: Path) -> None:
    try:
        if path.is_dir():
            raise InputError(f"{path}: is a directory, not a PyTorch profiler trace")
        if not path.is_file():
            raise InputError(f"{path}: no such file")
    except OSError as exc:
        raise InputError(f"{path}: {exc.strerror or exc}") from None


def is_kineto(path: Path) -> bool:
    """Whether a file (plain or gzipped) holds a Kineto trace, by its content: a JSON object
    with a `traceEvents` key in its first MiB. Its name does not matter."""
    start = sniff(path)
    return start.lstrip().startswith(b"{") and b'"traceEvents"' in start


def sniff(path: Path) -> bytes:
    """The first MiB of a file's content, gunzipped where it is gzip; b"" where it is no
    regular file or cannot be read."""
    import gzip
    import zlib

    if not Path(path).is_file():  # a FIFO would block; a folder is no trace
        return b""
    try:
        with Path(path).open("rb") as fh:
            head = fh.read(2)
        opener = gzip.open if head == b"\x1f\x8b" else open
        with opener(path, "rb") as fh:
            return fh.read(SNIFF_BYTES)
    except (OSError, EOFError, zlib.error):
        return b""

"""The JSON decoder behind the Kineto reader: msgspec's typed decoding where msgspec is installed
(census.sources.kineto.events; docs/performance.md says why), else the standard library's json
with the same results, several times slower (one line on stderr says so, once a process, and
how to install msgspec). Both read a batch of events at a time, so memory stays bounded either
way; both hand a non-integer number over as its decimal text and refuse NaN and Infinity.

`decoder()` gives the one in use: `events` (an events array's text -> its events, each with the
attributes census.sources.kineto.events.Event has), `value` (any JSON value), the exceptions
that mean malformed JSON (`malformed`) and an event of the wrong shape (`shape`), and
`error_at`: the index in the decoded text of the byte that a malformed-JSON error names, and
whether the error is text after the value's end.
"""

from __future__ import annotations

import re
import sys
from collections.abc import Callable
from dataclasses import dataclass
from functools import cache
from typing import Any

INSTALL = "pip install msgspec"
SLOW_NOTE = (
    "census: msgspec is not installed: reading the trace with Python's json instead "
    f"(same results, several times slower; `{INSTALL}` makes it fast)"
)
_CONSTANT = re.compile(r"[\[:,]\s*(-?(?:NaN|Infinity))")


@dataclass(frozen=True)
class Decoder:
    """A JSON decoder for the reader; see the module's docstring."""

    events: Callable[[Any], list]
    value: Callable[[bytes], Any]
    malformed: tuple[type[Exception], ...]
    shape: tuple[type[Exception], ...]
    error_at: Callable[[Exception], tuple[int | None, bool]]


@cache
def decoder() -> Decoder:
    """msgspec's decoder where msgspec can be imported, else json's (with a line on stderr)."""
    try:
        import msgspec
    except ImportError:
        print(SLOW_NOTE, file=sys.stderr)
        return _json_decoder()
    from census.sources.kineto.events import DECODE_EVENTS

    return Decoder(
        events=DECODE_EVENTS,
        value=msgspec.json.decode,
        malformed=(msgspec.DecodeError,),
        shape=(msgspec.ValidationError,),
        error_at=_msgspec_error_at,
    )


def _msgspec_error_at(exc: Exception) -> tuple[int | None, bool]:
    """msgspec's "... (byte N)": N is the offending byte, or one past it for trailing text."""
    m = re.search(r"\(byte (\d+)\)", str(exc))
    trailing = "trailing characters" in str(exc)
    if m is None:
        return None, trailing
    return int(m.group(1)) - trailing, trailing


class JsonDecodeError(ValueError):
    """Malformed JSON as the json route reports it: the offending byte's index, if known."""

    def __init__(self, msg: str, at: int | None, trailing: bool = False) -> None:
        super().__init__(msg if at is None else f"{msg} (byte {at})")
        self.at = at
        self.trailing = trailing


class EventShapeError(JsonDecodeError):
    """An event (or its args) that is not a JSON object: like msgspec's ValidationError, a
    kind of malformed JSON without a byte (the reader tries the cut before)."""

    def __init__(self, msg: str) -> None:
        super().__init__(msg, None)


class _Constant(Exception):
    """NaN or Infinity met by json's parser (which would accept them)."""


def _reject(name: str) -> Any:
    raise _Constant(name)


class Args:
    """An event's args as the json route reads them (events.Args' fields)."""

    __slots__ = ("bytes", "correlation", "device", "fwd_thread", "sequence", "stream")

    def __init__(self, d: dict) -> None:
        get = d.get
        self.correlation, self.device, self.stream = (
            get("correlation"),
            get("device"),
            get("stream"),
        )
        self.bytes, self.sequence = get("bytes"), get("Sequence number")
        self.fwd_thread = get("Fwd thread id")


class Event:
    """One trace event as the json route reads it (events.Event's fields)."""

    __slots__ = ("args", "cat", "dur", "name", "ph", "pid", "tid", "ts")

    def __init__(self, d: dict) -> None:
        get = d.get
        self.ph, self.cat, self.name, self.pid = get("ph"), get("cat"), get("name"), get("pid")
        self.tid, self.ts, self.dur = get("tid"), get("ts"), get("dur")
        args = get("args")
        if args is not None and not isinstance(args, dict):
            raise EventShapeError(
                f"Expected `object | null`, got `{type(args).__name__}` - at args"
            )
        self.args = None if args is None else Args(args)


def _text(data: Any) -> str:
    """The text of bytes or a memoryview (the stream's buffer, which must not stay exported:
    the callers drop their `data` before decoding, so an exception's frames never hold it)."""
    return bytes(data).decode("utf-8")


def _json_value(data: Any) -> Any:
    """A JSON value from bytes (or a memoryview), as msgspec would decode it: non-integer
    numbers as their text; NaN, Infinity and any text after the value refused."""
    text = _text(data)
    del data
    return _loads(text)


def _loads(text: str) -> Any:
    import json

    try:
        return json.loads(text, parse_float=str, parse_constant=_reject)
    except json.JSONDecodeError as exc:
        if exc.msg.startswith("Unterminated string"):  # as msgspec: no byte (a cut inside a
            raise JsonDecodeError("Input data was truncated", None) from None  # string)
        at = len(text[: exc.pos].encode())
        raise JsonDecodeError(
            f"JSON is malformed: {exc.msg}", at, exc.msg == "Extra data"
        ) from None
    except _Constant:
        m = _CONSTANT.search(text)
        at = len(text[: m.start(1)].encode()) if m else None
        raise JsonDecodeError("JSON is malformed: invalid character", at) from None


def _json_events(data: Any) -> list:
    """An events array's events (each an Event), through json."""
    text = _text(data)
    del data
    events = _loads(text)
    if not isinstance(events, list):
        raise EventShapeError(f"Expected `array`, got `{type(events).__name__}`")
    try:
        return [Event(e) for e in events]
    except AttributeError:  # an event that is not an object (no .get)
        bad = next(e for e in events if not isinstance(e, dict))
        raise EventShapeError(f"Expected `object`, got `{type(bad).__name__}`") from None


def _json_decoder() -> Decoder:
    return Decoder(
        events=_json_events,
        value=_json_value,
        malformed=(JsonDecodeError,),
        shape=(EventShapeError,),
        error_at=lambda exc: (getattr(exc, "at", None), getattr(exc, "trailing", False)),
    )

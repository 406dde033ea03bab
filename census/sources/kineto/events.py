"""The fields of a Kineto event that census reads, as msgspec decodes them (imported when a trace
is read: msgspec stays out of `census --help`). Every field is Any: an odd value (a string pid,
a missing ts) is counted where it is used, never a failed batch; `float_hook=str` hands every
non-integer number over as its decimal text (census.sources.kineto.numbers reads it)."""

from typing import Any

import msgspec


class Args(msgspec.Struct, gc=False):
    """An event's args: the GPU event's device, stream, correlation and bytes; the API call's
    correlation; an op's autograd sequence number and forward thread id (> 0 on the ranges of
    backward nodes)."""

    correlation: Any = None
    device: Any = None
    stream: Any = None
    bytes: Any = None
    sequence: Any = msgspec.field(name="Sequence number", default=None)
    fwd_thread: Any = msgspec.field(name="Fwd thread id", default=None)


class Event(msgspec.Struct, gc=False):
    """One trace event; the fields census does not read are skipped unbuilt."""

    ph: Any = None
    cat: Any = None
    name: Any = None
    pid: Any = None
    tid: Any = None
    ts: Any = None
    dur: Any = None
    args: Args | None = None


DECODE_EVENTS = msgspec.json.Decoder(list[Event], float_hook=str).decode

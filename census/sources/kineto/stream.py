"""A Kineto trace's bytes streamed: the file (plain or gzipped) decompressed in a thread beside,
its top-level object read key by key, and its `traceEvents` array handed on in batches of decoded
events, so that memory stays bounded whatever the trace's length.

The events array is cut at an event's closing brace: a batch is the text from the last cut to
the last `}` that a `,` or `]` follows, decoded as one JSON array. Only a cut between two events
decodes (a brace inside an event leaves the array unbalanced, inside a string unterminated), so
a failed decode moves the cut back to the brace before; a batch that finds none reads on, up to
MAX_EVENT_BYTES. Top-level values other than the events (`deviceProperties`,
`distributedInfo`, `traceName`, ...) are decoded whole, up to MAX_META_BYTES together.
"""

from __future__ import annotations

import contextlib
import queue
import re
import threading
import zlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from census.errors import InputError
from census.sources.kineto.decoder import Decoder, decoder

CHUNK_BYTES = 8 << 20  # compressed bytes read at a time; decompressed pieces of about this size
BATCH_BYTES = 256 << 10  # decoded at a time: the batch's events stay in the CPU's caches
TRIED_CUTS = 32  # braces tried, last first, before more is read
MAX_EVENT_BYTES = 64 << 20  # no real event comes near: more without a cut is not a trace
MAX_META_BYTES = 64 << 20
GZIP_MAGIC = b"\x1f\x8b"
GZIP_WBITS = 16 + zlib.MAX_WBITS
_WS = re.compile(rb"[ \t\r\n]*")
_STRING = re.compile(rb'"(?:[^"\\]|\\.)*"', re.S)
# strings and brackets, for a value's end; a lone quote is a string the buffer cuts short
_TOKEN = re.compile(rb'"(?:[^"\\]|\\.)*"|[\[\]{}"]', re.S)
_SCALAR = re.compile(rb'"(?:[^"\\]|\\.)*"|[^,}\]\s]+', re.S)


def _pieces(path: Path, out: queue.Queue, stop: threading.Event) -> None:
    """Put the file's decompressed bytes on `out` (zlib releases the GIL, so this runs beside
    the decoding), then None; an InputError instead where the file is damaged."""
    try:
        with path.open("rb") as fh:
            data = fh.read(CHUNK_BYTES)
            inflate = zlib.decompressobj(GZIP_WBITS) if data.startswith(GZIP_MAGIC) else None
            fed = False  # whether the current gzip member has begun
            while data and not stop.is_set():
                if inflate is None:
                    out.put(data)
                while inflate is not None and data and not stop.is_set():
                    fed = True
                    piece = inflate.decompress(data, CHUNK_BYTES)  # bounded: a bomb never
                    if piece:  # makes a large piece
                        out.put(piece)
                    if inflate.eof:  # another member may follow (concatenated gzip files)
                        data, inflate, fed = (
                            inflate.unused_data,
                            zlib.decompressobj(GZIP_WBITS),
                            False,
                        )
                    else:
                        data = inflate.unconsumed_tail
                data = fh.read(CHUNK_BYTES)
        if fed and not stop.is_set():
            raise InputError(f"{path}: truncated gzip file (it ends inside compressed data)")
        out.put(None)
    except zlib.error as exc:
        out.put(InputError(f"{path}: damaged gzip data ({exc})"))
    except OSError as exc:
        out.put(InputError(f"{path}: cannot read: {exc.strerror or exc}"))
    except BaseException as exc:
        out.put(exc)


class TraceStream:
    """The decompressed text of a trace, read forward: a buffer, its position, and more on
    demand. `offset` is the position's place in the whole text, for messages."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.buf = bytearray()
        self.pos = 0
        self.consumed = 0  # bytes dropped from the buffer's front
        self.done = False
        self._queue: queue.Queue = queue.Queue(maxsize=3)
        self._stop = threading.Event()
        self._thread = threading.Thread(
            target=_pieces, args=(path, self._queue, self._stop), daemon=True
        )
        self._thread.start()

    @property
    def offset(self) -> int:
        """The position's place in the whole decompressed text."""
        return self.consumed + self.pos

    def more(self) -> bool:
        """Append the next decompressed piece; False at the end of the file."""
        if self.done:
            return False
        item = self._queue.get()
        if item is None:
            self.done = True
            return False
        if isinstance(item, BaseException):
            self.done = True
            raise item
        drop = self.pos - 1  # the byte before the position stays: a batch's `[` goes there
        if drop > 0:
            del self.buf[:drop]
            self.consumed += drop
            self.pos -= drop
        self.buf += item
        return True

    def close(self) -> None:
        """Stop the decompressing thread (it may be waiting on a full queue)."""
        self._stop.set()
        while self._thread.is_alive():
            with contextlib.suppress(queue.Empty):
                self._queue.get(timeout=0.05)

    def skip_ws(self) -> int:
        """Move past whitespace, reading on; the next byte, or -1 at the end."""
        while True:
            self.pos = _WS.match(self.buf, self.pos).end()
            if self.pos < len(self.buf):
                return self.buf[self.pos]
            if not self.more():
                return -1

    def expect(self, char: bytes, what: str) -> None:
        """Move past `char` (after whitespace), else raise naming what was expected."""
        if self.skip_ws() != char[0]:
            raise self.error(f"expected {what}")
        self.pos += 1

    def error(self, what: str) -> InputError:
        """A one-line error naming the file, the place in its text and what was found there."""
        found = bytes(self.buf[self.pos : self.pos + 24]).decode("utf-8", "replace")
        shown = repr(found) if found else "the end of the file"
        return InputError(
            f"{self.path}: not a PyTorch profiler trace: {what} at byte {self.offset}, "
            f"found {shown}"
        )

    def read_string(self) -> str:
        """A JSON string at the position (a key)."""
        if self.skip_ws() != ord('"'):
            raise self.error("expected a key")
        while (m := _STRING.match(self.buf, self.pos)) is None:
            if len(self.buf) - self.pos > MAX_META_BYTES or not self.more():
                raise self.error("expected a key")
        self.pos = m.end()
        return _decode(m.group(), self)

    def read_value(self) -> Any:
        """A whole JSON value at the position (metadata: small)."""
        self.skip_ws()
        start = self.pos
        while (end := _value_end(self.buf, start)) is None:
            if len(self.buf) - start > MAX_META_BYTES:
                raise self.error(f"a top-level value longer than {MAX_META_BYTES >> 20} MiB")
            if not self.more():
                raise self.error("a value cut short")
            start = self.pos
        self.pos = end
        return _decode(bytes(self.buf[start:end]), self)


def _value_end(buf: bytearray, start: int) -> int | None:
    """Where the JSON value at `start` ends, or None where the buffer ends first."""
    if start >= len(buf):
        return None
    if buf[start] not in b"[{":
        m = _SCALAR.match(buf, start)
        return m.end() if m and m.end() < len(buf) else None
    depth = 0
    for m in _TOKEN.finditer(buf, start):
        c = m.group()[0]
        if m.end() - m.start() == 1 and c == ord('"'):
            return None
        if c in b"[{":
            depth += 1
        elif c in b"]}":
            depth -= 1
            if depth == 0:
                return m.end()
    return None


def _decode(text: bytes, stream: TraceStream) -> Any:
    dec = decoder()
    try:
        return dec.value(text)
    except dec.malformed as exc:
        raise stream.error(f"invalid JSON ({exc})") from None


def read_events(stream: TraceStream, dec: Decoder, meta: dict[str, Any]) -> Iterator[list]:
    """The events of the array at the position, a decoded batch at a time; `meta` gains the
    top-level keys that follow the array."""
    stream.expect(b"[", "the events array `[`")
    while True:
        c = stream.skip_ws()
        if c == ord("]"):
            stream.pos += 1
            break
        if c == -1:
            raise stream.error("the events array cut short")
        batch = _next_batch(stream, dec)
        yield batch
        c = stream.skip_ws()
        if c == ord(","):
            stream.pos += 1
        elif c != ord("]"):
            raise stream.error("expected `,` or `]` after an event")
    read_rest(stream, meta)


def _last_cuts(buf: bytearray, start: int, count: int, end: int) -> list[int]:
    """The last `count` closing braces between `start` and `end` that a `,` or `]` follows,
    last first."""
    cuts: list[int] = []
    while len(cuts) < count:
        brace = buf.rfind(b"}", start, end)
        if brace < 0:
            break
        after = _WS.match(buf, brace + 1).end()
        if after < len(buf) and buf[after] in b",]":
            cuts.append(brace)
        end = brace
    return cuts


def _next_batch(stream: TraceStream, dec: Decoder) -> list:
    """The events from the position to the last cut in the buffer, decoded."""
    error: Exception | None = None
    while True:
        buf, start = stream.buf, stream.pos
        cuts = _last_cuts(buf, start, TRIED_CUTS, min(len(buf), start + BATCH_BYTES))
        for cut in cuts or _last_cuts(buf, start, TRIED_CUTS, len(buf)):  # the last decodes
            # unless the brace is inside an event (args holding a list of objects)
            saved = buf[start - 1], buf[cut + 1]
            buf[start - 1], buf[cut + 1] = ord("["), ord("]")
            try:
                with memoryview(buf) as view:
                    events = dec.events(view[start - 1 : cut + 2])
            except dec.malformed as exc:
                error = exc
                at, trailing = dec.error_at(exc)
                if at is not None and trailing:  # the cut lies past the array
                    return _events_to_end(stream, start, start - 1 + at, dec)
                if at is not None and at < cut + 1 - (start - 1):  # before the `]` put in:
                    stream.pos = start - 1 + at  # the events' own text is wrong
                    raise stream.error(_malformed(buf, stream.pos, exc)) from None
                continue
            except dec.shape as exc:  # an event that is not an object, ...
                raise stream.error(f"an event of an unexpected shape ({exc})") from None
            finally:
                buf[start - 1], buf[cut + 1] = saved
            stream.pos = cut + 1
            return events
        detail = f" ({error})" if error else ""
        if len(buf) - start > MAX_EVENT_BYTES:
            raise stream.error(f"no event ends within {MAX_EVENT_BYTES >> 20} MiB{detail}")
        if not stream.more():
            raise stream.error(f"the events array cut short or not JSON{detail}")


def _events_to_end(stream: TraceStream, start: int, trailing: int, dec: Decoder) -> list:
    """The events from the position to the array's own `]`, which ends before `trailing` (the
    first byte past it that the decoder found, a top-level key's `,`): a cut tried past the
    array's end (a top-level object after the events, `"distributedInfo": {"rank": 0},`) falls
    back here. The position is left on the `]`."""
    close = trailing - 1
    while close >= start and stream.buf[close] in b" \t\r\n":
        close -= 1
    try:
        with memoryview(stream.buf) as view:
            events = dec.events(view[start - 1 : close + 1])
    except dec.malformed as exc:
        stream.pos = close
        raise stream.error(_malformed(stream.buf, close, exc)) from None
    stream.pos = close
    return events


def _malformed(buf: bytearray, at: int, exc: Exception) -> str:
    """What is wrong at `at`: NaN and Infinity named (Python writes them; JSON has none)."""
    text = bytes(buf[at : at + 9]).lstrip(b"-")
    if text.startswith((b"NaN", b"Infinity")):
        return "NaN or Infinity, which JSON does not allow,"
    return f"invalid JSON ({str(exc).split(' (byte')[0]})"


def read_rest(stream: TraceStream, meta: dict[str, Any]) -> None:
    """The top-level keys after the events, then the object's end and nothing after it."""
    while True:
        c = stream.skip_ws()
        if c == ord("}"):
            stream.pos += 1
            break
        if c != ord(","):
            raise stream.error("expected `,` or `}` in the top-level object")
        stream.pos += 1
        key = stream.read_string()
        stream.expect(b":", "`:`")
        meta[key] = stream.read_value()
    if stream.skip_ws() != -1:
        raise stream.error("data after the trace's end")

"""The cache's file format for a model object (a Census): `dump_record`/`load_record` as the
bytes of a cache entry: its digest (a line), its record as a line of JSON, then its arrays as raw
little-endian int64 and bool bytes (an object array, of Python ints past int64 or of floats,
stays in the JSON), read back with numpy, never unpickled. What the record holds is the model's
(each class's to_record/from_record, census.model.record): this module names no field.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any, TypeVar

from census.model.census import Census

_BLOB = "$blob"  # an array's place in the JSON line: {"$blob": [dtype, length]}
_DTYPES = ("<i8", "|b1")
T = TypeVar("T")


def dump_record(obj: Any) -> list[bytes]:
    """The cache entry of `obj` (a model object: its to_record), in pieces: the SHA-256 of the
    rest (a line), the JSON line, then each array's bytes, in the order the record wrote them."""
    blobs: list[bytes] = []

    def column(values: Any) -> Any:
        flat = values.ravel()
        if flat.dtype.str not in _DTYPES:  # exact Python ints or floats: as JSON
            return flat.tolist()
        blobs.append(flat.tobytes())
        return {_BLOB: [flat.dtype.str, len(flat)]}

    body = [json.dumps(obj.to_record(column)).encode("utf-8"), b"\n", *blobs]
    digest = hashlib.sha256()
    for piece in body:
        digest.update(piece)
    return [digest.hexdigest().encode(), b"\n", *body]


def load_record(data: bytes, cls: type[T] = Census) -> T:  # type: ignore[assignment]
    """The `cls` object of a cache entry (its from_record, which reads the arrays back in the
    order to_record wrote them); ValueError when it is not one: cut, damaged (its digest),
    foreign (a record its from_record cannot read)."""
    import numpy as np

    digest, _, body = data.partition(b"\n")
    if hashlib.sha256(body).hexdigest().encode() != digest:
        raise ValueError("a damaged cache entry")
    line, sep, rest = body.partition(b"\n")
    if not sep:
        raise ValueError("a cut cache entry")
    view, at = memoryview(rest), 0

    def column(value: Any) -> Any:
        nonlocal at
        if not isinstance(value, dict):
            return value
        dtype, n = value[_BLOB]
        if dtype not in _DTYPES or not isinstance(n, int) or n < 0:
            raise ValueError("not a census column")
        size = np.dtype(dtype).itemsize * n
        if at + size > len(view):
            raise ValueError("a cut cache entry")
        out = np.frombuffer(view[at : at + size], dtype).copy()
        at += size
        return out

    try:
        obj = cls.from_record(json.loads(line), column)  # type: ignore[attr-defined]
    except (KeyError, TypeError, AttributeError, IndexError) as exc:
        raise ValueError(f"not a {cls.__name__} record ({type(exc).__name__}: {exc})") from None
    if at != len(view):
        raise ValueError("a cache entry with bytes to spare")
    return obj

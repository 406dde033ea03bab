"""A Kineto trace's numbers made int64 columns exactly: times from their decimal text, ids from
integers or the strings some torch versions write.

`ts` and `dur` are microseconds written in decimal (Kineto writes three decimals: whole
nanoseconds). The decoder hands their text over (msgspec's `float_hook=str`), and
`decimal_ns` reads the digits themselves: a double's rounding would put a
quarter of a real trace's times 1 ns off (tests/test_kineto_reader.py shows it on a fixture).
"""

from __future__ import annotations

from decimal import Decimal, InvalidOperation
from itertools import repeat
from typing import Any

import numpy as np

NO_VALUE = np.iinfo(np.int64).min  # a missing or unreadable value in a column
_MAX_NS = np.iinfo(np.int64).max
_SCALE = np.array([1, 10, 100, 1000], dtype=np.int64)


class Rounded:
    """How many times had digits below the nanosecond (rounded to the nearest ns, halves away
    from zero): a count for the notes."""

    def __init__(self) -> None:
        self.count = 0


def decimal_ns(values: list[Any], rounded: Rounded) -> np.ndarray:
    """Microsecond values (the decimal text of a JSON number, or an int) as int64 nanoseconds,
    exactly; NO_VALUE where a value is missing or not a number.

    The digits without the point are one integer (Python's int, exact at any length); the
    places after the point say its scale: three (Kineto's) are ns as they stand, fewer are
    multiplied up, more are rounded (counted in `rounded`). Anything else (an int, an
    exponent, a missing value) goes through Decimal, one value at a time."""
    n = len(values)
    try:
        digits = np.array([v.replace(".", "") for v in values], dtype=np.int64)
        ends = np.fromiter(map(len, values), dtype=np.int64, count=n)
        points = np.fromiter(map(str.rfind, values, repeat(".")), dtype=np.int64, count=n)
    except (AttributeError, TypeError, ValueError, OverflowError):
        return np.array([_one_ns(v, rounded) for v in values], dtype=np.int64)
    places = np.where(points < 0, 0, ends - points - 1)
    if (places == 3).all():
        return digits
    out = digits * _SCALE[np.clip(3 - places, 0, 3)]
    for i in np.flatnonzero(places > 3).tolist():
        out[i] = _one_ns(values[i], rounded)
    return out


def _one_ns(value: Any, rounded: Rounded) -> int:
    """One value as ns, through Decimal (exponents and odd forms); NO_VALUE if not a number."""
    if isinstance(value, bool) or not isinstance(value, (int, str)):
        return NO_VALUE
    try:
        ns = Decimal(value).scaleb(3)
    except (InvalidOperation, ValueError):
        return NO_VALUE
    if not ns.is_finite():
        return NO_VALUE
    whole = int(ns.to_integral_value(rounding="ROUND_HALF_UP"))
    if whole != ns:
        rounded.count += 1
    return whole if -_MAX_NS <= whole <= _MAX_NS else NO_VALUE


def int_column(values: list[Any], labels: dict[str, int] | None = None) -> np.ndarray:
    """Integer values (ids: pid, tid, correlation, device, stream, bytes) as int64; a string
    of digits read as its number; with `labels`, another string (`stream 7`, `Spans`) becomes
    a negative id numbered in `labels` (-2, -3, ...); anything else NO_VALUE."""
    try:
        return np.array(values, dtype=np.int64)
    except (TypeError, ValueError, OverflowError):
        return np.array([_one_int(v, labels) for v in values], dtype=np.int64)


def _one_int(value: Any, labels: dict[str, int] | None) -> int:
    if isinstance(value, int) and not isinstance(value, bool):
        return value if abs(value) <= _MAX_NS else NO_VALUE
    if isinstance(value, str):
        digits = value.removeprefix("-")
        if digits.isdigit() and digits.isascii() and len(digits) <= 18:
            return int(value)
        if labels is not None:
            return labels.setdefault(value, -2 - len(labels))
    return NO_VALUE

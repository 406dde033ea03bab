"""A Kineto trace's numbers made int64 columns exactly: times from their decimal text, ids from
integers or the strings some torch versions write.

`ts` and `dur` are microseconds written in decimal (Kineto writes three decimals: whole
nanoseconds). The decoder hands their text over (msgspec's `float_hook=str`), and
`decimal_ns` reads the digits themselves, all rows at once: a double's rounding would put a
quarter of a real trace's times 1 ns off (tests/test_kineto_reader.py shows it on a fixture).
"""

from __future__ import annotations

from decimal import Decimal, InvalidOperation
from typing import Any

import numpy as np

NO_VALUE = np.iinfo(np.int64).min  # a missing or unreadable value in a column
_MAX_NS = np.iinfo(np.int64).max
_POW10 = np.array([10**k for k in range(20)], dtype=np.uint64)
_ZERO, _NINE, _DOT, _MINUS = 48, 57, 46, 45


class Rounded:
    """How many times had digits below the nanosecond (rounded to the nearest ns, halves away
    from zero): a count for the notes."""

    def __init__(self) -> None:
        self.count = 0


def decimal_ns(values: list[Any], rounded: Rounded) -> np.ndarray:
    """Microsecond values (the decimal text of a JSON number, or an int) as int64 nanoseconds,
    exactly; NO_VALUE where a value is missing or not a number."""
    n = len(values)
    if n == 0:
        return np.zeros(0, dtype=np.int64)
    text = np.array(values)
    if text.dtype.kind != "U":  # None, a list, ... among them: each on its own
        return np.array([_one_ns(v, rounded) for v in values], dtype=np.int64)
    width = text.dtype.itemsize // 4
    codes = text.view(np.uint32).reshape(n, width)
    out, ok = _digits_ns(codes, rounded)
    for i in np.flatnonzero(~ok).tolist():  # exponents, signs, text that is no number
        out[i] = _one_ns(values[i], rounded)
    return out


def _digits_ns(codes: np.ndarray, rounded: Rounded) -> tuple[np.ndarray, np.ndarray]:
    """Rows of character codes ([-]digits[.digits], zero-padded) as ns, and which rows were
    of that form (the others are left to `_one_ns`)."""
    _n, width = codes.shape
    neg = codes[:, 0] == _MINUS
    digit = (codes >= _ZERO) & (codes <= _NINE)
    dot = codes == _DOT
    used = codes != 0
    col = np.arange(width)
    length = used.sum(axis=1)
    ok = (digit | dot | (col == 0) & neg[:, None] | ~used).all(axis=1)
    ok &= (used == (col < length[:, None])).all(axis=1) & (dot.sum(axis=1) <= 1)
    ok &= length > neg  # not empty, not a lone sign
    point = np.where(dot.any(axis=1), dot.argmax(axis=1), length)
    power = point[:, None] - col - 1  # of each digit, in microseconds
    power += col > point[:, None]
    exp_ns = power + 3
    ok &= ((exp_ns <= 18) | ~digit).all(axis=1)  # at most 16 digits before the point
    whole = digit & (exp_ns >= 0)
    weights = _POW10[np.clip(exp_ns, 0, 19)]
    value = np.where(whole, (codes - _ZERO).astype(np.uint64) * weights, 0).sum(
        axis=1, dtype=np.uint64
    )
    below = digit & (exp_ns < 0)
    if below.any():  # more than three decimals: round half away from zero
        first = np.where(below & (exp_ns == -1), codes - _ZERO, 0).sum(axis=1)
        rest = (below & (codes != _ZERO)).any(axis=1)
        rounded.count += int((rest & ok).sum())
        value += (first >= 5).astype(np.uint64)
    ok &= value <= np.uint64(_MAX_NS)
    signed = np.where(ok, value, 0).astype(np.int64)
    return np.where(neg, -signed, signed), ok


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

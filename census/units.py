"""Human units for integer nanoseconds and bytes (the only place numbers meet units), the one
rule for clipping a long text, and the one rule for showing a text census did not write."""

from __future__ import annotations

import math
import re
from collections.abc import Iterator

KIB = 1024
MIB = 1024**2
GIB = 1024**3


def fmt_ns(ns: float | None, signed: bool = False) -> str:
    """`ns` in the largest unit it reaches: s (3 decimals), ms (2), µs (1) or ns (none), with
    thousands separators; '-' when negative, '+' when positive and `signed`; '' for None."""
    if ns is None:
        return ""
    sign = "+" if signed and ns > 0 else ("-" if ns < 0 else "")
    v = abs(ns)
    if v >= 1e9:
        text = f"{v / 1e9:,.3f} s"
    elif v >= 1e6:
        text = f"{v / 1e6:,.2f} ms"
    elif v >= 1e3:
        text = f"{v / 1e3:,.1f} µs"
    else:
        text = f"{v:,.0f} ns"
    return sign + text


def fmt_bytes(b: float | None, signed: bool = False) -> str:
    """`b` bytes in the largest binary unit it reaches: GiB, MiB, KiB (2 decimals) or B (none),
    signed as fmt_ns; '' for None."""
    if b is None:
        return ""
    sign = "+" if signed and b > 0 else ("-" if b < 0 else "")
    v = abs(b)
    for unit, size in (("GiB", GIB), ("MiB", MIB), ("KiB", KIB)):
        if v >= size:
            return f"{sign}{v / size:,.2f} {unit}"
    return f"{sign}{v:,.0f} B"


def fmt_count(n: float | None, signed: bool = False) -> str:
    """`n` with thousands separators, no decimals when whole, else one; '+' when positive and
    `signed`; '' for None."""
    if n is None:
        return ""
    text = f"{n:,.0f}" if float(n).is_integer() else f"{n:,.1f}"
    return f"+{text}" if signed and n > 0 else text


def fmt_metric(key: str, value: float | None, signed: bool = False) -> str:
    """Format by the unit suffix of the metric's name."""
    if key.endswith("_ns"):
        return fmt_ns(value, signed)
    if key.endswith("bytes"):
        return fmt_bytes(value, signed)
    return fmt_count(value, signed)


def fmt_pct(pct: float | None) -> str:
    """A percentage with its sign and one decimal ('+4.2%'); '' for None."""
    if pct is None:
        return ""
    return f"{pct:+.1f}%"


def coverage_name(coverage: float) -> str:
    """An interval's coverage as a percentage, two significant digits of what it misses and
    rounded down (never claiming more): 0.95 -> "95%", 0.97929 -> "97.9%", 0.99930 ->
    "99.93%", 0.9999984 -> "99.99984%" (the first looks of `--arms auto`)."""
    miss = 100 * (1 - coverage)
    if miss < 1e-9:  # beyond what a percentage with 9 decimals can show below 100
        return ">99.999999999%"
    digits = max(0, min(9, 1 - math.floor(math.log10(miss))))
    scale = 10**digits
    text = f"{math.floor((100 - miss) * scale + 1e-6) / scale:.{digits}f}"
    return (text.rstrip("0").rstrip(".") if "." in text else text) + "%"


def fmt_ci(ci_ns: tuple[float, float], coverage: float) -> str:
    """An interval in words: '95% CI -1.79 ms to -1.70 ms' (its coverage by coverage_name)."""
    lo, hi = ci_ns
    return f"{coverage_name(coverage)} CI {fmt_ns(lo, signed=True)} to {fmt_ns(hi, signed=True)}"


def clip(text: str, width: int) -> str:
    """`text` in at most `width` characters, cut at the end with an ellipsis."""
    return text if len(text) <= width else text[: width - 1] + "…"


# C0 controls (tab and newline included), DEL and the C1 controls (U+009B is a terminal's CSI).
_CONTROLS = {c: f"\\x{c:02x}" for c in (*range(0x20), *range(0x7F, 0xA0))}


PIECE_CHARS = 1 << 20


def pieces(text: str | list[str]) -> Iterator[str]:
    """`text` (or the text that is these pieces of it, in order) a MiB of characters at a time
    at most: what is encoded or written of a long document at once (a summary document reaches
    hundreds of MB; a whole encoded copy would sit beside it)."""
    for part in [text] if isinstance(text, str) else text:
        for at in range(0, len(part), PIECE_CHARS):
            yield part[at : at + PIECE_CHARS]


def one_line(text: str) -> str:
    """`text` with every control character shown as a `\\xNN` escape: a kernel name, an NVTX
    text, a label or a file name stays one line, cannot send a terminal escape sequence (retitle
    the window, clear the screen) and cannot break a markdown row. Other text is unchanged."""
    return text.translate(_CONTROLS)


def first_clause(sentence: str) -> str:
    """The sentence up to its first `; ` outside parentheses: a verdict without what follows it
    (`compiled is faster than eager on the GPU: GPU span -1.76 ms/step (-11.5%) (beyond the
    ±166.9 µs spread of one capture each)`)."""
    depth = 0
    for i, ch in enumerate(sentence):
        depth += {"(": 1, ")": -1}.get(ch, 0)
        if depth == 0 and sentence.startswith("; ", i):
            return sentence[:i]
    return sentence


NBSP = "\u00a0"
# A number and the unit fmt_ns or fmt_bytes put after it, with the space between them.
_NUMBER_UNIT = re.compile(r"(?<=[0-9]) (?=(?:ns|µs|ms|s|B|KiB|MiB|GiB)(?![A-Za-z0-9_]))")


def keep_units(text: str) -> str:
    """`text` with a no-break space between each number and its unit (`558.6 µs`): a page laid
    out at any width never puts the unit on the next line."""
    return _NUMBER_UNIT.sub(NBSP, text)

"""The user's --steps and --phases regular expressions, matched with a time limit.

They run on NVTX texts from the export, which census does not control: a pattern that backtracks
catastrophically on one text (`^(a|aa)+$` on a long run of `a`) would hang census. The `regex`
engine takes a timeout; past it, census stops with one line naming the option, the pattern and
the text. census's own default patterns (anchored alternations of literals, linear in the
text) search ASCII texts with the standard library's `re` instead: loaded anyway, where `regex`
takes ~8 ms to import. On ASCII the two agree on what `\b` is; past it they do not (`regex`
counts combining marks as word characters), so any other text goes to `regex`.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from census.definitions import DEFAULT_PHASES_REGEX, DEFAULT_STEPS_REGEX
from census.errors import UsageError
from census.units import clip

MATCH_SECONDS = 1.0  # per NVTX text; an ordinary pattern takes microseconds
TOTAL_SECONDS = 30.0  # over all the texts of an export (10^6 distinct texts take about 1 s)


_OWN = frozenset({DEFAULT_STEPS_REGEX, DEFAULT_PHASES_REGEX})


def check_pattern(option: str, pattern: str) -> None:
    """A UsageError naming the option where `pattern` is not a valid regular expression."""
    if pattern not in _OWN:
        compile_pattern(option, pattern)


def compile_pattern(option: str, pattern: str):
    """The compiled pattern, or a UsageError naming the option."""
    import regex

    try:
        return regex.compile(pattern)
    except (regex.error, ValueError) as exc:
        named = option if option.endswith("=") else f"{option} "  # `steps=` or `--steps`
        raise UsageError(f"{named}{pattern!r} is not a valid regular expression: {exc}") from None


def matching(option: str, pattern: str, texts: Iterable[str]) -> list[str]:
    """The texts `pattern` finds a match in: each search bounded by MATCH_SECONDS, all of them
    by TOTAL_SECONDS."""
    import time

    if pattern in _OWN:
        texts = list(texts)
        if all(text.isascii() for text in texts):
            own = re.compile(pattern)
            return [text for text in texts if own.search(text)]
    compiled = compile_pattern(option, pattern)
    out = []
    deadline = time.monotonic() + TOTAL_SECONDS
    slowest, slowest_s = "", -1.0
    for text in texts:
        started = time.monotonic()
        limit = min(MATCH_SECONDS, deadline - started)
        try:
            if limit <= 0:
                raise TimeoutError
            if compiled.search(text, timeout=limit):
                out.append(text)
        except TimeoutError:
            if limit < MATCH_SECONDS:  # the total ran out: name the slowest text seen
                raise UsageError(f"{option} {pattern!r} took over {TOTAL_SECONDS:g} s on the "
                                 f"export's NVTX texts (the slowest: {quoted(slowest)}): "
                                 "simplify the pattern") from None  # fmt: skip
            raise UsageError(
                f"{option} {pattern!r} took over {MATCH_SECONDS:g} s on the NVTX text "
                f"{quoted(text)} (catastrophic backtracking): simplify the pattern"
            ) from None
        took = time.monotonic() - started
        if took > slowest_s:
            slowest, slowest_s = text, took
    return out


def quoted(text: str) -> str:
    """An NVTX text as a warning or an error quotes it: one line (repr escapes newlines and other
    controls), cut to 60 characters (a range's text can be a long payload: a path, a config)."""
    return repr(clip(text, 60))

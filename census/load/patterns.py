"""The user's --steps and --phases regular expressions, matched with a time limit.

They run on NVTX texts from the export, which census does not control: a pattern that backtracks
catastrophically on one text (`^(a|aa)+$` on a long run of `a`) would hang census. The `regex`
engine takes a timeout; past it, census stops with one line naming the option, the pattern and
the text.
"""

from __future__ import annotations

from collections.abc import Iterable

from census.errors import UsageError

MATCH_SECONDS = 1.0  # per NVTX text; an ordinary pattern takes microseconds


def compile_pattern(option: str, pattern: str):
    """The compiled pattern, or a UsageError naming the option."""
    import regex

    try:
        return regex.compile(pattern)
    except (regex.error, ValueError) as exc:
        raise UsageError(f"{option} {pattern!r} is not a valid regular expression: {exc}") from None


def matching(option: str, pattern: str, texts: Iterable[str]) -> list[str]:
    """The texts `pattern` finds a match in, each search bounded by MATCH_SECONDS."""
    compiled = compile_pattern(option, pattern)
    out = []
    for text in texts:
        try:
            if compiled.search(text, timeout=MATCH_SECONDS):
                out.append(text)
        except TimeoutError:
            shown = text if len(text) <= 60 else text[:59] + "…"
            raise UsageError(
                f"{option} {pattern!r} took over {MATCH_SECONDS:g} s on the NVTX text {shown!r} "
                "(catastrophic backtracking): simplify the pattern"
            ) from None
    return out

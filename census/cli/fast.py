"""`census summary EXPORT --json` into a pipe, answered from the cache before the command line
is built: importing typer, pydantic and the commands costs more than reading a cached document
back. Any other command line, and a document the cache does not hold, go the usual way
(census.cli.analysis.summary), which computes and caches it."""

from __future__ import annotations

import sys
from pathlib import Path

TOP_DEFAULT = 15  # summary's and diff's --top
_JSON_FLAGS = (("--json",), ("--format", "json"), ("--format=json",))


def cached_summary(argv: list[str]) -> bool:
    """Whether `argv` (what follows `census`) asks for the default `summary --json` of an export
    file into a pipe and the cache answered it: the document is on stdout, its warnings on
    stderr, as the command writes them (census.cli.common.write_cached)."""
    from census.cli.stdout import piped_json, warn

    path = _summary_json_of(argv)
    if path is None or not piped_json("json") or not _utf8(sys.stdout):
        return False
    try:
        from census.api import cached_summary_json

        hit = cached_summary_json(path, TOP_DEFAULT)
    except Exception:
        return False
    if hit is None:
        return False
    meta, document = hit
    warn(meta["warnings"])
    sys.stdout.write_bytes(document + b"\n")  # type: ignore[attr-defined] (GuardedStdout)
    sys.stdout.flush()
    return True


def _utf8(stream) -> bool:
    """Whether text written to `stream` is encoded as UTF-8, as the cache holds it."""
    import codecs

    try:
        return codecs.lookup(getattr(stream, "encoding", None) or "").name == "utf-8"
    except LookupError:
        return False


def _summary_json_of(argv: list[str]) -> Path | None:
    """The export named by `summary EXPORT --json` (or `--format json`, `--format=json`, before
    or after it) with no other argument; else None."""
    if not argv or argv[0] != "summary":
        return None
    rest = argv[1:]
    for flag in _JSON_FLAGS:
        for at in range(len(rest) - len(flag) + 1):
            if tuple(rest[at : at + len(flag)]) == flag:
                others = rest[:at] + rest[at + len(flag) :]
                if len(others) == 1 and not others[0].startswith("-"):
                    return Path(others[0])
    return None

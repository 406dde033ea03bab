"""`census summary EXPORT --json [--no-idle]` into a pipe, without the command line: importing
typer and pydantic and building the commands cost 0.16 s of every run. The document comes from
the cache where it holds it (the default options; nothing heavy imported then), else is
computed here as the command computes it (census.cli.analysis.summary), with its errors and
exit codes (census.cli.stdout.error_exit). Any other command line goes the usual way."""

from __future__ import annotations

import sys
from functools import partial
from pathlib import Path

TOP_DEFAULT = 15  # summary's and diff's --top
_JSON_FLAGS = (("--json",), ("--format", "json"), ("--format=json",))


def summary_json(argv: list[str]) -> int | None:
    """The exit code of `argv` (what follows `census`) when it asks for `summary EXPORT --json`
    (and nothing else but --no-idle or --idle) into a pipe, answered here: the document on
    stdout, its warnings and any error on stderr, as the command writes them; None for any
    other command line."""
    from census.cli.stdout import error_exit, piped_json

    asked = _summary_json_of(argv)
    if asked is None or not piped_json("json") or not _utf8(sys.stdout):
        return None
    path, idle = asked
    try:
        if not (idle and _from_cache(path)):
            from census.api import Options, summary_json_text
            from census.cli.stdout import write_cached

            options = Options(idle=idle)
            write_cached(f"census of {path.name}",
                         partial(summary_json_text, path, options, TOP_DEFAULT))  # fmt: skip
        sys.stdout.flush()  # a full or closed stdout fails here
    except (Exception, KeyboardInterrupt) as exc:
        return error_exit(exc)
    return 0


def _from_cache(path: Path) -> bool:
    """Whether the cache answered the default summary of `path`: the document is on stdout."""
    from census.cli.stdout import warn

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
    return True


def _utf8(stream) -> bool:
    """Whether text written to `stream` is encoded as UTF-8, as the cache holds it."""
    import codecs

    try:
        return codecs.lookup(getattr(stream, "encoding", None) or "").name == "utf-8"
    except LookupError:
        return False


_IDLE_FLAGS = {"--no-idle": False, "--idle": True}


def _summary_json_of(argv: list[str]) -> tuple[Path, bool] | None:
    """(the export, whether to split the idle time) named by `summary EXPORT --json` (or
    `--format json`, `--format=json`, before or after it), with --no-idle or --idle at most;
    else None."""
    if not argv or argv[0] != "summary":
        return None
    rest = argv[1:]
    idle = True
    flags = [a for a in rest if a in _IDLE_FLAGS]
    if len(flags) > 1:
        return None
    if flags:
        idle = _IDLE_FLAGS[flags[0]]
        rest = [a for a in rest if a not in _IDLE_FLAGS]
    for flag in _JSON_FLAGS:
        for at in range(len(rest) - len(flag) + 1):
            if tuple(rest[at : at + len(flag)]) == flag:
                others = rest[:at] + rest[at + len(flag) :]
                if len(others) == 1 and not others[0].startswith("-"):
                    return Path(others[0]), idle
    return None

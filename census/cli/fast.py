"""`census summary EXPORT --json [--no-idle]` into a pipe, without the command line: importing
typer and pydantic and building the commands cost 0.16 s of every run. This module only
recognizes the command lines it may answer; the document is written as the command writes it
(census.cli.piped.write_summary_json, which both call), with the command's errors and exit codes
(census.cli.stdout.error_exit). Any other command line goes the usual way."""

from __future__ import annotations

import sys
from typing import Any

_JSON_FLAGS = (("--json",), ("--format", "json"), ("--format=json",))


def summary_json(argv: list[str]) -> int | None:
    """The exit code of `argv` (what follows `census`) when it asks for `summary EXPORT --json`
    (and nothing else but --no-idle or --idle) into a pipe, answered here: the document on
    stdout, its warnings and any error on stderr, as the command writes them; None for any
    other command line."""
    from census.cli.stdout import error_exit, piped_json

    asked = _summary_json_of(argv)
    if asked is None or not piped_json("json"):
        return None
    named, selection = asked
    try:
        from census.cli.piped import write_summary_json
        from census.options import Options

        write_summary_json(named, Options(**selection))
        sys.stdout.flush()  # a full or closed stdout fails here
    except (Exception, KeyboardInterrupt) as exc:
        return error_exit(exc)
    return 0


_IDLE_FLAGS = {"--no-idle": False, "--idle": True}


def _summary_json_of(argv: list[str]) -> tuple[str, dict[str, Any]] | None:
    """(the export as named, the Options keywords given) of `summary EXPORT --json` (or
    `--format json`, `--format=json`, before or after it), with --no-idle or --idle at most;
    else None."""
    if not argv or argv[0] != "summary":
        return None
    rest = argv[1:]
    selection = {}
    flags = [a for a in rest if a in _IDLE_FLAGS]
    if len(flags) > 1:
        return None
    if flags:
        selection["idle"] = _IDLE_FLAGS[flags[0]]
        rest = [a for a in rest if a not in _IDLE_FLAGS]
    for flag in _JSON_FLAGS:
        for at in range(len(rest) - len(flag) + 1):
            if tuple(rest[at : at + len(flag)]) == flag:
                others = rest[:at] + rest[at + len(flag) :]
                if len(others) == 1 and others[0] and not others[0].startswith("-"):
                    return others[0], selection
    return None

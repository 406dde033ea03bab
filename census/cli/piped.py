"""`census summary --json` into a pipe, with nothing heavy imported (no typer): the one place the
document is written, by the command (census.cli.analysis.summary) and, before typer is imported,
by census.cli.fast. Where the cache holds the default document, its bytes go to stdout as they
are (nothing computed, nothing heavy imported)."""

from __future__ import annotations

import sys
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING

from census.cli.stdout import GuardedStdout, warn, write_cached

if TYPE_CHECKING:
    from census.options import Options

TOP_DEFAULT = 15  # summary's and diff's --top


def write_summary_json(named: str, options: Options, top: int = TOP_DEFAULT) -> None:
    """The compact `summary --json` document of `named` (.sqlite, .nsys-rep, capture folder or
    sample:NAME) on stdout, its progress and warnings on stderr; errors are raised."""
    from census.api import resolve_input, summary_document

    path = resolve_input(named)
    if not _from_cache(path, options, top):
        write_cached(f"census of {path.name}", partial(summary_document, path, options, top))


def _from_cache(path: Path, options: Options, top: int) -> bool:
    """Whether the cache answered (the default options' document of an export file, to census's
    guarded UTF-8 stdout): the document is on stdout. Anything else is left to the computation,
    which reads the cache too and raises the input's errors."""
    from census.options import Options

    stdout = sys.stdout
    if options != Options() or not isinstance(stdout, GuardedStdout) or not _utf8(stdout):
        return False
    try:
        from census.api import cached_summary_json

        hit = cached_summary_json(path, top)
    except Exception:
        return False
    if hit is None:
        return False
    meta, document = hit
    warn(meta["warnings"])
    stdout.write_bytes(document + b"\n")
    return True


def _utf8(stream: GuardedStdout) -> bool:
    """Whether text written to `stream` is encoded as UTF-8, as the cache holds it."""
    import codecs

    try:
        return codecs.lookup(getattr(stream, "encoding", None) or "").name == "utf-8"
    except LookupError:
        return False

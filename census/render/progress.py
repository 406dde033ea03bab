"""Progress on stderr: a spinner on a terminal, plain lines elsewhere; never on stdout."""

from __future__ import annotations

import contextlib
import sys
import time
from collections.abc import Callable, Iterator

QUIET_SECONDS = 1.0


@contextlib.contextmanager
def stage_progress(label: str, quiet: bool = False) -> Iterator[Callable[[str], None]]:
    if quiet:
        yield lambda _stage: None
        return
    if sys.stderr.isatty():
        from rich.console import Console

        console = Console(stderr=True)
        with console.status(label) as status:
            yield lambda stage: status.update(f"{label}: {stage}")
        return
    start = time.monotonic()

    def report(stage: str) -> None:
        elapsed = time.monotonic() - start
        if elapsed >= QUIET_SECONDS:  # quick work stays silent in logs
            print(f"census: {label}: {stage} ({elapsed:.1f}s)", file=sys.stderr)

    yield report

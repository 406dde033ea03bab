"""Progress on stderr: a spinner on a terminal, plain lines elsewhere; never on stdout."""

from __future__ import annotations

import contextlib
import sys
import time
from collections.abc import Callable, Iterator

QUIET_SECONDS = 1.0
LOG_EVERY_SECONDS = 5.0


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
    last = [0.0]

    def report(stage: str) -> None:
        now = time.monotonic()
        # Quick work stays silent in logs; long work reports at most every few seconds.
        if now - start >= QUIET_SECONDS and now - last[0] >= LOG_EVERY_SECONDS:
            last[0] = now
            print(f"census: {label}: {stage} ({now - start:.1f}s)", file=sys.stderr)

    yield report

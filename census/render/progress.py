"""Progress on stderr: a rich progress bar on a terminal, plain lines elsewhere; never stdout.

The callback takes a stage, and for passes over a table the rows read so far and in all:
`progress("reading GPU activity", 1_500_000, 10_003_500)`.
"""

from __future__ import annotations

import contextlib
import sys
import time
from collections.abc import Callable, Iterator

QUIET_SECONDS = 1.0
LOG_EVERY_SECONDS = 5.0


@contextlib.contextmanager
def stage_progress(label: str, quiet: bool = False) -> Iterator[Callable[..., None]]:
    """A progress callback for `label`'s work, on stderr: a bar on a terminal, elsewhere a line
    every LOG_EVERY_SECONDS once QUIET_SECONDS have passed; nothing when `quiet`."""
    if quiet:
        yield lambda *_args: None
        return
    if sys.stderr.isatty():
        with _bar(label) as report:
            yield report
        return
    start = time.monotonic()
    last = [0.0]

    def report(stage: str, done: int | None = None, total: int | None = None) -> None:
        now = time.monotonic()
        # Quick work stays silent in logs; long work reports at most every few seconds.
        if now - start >= QUIET_SECONDS and now - last[0] >= LOG_EVERY_SECONDS:
            last[0] = now
            rows = f", {rows_text(done, total)}" if done is not None else ""
            print(f"census: {label}: {stage}{rows} ({now - start:.1f}s)", file=sys.stderr)

    yield report


def rows_text(done: int, total: int | None) -> str:
    """`done` rows read, of `total` with a percentage where it is known."""
    if not total:
        return f"{done:,} rows"
    return f"{min(done, total):,} of {total:,} rows ({100 * min(done, total) / total:.0f}%)"


@contextlib.contextmanager
def _bar(label: str) -> Iterator[Callable[..., None]]:
    from rich.console import Console
    from rich.progress import (
        BarColumn,
        Progress,
        SpinnerColumn,
        TaskProgressColumn,
        TextColumn,
        TimeElapsedColumn,
    )

    columns = (
        SpinnerColumn(),
        TextColumn(f"{label}: {{task.description}}"),
        BarColumn(bar_width=24),
        TaskProgressColumn(),
        TextColumn("{task.fields[rows]}"),
        TimeElapsedColumn(),
    )
    with Progress(*columns, console=Console(stderr=True), transient=True) as bar:
        task = bar.add_task("starting", total=None, rows="")

        def report(stage: str, done: int | None = None, total: int | None = None) -> None:
            rows = f"{done:,} rows" if done is not None else ""
            bar.update(task, description=stage, total=total or None, completed=done or 0,
                       rows=rows)  # fmt: skip

        yield report

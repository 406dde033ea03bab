"""A diff's two sides, each a Census or what census.api.summarize takes, read one after the
other or side by side (census.api.diff). `summarize` is census.api.summarize_with, `cached`
whether the cache holds an export's census with the options. An experiment's capture is read
ahead while census ab still makes the other (read_ahead)."""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from pathlib import Path
from typing import Any

from census.errors import CensusError
from census.model.census import Census
from census.options import Options, resolve_input
from census.sources.export import Progress


def read_sides(sides: tuple, options: Options, progress: Progress | None,
               summarize: Callable[..., Census],
               cached: Callable[[Path, Options], bool]) -> list[tuple]:  # fmt: skip
    """(Census, path, read from that path) of each side (a Census, or what summarize takes).
    Two export files to compute are read side by side where there are two workers or more
    (CENSUS_WORKERS=1: one after the other): the second in a process of its own with half the
    workers (census.load.pool.SideProcess), the first here with its progress. Else, and for anything
    else (rank folders, reports to export, a side in the cache: the other then has every
    worker), one after the other, the first side's errors before the second's; and also where
    another thread runs (a progress bar on a terminal, the caller's threads): a process forked
    beside threads can inherit a lock one of them holds (an import's), and wait on it forever."""
    pair = _pair_beside(sides, options, cached)
    if pair is None:
        return [_side(side, options, progress, summarize) for side in sides]
    from census.load.pool import SideProcess, default_workers

    workers = default_workers()
    half = workers // 2
    with SideProcess(summarize, pair[1], options, None, True, half) as second:
        first = summarize(pair[0], options, progress, workers=workers - half)
        if progress:
            progress(f"waiting for {pair[1].name}")
        other = second.result()
    if other is None:  # failed there: computed here, where its error is raised as it would be
        other = summarize(pair[1], options, progress)
    return [(first, pair[0], True), (other, pair[1], True)]


def _side(side: Any, options: Options, progress: Progress | None,
          summarize: Callable[..., Census]) -> tuple:  # fmt: skip
    if isinstance(side, Census):
        return side, Path(side.source.path), False
    path = resolve_input(side)
    return summarize(path, options, progress), path, True


def _pair_beside(sides: tuple, options: Options,
                 cached: Callable[[Path, Options], bool]) -> tuple | None:  # fmt: skip
    """The two export files to read side by side, or None (never an error: the sides are then
    read one after the other, each raising its own)."""
    from census.errors import CensusError
    from census.load.pool import alone, default_workers
    from census.sources.export import is_export_file

    if default_workers() < 2 or not alone() or any(isinstance(side, Census) for side in sides):
        return None
    try:
        paths = tuple(resolve_input(side) for side in sides)
    except CensusError:
        return None
    if not all(is_export_file(p) for p in paths) or any(cached(p, options) for p in paths):
        return None
    return paths


def read_ahead(capture: Path, lies_at: Path, summarize: Callable[..., Census]) -> None:
    """The census of an experiment's capture folder, read by `summarize` (census.api's
    summarize_with) and cached as the capture at `lies_at`, where census.api.load_experiment
    reads it once the experiment is in place; a failure is left for that read to say."""
    from census.sources.export import resolve_sqlite

    with contextlib.suppress(CensusError, OSError):
        export = resolve_sqlite(capture)
        summarize(export, Options(), cache_as=lies_at / export.name)

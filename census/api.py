"""What the CLI and notebooks call: from what the user names (an export, a report, a capture
folder, a rank folder, `sample:NAME`) to a Census, a CensusDiff and their JSON documents.

The input is resolved once here, and one Options object says how steps are selected; it is also
the cache key (with the files' identity and a hash of census's code, census.store.cache).
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from census.definitions import DEFAULT_PHASES_REGEX, DEFAULT_STEPS_REGEX
from census.errors import UsageError

if TYPE_CHECKING:
    from census.compare.diff import CensusDiff
    from census.model import Census
    from census.sources.export import Progress

PathLike = str | Path


@dataclass(frozen=True)
class Options:
    """How steps are selected: NVTX ranges whose text matches `steps_regex`, minus the first
    `skip_first` per process; and which ranges inside them are phases (`phases_regex`; empty:
    none). Checked when made; `key()` is what the cache keys on."""

    steps_regex: str = DEFAULT_STEPS_REGEX
    skip_first: int = 0
    phases_regex: str = DEFAULT_PHASES_REGEX
    idle: bool = False  # split the GPU idle time by cause (syncs, launches, other host time)
    ranks: bool = False  # a folder of exports is the ranks of one run (--ranks); not a cache key

    def __post_init__(self) -> None:
        from census.load.patterns import compile_pattern

        for option, pattern in (("--steps", self.steps_regex), ("--phases", self.phases_regex)):
            compile_pattern(option, pattern)
        if self.skip_first < 0:
            raise UsageError("--skip-first must be 0 or more")

    def key(self) -> list:
        return [self.steps_regex, self.skip_first, self.phases_regex, self.idle]


def resolve_input(name: PathLike) -> Path:
    """`sample:eager` names a bundled capture; anything else is a path."""
    text = str(name)
    if text.startswith("sample:"):
        from census.sources.samples import sample_path

        return sample_path(text.split(":", 1)[1])
    return Path(name)


def default_label(path: Path) -> str:
    """A folder's name; a file's name up to its first dot; a capture folder's export
    (`NAME/capture.sqlite`) is named by its folder."""
    if path.is_dir():
        return path.name
    stem = path.name.split(".")[0]
    return path.parent.name if stem == "capture" and path.parent.name else stem


def summarize(
    path: PathLike,
    options: Options | None = None,
    *,
    progress: Progress | None = None,
    use_cache: bool = True,
    workers: int | None = None,
    **selection: Any,
) -> Census:
    """The census of one profile: `.sqlite`, `.nsys-rep` (exported on demand), a capture folder,
    a rank folder (the ranks merged; a folder that is not a census capture only with `ranks`)
    or `sample:NAME`. `options` (an Options) or the keywords of SELECTION (`steps=`,
    `skip_first=`, `phases=`, `idle=`, `ranks=`) select steps and phases; a keyword given beside
    `options` overrides that field."""
    chosen = with_options(options, selection)
    return summarize_with(resolve_input(path), chosen, progress, use_cache, workers)


# The keywords summarize and diff take for the fields of Options.
SELECTION = {"steps": "steps_regex", "skip_first": "skip_first", "phases": "phases_regex",
             "idle": "idle", "ranks": "ranks"}  # fmt: skip


def with_options(options: Options | None, selection: dict[str, Any]) -> Options:
    """`options` (default Options()) with every SELECTION keyword that is not None in its place."""
    from dataclasses import replace

    if options is not None and not isinstance(options, Options):
        raise UsageError(f"options must be a census.Options, not {type(options).__name__}")
    unknown = sorted(set(selection) - set(SELECTION))
    if unknown:
        raise UsageError(f"unknown keyword {unknown[0]!r}: the step selection is one of "
                         f"{', '.join(SELECTION)} (or options=census.Options(...))")  # fmt: skip
    given = {SELECTION[k]: v for k, v in selection.items() if v is not None}
    return replace(options or Options(), **given)


def summarize_with(
    path: Path,
    options: Options,
    progress: Progress | None = None,
    use_cache: bool = True,
    workers: int | None = None,
) -> Census:
    from census.sources.ranks import is_multi_rank

    if is_multi_rank(path):
        return summarize_ranks(path, options, progress)[0]
    from census.census import compute_census
    from census.load.aggregates import load_profile
    from census.sources.export import resolve_sqlite
    from census.store.cache import cached_census

    sqlite_path = resolve_sqlite(path, progress)

    def compute() -> Census:
        profile = load_profile(sqlite_path, options.steps_regex, options.skip_first, progress,
                               workers, phases_regex=options.phases_regex or None,
                               idle=options.idle)  # fmt: skip
        return compute_census(profile)

    if not use_cache:
        return compute()
    return cached_census(sqlite_path, options.key(), compute)


def summarize_ranks(
    folder: Path, options: Options, progress: Progress | None = None, workers: int | None = None
) -> tuple[Census, list[str], list[Census]]:
    """(merged Census, rank labels, per-rank Census list) of a multi-rank capture folder; the
    ranks are parsed in a process pool, each with the cores left to it."""
    from census.census import merge_census
    from census.load.pool import map_processes
    from census.sources.ranks import rank_files

    files = rank_files(folder, options.ranks)
    labels = [label for label, _ in files]
    workers = workers or min(len(files), os.cpu_count() or 1)
    inner = max(1, (os.cpu_count() or 1) // workers) if workers > 1 else None
    if progress:
        progress(f"{len(files)} ranks on {workers} worker(s)")
    jobs = [(p, options, inner) for _, p in files]
    ranks = map_processes(_summarize_rank, jobs, workers)
    return merge_census(labels, ranks, folder), labels, ranks


def _summarize_rank(job: tuple[Path, Options, int | None]) -> Census:
    path, options, workers = job
    return summarize_with(path, options, workers=workers)


def diff(
    a: Census | PathLike,
    b: Census | PathLike,
    labels: tuple[str, str] | None = None,
    options: Options | None = None,
    **selection: Any,
) -> CensusDiff:
    """B against A; each side a Census or anything `summarize` takes (read with `options` or
    the SELECTION keywords, as in `summarize`). Labels default to the file or folder names."""
    from census.model import Census

    options = with_options(options, selection)
    sides = []
    for side in (a, b):
        if isinstance(side, Census):
            sides.append((side, Path(side.source.path), False))
        else:
            path = resolve_input(side)
            sides.append((summarize_with(path, options), path, True))
    if labels is None:
        labels = (default_label(sides[0][1]), default_label(sides[1][1]))
    return _diff_sides(sides[0], sides[1], labels)


def _diff_sides(a: tuple, b: tuple, labels: tuple[str, str]) -> CensusDiff:
    """(Census, path, read from that path) of each side -> their diff, with the calibration
    runs' step times on the clock the steps are compared by."""
    from census.compare.diff import diff_census, step_clock

    clock = step_clock(a[0], b[0])
    uncaptured = tuple(uncaptured_step_ns(path, clock) if read else None
                       for _, path, read in (a, b))  # fmt: skip
    return diff_census(a[0], b[0], labels, uncaptured)  # type: ignore[arg-type]


def uncaptured_step_ns(path: Path, clock: str = "host") -> float | None:
    """The mean step time of a capture folder's calibration run without nsys (run.json): on the
    host's clock (what NVTX ranges span), or on the GPU's (CUDA events) with clock "gpu"."""
    from census.capture.run import read_run_info

    info = read_run_info(path) if path.is_dir() else None
    key = "uncaptured_gpu_mean_step_time_ns" if clock == "gpu" else "uncaptured_mean_step_time_ns"
    value = ((info or {}).get("calibration") or {}).get(key)
    return float(value) if isinstance(value, int | float) else None


def diff_paths(a: Path, b: Path, labels: tuple[str, str], options: Options, progress=None):
    """The CensusDiff of two inputs, with their calibration runs when they have them."""
    ca, cb = summarize_with(a, options, progress), summarize_with(b, options, progress)
    return _diff_sides((ca, a, True), (cb, b, True), labels)


def explain(d: CensusDiff) -> list[str]:
    """The explanation of a diff, one sentence a line, the headline first."""
    from census.compare.explain import explain_diff

    return explain_diff(d)


def summary_document(
    path: Path, options: Options, top: int = 20, progress: Progress | None = None
) -> tuple[dict, str]:
    """({"warnings", "timing"}, the `summary --json` document as compact JSON) of one export,
    from the cache when the same export and options were summarized before."""
    from census.render.json_docs import summary_json
    from census.sources.export import resolve_sqlite
    from census.store.cache import cached_text

    sqlite_path = resolve_sqlite(path, progress)

    def render() -> tuple[dict, str]:
        census = summarize_with(path, options, progress)
        meta = {"warnings": list(census.warnings), "timing": census.per_step_timing(),
                "host_ran_ahead": census.host_ran_ahead()}  # fmt: skip
        return meta, json.dumps(summary_json(census, top))

    return cached_text([sqlite_path], [*options.key(), top], "summary-json", render)


def diff_document(
    a: Path,
    b: Path,
    labels: tuple[str, str],
    options: Options,
    top: int = 20,
    progress: Progress | None = None,
) -> tuple[dict, str]:
    """({"warnings"}, the `diff --format json` document as compact JSON), from the cache when
    the same two exports were compared with the same options before."""
    from census.compare.explain import explain_diff
    from census.render.json_docs import diff_json
    from census.sources.export import resolve_sqlite
    from census.sources.ranks import is_multi_rank
    from census.store.cache import cached_text

    def render() -> tuple[dict, str]:
        d = diff_paths(a, b, labels, options, progress)
        return {"warnings": list(d.warnings)}, json.dumps(diff_json(d, explain_diff(d), top))

    if is_multi_rank(a) or is_multi_rank(b):
        return render()
    files = [resolve_sqlite(a, progress), resolve_sqlite(b, progress)]
    return cached_text(files, [list(labels), *options.key(), top], "diff-json", render)

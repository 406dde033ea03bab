"""What the CLI and notebooks call: from what the user names (an export, a report, a capture,
rank or `census ab` folder, `sample:NAME`) to a Census, a CensusDiff, an Experiment, their views
(what census.render.render formats) and their JSON documents. The input is resolved once here;
one Options object says how steps are selected, and is the cache key (census.store.cache)."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import replace
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any

from census.definitions import DEFAULT_STEPS_REGEX
from census.errors import CaptureError, InputError, UsageError
from census.options import (
    Options,
    PathLike,
    default_label,
    parse_labels,
    resolve_input,
    with_options,
)
from census.sources.inductor_map import map_identity  # in each census cache key: a map added later

if TYPE_CHECKING:
    from collections.abc import Callable

    from census.capture.ab import ABSpec
    from census.capture.run import CaptureSpec
    from census.compare.ab.auto_arms import AutoSpec
    from census.compare.ab.experiment import Experiment
    from census.compare.diff import CensusDiff
    from census.model.census import Census
    from census.render.views import DiffView, ExperimentView, RanksView, SummaryView
    from census.sources.export import Progress


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
    `skip_first=`, `phases=`, `idle=`, `ranks=`; `scheduler=`: a Dask scheduler reads a rank
    folder's exports) select steps and phases; a keyword given beside `options` overrides it."""
    chosen = with_options(options, selection)
    return summarize_with(resolve_input(path), chosen, progress, use_cache, workers)


def summarize_with(
    path: Path,
    options: Options,
    progress: Progress | None = None,
    use_cache: bool = True,
    workers: int | None = None,
    cache_as: Path | None = None,  # cached as this file's census (census.store.cache.cached_census)
) -> Census:
    """summarize of a resolved path: a rank folder's ranks merged, else one export's census."""
    from census.sources.ranks import is_multi_rank

    if is_multi_rank(path):
        return summarize_ranks(path, options, progress)[0]
    return _summarize_one(path, options, progress, use_cache, workers, cache_as)


def _summarize_one(path: Path, options: Options, progress: Progress | None = None,
                   use_cache: bool = True, workers: int | None = None,
                   cache_as: Path | None = None) -> Census:  # fmt: skip
    """summarize_with of one export (a file, or a capture folder's one), never a rank folder."""
    from census.load.finish import compute_census
    from census.load.profile import load_profile
    from census.sources.export import resolve_sqlite
    from census.sources.kineto.export import named_source
    from census.store.cache import cached_census

    sqlite_path = resolve_sqlite(path, progress)
    source = named_source(path, sqlite_path)  # as named (not a trace's export): its map beside

    def compute() -> Census:
        profile = load_profile(sqlite_path, options.steps_regex, options.skip_first, progress,
                               workers, phases_regex=options.phases_regex or None,
                               idle=options.idle, map_from=source)  # fmt: skip
        return compute_census(profile)

    if not use_cache:  # read through the name given this time, which the cache may not hold
        return compute().read_through(str(source))
    key = [*options.key(), map_identity(source)]
    return cached_census(sqlite_path, key, compute, cache_as).read_through(str(source))


def summarize_ranks(
    folder: Path, options: Options, progress: Progress | None = None, workers: int | None = None
) -> tuple[Census, list[str], list[Census], list[str | None]]:
    """(merged Census, rank labels, per-rank Census list, each rank's host or None) of a rank
    folder, read in a process pool or on the Dask cluster of `options.scheduler`."""
    from census.load.finish import merge_census
    from census.load.scheduler import map_ranks
    from census.sources.kineto.ranks import missing_ranks_note
    from census.sources.ranks import rank_files, rank_places

    files = rank_files(folder, options.ranks)
    labels, exports = [label for label, _ in files], [p for _, p in files]
    ranks = map_ranks(_summarize_rank, exports, options, progress, workers, options.scheduler)
    hosts, clocks = rank_places(folder, exports)  # each export opened once more, for both
    merged = merge_census(labels, ranks, folder, hosts, clocks)
    notes = [n for n in (missing_ranks_note(files),) if n]  # traces lacking some of their world
    return replace(merged, warnings=(*notes, *merged.warnings)), labels, ranks, hosts


def _summarize_rank(path: Path, options: Options, workers: int | None) -> Census:
    return _summarize_one(path, options, workers=workers)  # a rank: never a rank folder again


def diff(
    a: Census | PathLike,
    b: Census | PathLike,
    labels: tuple[str, str] | str | None = None,
    options: Options | None = None,
    *,
    progress: Progress | None = None,
    **selection: Any,
) -> CensusDiff:
    """B against A; each side a Census or anything `summarize` takes (read with `options` or
    the SELECTION keywords, as in `summarize`). Labels: a pair or `"eager,compiled"` (as
    --labels takes them), by default the file or folder names."""
    return _diff(a, b, parse_labels(labels, "labels"), with_options(options, selection), progress)


def _diff(a: Any, b: Any, labels: tuple | None, options: Options, progress: Any) -> CensusDiff:
    """diff() past its checks; labels None: the file names, which may be alike (not the user's)."""
    from census.api.sides import read_sides

    sides = read_sides((a, b), options, progress, summarize_with, _cached)
    if labels is None:
        labels = (default_label(sides[0][1]), default_label(sides[1][1]))
    return _diff_sides(sides[0], sides[1], labels)


def _cached(path: Path, options: Options) -> bool:
    """Whether the cache holds the census of this export file with these options."""
    from census.store.cache import holds_census

    return holds_census(path, [*options.key(), map_identity(path)])


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
    from census.capture.records import read_run_info

    info = read_run_info(path) if path.is_dir() else None
    key = "uncaptured_gpu_mean_step_time_ns" if clock == "gpu" else "uncaptured_mean_step_time_ns"
    value = ((info or {}).get("calibration") or {}).get(key)
    return float(value) if isinstance(value, int | float) else None


def explain(d: CensusDiff) -> list[str]:
    """The explanation of a diff, one sentence a line, the headline first."""
    from census.compare.diff import CensusDiff
    from census.compare.explain import explain_diff

    if not isinstance(d, CensusDiff):
        raise UsageError(f"census.explain takes the CensusDiff that census.diff(a, b) returns, not "
                         f"a {type(d).__name__}: compare two captures first")  # fmt: skip

    return explain_diff(d)


def summary_view(
    source: Census | PathLike,
    options: Options | None = None,
    progress: Progress | None = None,
    *,
    shown: str | None = None,
) -> SummaryView | RanksView:
    """What every format shows of one capture (census.render.render): a Census, or anything
    `summarize` takes, read with `options`; a rank folder's is a RanksView (the merged summary,
    each rank's and the spread). `shown`: what the user named it (else the export's path)."""
    from census.capture.records import capture_overhead
    from census.findings.spread import rank_spread
    from census.model.census import Census
    from census.render.views import RanksView
    from census.sources.ranks import is_multi_rank

    if isinstance(source, Census):
        return census_view(source, shown=shown)
    path, options = resolve_input(source), options or Options()
    if is_multi_rank(path):
        merged, labels, ranks, hosts = summarize_ranks(path, options, progress)
        return RanksView(census_view(merged, default_label(path), shown), labels,
                         [census_view(c) for c in ranks], rank_spread(labels, ranks),
                         hosts)  # fmt: skip
    census = summarize_with(path, options, progress)
    clock = "gpu" if census.host_ran_ahead() else "host"
    overhead = capture_overhead(path, census.per_step_timing(), clock)
    return census_view(census, default_label(path), shown, overhead)


def census_view(
    census: Census, label: str | None = None, shown: str | None = None, overhead: dict | None = None
) -> SummaryView:
    """A Census with its tail steps, its limiter and its first line; `label` (the page's title)
    defaults to its export's name."""
    from census.findings.limiter import find_limiter, summary_lead
    from census.findings.nccl_ranks import split_ranks
    from census.findings.tails import tail_steps
    from census.render.views import SummaryView

    label = label or default_label(Path(census.source.path))
    return SummaryView(census, tail_steps(census), find_limiter(census), summary_lead(census),
                       label, shown, overhead, split_ranks(census))  # fmt: skip


def diff_view(
    a: CensusDiff | Census | PathLike,
    b: Census | PathLike | None = None,
    labels: tuple[str, str] | None = None,
    options: Options | None = None,
    progress: Progress | None = None,
    *,
    sources: tuple[str, str] | None = None,
    explanation: list[str] | None = None,
) -> DiffView:
    """What every format shows of a diff: a CensusDiff (`b` None), or B against A as `diff`
    takes them; with its explanation (explain_diff's unless given). `sources`: what the user
    named the sides."""
    from census.compare.diff import CensusDiff
    from census.compare.explain import explain_diff
    from census.render.views import DiffView

    if isinstance(a, CensusDiff):
        d = a
    elif b is None:
        raise UsageError("diff_view: give a CensusDiff, or two sides to compare")
    else:
        d = diff(a, b, labels, options, progress=progress)
    explanation = explain_diff(d) if explanation is None else explanation
    return DiffView(d, explanation, census_view(d.a), census_view(d.b), sources)


def summary_document(
    path: Path, options: Options, top: int = 20, progress: Progress | None = None
) -> tuple[dict, Iterable[str]]:
    """({"warnings"}, the `summary --json` document, compact, in pieces: their join is
    census.render.render of its view) of one export, capture folder or rank folder; from the
    cache where the same export was summarized with the same options and the same calibration
    run (its capture overhead) before; a rank folder's, uncached."""
    from census.sources.export import resolve_sqlite
    from census.sources.kineto.export import named_source
    from census.sources.ranks import is_multi_rank
    from census.store.cache import cached_text, spooled

    def render() -> tuple[dict, Iterable[str]]:  # only when the cache has no document
        from census.heap import collector_paused
        from census.render import render_pieces

        with collector_paused():
            view = summary_view(path, options, progress)
            return {"warnings": list(view.census.warnings)}, render_pieces(view, "json", top=top)

    if is_multi_rank(path):
        meta, text = render()
        return meta, spooled(text)
    sqlite_path = resolve_sqlite(path, progress)
    key = _document_key(named_source(path, sqlite_path), options, top, _calibration(path))
    return cached_text([sqlite_path], *key, render)


def _document_key(
    named: Path, options: Options, top: int, calibration: dict | None
) -> tuple[list, str]:
    """(the key, the kind) a summary document is cached under (census.store.cache): the
    options and the Inductor map (as a census's), --top, the calibration run the capture overhead
    is measured against and the export's path as named (the document's source.path; the cache
    keys the file itself by its resolved path)."""
    return [*options.key(), map_identity(named), top, calibration, str(named)], "summary-json"


def _calibration(path: Path) -> dict | None:
    """The calibration run recorded in a capture folder's run.json (None elsewhere): what the
    summary's capture overhead is measured against, which may be added after a summary."""
    from census.capture.records import read_run_info

    info = read_run_info(path) if path.is_dir() else None
    return (info or {}).get("calibration")


def cached_summary_json(path: Path, top: int) -> tuple[dict, bytes] | None:
    """summary_document of an export file with the default Options, as bytes, when the cache
    holds it, else None; nothing is computed and nothing heavy imported (census.cli.fast)."""
    from census.sources.export import is_export_file
    from census.store.cache import cached_bytes

    if not is_export_file(path):
        return None
    return cached_bytes([path], *_document_key(path, Options(), top, None))


def diff_document(a: Path, b: Path, labels: tuple[str, str] | None, options: Options,
                  top: int = 20, progress: Progress | None = None) -> tuple[dict, Iterable[str]]:  # fmt: skip
    """({"warnings"}, the `diff --format json` document as compact JSON, in pieces), from the
    cache when the same two exports were compared with the same options before (labels: their
    names)."""
    from census.sources.export import resolve_sqlite
    from census.sources.kineto.export import named_source
    from census.sources.ranks import is_multi_rank
    from census.store.cache import cached_text, spooled

    labels = labels or (default_label(a), default_label(b))  # file names: may be alike

    def render() -> tuple[dict, Iterable[str]]:
        from census.heap import collector_paused
        from census.render import render_pieces

        with collector_paused():
            d = _diff(a, b, labels, options, progress)
            return {"warnings": list(d.warnings)}, render_pieces(diff_view(d), "json", top=top)

    if is_multi_rank(a) or is_multi_rank(b):
        meta, text = render()
        return meta, spooled(text)
    files = [resolve_sqlite(a, progress), resolve_sqlite(b, progress)]
    named = [named_source(p, f) for p, f in zip((a, b), files, strict=True)]  # see _document_key
    key = [list(labels), *options.key(), top, [str(p) for p in named], *map(map_identity, named)]
    return cached_text(files, key, "diff-json", render)


def load_experiment(folder: PathLike, scheduler: str | None = None) -> Experiment:
    """The `census ab` experiment in `folder`: its arms' statistics and its captures' diff, both
    recomputed (no stale number is stored; rank folders read on Dask as Options.scheduler)."""
    from census.compare.ab.auto_arms import decided
    from census.compare.ab.experiment import Experiment
    from census.compare.ab.stats import analyze
    from census.compare.diff import diff_census
    from census.sources.experiment import not_a_record, read_experiment

    folder = resolve_input(folder)  # a path; anything else is a UsageError
    if not folder.is_dir():
        what = "is not a folder" if folder.exists() else "does not exist"
        raise InputError(f"{folder}: {what}; census.load_experiment reads the folder that "
                         "`census ab` wrote (its ab.json beside the a/ and b/ captures)")  # fmt: skip
    record = read_experiment(folder)
    try:
        stats = decided(analyze(list(record.arms)), list(record.arms), record.sequential)
    except (ValueError, TypeError, AttributeError) as exc:
        raise not_a_record(record.path, exc) from None
    d = None
    if record.captured:
        options = Options(scheduler=scheduler)
        a, b = (summarize_with(folder / side, options) for side in ("a", "b"))
        d = diff_census(a, b, record.labels)
    return Experiment(record.labels, record.commands, record.arms, stats, d,
                      record.capture_note, record.wall_s, None, record.sequential)  # fmt: skip


def experiment_view(source: Experiment | PathLike) -> ExperimentView:
    """What every format shows of an experiment (or its folder): verdict, warnings, the diff."""
    from census.compare.ab.experiment import Experiment, explain_parts
    from census.render.views import ExperimentView

    exp = source if isinstance(source, Experiment) else load_experiment(source)
    parts = explain_parts(exp)
    d = None if exp.diff is None else diff_view(exp.diff, explanation=parts.lines)
    return ExperimentView(exp, parts, d)


def run_experiment(spec: ABSpec, progress: Callable[[str], None] | None = None,
                   auto: AutoSpec | None = None) -> Experiment:  # fmt: skip
    """Run a `census ab` experiment into its folder (census.capture.ab; a capture is kept only if
    it holds step ranges; `auto`: --arms auto, census.compare.ab.auto_arms), then read it back."""
    from census.api.sides import read_ahead
    from census.capture.ab import run_ab
    from census.compare.ab.auto_arms import auto_rule

    spec = spec if auto is None else replace(spec, arms=auto.max_arms)
    ahead = partial(read_ahead, summarize=summarize_with)  # A's read while B's is exported
    return load_experiment(run_ab(spec, progress, _has_steps, auto_rule(auto, progress), ahead))


def _has_steps(path: Path) -> bool:
    from census.load.steps import has_step_ranges

    return has_step_ranges(path, DEFAULT_STEPS_REGEX)


def capture_steps(spec: CaptureSpec, nsys: str | None = None) -> Path:
    """Capture `spec.command` under its profiler (nsys: `nsys`, else found; or torch.profiler)
    into its capture folder, kept only if it holds step ranges; the folder."""
    from census.capture.nsys import find_nsys_to_capture
    from census.capture.run import run_capture, validate_spec

    validate_spec(spec)  # the name and the folder, before nsys is looked for or anything runs
    spec = replace(spec, nsys=find_nsys_to_capture(nsys)) if spec.profiler == "nsys" else spec

    def verify(work: Path) -> None:
        if not _has_steps(work):
            ranges = "NVTX" if spec.profiler == "nsys" else "torch.profiler"
            raise CaptureError(f"{spec.name}: the capture holds no {ranges} step ranges, so it was "
                               "discarded: wrap each training step with census.step(i) or iterate "
                               "with census.steps(loader)", list(spec.command))  # fmt: skip

    return run_capture(spec, verify)

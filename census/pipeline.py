"""From what the user names (an export, a report, a capture folder, a bundled sample) to a Census."""

from __future__ import annotations

import re
from pathlib import Path

from census.errors import UsageError
from census.load import Progress, load_profile
from census.model import Census

DEFAULT_STEPS_REGEX = r"^(step\b|ProfilerStep#)"


def summarize(
    path: Path,
    steps_regex: str = DEFAULT_STEPS_REGEX,
    skip_first: int = 0,
    progress: Progress | None = None,
    use_cache: bool = True,
    workers: int | None = None,
) -> Census:
    """The census of one profile: `.sqlite`, `.nsys-rep` (exported on demand) or capture folder."""
    from census.cache import cached_census
    from census.census import compute_census
    from census.export import resolve_sqlite

    _check_regex(steps_regex)
    if skip_first < 0:
        raise UsageError("--skip-first must be 0 or more")
    from census.ranks import is_multi_rank

    if is_multi_rank(path):
        return summarize_multi(path, steps_regex, skip_first, progress)[0]
    sqlite_path = resolve_sqlite(path, progress)

    def compute() -> Census:
        profile = load_profile(sqlite_path, steps_regex, skip_first, progress, workers)
        return compute_census(profile)

    if not use_cache:
        return compute()
    return cached_census(sqlite_path, (steps_regex, skip_first), compute)


def summary_document(
    path: Path,
    steps_regex: str = DEFAULT_STEPS_REGEX,
    skip_first: int = 0,
    top: int = 20,
    progress: Progress | None = None,
) -> tuple[dict, str]:
    """({"warnings", "timing"}, the `summary --json` document as compact JSON) of one export,
    from the cache when the same export and options were summarized before."""
    import json

    from census.cache import cached_text
    from census.export import resolve_sqlite
    from census.model import summary_json

    sqlite_path = resolve_sqlite(path, progress)

    def render() -> tuple[dict, str]:
        census = summarize(path, steps_regex, skip_first, progress)
        meta = {"warnings": list(census.warnings), "timing": census.per_step_timing()}
        return meta, json.dumps(summary_json(census, top))

    return cached_text([sqlite_path], (steps_regex, skip_first, top), "summary-json", render)


def diff_document(
    a: Path,
    b: Path,
    labels: tuple[str, str],
    steps_regex: str = DEFAULT_STEPS_REGEX,
    skip_first: int = 0,
    top: int = 20,
    progress: Progress | None = None,
) -> tuple[dict, str]:
    """({"warnings"}, the `diff --format json` document as compact JSON), from the cache when
    the same two exports were compared with the same options before."""
    import json

    from census.cache import cached_text
    from census.diff import diff_census
    from census.explain import explain_diff
    from census.export import resolve_sqlite
    from census.ranks import is_multi_rank
    from census.render.json_out import diff_json

    def render() -> tuple[dict, str]:
        ca = summarize(a, steps_regex, skip_first, progress)
        cb = summarize(b, steps_regex, skip_first, progress)
        d = diff_census(ca, cb, labels)
        return {"warnings": list(d.warnings)}, json.dumps(diff_json(d, explain_diff(d), top))

    if is_multi_rank(a) or is_multi_rank(b):
        return render()
    files = [resolve_sqlite(a, progress), resolve_sqlite(b, progress)]
    return cached_text(files, (labels, steps_regex, skip_first, top), "diff-json", render)


def _check_regex(pattern: str) -> None:
    try:
        re.compile(pattern)
    except re.error as exc:
        raise UsageError(f"--steps {pattern!r} is not a valid regular expression: {exc}") from None


def summarize_multi(
    folder: Path, steps_regex: str, skip_first: int, progress: Progress | None = None
) -> tuple:
    """(merged Census, rank labels, per-rank Census list) of a multi-rank capture folder."""
    from census.ranks import merge_census, rank_files, summarize_ranks

    files = rank_files(folder)
    labels = [label for label, _ in files]
    ranks = summarize_ranks(files, steps_regex, skip_first, progress)
    return merge_census(labels, ranks, folder), labels, ranks

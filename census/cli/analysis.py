"""Commands that read captures: summary, diff, dashboard. Each parses, calls census.api, prints."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Annotated

import typer

from census.cli.app import (
    PHASES_DEFAULT,
    STEPS_DEFAULT,
    FailIfOpt,
    IdleOpt,
    PhasesOpt,
    RanksOpt,
    SkipOpt,
    StepsOpt,
    TopOpt,
    app,
    check_count,
    clock_of,
    dumps,
    enforce,
    handle_errors,
    overhead_text,
    parse_gates,
    parse_labels,
    summarize_shown,
    terminal,
    warn,
    write_report,
)
from census.errors import UsageError
from census.paths import check_output


def _input(profile: str | None, sample: str | None) -> Path:
    from census.api import resolve_input

    if sample:
        return resolve_input(f"sample:{sample}")
    if not profile:
        raise UsageError("name a profile (.sqlite, .nsys-rep or capture folder) or --sample")
    return Path(profile)


def _metric_help() -> str:
    from census.definitions import METRICS, TIMING_METRICS

    keys = ", ".join(f"{m.name} ({m.unit})" for m in (*METRICS, *TIMING_METRICS))
    return f"Keys, per capture and per step (docs/definitions.md): {keys}."


@app.command(epilog=_metric_help())
@handle_errors
def summary(
    profile: Annotated[
        str | None, typer.Argument(help=".sqlite, .nsys-rep or capture folder")
    ] = None,
    sample: Annotated[
        str | None, typer.Option(help="A bundled capture: eager or compiled.")
    ] = None,
    steps: StepsOpt = STEPS_DEFAULT,
    skip_first: SkipOpt = 0,
    phases: PhasesOpt = PHASES_DEFAULT,
    idle: IdleOpt = False,
    ranks: RanksOpt = False,
    as_json: Annotated[bool, typer.Option("--json", help="JSON on stdout.")] = False,
    top: TopOpt = 15,
    fail_if: FailIfOpt = None,
    all_steps: Annotated[
        bool,
        typer.Option(
            "--all-steps", help="List every step (else the first and last few and the tail)."
        ),
    ] = False,
) -> None:
    """The kernel census of one capture."""
    from census.api import Options
    from census.compare.gates import check_summary, check_summary_gates
    from census.sources.ranks import is_multi_rank

    check_count("--top", top)
    path, options = _input(profile, sample), Options(steps, skip_first, phases, idle, ranks)
    gates = parse_gates(fail_if)
    check_summary_gates(gates)
    if is_multi_rank(path):
        merged = _summary_ranks(path, options, as_json, top)
        enforce(check_summary(gates, merged))
        return
    if as_json and not sys.stdout.isatty() and not gates:
        _summary_json_text(path, options, top)
        return
    census = summarize_shown(path, options)
    warn(census.warnings)
    if as_json:
        from census.capture.run import capture_overhead
        from census.render.json_docs import summary_json

        overhead = capture_overhead(path, census.per_step_timing(), clock_of(census))
        print(dumps({**summary_json(census, top), "capture": overhead}, indent=2))
        enforce(check_summary(gates, census))
        return
    from census.render.table import render_summary

    shown = profile or f"sample:{sample}"  # as the user named it, not a cache path
    sys.stdout.write(render_summary(census, top, **terminal(), all_steps=all_steps, source=shown))
    line = overhead_text(path, census)
    if line:
        print(line)
    enforce(check_summary(gates, census))


def _summary_json_text(path: Path, options, top: int) -> None:
    """Compact JSON for a pipe, answered from the cache on a repeated call."""
    from census.api import summary_document
    from census.capture.run import capture_overhead
    from census.render.progress import stage_progress

    with stage_progress(f"census of {path.name}") as progress:
        meta, text = summary_document(path, options, top, progress)
    warn(meta["warnings"])
    overhead = capture_overhead(path, meta["timing"], "gpu" if meta["host_ran_ahead"] else "host")
    sys.stdout.write(f"{text[:-1]}, {json.dumps('capture')}: {json.dumps(overhead)}}}\n")


def _summary_ranks(path: Path, options, as_json: bool, top: int):
    from census.api import summarize_ranks
    from census.render.progress import stage_progress

    with stage_progress(f"census of {path.name}") as progress:
        merged, labels, ranks = summarize_ranks(path, options, progress)
    warn(merged.warnings)
    if as_json:
        from census.render.json_docs import spread_json, summary_json

        print(dumps({**summary_json(merged, top), **spread_json(labels, ranks)}, indent=2))
        return merged
    from census.census import rank_spread
    from census.render.table import render_spread, render_summary

    shape = terminal()
    sys.stdout.write(render_summary(merged, top, **shape))
    sys.stdout.write(render_spread(labels, ranks, rank_spread(labels, ranks), **shape))
    return merged


def _labels(labels: str | None, a: Path, b: Path) -> tuple[str, str]:
    from census.api import default_label

    if labels:
        return parse_labels(labels)
    return default_label(a), default_label(b)


def diff_shown(a: Path, b: Path, labels: tuple[str, str], options):
    """(CensusDiff, explanation) of two inputs, with progress on stderr."""
    from census.api import diff_paths
    from census.compare.explain import explain_diff
    from census.render.progress import stage_progress

    with stage_progress(f"diff of {a.name} and {b.name}") as progress:
        d = diff_paths(a, b, labels, options, progress)
    return d, explain_diff(d)


@app.command()
@handle_errors
def diff(
    a: Annotated[
        str, typer.Argument(help="Baseline: .sqlite, .nsys-rep, capture folder, or sample:NAME")
    ],
    b: Annotated[
        str | None, typer.Argument(help="Candidate, as A (none when A is a `census ab` folder)")
    ] = None,
    labels: Annotated[str | None, typer.Option(help="Two labels, e.g. eager,compiled.")] = None,
    steps: StepsOpt = STEPS_DEFAULT,
    skip_first: SkipOpt = 0,
    phases: PhasesOpt = PHASES_DEFAULT,
    idle: IdleOpt = False,
    ranks: RanksOpt = False,
    fmt: Annotated[str, typer.Option("--format", help="table, markdown or json.")] = "table",
    top: TopOpt = 15,
    html: Annotated[Path | None, typer.Option(help="Also write the HTML dashboard here.")] = None,
    fail_if: FailIfOpt = None,
) -> None:
    """Compare two captures (eager vs compiled) and explain the difference; or show a
    `census ab` experiment folder (its arms' verdict, then the diff of its captures)."""
    from census.api import Options, resolve_input
    from census.experiments import is_experiment, load_experiment

    if fmt not in ("table", "markdown", "json"):
        raise UsageError(f"--format {fmt!r}: choose table, markdown or json")
    check_count("--top", top)
    if html:
        check_output(html, [Path(a), *([Path(b)] if b else [])])
    if b is None:
        if not is_experiment(Path(a)):
            raise UsageError(f"{a}: give two captures to compare, or one `census ab` folder")
        exp = load_experiment(Path(a))
        show_experiment(exp, fmt, html)
        if fail_if:
            from census.compare.gates import check_diff

            if exp.diff is None:
                raise UsageError(f"{a}: --fail-if needs the experiment's captures; it has none")
            enforce(check_diff(parse_gates(fail_if), exp.diff))
        return
    options = Options(steps, skip_first, phases, idle, ranks)
    pa, pb = resolve_input(a), resolve_input(b)
    names = _labels(labels, pa, pb)
    gates = parse_gates(fail_if)
    if fmt == "json" and not html and not gates and not sys.stdout.isatty():  # cached, compact
        from census.api import diff_document
        from census.render.progress import stage_progress

        with stage_progress(f"diff of {pa.name} and {pb.name}") as progress:
            meta, text = diff_document(pa, pb, names, options, top, progress)
        warn(meta["warnings"])
        sys.stdout.write(text + "\n")
        return
    d, explanation = diff_shown(pa, pb, names, options)
    warn(d.warnings)
    if fmt == "json":
        from census.render.json_docs import diff_json

        print(dumps(diff_json(d, explanation, top), indent=2))
    elif fmt == "markdown":
        from census.render.markdown import render_diff_markdown

        print(render_diff_markdown(d, explanation, top))
    else:
        from census.render.diff_table import render_diff_table

        sys.stdout.write(render_diff_table(d, explanation, top, **terminal()))
    if html:
        from census.render.html import render_diff_html

        write_report(render_diff_html(d, explanation, (a, b)), html)
    from census.compare.gates import check_diff

    enforce(check_diff(gates, d))


@app.command()
@handle_errors
def dashboard(
    a: Annotated[str, typer.Argument(help="A capture (or the baseline of a diff)")],
    b: Annotated[str | None, typer.Argument(help="Optional second capture to diff against")] = None,
    output: Annotated[
        Path | None, typer.Option("-o", "--output", help="HTML file to write.")
    ] = None,
    labels: Annotated[str | None, typer.Option(help="Two labels for a diff.")] = None,
    steps: StepsOpt = STEPS_DEFAULT,
    skip_first: SkipOpt = 0,
    phases: PhasesOpt = PHASES_DEFAULT,
    idle: IdleOpt = False,
    ranks: RanksOpt = False,
) -> None:
    """Write a self-contained HTML dashboard for one capture, a diff of two, or a `census ab`
    experiment folder."""
    from census.api import Options, default_label, resolve_input
    from census.experiments import is_experiment, load_experiment
    from census.render.html import render_diff_html, render_summary_html

    options = Options(steps, skip_first, phases, idle, ranks)
    pa, pb = resolve_input(a), resolve_input(b) if b else None
    names = _labels(labels, pa, pb) if pb else (default_label(pa),)
    out = output or Path("reports") / f"{'-vs-'.join(names)}.html"
    check_output(out, [pa, *([pb] if pb else [])])  # the default target too, before any work
    if pb is None and is_experiment(pa):
        from census.render.html_ab import render_experiment_html

        write_report(render_experiment_html(load_experiment(pa)), out)
    elif pb is None:
        census = summarize_shown(pa, options)
        write_report(render_summary_html(census, names[0], a), out)
    else:
        d, explanation = diff_shown(pa, pb, _labels(labels, pa, pb), options)
        write_report(render_diff_html(d, explanation, (a, b)), out)


def show_experiment(exp, fmt: str, html: Path | None) -> None:
    """Print an experiment as a table, markdown or JSON; write its dashboard if asked."""
    if fmt == "json":
        from census.render.json_docs import experiment_json

        print(dumps(experiment_json(exp)))
    elif fmt == "markdown":
        from census.render.ab import render_experiment_markdown

        print(render_experiment_markdown(exp))
    else:
        from census.render.ab import render_experiment_table

        sys.stdout.write(render_experiment_table(exp, **terminal()))
    if html:
        from census.render.html_ab import render_experiment_html

        write_report(render_experiment_html(exp), html)

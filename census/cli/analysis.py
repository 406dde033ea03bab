"""Commands that read captures: summary, diff, dashboard. Each parses, calls census.api for a
view, renders it (census.render.render) and writes it."""

from __future__ import annotations

from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from census.cli.common import (
    PHASES_DEFAULT,
    PROFILE_HELP,
    STEPS_DEFAULT,
    EquivalenceOpt,
    FailIfOpt,
    FormatOpt,
    HtmlOpt,
    IdleOpt,
    JsonOpt,
    LabelsOpt,
    PhasesOpt,
    RanksOpt,
    SampleOpt,
    SchedulerOpt,
    SkipOpt,
    StepsOpt,
    TopOpt,
    app,
    check_count,
    deprecated,
    diff_shown,
    enforce,
    handle_errors,
    output_format,
    parse_gates,
    shape,
    show,
    summary_shown,
    write_report,
)
from census.cli.piped import TOP_DEFAULT, write_summary_json
from census.cli.stdout import piped_json, warn, write_cached
from census.errors import UsageError
from census.options import Options, parse_labels
from census.paths import check_output

if TYPE_CHECKING:
    from census.render.views import ExperimentView


def _named(profile: str | None, sample: str | None) -> str:
    """What the user named: PROFILE, or `sample:NAME` for --sample NAME (one of them)."""
    return _sides(profile, None, sample, most=1)[0]


def _sides(
    a: str | None, b: str | None, sample: str | None, most: int = 2
) -> tuple[str, str | None]:
    """The sides named: A and B as given, or `sample:NAME` for each of --sample's names (up to
    `most`; not with A or B)."""
    given = [p for p in (a, b) if p is not None]
    if sample is None:
        if not given:
            raise UsageError("name a profile (.sqlite, .nsys-rep or capture folder) or --sample")
        return given[0], b
    if given:
        raise UsageError(f"give either {' '.join(given)} or --sample {sample}, not both")
    names = [n.strip() for n in sample.split(",")]
    if len(names) > most:
        raise UsageError(
            f"--sample {sample!r}: give {'one name' if most == 1 else 'one or two names'}"
        )
    return f"sample:{names[0]}", f"sample:{names[1]}" if len(names) > 1 else None


def _metric_help() -> str:
    from census.metrics import METRICS, TIMING_METRICS

    keys = ", ".join(f"{m.name} ({m.unit})" for m in (*METRICS, *TIMING_METRICS))
    return f"Keys, per capture and per step (docs/definitions.md): {keys}."


OpsOpt = Annotated[
    bool,
    typer.Option(
        "--ops",
        help="The top operations by kernel time per step (aten ops, Inductor fused groups; "
        "a profile with op ranges: Kineto traces, emit_nvtx). The JSON has them always.",
    ),
]


@app.command(epilog=_metric_help())
@handle_errors
def summary(
    profile: Annotated[str | None, typer.Argument(help=PROFILE_HELP)] = None,
    sample: SampleOpt = None,
    steps: StepsOpt = STEPS_DEFAULT,
    skip_first: SkipOpt = 0,
    phases: PhasesOpt = PHASES_DEFAULT,
    idle: IdleOpt = Options.idle,
    ranks: RanksOpt = False,
    scheduler: SchedulerOpt = None,
    as_json: JsonOpt = False,
    fmt: FormatOpt = "table",
    top: TopOpt = TOP_DEFAULT,
    fail_if: FailIfOpt = None,
    all_steps: Annotated[
        bool,
        typer.Option(
            "--all-steps", help="List every step (else the first and last few and the tail)."
        ),
    ] = False,
    ops: OpsOpt = False,
) -> None:
    """The kernel census of one capture."""
    fmt = output_format("json" if as_json else fmt)
    check_count("--top", top)
    named = _named(profile, sample)
    options = Options.from_flags(steps, skip_first, phases, idle, ranks, scheduler)
    gates = parse_gates(fail_if)
    if gates:
        from census.compare.gates import check_summary_gates

        check_summary_gates(gates)
    if piped_json(fmt, gates):
        write_summary_json(named, options, top)
        return
    from census.api import resolve_input
    from census.render import render

    path = resolve_input(named)
    view = summary_shown(path, options, shown=named)
    warn(view.census.warnings)
    show(render(view, fmt, top=top, **_summary_options(fmt, all_steps, ops)), fmt)
    if gates:
        from census.compare.gates import check_summary

        enforce(check_summary(gates, view.census))


def _summary_options(fmt: str, all_steps: bool, ops: bool = False) -> dict:
    if fmt == "terminal":
        return {**shape(fmt), "all_steps": all_steps, "ops": ops}
    return {**shape(fmt), "ops": ops} if fmt == "markdown" else shape(fmt)


@app.command()
@handle_errors
def diff(
    a: Annotated[str | None, typer.Argument(help=f"Baseline: {PROFILE_HELP}")] = None,
    b: Annotated[
        str | None,
        typer.Argument(help=f"Candidate: {PROFILE_HELP} (none when A is a `census ab` folder)"),
    ] = None,
    sample: SampleOpt = None,
    labels: LabelsOpt = None,
    steps: StepsOpt = STEPS_DEFAULT,
    skip_first: SkipOpt = 0,
    phases: PhasesOpt = PHASES_DEFAULT,
    idle: IdleOpt = Options.idle,
    ranks: RanksOpt = False,
    scheduler: SchedulerOpt = None,
    as_json: JsonOpt = False,
    fmt: FormatOpt = "table",
    top: TopOpt = TOP_DEFAULT,
    html: HtmlOpt = None,
    fail_if: FailIfOpt = None,
    equivalence: EquivalenceOpt = None,
) -> None:
    """Compare two captures (eager vs compiled) and explain the difference; or show a
    `census ab` experiment folder (its arms' verdict, then the diff of its captures)."""
    from census.api import diff_document, resolve_input
    from census.compare.gates import check_diff
    from census.render import render

    fmt = output_format("json" if as_json else fmt)
    check_count("--top", top)
    a, b = _diff_sides(a, b, sample, html)
    gates = parse_gates(fail_if)
    if b is None:
        return _diff_experiment(Path(a), fmt, html, gates, equivalence, scheduler)
    if equivalence is not None:
        raise UsageError(
            "--equivalence asks a `census ab` experiment's arms: give its folder alone"
        )
    options = Options.from_flags(steps, skip_first, phases, idle, ranks, scheduler)
    pa, pb, names = resolve_input(a), resolve_input(b), parse_labels(labels)
    if piped_json(fmt, html, gates):
        document = partial(diff_document, pa, pb, names, options, top)
        write_cached(f"diff of {pa.name} and {pb.name}", document)
        return warn(_same_side(pa, pb))
    view = diff_shown(pa, pb, names, options, sources=(a, b))
    warn([*_same_side(pa, pb), *view.diff.warnings])
    show(render(view, fmt, top=top, **shape(fmt)), fmt)
    if html:
        write_report(render(view, "html"), html)
    enforce(check_diff(gates, view.diff))


def _diff_sides(a: str | None, b: str | None, sample: str | None,
                html: Path | None) -> tuple[str, str | None]:  # fmt: skip
    """The sides of `census diff` (_sides), its --html target checked against them first."""
    a, b = _sides(a, b, sample)
    if html:
        check_output(html, [Path(a), *([Path(b)] if b else [])])
    return a, b


def _same_side(pa: Path, pb: Path) -> list[str]:
    """The warning said first when both sides are one file or folder (every difference is zero),
    once the diff is made (a side that fails says its error alone)."""
    if not (pa.exists() and pb.exists() and pa.samefile(pb)):
        return []
    kind = "folder" if pa.is_dir() else "file"
    return [f"A and B are the same {kind} ({pa}): every difference below is zero"]


def _diff_experiment(folder: Path, fmt: str, html: Path | None, gates: list,
                     equivalence: str | None, scheduler: str | None) -> None:  # fmt: skip
    """`census diff EXPERIMENT`: the experiment (with the equivalence of its arms, when asked),
    then its captures' diff against the gates."""
    from census.api import experiment_view, load_experiment
    from census.compare.ab.experiment import with_equivalence
    from census.compare.gates import check_diff, parse_amount
    from census.sources.experiment import is_experiment

    margin = None if equivalence is None else parse_amount(equivalence, "--equivalence")
    if not is_experiment(folder):
        raise UsageError(f"{folder}: give two captures to compare, or one `census ab` folder")
    exp = load_experiment(folder, scheduler)
    view = experiment_view(exp if margin is None else with_equivalence(exp, margin))
    show_experiment(view, fmt, html)
    if gates:
        if view.diff is None:
            raise UsageError(f"{folder}: --fail-if needs the experiment's captures; it has none")
        enforce(check_diff(gates, view.diff.diff))


@app.command()
@handle_errors
def dashboard(
    a: Annotated[
        str | None,
        typer.Argument(
            help=f"A capture, a `census ab` folder, or the baseline of a diff: {PROFILE_HELP}"
        ),
    ] = None,
    b: Annotated[
        str | None, typer.Argument(help=f"Optional second capture to diff against: {PROFILE_HELP}")
    ] = None,
    sample: SampleOpt = None,
    html: HtmlOpt = None,
    output: Annotated[Path | None, typer.Option("-o", "--output", hidden=True)] = None,
    open_page: Annotated[
        bool, typer.Option("--open", help="Open the written file in the web browser.")
    ] = False,
    labels: LabelsOpt = None,
    steps: StepsOpt = STEPS_DEFAULT,
    skip_first: SkipOpt = 0,
    phases: PhasesOpt = PHASES_DEFAULT,
    idle: IdleOpt = Options.idle,
    ranks: RanksOpt = False,
    scheduler: SchedulerOpt = None,
) -> None:
    """Write a self-contained HTML dashboard for one capture, a diff of two, or a `census ab`
    experiment folder (--html FILE, else reports/LABEL.html; a diff's reports/A-vs-B.html)."""
    from census.api import default_label, experiment_view, load_experiment, resolve_input
    from census.render import render
    from census.sources.experiment import is_experiment

    html = deprecated(
        "-o/--output (a file here; -o names a folder elsewhere)", output, "--html FILE", html
    )
    options = Options.from_flags(steps, skip_first, phases, idle, ranks, scheduler)
    a, b = _sides(a, b, sample)
    pa, pb = resolve_input(a), resolve_input(b) if b else None
    names = parse_labels(labels) if pb else None
    named = names or (default_label(pa), *([default_label(pb)] if pb else []))
    out = html or Path("reports") / f"{'-vs-'.join(named)}.html"
    check_output(out, [pa, *([pb] if pb else [])])  # the default target too, before any work
    if pb is not None:
        view = diff_shown(pa, pb, names, options, sources=(a, b))
    elif is_experiment(pa):
        view = experiment_view(load_experiment(pa, scheduler))
    else:
        view = summary_shown(pa, options, shown=a)
    write_page(render(view, "html"), out, open_page)


def write_page(html: str, target: Path, open_page: bool = False) -> None:
    """Write the HTML page to `target` (write_report) and, with --open, open it in the web
    browser."""
    write_report(html, target)
    if open_page:
        import webbrowser

        webbrowser.open(target.resolve().as_uri())


def show_experiment(view: ExperimentView, fmt: str, html: Path | None) -> None:
    """Print an experiment (census.api.experiment_view) in `fmt`; write its dashboard if asked.
    (Its kernel tables keep their own --top.)"""
    from census.render import render

    show(render(view, fmt, **shape(fmt)), fmt)
    if html:
        write_report(render(view, "html"), html)

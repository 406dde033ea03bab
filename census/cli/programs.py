"""Commands that run programs: capture, demo, doctor, ab. Each parses, calls census.api,
renders the result (census.render.render) and writes it."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated

import typer

from census.cli.capture_options import (
    ABFailIfOpt,
    ActiveOpt,
    ArmsOpt,
    BudgetOpt,
    CaptureJsonOpt,
    MaxArmsOpt,
    MinEffectOpt,
    OnRanksOpt,
    OpsOpt,
    StepsRefusedOpt,
    refuse_steps,
)
from census.cli.common import (
    EquivalenceOpt,
    FormatOpt,
    HtmlOpt,
    JsonOpt,
    LabelsOpt,
    NsysOpt,
    OutputDirOpt,
    ProfilerOpt,
    app,
    check_profiler,
    deprecated,
    diff_shown,
    handle_errors,
    output_format,
    show,
    summary_shown,
    terminal,
    write_report,
)
from census.errors import EXIT_TOOL_MISSING, UsageError


@app.command(context_settings={"allow_extra_args": True, "ignore_unknown_options": True})
@handle_errors
def capture(
    ctx: typer.Context,
    name: Annotated[str, typer.Argument(help="Capture name: the folder under -o.")],
    warmup: Annotated[int | None, typer.Option(help="Steps before the capture range.")] = None,
    active: ActiveOpt = None,
    nsys: NsysOpt = None,
    trace: Annotated[str, typer.Option(help="nsys --trace value.")] = "cuda,nvtx",
    output: OutputDirOpt = Path("profiles"),
    demo: Annotated[
        str | None,
        typer.Option(help="The built-in workload: eager, compiled, ddp-eager or ddp-compiled."),
    ] = None,
    nproc: Annotated[int, typer.Option(help="GPUs for the ddp-* demo modes.")] = 2,
    force: Annotated[bool, typer.Option(help="Replace an existing capture.")] = False,
    calibrate: Annotated[
        bool | None,
        typer.Option(help="First run without nsys to measure overhead (default: on for --demo)."),
    ] = None,
    on_ranks: OnRanksOpt = False,
    ops: OpsOpt = False,
    steps: StepsRefusedOpt = None,
    as_json: CaptureJsonOpt = False,
    profiler: ProfilerOpt = "nsys",
) -> None:
    """Run COMMAND (after --) under nsys, or torch.profiler (--profiler torch), and print its
    census."""
    from census.capture.demo import demo_command

    refuse_steps(steps, after_dash=True)
    _check_counts(warmup, active, nproc)
    check_profiler(profiler, nsys, on_ranks)
    command = tuple(ctx.args)
    if demo:
        if command:
            raise UsageError("give either --demo or a command after --, not both")
        command = demo_command(
            demo, 5 if warmup is None else warmup, 3 if active is None else active, nproc
        )
    run = (warmup, active, nsys, trace, output, force)
    calibrate = bool(demo) if calibrate is None else calibrate
    folder = capture_shown(name, command, *run, calibrate, on_ranks, as_json, profiler, ops)
    print(f"capture written to {folder}", file=sys.stderr)


@app.command()
@handle_errors
def demo(
    active: Annotated[int, typer.Option("--active", help="Measured steps per capture.")] = 20,
    warmup: Annotated[int, typer.Option(help="Warm-up steps (compilation happens here).")] = 5,
    output: OutputDirOpt = Path("profiles"),
    html: Annotated[
        Path | None,
        typer.Option("--html", help="Write the HTML dashboard to this file (reports/demo.html)."),
    ] = None,
    report: Annotated[Path | None, typer.Option("--report", hidden=True)] = None,
    nsys: NsysOpt = None,
    force: Annotated[bool, typer.Option(help="Replace existing demo captures.")] = True,
    steps: StepsRefusedOpt = None,
    as_json: Annotated[
        bool,
        typer.Option(
            "--json",
            help="The diff's JSON on stdout (as `census diff --json`); the "
            "dashboard only where --html names a file.",
        ),
    ] = False,
) -> None:
    """Capture eager and compiled runs of the built-in workload, diff them, write a dashboard.

    Without a GPU or nsys, uses the bundled real captures and says so."""
    from census.api import Options
    from census.cli.common import shape
    from census.cli.piped import TOP_DEFAULT
    from census.paths import check_output
    from census.render import render

    refuse_steps(steps)
    _check_counts(warmup, active)
    report = deprecated("--report", report, "--html FILE", html)
    report = report or (None if as_json else Path("reports/demo.html"))
    if report:
        check_output(report)  # every output target before any work
    paths, sources = _demo_captures(warmup, active, output, nsys, force)
    view = diff_shown(paths[0], paths[1], ("eager", "compiled"), Options(), sources)
    fmt = "json" if as_json else "terminal"
    show(render(view, fmt, top=TOP_DEFAULT, **shape(fmt)), fmt)
    if report:
        write_report(render(view, "html"), report)


def _demo_captures(warmup: int, active: int, output: Path, nsys: str | None,
                   force: bool) -> tuple[list[Path], tuple[str, str]]:  # fmt: skip
    """`census demo`'s eager and compiled captures and how the diff names them: fresh ones
    under `output`, or the bundled ones where this machine cannot capture (said on stderr)."""
    from census.capture.demo import DEMO_MODES, demo_command
    from census.capture.doctor import cannot_capture
    from census.capture.run import check_capture_folder
    from census.sources.samples import sample_path

    reason = cannot_capture(nsys)
    if reason:
        print(f"census demo: {reason}; using the bundled H200 captures instead", file=sys.stderr)
        paths = [sample_path("eager"), sample_path("compiled")]
        sources = ("sample:eager (bundled H200 capture)", "sample:compiled (bundled H200 capture)")
    else:
        for mode in DEMO_MODES:
            check_capture_folder(output / f"demo-{mode}", force)
        run = (warmup, active, nsys, "cuda,nvtx", output, force, True)
        paths = [
            capture_shown(f"demo-{m}", demo_command(m, warmup, active), *run) for m in DEMO_MODES
        ]
        sources = (str(paths[0]), str(paths[1]))
    return paths, sources


def _check_counts(warmup: int | None, active: int | None, nproc: int | None = None) -> None:
    """Warm-up steps 0 or more, measured steps and GPUs 1 or more: before nsys is looked for."""
    from census.cli.common import check_count

    check_count("--warmup", warmup)
    check_count("--active", active, least=1)
    check_count("--nproc", nproc, least=1)


@app.command()
@handle_errors
def doctor(
    nsys: NsysOpt = None,
    output: OutputDirOpt = Path("profiles"),
    as_json: Annotated[
        bool, typer.Option("--json", help="JSON on stdout: {ok, checks: [{name, ok, detail}]}.")
    ] = False,
) -> None:
    """Check that this machine can capture: nsys, GPU, torch, CUDA, profiles/ (exit 3 if not)."""
    from census.capture.doctor import run_checks, verdict

    checks = run_checks(nsys, output)
    if as_json:
        import json

        found = [{"name": c.name, "ok": c.ok, "detail": c.detail} for c in checks]
        print(json.dumps({"ok": all(c.ok for c in checks), "checks": found}))
    else:
        for line in verdict(checks):
            print(line)
        for c in checks:
            print(f"{'ok  ' if c.ok else 'FAIL'} {c.name}: {c.detail}")
    if not all(c.ok for c in checks):
        raise typer.Exit(EXIT_TOOL_MISSING)


def capture_shown(name, command, warmup, active, nsys, trace, output, force, calibrate,
                  on_ranks=False, as_json=False, profiler="nsys", ops=False) -> Path:  # fmt: skip
    """Capture `command` into output/name (census.api.capture_steps: kept only if it holds step
    ranges), print its census, its capture overhead on stderr (`as_json`: its JSON document,
    census.render.views.CaptureView); the capture folder."""
    from census.api import Options, capture_steps
    from census.capture.records import read_run_info
    from census.capture.run import CaptureSpec
    from census.cli.common import shape
    from census.cli.piped import TOP_DEFAULT
    from census.render import render
    from census.render.table import overhead_note
    from census.render.views import CaptureView, RanksView

    spec = CaptureSpec(name=name, command=tuple(command), out_dir=output, nsys=nsys or "nsys",
                       trace=trace, warmup=warmup, active=active, force=force,
                       calibrate=calibrate, on_ranks=on_ranks, profiler=profiler,
                       ops=ops)  # fmt: skip
    folder = capture_steps(spec, nsys)
    view = summary_shown(folder, Options())
    if as_json:
        own = CaptureView(view, str(folder), read_run_info(folder))
        show(render(own, "json", top=TOP_DEFAULT, **shape("json")), "json")
        return folder
    term = terminal()
    if isinstance(view, RanksView):  # a launcher's ranks, and no overhead of their own
        show(render(view, "terminal", **term), "terminal")
        return folder
    show(render(view, "terminal", overhead=False, **term), "terminal")
    note = overhead_note(view.overhead, term["width"])
    if note:
        print(note, file=sys.stderr)
    return folder


@app.command()
@handle_errors
def ab(
    name: Annotated[str, typer.Argument(help="Experiment name: the folder under -o.")],
    a: Annotated[str | None, typer.Option("--a", help="Side A's command (shell-quoted).")] = None,
    b: Annotated[str | None, typer.Option("--b", help="Side B's command (shell-quoted).")] = None,
    labels: LabelsOpt = None,
    arms: ArmsOpt = "8",
    max_arms: MaxArmsOpt = None,
    min_effect: MinEffectOpt = None,
    budget: BudgetOpt = None,
    warmup: Annotated[int | None, typer.Option(help="Steps before the measured ones.")] = None,
    active: Annotated[
        int | None, typer.Option("--active", help="Measured steps per arm (and per capture).")
    ] = None,
    capture: Annotated[
        bool, typer.Option(help="After the arms, capture each side once (under --profiler).")
    ] = True,
    fmt: FormatOpt = "table",
    as_json: JsonOpt = False,
    demo: Annotated[
        str | None, typer.Option(help="The built-in workload: eager,compiled or eager,eager.")
    ] = None,
    output: OutputDirOpt = Path("profiles"),
    nsys: NsysOpt = None,
    force: Annotated[bool, typer.Option(help="Replace an existing experiment.")] = False,
    html: HtmlOpt = None,
    equivalence: EquivalenceOpt = None,
    fail_if: ABFailIfOpt = None,
    steps: StepsRefusedOpt = None,
    profiler: ProfilerOpt = "nsys",
) -> None:
    """A/B experiment: interleaved uncaptured arms decide whether B is faster; one capture per
    side explains why."""
    from census.api import run_experiment
    from census.capture.ab import ABSpec

    refuse_steps(steps)
    check_profiler(profiler, nsys)
    fmt = output_format("json" if as_json else fmt)
    margin, gates = _ab_checks(warmup, active, html, equivalence, fail_if)
    count, auto = _ab_arms(arms, max_arms, min_effect, budget)
    commands, names = _ab_commands(a, b, labels, demo, warmup, active)
    spec = ABSpec(name, commands, names, count, warmup, active, capture, output, nsys, force,
                  bool(demo), profiler)  # fmt: skip
    exp = run_experiment(spec, lambda stage: print(f"census ab: {stage}", file=sys.stderr), auto)
    print(f"experiment written to {spec.folder} ({exp.wall_s} s)", file=sys.stderr)
    _report_ab(exp, margin, gates, fmt, html)


def _report_ab(exp, margin, gates, fmt: str, html: Path | None) -> None:
    """The experiment in `fmt` (and its dashboard), its equivalence when asked, then its gates."""
    from census.api import experiment_view
    from census.cli.analysis import show_experiment
    from census.cli.common import enforce
    from census.compare.ab.experiment import with_equivalence
    from census.compare.ab.gates import check_ab

    if margin is not None:
        exp = with_equivalence(exp, margin)
    show_experiment(experiment_view(exp), fmt, html)
    enforce(check_ab(gates, exp.stats, exp.labels))


def _ab_checks(warmup, active, html, equivalence, fail_if) -> tuple:
    """What `census ab` refuses before any arm runs: the counts, the dashboard's target, the
    equivalence margin and the gates (parsed: the margin, or None, and the gates)."""
    from census.compare.ab.gates import parse_ab_gate
    from census.compare.gates import parse_amount

    _check_counts(warmup, active)
    if html:
        from census.paths import check_output

        check_output(html)
    margin = None if equivalence is None else parse_amount(equivalence, "--equivalence")
    return margin, [parse_ab_gate(t) for t in fail_if or []]


def _ab_arms(arms: str, max_arms: int | None, min_effect: str | None, budget: str | None):
    """--arms N (its count, None), or --arms auto (the most arms and census.compare.ab.sequential's
    AutoSpec), checked before any arm runs."""
    if arms.strip() != "auto":
        given = [f"--{n}" for n, v in (("max-arms", max_arms), ("min-effect", min_effect),
                                       ("budget", budget)) if v is not None]  # fmt: skip
        if given:
            raise UsageError(f"{', '.join(given)}: only with --arms auto")
        try:
            return int(arms), None
        except ValueError:
            raise UsageError(f"--arms {arms!r}: give a multiple of 4, or auto") from None
    from census.compare.ab.auto_arms import AutoSpec
    from census.compare.ab.sequential import DEFAULT_MAX_ARMS, plan
    from census.compare.gates import parse_amount

    most = DEFAULT_MAX_ARMS if max_arms is None else max_arms
    try:
        plan(most)
    except ValueError as exc:
        raise UsageError(str(exc)) from None
    effect = None if min_effect is None else parse_amount(min_effect, "--min-effect")
    return most, AutoSpec(most, effect, None if budget is None else parse_duration_s(budget))


def parse_duration_s(text: str) -> float:
    """'30m', '1h', '90s', '1.5h' or plain seconds: seconds above 0; a UsageError otherwise."""
    import math
    import re

    m = re.fullmatch(r"\s*([0-9]+(?:\.[0-9]+)?)\s*(s|m|min|h)?\s*", text)
    seconds = (
        None if not m else float(m[1]) * {"s": 1, None: 1, "m": 60, "min": 60, "h": 3600}[m[2]]
    )
    if not seconds or not math.isfinite(seconds):
        raise UsageError(f"--budget {text!r}: give a time above 0 ('30m', '1h', '900s')")
    return seconds


def _ab_commands(a, b, labels, demo, warmup, active) -> tuple[dict, tuple[str, str]]:
    import shlex

    from census.capture.demo import DEMO_MODES, demo_command

    if demo:
        if a or b:
            raise UsageError("give either --demo or --a and --b, not both")
        modes = [m.strip() for m in demo.split(",")]
        if len(modes) != 2 or not set(modes) <= set(DEMO_MODES):
            raise UsageError(f"--demo {demo!r}: give two of eager, compiled (eager,compiled)")
        w, s = 5 if warmup is None else warmup, 20 if active is None else active
        commands = {side: demo_command(m, w, s) for side, m in zip("ab", modes, strict=True)}
        default = (
            (modes[0], modes[1]) if modes[0] != modes[1] else (f"{modes[0]}-a", f"{modes[1]}-b")
        )
    else:
        if not a or not b:
            raise UsageError("give both --a and --b (each a shell-quoted command), or --demo")
        try:
            commands = {"a": tuple(shlex.split(a)), "b": tuple(shlex.split(b))}
        except ValueError as exc:
            raise UsageError(f"--a/--b: {exc}") from None
        default = ("A", "B")
    if labels:
        from census.options import parse_labels

        return commands, parse_labels(labels)
    return commands, default

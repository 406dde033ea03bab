"""The census command line: a thin typer app over the library.

Each command parses arguments, calls the library and prints. A CensusError becomes one line on
stderr and its exit code (README: Exit codes); data goes to stdout, everything else to stderr.
"""

from __future__ import annotations

import functools
import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Annotated, Any, TypeVar

import typer

from census.errors import EXIT_INTERRUPTED, CensusError, UsageError
from census.pipeline import DEFAULT_STEPS_REGEX

app = typer.Typer(
    add_completion=False,
    no_args_is_help=True,
    help="Explain why one PyTorch training run is faster than another, from Nsight Systems.",
    pretty_exceptions_enable=False,
)
_state = {"debug": False}
F = TypeVar("F", bound=Callable[..., Any])


@app.callback()
def _main(
    debug: Annotated[
        bool, typer.Option("--debug", help="Show tracebacks of internal errors.")
    ] = False,
) -> None:
    _state["debug"] = debug


def _json(doc: Any, indent: int = 2) -> str:
    """Indented for a person at a terminal; compact (and much faster to write) for a pipe."""
    return json.dumps(doc, indent=indent if sys.stdout.isatty() else None)


def fail(message: str, code: int) -> None:
    print(f"Error: {message}", file=sys.stderr)
    raise typer.Exit(code)


def handle_errors(func: F) -> F:
    @functools.wraps(func)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return func(*args, **kwargs)
        except CensusError as exc:
            fail(str(exc), exc.exit_code)
        except KeyboardInterrupt:
            fail("interrupted", EXIT_INTERRUPTED)
        except BrokenPipeError:
            sys.stderr.close()
            raise typer.Exit(0) from None
        except (typer.Exit, typer.Abort):
            raise
        except Exception as exc:
            if _state["debug"]:
                raise
            fail(f"internal error: {type(exc).__name__}: {exc} (run with --debug for details)", 70)

    return wrapper  # type: ignore[return-value]


StepsOpt = Annotated[
    str, typer.Option("--steps", help="Regex for the NVTX ranges that are training steps.")
]
SkipOpt = Annotated[
    int, typer.Option("--skip-first", help="Steps to drop at the start, per process.")
]
TopOpt = Annotated[int, typer.Option("--top", help="How many kernels to list.")]


def _input(profile: str | None, sample: str | None) -> Path:
    if sample:
        from census.samples import sample_path

        return sample_path(sample)
    if not profile:
        raise UsageError("name a profile (.sqlite, .nsys-rep or capture folder) or --sample")
    return Path(profile)


def _summarize(path: Path, steps: str, skip_first: int, quiet: bool = False):
    from census.pipeline import summarize
    from census.render.progress import stage_progress

    with stage_progress(f"census of {path.name}", quiet=quiet) as progress:
        return summarize(path, steps, skip_first, progress)


def _warn(warnings: Any) -> None:
    for w in warnings:
        print(f"warning: {w}", file=sys.stderr)


@app.command()
@handle_errors
def summary(
    profile: Annotated[
        str | None, typer.Argument(help=".sqlite, .nsys-rep or capture folder")
    ] = None,
    sample: Annotated[
        str | None, typer.Option(help="A bundled capture: eager or compiled.")
    ] = None,
    steps: StepsOpt = DEFAULT_STEPS_REGEX,
    skip_first: SkipOpt = 0,
    as_json: Annotated[bool, typer.Option("--json", help="JSON on stdout.")] = False,
    top: TopOpt = 15,
) -> None:
    """The kernel census of one capture."""
    path = _input(profile, sample)
    from census.ranks import is_multi_rank

    if is_multi_rank(path):
        _summary_ranks(path, steps, skip_first, as_json, top)
        return
    if as_json and not sys.stdout.isatty():
        _summary_json_text(path, steps, skip_first, top)
        return
    census = _summarize(path, steps, skip_first)
    _warn(census.warnings)
    from census.capture import capture_overhead

    overhead = capture_overhead(path, census.per_step_timing())
    if as_json:
        from census.model import summary_json

        print(_json({**summary_json(census, top), "capture": overhead}, indent=2))
        return
    from rich.console import Console

    from census.capture_cli import overhead_line
    from census.render.table import render_summary

    render_summary(census, Console(), top)
    line = overhead_line(path, census)
    if line:
        print(line)


def _summary_json_text(path: Path, steps: str, skip_first: int, top: int) -> None:
    """Compact JSON for a pipe, answered from the cache on a repeated call."""
    from census.capture import capture_overhead
    from census.pipeline import summary_document
    from census.render.progress import stage_progress

    with stage_progress(f"census of {path.name}") as progress:
        meta, text = summary_document(path, steps, skip_first, top, progress)
    _warn(meta["warnings"])
    overhead = capture_overhead(path, meta["timing"])
    sys.stdout.write(f"{text[:-1]}, {json.dumps('capture')}: {json.dumps(overhead)}}}\n")


def _summary_ranks(path: Path, steps: str, skip_first: int, as_json: bool, top: int) -> None:
    from census.pipeline import summarize_multi
    from census.ranks import rank_spread, spread_json
    from census.render.progress import stage_progress

    with stage_progress(f"census of {path.name}") as progress:
        merged, labels, ranks = summarize_multi(path, steps, skip_first, progress)
    _warn(merged.warnings)
    if as_json:
        from census.model import summary_json

        print(_json({**summary_json(merged, top), **spread_json(labels, ranks)}, indent=2))
        return
    from rich.console import Console

    from census.render.table import render_spread, render_summary

    console = Console()
    render_summary(merged, console, top)
    render_spread(labels, ranks, rank_spread(labels, ranks), console)


def _labels(labels: str | None, a: Path, b: Path) -> tuple[str, str]:
    if labels:
        parts = [p.strip() for p in labels.split(",")]
        if len(parts) != 2 or not all(parts):
            raise UsageError(f"--labels {labels!r}: give two labels separated by a comma")
        return parts[0], parts[1]
    return default_label(a), default_label(b)


def default_label(path: Path) -> str:
    return path.name if path.is_dir() else path.name.split(".")[0]


def _diff(a: Path, b: Path, labels: str | None, steps: str, skip_first: int):
    from census.diff import diff_census
    from census.explain import explain_diff

    ca = _summarize(a, steps, skip_first)
    cb = _summarize(b, steps, skip_first)
    d = diff_census(ca, cb, _labels(labels, a, b))
    return d, explain_diff(d)


@app.command()
@handle_errors
def diff(
    a: Annotated[
        str, typer.Argument(help="Baseline: .sqlite, .nsys-rep, capture folder, or sample:NAME")
    ],
    b: Annotated[str, typer.Argument(help="Candidate, as A")],
    labels: Annotated[str | None, typer.Option(help="Two labels, e.g. eager,compiled.")] = None,
    steps: StepsOpt = DEFAULT_STEPS_REGEX,
    skip_first: SkipOpt = 0,
    fmt: Annotated[str, typer.Option("--format", help="table, markdown or json.")] = "table",
    top: TopOpt = 15,
    html: Annotated[Path | None, typer.Option(help="Also write the HTML dashboard here.")] = None,
) -> None:
    """Compare two captures (eager vs compiled) and explain the difference."""
    if fmt not in ("table", "markdown", "json"):
        raise UsageError(f"--format {fmt!r}: choose table, markdown or json")
    pa, pb = _named(a), _named(b)
    if fmt == "json" and not html and not sys.stdout.isatty():  # a pipe: cached compact JSON
        from census.pipeline import diff_document
        from census.render.progress import stage_progress

        with stage_progress(f"diff of {pa.name} and {pb.name}") as progress:
            meta, text = diff_document(pa, pb, _labels(labels, pa, pb), steps, skip_first,
                                       top, progress)  # fmt: skip
        _warn(meta["warnings"])
        sys.stdout.write(text + "\n")
        return
    d, explanation = _diff(pa, pb, labels, steps, skip_first)
    _warn(d.warnings)
    if fmt == "json":
        from census.render.json_out import diff_json

        print(_json(diff_json(d, explanation, top), indent=2))
    elif fmt == "markdown":
        from census.render.markdown import render_diff_markdown

        print(render_diff_markdown(d, explanation, top))
    else:
        from rich.console import Console

        from census.render.diff_table import render_diff_table

        render_diff_table(d, explanation, Console(), top)
    if html:
        from census.render.html import write_diff_html

        write_diff_html(d, explanation, html)
        print(f"wrote {html}", file=sys.stderr)


def _named(text: str) -> Path:
    """`sample:eager` names a bundled capture; anything else is a path."""
    if text.startswith("sample:"):
        from census.samples import sample_path

        return sample_path(text.split(":", 1)[1])
    return Path(text)


@app.command()
@handle_errors
def dashboard(
    a: Annotated[str, typer.Argument(help="A capture (or the baseline of a diff)")],
    b: Annotated[str | None, typer.Argument(help="Optional second capture to diff against")] = None,
    output: Annotated[
        Path | None, typer.Option("-o", "--output", help="HTML file to write.")
    ] = None,
    labels: Annotated[str | None, typer.Option(help="Two labels for a diff.")] = None,
    steps: StepsOpt = DEFAULT_STEPS_REGEX,
    skip_first: SkipOpt = 0,
) -> None:
    """Write a self-contained HTML dashboard for one capture or a diff of two."""
    from census.render.html import write_diff_html, write_summary_html

    pa = _named(a)
    if b is None:
        census = _summarize(pa, steps, skip_first)
        out = output or Path("reports") / f"{default_label(pa)}.html"
        write_summary_html(census, default_label(pa), out)
    else:
        pb = _named(b)
        d, explanation = _diff(pa, pb, labels, steps, skip_first)
        out = output or Path("reports") / f"{d.labels[0]}-vs-{d.labels[1]}.html"
        write_diff_html(d, explanation, out)
    print(f"wrote {out}", file=sys.stderr)


def _register_runners() -> None:
    from census import capture_cli  # capture, demo and doctor; light to import

    capture_cli.register(app, handle_errors)


_register_runners()


def main() -> None:
    app()


if __name__ == "__main__":
    main()

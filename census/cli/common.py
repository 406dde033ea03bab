"""The typer app, the options every command shares, and how errors and output leave census.

A CensusError becomes one line on stderr and its exit code (docs/robustness.md: Exit codes); data
goes to stdout, everything else to stderr.
"""

from __future__ import annotations

import functools
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Annotated, Any, TypeVar

import typer

from census.cli.stdout import error_exit
from census.definitions import DEFAULT_PHASES_REGEX, DEFAULT_STEPS_REGEX

# What an option's value is, in --help: a flag shows none, a value its meaning, not its type.
METAVARS = {
    "fail_if": "GATE",
    "labels": "A,B",
    "fmt": "table|markdown|json",
    "html": "FILE",
    "output": "FOLDER",
    "nsys": "PATH",
    "trace": "LIST",
    "sample": "NAME",
    "demo": "MODE",
    "a": "COMMAND",
    "b": "COMMAND",
    "arms": "N|auto",
    "min_effect": "AMOUNT",
    "equivalence": "AMOUNT",
    "budget": "TIME",
    "scheduler": "ADDRESS",
}


class CommandGroup(typer.core.TyperGroup):
    """The app's commands as a person reads them: every option's value named by its meaning in
    --help (typer shows `<str>` and `<bool>`), usage lines without typer's braces, descriptions
    as whole sentences; a mistake on the command line is one line on stderr, as any other error
    (typer and click draw a box of five)."""

    def get_command(self, ctx: Any, cmd_name: str) -> Any:
        """The command `cmd_name`, made plain (plain_command) the first time it is asked for."""
        command = super().get_command(ctx, cmd_name)
        if command is not None and not getattr(command, "_metavars_named", False):
            plain_command(command)
        return command

    def get_params(self, ctx: Any) -> list:
        """census's own options (--debug, --version, --help), their values named."""
        params = super().get_params(ctx)  # census's own: --debug, --version, --help
        for param in params:
            name_metavar(param)
        return params

    def main(self, *args: Any, standalone_mode: bool = True, **kwargs: Any) -> Any:
        """Run the app; standalone, a command line click refuses is one line on stderr and its exit
        code, an abort exit 1, and a command's return value the exit code."""
        if not standalone_mode:
            return super().main(*args, standalone_mode=False, **kwargs)
        import importlib

        click = importlib.import_module(typer.BadParameter.__module__)  # typer's click
        try:
            code = super().main(*args, standalone_mode=False, **kwargs)
        except click.NoArgsIsHelpError as exc:  # `census` alone: the help, shown
            raise SystemExit(exc.exit_code) from None
        except click.ClickException as exc:
            print(f"Error: {usage_error(exc)}", file=sys.stderr)
            raise SystemExit(exc.exit_code) from None
        except typer.Abort:
            print("Error: aborted", file=sys.stderr)
            raise SystemExit(1) from None
        raise SystemExit(code if isinstance(code, int) else 0)


def usage_error(exc: Any) -> str:
    """A command line click refused, in one line: its message, then the command's usage."""
    from census.units import one_line

    message = " ".join(exc.format_message().split())
    ctx = getattr(exc, "ctx", None)
    if ctx is None:
        return one_line(message)
    usage = " ".join(ctx.get_usage().split()).removeprefix("Usage: ")
    return one_line(f"{message} (usage: {usage}; {ctx.command_path} --help for more)")


def plain_command(command: Any) -> None:
    """Name the command's values (name_metavar), its arguments in its usage line as ARG and
    [ARG], a command after `--` (capture's) in it too, and its description unwrapped: typer
    keeps a docstring's line breaks, which then fall mid-sentence in the command list."""
    for param in command.params:
        name_metavar(param)
        if getattr(param, "param_type_name", "") == "argument":
            name = param.name.upper()
            shown = name if param.required else f"[{name}]"
            param.get_usage_pieces = lambda ctx, shown=shown: [shown]
    if command.context_settings.get("allow_extra_args"):
        pieces = command.collect_usage_pieces
        command.collect_usage_pieces = lambda ctx: [*pieces(ctx), "-- COMMAND..."]
    if command.help:
        paragraphs = command.help.split("\n\n")
        command.help = "\n\n".join(" ".join(p.split()) for p in paragraphs)
    plain_help = command.get_help_option

    def help_option(ctx: Any) -> Any:
        option = plain_help(ctx)
        if option is not None:
            option.metavar = ""
        return option

    command.get_help_option = help_option
    command._metavars_named = True


def name_metavar(param: Any) -> None:
    """Name `param`'s value in --help (unless already named): an argument by its name in capitals, a
    flag by nothing, else by METAVARS, N for an int, REGEX for --steps and --phases, TEXT."""
    from typer.core import TyperArgument

    if param.metavar is not None:
        return
    descriptor = getattr(param, "type_descriptor", None)
    if isinstance(param, TyperArgument):
        param.metavar = param.name.upper()
        param.display_type_rich = lambda ctx: None  # the name says it; typer adds `<str>`
    elif getattr(param, "is_flag", False) or getattr(param, "count", False):
        param.metavar = ""
    elif param.name in METAVARS:
        param.metavar = METAVARS[param.name]
    elif getattr(descriptor, "annotation", None) is int:
        param.metavar = "N"
    elif param.name in ("steps", "phases"):
        param.metavar = "REGEX"
    else:
        param.metavar = "TEXT"


# Why census has no --install-completion (said in `census --help`): typer's completion answers
# each Tab by starting census in full (typer, click and every command built), and it installs
# by editing the user's shell start-up file.
COMPLETION_OFF = (
    "No shell completion: typer's would start census in full at every Tab and edit your shell's "
    "start-up file; `census COMMAND --help` lists every option."
)

app = typer.Typer(
    cls=CommandGroup,
    add_completion=False,  # see COMPLETION_OFF
    no_args_is_help=True,
    help="Explain why one PyTorch training run is faster than another, from Nsight Systems."
    f"\n\n{COMPLETION_OFF}",
    pretty_exceptions_enable=False,
)
_state = {"debug": False}
F = TypeVar("F", bound=Callable[..., Any])


def _show_version(shown: bool) -> None:
    if shown:
        from census import __version__

        print(f"census {__version__}")
        raise typer.Exit()


@app.callback()
def _main(
    debug: Annotated[
        bool, typer.Option("--debug", help="Show tracebacks of internal errors.")
    ] = False,
    version: Annotated[
        bool,
        typer.Option("--version", help="Show census's version and exit.", is_eager=True,
                     callback=_show_version),
    ] = False,
) -> None:  # fmt: skip
    _state["debug"] = debug


def handle_errors(func: F) -> F:
    """`func` (a command), stdout flushed before it returns, and any error but typer's exits one
    line on stderr and its exit code (error_exit; with --debug, an internal error's traceback)."""

    @functools.wraps(func)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            result = func(*args, **kwargs)
            sys.stdout.flush()  # a full or closed stdout fails here, inside the handler
            return result
        except (typer.Exit, typer.Abort):
            raise
        except (Exception, KeyboardInterrupt) as exc:
            raise typer.Exit(error_exit(exc, _state["debug"])) from None

    return wrapper  # type: ignore[return-value]


StepsOpt = Annotated[
    str, typer.Option("--steps", help="Regex for the NVTX ranges that are training steps.")
]
SkipOpt = Annotated[
    int, typer.Option("--skip-first", help="Steps to drop at the start, per process.")
]
TopOpt = Annotated[int, typer.Option("--top", help="How many kernels to list.")]
PhasesOpt = Annotated[
    str,
    typer.Option(
        "--phases", help="Regex for the NVTX ranges inside steps that are phases ('' for none)."
    ),
]
PHASES_DEFAULT = DEFAULT_PHASES_REGEX
IdleOpt = Annotated[
    bool,
    typer.Option(
        "--idle/--no-idle",
        help="Split GPU idle time by cause (after host syncs, while launching, other host time) "
        "and by the host's NVTX range; on by default (--idle is kept and does nothing more).",
    ),
]
RanksOpt = Annotated[
    bool,
    typer.Option(
        "--ranks",
        help="Read a folder of exports that is not a census capture as the ranks of one run.",
    ),
]
SchedulerOpt = Annotated[
    str | None,
    typer.Option(help="Read a rank folder's exports on this Dask scheduler's cluster (tcp://HOST:"
                 "8786; else $DASK_SCHEDULER_ADDRESS; pip install 'torch-census\\[dask]').",
                 show_default=False),
]  # fmt: skip
FailIfOpt = Annotated[
    list[str] | None,
    typer.Option(
        "--fail-if",
        help="A CI gate, KEY OP VALUE ('kernel_count>+0', 'd2d_bytes>+5%', "
        "'forward.launch_api_count>+0'); repeatable; exit 5 when one fails.",
    ),
]


# The options summary, diff, dashboard and ab share: one name, one meaning, one help text
# (tests/test_cli_options.py holds them to it).
LabelsOpt = Annotated[str | None, typer.Option(help="Two labels, e.g. eager,compiled.")]
FormatOpt = Annotated[str, typer.Option("--format", help="table, markdown or json (--json: json).")]
JsonOpt = Annotated[bool, typer.Option("--json", help="JSON on stdout (= --format json).")]
HtmlOpt = Annotated[
    Path | None, typer.Option("--html", help="Write the HTML dashboard to this file.")
]
SampleOpt = Annotated[
    str | None,
    typer.Option(help="A bundled capture, eager or compiled (= sample:NAME); diff and dashboard "
                 "take two, eager,compiled."),
]  # fmt: skip
# Where an input is named: a file, a folder, or a bundled capture (every PROFILE's help says so).
PROFILE_HELP = ".sqlite, .nsys-rep, capture folder, nsys arrowdir/parquetdir folder, or sample:NAME"


def deprecated(old: str, value: Any, new: str, given: Any = None) -> Any:
    """The value of an option given by its old spelling `old` (kept, hidden, for users' scripts):
    one warning line on stderr naming `new`; both given is a usage error. `given`, else."""
    from census.errors import UsageError

    if value is None:
        return given
    if given is not None:
        raise UsageError(f"give {new} alone ({old} is its old spelling)")
    print(f"warning: {old} is deprecated: use {new}", file=sys.stderr)
    return value


def parse_gates(texts: list[str] | None) -> list:
    """The gates of --fail-if (census.compare.gates.parse_gate); [] without any."""
    if not texts:  # the gates' module stays unimported (a cached summary answers in 0.2 s)
        return []
    from census.compare.gates import parse_gate

    return [parse_gate(t) for t in texts]


def enforce(failed: list[str]) -> None:
    """After the output: one line per failed gate on stderr, and exit 5."""
    from census.errors import EXIT_GATE_FAILED

    for line in failed:
        print(line, file=sys.stderr)
    if failed:
        raise typer.Exit(EXIT_GATE_FAILED)


EquivalenceOpt = Annotated[
    str | None,
    typer.Option(
        help="Also say whether B and A are equivalent within ±MARGIN, a share of A's step (2%) "
        "or a time (0.5ms): two one-sided tests at α = 0.05."
    ),
]
OutputDirOpt = Annotated[Path, typer.Option("-o", "--output", help="Where captures go.")]
NsysOpt = Annotated[str | None, typer.Option(help="Path to nsys.")]
ProfilerOpt = Annotated[
    str,
    typer.Option(help="nsys, or torch: torch.profiler records the measured steps inside the "
                 "program (census.steps), no nsys needed."),
]  # fmt: skip


def check_profiler(profiler: str, nsys: str | None, on_ranks: bool = False) -> None:
    """--profiler nsys or torch; torch takes no --nsys nor --summarize-on-ranks (nsys's)."""
    from census.capture.torch_trace import PROFILERS
    from census.errors import UsageError

    if profiler not in PROFILERS:
        raise UsageError(f"--profiler {profiler!r}: choose nsys or torch")
    given = [n for n, v in (("--nsys", nsys), ("--summarize-on-ranks", on_ranks)) if v]
    if profiler != "nsys" and given:
        raise UsageError(f"{', '.join(given)}: only with --profiler nsys")


STEPS_DEFAULT = DEFAULT_STEPS_REGEX


def output_format(fmt: str) -> str:
    """`--format` (table, markdown or json) -> the format census.render.render takes."""
    from census.errors import UsageError

    if fmt not in ("table", "markdown", "json"):
        raise UsageError(f"--format {fmt!r}: choose table, markdown or json")
    return "terminal" if fmt == "table" else fmt


def terminal() -> dict[str, Any]:
    """How wide stdout is and whether it takes colour: what the terminal renderers need."""
    from rich.console import Console

    console = Console()
    return {"width": console.width, "color": console.is_terminal}


def shape(fmt: str) -> dict[str, Any]:
    """What a rendering in `fmt` needs of stdout: a terminal's width and colour; JSON indented
    for a person at a terminal, compact (and much faster to write) for a pipe."""
    if fmt == "terminal":
        return terminal()
    return {"indent": 2 if sys.stdout.isatty() else None} if fmt == "json" else {}


def show(text: str, fmt: str) -> None:
    """A rendering on stdout: a terminal's as drawn, a document (markdown, JSON) as a line."""
    sys.stdout.write(text if fmt == "terminal" else f"{text}\n")


def summary_shown(path: Path, options: Any, shown: str | None = None) -> Any:
    """The summary view of `path` (census.api.summary_view), with progress on stderr."""
    from census.api import summary_view
    from census.render.progress import stage_progress

    with stage_progress(f"census of {path.name}") as progress:
        return summary_view(path, options, progress, shown=shown)


def diff_shown(a: Path, b: Path, labels: tuple[str, str] | None, options: Any,
               sources: tuple[str, str] | None = None) -> Any:  # fmt: skip
    """The diff view of two inputs (census.api.diff_view), with progress on stderr."""
    from census.api import diff_view
    from census.render.progress import stage_progress

    with stage_progress(f"diff of {a.name} and {b.name}") as progress:
        return diff_view(a, b, labels, options, progress, sources=sources)


def write_report(text: str, target: Path) -> None:
    """Write `text` to `target` atomically and say so on stderr; one that cannot be written is a
    UsageError, a full disk or the file size limit a resource error naming the report's size."""
    from census.errors import UsageError, ran_out
    from census.paths import check_output, write_atomic
    from census.units import fmt_bytes

    check_output(target)
    try:
        write_atomic(target, text)
    except OSError as exc:  # a full disk, the file size limit: exit 73, naming where
        resource = ran_out(exc, target, output=True)
        if resource is None:
            raise UsageError(f"{target}: cannot write the report ({exc.strerror or exc})") from None
        size = fmt_bytes(len(text.encode("utf-8", "backslashreplace")))
        raise type(resource)(f"{resource} (the report takes {size})") from None
    print(f"wrote {target}", file=sys.stderr)


def check_count(option: str, value: int | None, least: int = 0) -> None:
    """Counts given on the command line are `least` or more (checked before any work)."""
    from census.errors import UsageError

    if value is not None and value < least:
        raise UsageError(f"{option} {value}: give {least} or more")

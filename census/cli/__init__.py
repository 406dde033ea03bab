"""The census command line: a thin typer app over census.api.

common.py holds the app, the shared options, the error handling and how a rendering reaches stdout;
analysis.py the commands that read captures (summary, diff, dashboard); programs.py those that
run programs (capture, demo, doctor, ab). Each asks census.api for a view and renders it through
census.render.render. stdout.py (output guarded, errors to exit codes), piped.py (`summary
--json` into a pipe: written there for the command and for fast.py) and fast.py (which command
lines are answered before typer is imported) are light; `app` is built on first use.
"""

from __future__ import annotations

from typing import Any


def main() -> None:
    """The `census` command: SIGTERM and SIGHUP end it as Ctrl-C does, stdout is guarded, a plain
    `summary EXPORT --json` is answered without typer, anything else by the app."""
    import signal
    import sys

    from census.cli.fast import summary_json
    from census.cli.stdout import guard_stdout, outside_commands
    from census.heap import keep_heap

    keep_heap()

    def terminate(signum, frame) -> None:  # SIGTERM and SIGHUP end census as Ctrl-C does:
        raise KeyboardInterrupt  # exit 130, workers killed, temporary folders removed

    signal.signal(signal.SIGTERM, terminate)
    if hasattr(signal, "SIGHUP") and signal.getsignal(signal.SIGHUP) is not signal.SIG_IGN:
        signal.signal(signal.SIGHUP, terminate)  # a closed terminal; nohup's SIG_IGN is kept
    guard_stdout()
    with outside_commands():  # --help and usage text are written outside any command
        code = summary_json(sys.argv[1:])  # the plain `summary EXPORT --json`, without typer
        if code is None:
            _app()()
        elif code:
            raise SystemExit(code)


def _app() -> Any:
    from census.cli import analysis, programs  # noqa: F401  (each registers its commands on the app)
    from census.cli.common import app

    return app


def __getattr__(name: str) -> Any:
    """`census.cli.app`: the typer app, its commands registered (tests run it with typer's
    runner)."""
    if name == "app":
        return _app()
    raise AttributeError(name)

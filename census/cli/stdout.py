"""How census's output leaves the process, with nothing heavy imported (no typer): stdout
guarded so that a full or closed stdout is one line and exit 74 and a reader that stopped early
exit 141 (docs/robustness.md: Exit codes), a closed stderr replaced by /dev/null."""

from __future__ import annotations

import contextlib
import os
import sys
from collections.abc import Callable, Iterable
from typing import Any

from census.errors import (
    EXIT_BAD_INPUT,
    EXIT_INTERNAL,
    EXIT_INTERRUPTED,
    EXIT_READER_GONE,
    CensusError,
    ReaderGone,
    ran_out,
)
from census.units import PIECE_CHARS, one_line, pieces


class GuardedStdout:
    """sys.stdout, whose write failures become census errors: a full or broken stdout
    (OutputError, exit 74) and a reader that stopped early (ReaderGone, exit 141)."""

    def __init__(self, stream: Any) -> None:
        self._stream = stream

    def _guard(self, action: Callable[[], Any]) -> Any:
        from census.errors import OutputError, ReaderGone

        try:
            return action()
        except BrokenPipeError:
            raise ReaderGone() from None
        except OSError as exc:
            reason = exc.strerror or str(exc)
            raise OutputError(f"cannot write to standard output ({reason})") from None

    def write(self, text: str) -> int:
        """`text`; a long one a MiB at a time (the stream encodes what it is given whole, and a
        document reaches hundreds of MB)."""
        if not isinstance(text, str) or len(text) <= PIECE_CHARS:
            return self._guard(lambda: self._stream.write(text))
        for piece in pieces(text):
            self._guard(lambda piece=piece: self._stream.write(piece))
        return len(text)

    def flush(self) -> None:
        """Flush the stream, its failures census errors as write's."""
        self._guard(self._stream.flush)

    def write_bytes(self, data: bytes) -> None:
        """`data` as it is, after any text written before it (a cached document: no decoding)."""
        self._guard(self._stream.flush)
        self._guard(lambda: self._stream.buffer.write(data))

    def __getattr__(self, name: str) -> Any:
        return getattr(self._stream, name)


def guard_stdout() -> None:
    """Before any command runs: a closed stdout is one line and exit 74; an open one is
    guarded; a closed stderr becomes /dev/null."""
    from census.errors import EXIT_OUTPUT_FAILED

    # A closed stderr: progress and warnings go to /dev/null, never to stdout or to a file
    # census opens later (which would take descriptor 2).
    _fill_fd(2)
    if sys.stderr is None:
        sys.stderr = open(2, "w", closefd=False)  # noqa: SIM115 (for the whole process)
    if sys.stdout is None or not _writable(1):
        print("Error: standard output is closed: census has nowhere to write", file=sys.stderr)
        raise SystemExit(EXIT_OUTPUT_FAILED)
    with contextlib.suppress(AttributeError, ValueError):  # text whose bytes are not UTF-8 (a
        sys.stdout.reconfigure(errors="backslashreplace")  # file name) is shown, not fatal
    sys.stdout = GuardedStdout(sys.stdout)  # type: ignore[assignment]


def _writable(fd: int) -> bool:
    """Whether descriptor `fd` is open for writing (a shell that closed it may have let a file
    it reads take its number)."""
    import fcntl

    try:
        return fcntl.fcntl(fd, fcntl.F_GETFL) & os.O_ACCMODE != os.O_RDONLY
    except OSError:
        return False


def _fill_fd(fd: int) -> None:
    """Put /dev/null on a standard descriptor that cannot be written."""
    if not _writable(fd):
        null = os.open(os.devnull, os.O_WRONLY)
        if null != fd:
            os.dup2(null, fd)
            os.close(null)


def silence_stdout() -> None:
    """After a broken pipe: point stdout at /dev/null, so that Python's flush at exit does not
    print a second error."""
    with contextlib.suppress(OSError, ValueError, AttributeError):
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())


@contextlib.contextmanager
def outside_commands() -> Any:
    """What handle_errors does for a command, for what runs outside one (--help and usage text,
    which click writes itself; a cached document): a full or closed stdout is one line and exit
    74, a reader that stopped early exit 141, Ctrl-C exit 130."""
    try:
        yield
    except ReaderGone as exc:
        silence_stdout()
        raise SystemExit(exc.exit_code) from None
    except CensusError as exc:
        print(f"Error: {one_line(str(exc))}", file=sys.stderr)
        raise SystemExit(exc.exit_code) from None
    except KeyboardInterrupt:
        print("Error: interrupted", file=sys.stderr)
        raise SystemExit(EXIT_INTERRUPTED) from None


def piped_json(fmt: str, *more: Any) -> bool:
    """Whether only JSON to a pipe is asked (nothing in `more`): then the compact document comes
    from the cache (write_cached; the summary's: census.cli.piped)."""
    return fmt == "json" and not sys.stdout.isatty() and not any(more)


def warn(warnings: Any) -> None:
    """Warnings on stderr, each one line."""
    for w in warnings:
        print(f"warning: {one_line(w)}", file=sys.stderr)


def error_exit(exc: BaseException, debug: bool = False) -> int:
    """The exit code of what a command raised, its message on stderr as one line
    (docs/robustness.md: Exit codes); with `debug`, an internal error is raised again, for its
    traceback."""
    if isinstance(exc, ReaderGone):
        silence_stdout()
        return exc.exit_code
    if isinstance(exc, CensusError):
        return report(str(exc), exc.exit_code, getattr(exc, "details", ""))
    if isinstance(exc, KeyboardInterrupt):
        return report("interrupted", EXIT_INTERRUPTED)
    if isinstance(exc, BrokenPipeError):  # a write that bypassed the guard
        silence_stdout()
        return EXIT_READER_GONE
    resource = ran_out(exc)  # memory, space, the file size limit: the machine's, not census's
    if resource is not None:
        return report(str(resource), resource.exit_code)
    if debug:
        raise exc
    if isinstance(exc, OSError) and exc.filename is not None:
        # A file the system refused (name too long, a loop of links, permissions): the user's
        # to fix, named in one line.
        return report(f"{shown_name(exc.filename)}: {exc.strerror or exc}", EXIT_BAD_INPUT)
    message = f"internal error: {type(exc).__name__}: {exc} (run with --debug for details)"
    return report(message, EXIT_INTERNAL)


def report(message: str, code: int, details: str = "") -> int:
    """The one-line error; then `details`, the end of the output of a program census ran
    silently (an A/B arm), as lines of their own, each escaped and indented. Returns `code`."""
    print(f"Error: {one_line(message)}", file=sys.stderr)
    for line in details.split("\n") if details else ():
        print(f"  | {one_line(line)}", file=sys.stderr)
    return code


def shown_name(name: Any) -> str:
    """A file name as text, whatever its bytes."""
    return os.fsdecode(name) if isinstance(name, bytes) else str(name)


def write_cached(label: str, document: Callable[[Any], tuple[dict, Iterable[str]]]) -> None:
    """A document from census.api (`document(progress)` -> (its warnings, its text in pieces))
    on stdout, with progress and its warnings on stderr."""
    from census.render.progress import stage_progress

    with stage_progress(label) as progress:
        meta, text = document(progress)
    warn(meta["warnings"])
    for piece in text:  # never joined, nor copied with the newline: hundreds of MB
        sys.stdout.write(piece)
    sys.stdout.write("\n")

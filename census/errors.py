"""Errors census raises. Each message says what is wrong and, where it can, what to do.

The CLI turns any CensusError into one line on stderr and the exit code below.
"""

from __future__ import annotations

EXIT_BAD_INPUT = 1
EXIT_USAGE = 2
EXIT_TOOL_MISSING = 3
EXIT_CAPTURE_FAILED = 4
EXIT_GATE_FAILED = 5
EXIT_INTERNAL = 70  # sysexits' EX_SOFTWARE: a bug in census (never a user's mistake)
EXIT_OUTPUT_FAILED = 74  # sysexits' EX_IOERR: standard output could not be written
EXIT_INTERRUPTED = 130
EXIT_READER_GONE = 141  # 128 + SIGPIPE, as for any program whose reader stopped early


class CensusError(Exception):
    """Base class: a problem the user can act on. `exit_code` is what the CLI returns."""

    exit_code = EXIT_BAD_INPUT


class InputError(CensusError):
    """The profile given is missing, unreadable, not an nsys export, or corrupt."""

    exit_code = EXIT_BAD_INPUT


class ColumnError(ValueError):
    """Internal: a column of the export holds what census cannot read as integers. The loader
    turns it into an InputError naming the file."""


class UsageError(CensusError):
    """Arguments that cannot work together (bad regex, bad labels, ...)."""

    exit_code = EXIT_USAGE


class OutputError(CensusError):
    """Standard output is closed or full, or failed while census wrote to it."""

    exit_code = EXIT_OUTPUT_FAILED


class ReaderGone(CensusError):
    """The program reading census's standard output stopped early (`| head`): said by the exit
    code alone, as a shell expects of a program a broken pipe stopped."""

    exit_code = EXIT_READER_GONE


class ToolMissingError(CensusError):
    """An external tool (nsys, a browser) is not installed or not on PATH."""

    exit_code = EXIT_TOOL_MISSING


class CaptureError(CensusError):
    """`nsys` or the profiled program failed; the message carries the command and its output tail."""

    exit_code = EXIT_CAPTURE_FAILED

    def __init__(self, message: str, command: list[str] | None = None, tail: str = "") -> None:
        self.command = command or []
        self.tail = tail
        super().__init__(message)

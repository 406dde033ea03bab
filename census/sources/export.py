"""`.nsys-rep` -> `.sqlite` through `nsys export`, skipped when a current `.sqlite` exists."""

from __future__ import annotations

import os
import subprocess
from collections.abc import Callable
from pathlib import Path

from census.capture.nsys import export_command, find_nsys
from census.errors import CaptureError, InputError, ToolMissingError
from census.paths import atomic_target, cache_dir

# progress(stage) or progress(stage, rows_done, rows_total): how long work reports itself
Progress = Callable[..., None]
REPORT, RAW_STREAM = ".nsys-rep", ".qdstrm"  # what resolve_sqlite converts, or refuses


def resolve_sqlite(path: Path, progress: Progress | None = None, nsys: str | None = None) -> Path:
    """The SQLite export behind what the user named."""
    if path.is_dir():
        return _from_capture_dir(path, progress, nsys)
    if path.suffix == RAW_STREAM:
        raise InputError(
            f"{path}: a raw .qdstrm stream; nsys could not import it into a report "
            "(its install lacks the QdstrmImporter): import it on a machine with a full nsys"
        )
    if path.suffix == REPORT:
        return export_report(path, progress, nsys)
    if _is_kineto_trace(path):  # by content: a torch.profiler trace, made an nsys-shaped export
        from census.sources.kineto.export import export_kineto

        if progress:
            progress(f"reading the PyTorch profiler trace {path.name}")
        return export_kineto(path)
    return path


def _is_kineto_trace(path: Path) -> bool:
    """A regular file (never a FIFO: opening one would wait for a writer) that is no SQLite
    database and holds a Kineto trace."""
    if not path.is_file():
        return False
    try:
        with path.open("rb") as fh:
            if fh.read(16) == b"SQLite format 3\x00":
                return False
    except OSError:
        return False  # open_readonly names the problem
    from census.sources.kineto.reader import is_kineto

    return is_kineto(path)


def is_export_file(path: Path) -> bool:
    """Whether resolve_sqlite gives `path` itself: a file, neither a report nor a raw stream nor
    a Kineto trace."""
    return path.is_file() and path.suffix not in (REPORT, RAW_STREAM) and not _is_kineto_trace(path)


def _from_capture_dir(folder: Path, progress: Progress | None, nsys: str | None) -> Path:
    sqlites = sorted(folder.glob("*.sqlite"))
    reports = sorted(folder.glob("*.nsys-rep"))
    if len(sqlites) == 1:
        return sqlites[0]
    if not sqlites and len(reports) == 1:
        return export_report(reports[0], progress, nsys)
    traces = [*folder.glob("*.pt.trace.json"), *folder.glob("*.pt.trace.json.gz")]
    if not sqlites and not reports and len(traces) == 1:  # census capture --profiler torch
        return resolve_sqlite(traces[0], progress)
    if not sqlites and not reports:
        from census.sources.columnar import columnar_suffix, export_columnar

        if columnar_suffix(folder):  # by content: an nsys arrowdir/parquetdir's table files
            return export_columnar(folder, progress)
        raise _no_export(folder)
    raise InputError(
        f"{folder}: holds several exports ({', '.join(p.name for p in sqlites or reports)}); "
        "name one file"
    )


def _no_export(folder: Path) -> InputError:
    """A folder without an export: what it holds instead (its first entries), and a capture
    folder inside it to name instead, where there is one."""
    try:
        held = sorted(folder.iterdir(), key=lambda p: p.name)
    except OSError as exc:
        return InputError(f"{folder} holds no .sqlite or .nsys-rep export (and cannot be listed: "
                          f"{exc.strerror})")  # fmt: skip
    names = [p.name + ("/" if p.is_dir() else "") for p in held[:6]]
    what = (
        f"it holds {', '.join(names)}{' ...' if len(held) > 6 else ''}" if held else "it is empty"
    )
    inside = next((p for p in held if p.is_dir() and (any(p.glob("*.sqlite")) or any(
        p.glob("*.nsys-rep")))), None)  # fmt: skip
    hint = f"; name the capture folder inside it, {inside}" if inside else ""
    return InputError(f"{folder} holds no .sqlite or .nsys-rep export: {what}{hint}")


def export_target(report: Path) -> Path:
    """Beside the report when its folder is writable, else in the cache folder."""
    sibling = report.with_suffix(".sqlite")
    if os.access(report.parent, os.W_OK):
        return sibling
    stat = report.stat()
    return cache_dir() / "exports" / f"{report.stem}-{stat.st_size}-{stat.st_mtime_ns}.sqlite"


def export_report(report: Path, progress: Progress | None = None, nsys: str | None = None) -> Path:
    """The SQLite export of an .nsys-rep report (export_target), made by `nsys export` unless one at
    least as new is there; written atomically. InputError without the report, CaptureError when nsys
    fails."""
    if not report.is_file():
        raise InputError(f"{report}: no such file")
    target = export_target(report)
    if target.exists() and target.stat().st_mtime_ns >= report.stat().st_mtime_ns:
        return target
    try:
        exe = find_nsys(nsys, option=None)  # summary, diff and dashboard take no --nsys
    except ToolMissingError as exc:
        raise ToolMissingError(
            f"{report}: census reads a report through its SQLite export, which nsys makes: where "
            f"nsys is, run `nsys export --type sqlite {report.name}` and give census the "
            f"{report.stem}.sqlite it writes (it can be copied here); or, to export it here: {exc}"
        ) from None
    if progress:
        progress(f"exporting {report.name} to SQLite with nsys")
    target.parent.mkdir(parents=True, exist_ok=True)
    with atomic_target(target) as tmp:
        cmd = export_command(exe, report, tmp)
        proc = subprocess.run(cmd, capture_output=True, text=True, check=False)
        if proc.returncode != 0 or not tmp.exists():
            tail = (proc.stdout + proc.stderr).strip()[-2000:]
            last = tail.splitlines()[-1] if tail else "no output"
            raise CaptureError(
                f"{report}: `nsys export` failed (exit {proc.returncode}): {last}",
                cmd,
                tail,
            )
    return target

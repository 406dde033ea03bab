"""The last write of a capture or an experiment, and what is kept when it fails.

A capture or an experiment is assembled in a hidden work folder (census.paths.make_work_folder)
and finished by writing its record (run.json, ab.json) there and renaming the folder into place.
When that fails once the programs ran (a disk that filled meanwhile, a quota, the file size
limit, a folder that appeared or changed), what they measured is not lost:
- the record goes to a file of its own in the temporary folder, else in the home folder, else
  (no file could take it) on standard output;
- the files census gathered (nsys's exports, an experiment's captures) stay on disk: the work
  folder is renamed into place without its record when nothing is there, else to its own name
  made visible (`NAME.partial-PID-HOST-RANDOM`, which no later census removes);
- the error says what ran out and where each part went, in one line, with its own exit code
  (73 for a full disk).
"""

from __future__ import annotations

import contextlib
import os
import shutil
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path

from census.errors import CensusError, UsageError, ran_out
from census.paths import replace_folder

SPARE = ("records",)  # what a work folder holds that is no measurement (the arms' records)


def finish_folder(work: Path, folder: Path, record: tuple[str, str], what: tuple[str, str],
                  force: bool, foreign: Callable[[Path], str | None]) -> None:  # fmt: skip
    """`record` (its file name, its text) written into `work`, and `work` renamed onto `folder`
    (census.paths.replace_folder). When either fails, the error says where the record and the
    work folder's files were kept (`what`: how to call them, "the capture's record (run.json)"
    and "its exports")."""
    name, text = record
    try:
        (work / name).write_text(text, encoding="utf-8")
        work.chmod(0o755)  # mkdtemp made it private
        replace_folder(work, folder, force, foreign)
    except (OSError, CensusError) as exc:
        raise kept(exc, work, folder, record, what) from None


def kept(exc: BaseException, work: Path, folder: Path, record: tuple[str, str],
         what: tuple[str, str]) -> CensusError:  # fmt: skip
    """The error `exc` (a CensusError, or an OSError met finishing `folder`), told where what
    was measured went: the record into a file of its own (or onto standard output), the work
    folder's files kept on disk when it holds any."""
    (name, text), (record_is, files_are) = record, what
    error = _census_error(exc, folder / name)
    with contextlib.suppress(OSError):
        (work / name).unlink()  # cut short: the whole record is kept elsewhere
    files = _keep_files(work, folder)
    saved, tried = _save(folder.name, name, text)
    if saved is None:
        told = _print(text)
        clause = f"{record_is} {told} (no file could take it: {'; '.join(tried)})"
    else:
        clause = f"{record_is} is kept in {saved}"
    if isinstance(files, str):
        clause += f", {files_are} {files}"
    elif files is not None:
        clause += f", {files_are} in {files}"
    if saved is not None:
        place = files if isinstance(files, Path) else folder
        clause += f": once there is room, put it at {place / name}"
        if place != folder:
            clause += f" and move {place} to {folder}"
    error.args = (f"{error}; {clause}",)
    return error


def _census_error(exc: BaseException, path: Path) -> CensusError:
    if isinstance(exc, CensusError):
        return exc
    resource = ran_out(exc, path, output=True)
    if resource is not None:
        return resource
    strerror = getattr(exc, "strerror", None)
    return UsageError(f"{path}: cannot write there ({strerror or exc})")


def _keep_files(work: Path, folder: Path) -> Path | str | None:
    """Where the work folder's files are now: `folder` (renamed into place when nothing is
    there) or the work folder under its visible name; why they are not, when it could be
    neither (then they go with it); None when it held none."""
    try:
        if not [p for p in work.iterdir() if p.name not in SPARE]:
            return None
        work.chmod(0o755)  # mkdtemp made it private
    except OSError:
        return None
    reason = "both names are taken"
    for place in (folder, work.with_name(work.name.lstrip("."))):
        if os.path.lexists(place):
            continue
        try:
            os.rename(work, place)
        except OSError as exc:
            reason = exc.strerror or str(exc)
            continue
        shutil.rmtree(place / SPARE[0], ignore_errors=True)
        return place
    return f"lost: its folder could not be renamed ({reason})"


def _save(name: str, record: str, text: str) -> tuple[Path | None, list[str]]:
    """The file of its own that took `text` (census-NAME-RANDOM.RECORD, in the temporary folder,
    else the home folder); else None and why each could not."""
    tried = []
    for kind, where in (("temporary", tempfile.gettempdir), ("home", Path.home)):
        try:
            folder = where()
        except (OSError, RuntimeError):  # none usable, or no home known
            tried.append(f"no {kind} folder")
            continue
        path = None
        try:
            fd, path = tempfile.mkstemp(prefix=f"census-{name}-", suffix=f".{record}", dir=folder)
            with open(fd, "w", encoding="utf-8") as fh:
                fh.write(text)
                fh.flush()
                os.fsync(fh.fileno())
            return Path(path), tried
        except OSError as exc:
            if path is not None:
                with contextlib.suppress(OSError):
                    os.unlink(path)
            tried.append(f"{folder}: {exc.strerror or exc}")
    return None, tried


def _print(text: str) -> str:
    """`text` onto standard output; what became of it, for the error."""
    try:
        sys.stdout.write(text + "\n")
        sys.stdout.flush()
    except (OSError, CensusError) as exc:
        return f"is lost: standard output could not take it either ({exc})"
    return "follows on standard output"

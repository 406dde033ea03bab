"""Inductor's map kept by a capture (#56): kernel name -> the aten ops it fused, read back.

`census capture` of a compiled run writes inductor_map.json beside its export
(census.capture.inductor: read from the code Inductor generated); the engine hands it to
census.findings.ops.group_kernels, where it decides a Triton kernel's fused group instead of
the kernel's name.
"""

from __future__ import annotations

import json
from pathlib import Path

from census.capture.inductor import INDUCTOR_MAP
from census.errors import InputError


def map_path(where: Path) -> Path:
    """Where the map of `where` lies: inside a capture folder, else beside the file named (an
    export, a trace)."""
    return (where if where.is_dir() else where.parent) / INDUCTOR_MAP


def map_identity(where: Path) -> str | None:
    """A hash of the map of `where` (map_path), None where there is none: part of every cache
    key of a census (census.api), so a map written after a census was cached is read."""
    import hashlib

    try:
        return hashlib.sha256(map_path(where).read_bytes()).hexdigest()[:16]
    except (FileNotFoundError, NotADirectoryError):
        return None
    except OSError as exc:
        raise InputError(f"{map_path(where)}: unreadable Inductor map ({exc})") from None


def inductor_map(folder: Path) -> dict[str, tuple[str, ...]] | None:
    """The map in capture folder `folder` (or beside the export `folder` names): kernel name ->
    its ops (`aten::add`, ...); None where the capture kept none (an eager run, a run whose
    Inductor cache the user had set, an export made elsewhere). An InputError naming the file
    when it is there but not such a map."""
    path = map_path(folder)
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return None
    except (OSError, UnicodeDecodeError) as exc:
        raise InputError(f"{path}: unreadable Inductor map ({exc})") from None
    try:
        value = json.loads(text)
    except (ValueError, RecursionError):
        value = None
    if not isinstance(value, dict) or not all(
        isinstance(ops, list) and all(isinstance(o, str) for o in ops) for ops in value.values()
    ):
        raise InputError(f"{path}: not an Inductor map (a JSON object: kernel name -> op names)")
    return {name: tuple(ops) for name, ops in value.items()}

"""What every command and API call starts from: the input the user named (`sample:NAME` or a
path) and the Options saying how steps and phases are selected, which are also the cache's key
(census.store.cache). Light to import, as the cached `summary --json` needs (census.cli.fast)."""

from __future__ import annotations

import os
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from census.definitions import DEFAULT_PHASES_REGEX, DEFAULT_STEPS_REGEX
from census.errors import UsageError
from census.units import clip

PathLike = str | Path


@dataclass(frozen=True)
class Options:
    """How steps are selected: NVTX ranges matching `steps_regex`, less the first `skip_first`
    per process; phases: ranges inside matching `phases_regex` (empty: none). `key()`: cache's."""

    steps_regex: str = DEFAULT_STEPS_REGEX
    skip_first: int = 0
    phases_regex: str = DEFAULT_PHASES_REGEX
    idle: bool = True  # split the GPU idle time by cause and host range (False: --no-idle)
    ranks: bool = False  # a folder of exports is the ranks of one run (--ranks); not a cache key
    scheduler: str | None = None  # a rank folder's exports read on Dask (--scheduler); not a key

    def __post_init__(self) -> None:
        checked = {field: getattr(self, field) for field in FLAGS}
        check_selection(checked, {field: f"{field}=" for field in FLAGS})

    @classmethod
    def from_flags(cls, *values: Any) -> Options:
        """Options of the command line's values, in the fields' order: a value Options refuses
        is named as its flag (`--steps`), not as its field (`steps_regex=`)."""
        check_selection(dict(zip(FLAGS, values, strict=False)), FLAGS)
        return cls(*values)

    def key(self) -> list:
        """The options that change a census, as the cache's key: steps_regex, skip_first,
        phases_regex, idle."""
        return [self.steps_regex, self.skip_first, self.phases_regex, self.idle]


def resolve_input(name: PathLike) -> Path:
    """`sample:eager` names a bundled capture; anything else is a path (a path-like object: any
    other value is a UsageError, as a notebook may pass)."""
    if not isinstance(name, str | os.PathLike):
        raise UsageError(
            f"{type(name).__name__} {clip(repr(name), 60)}: give a path (an export, a report, a "
            "capture folder) or sample:NAME"
        )
    text = str(name)
    if text.startswith("sample:"):
        from census.sources.samples import sample_path

        return sample_path(text.split(":", 1)[1])
    return Path(name)


def default_label(path: Path) -> str:
    """A folder's name; a file's name up to its first dot; a capture folder's export
    (`NAME/capture.sqlite`) is named by its folder. A path the system cannot look up (a name
    too long) is named as a file: a repr of a Census names it without failing."""
    if _is_dir(path):
        return path.name
    stem = path.name.split(".")[0]
    return path.parent.name if stem == "capture" and path.parent.name else stem


def _is_dir(path: Path) -> bool:
    try:
        return path.is_dir()
    except OSError:
        return False


def parse_labels(labels: Any, name: str = "--labels") -> tuple[str, str] | None:
    """Two labels: `eager,compiled` (as --labels takes them) or a pair of texts; None stays None.
    `name`: what the user gave them as, in the error."""
    if labels is None:
        return None
    parts: list = []
    if isinstance(labels, str):
        parts = [p.strip() for p in labels.split(",")]
    elif isinstance(labels, tuple | list):
        parts = list(labels)
    if len(parts) != 2 or not all(isinstance(p, str) and p.strip() for p in parts):
        pair = "" if name.startswith("-") else ", or a pair such as ('eager', 'compiled')"
        raise UsageError(f"{name} {labels!r}: give two labels separated by a comma{pair}")
    if parts[0].strip() == parts[1].strip():
        raise UsageError(f"{name} {labels!r}: both sides would be {parts[0].strip()!r}: give each "
                         "side its own label")  # fmt: skip
    return parts[0], parts[1]


# The keywords summarize and diff take for the fields of Options.
SELECTION = {"steps": "steps_regex", "skip_first": "skip_first", "phases": "phases_regex",
             "idle": "idle", "ranks": "ranks", "scheduler": "scheduler"}  # fmt: skip


def with_options(options: Options | None, selection: dict[str, Any]) -> Options:
    """`options` (default Options()) with every SELECTION keyword that is not None in its place."""
    if options is not None and not isinstance(options, Options):
        raise UsageError(f"options must be a census.Options, not {type(options).__name__}")
    unknown = sorted(set(selection) - set(SELECTION))
    if unknown:
        raise UsageError(f"unknown keyword {unknown[0]!r}: the step selection is one of "
                         f"{', '.join(SELECTION)} (or options=census.Options(...))")  # fmt: skip
    _check_keywords(selection)
    given = {SELECTION[k]: v for k, v in selection.items() if v is not None}
    return replace(options or Options(), **given)


def _check_keywords(selection: dict[str, Any]) -> None:
    """A UsageError in the API's words (`steps=`, not the CLI's `--steps`) for a keyword of
    SELECTION that Options would refuse."""
    given = {SELECTION[key]: value for key, value in selection.items()}
    check_selection(given, {SELECTION[key]: f"{key}=" for key in SELECTION})


# The fields of Options that can be refused, in their order, and their command line's flags.
FLAGS = {"steps_regex": "--steps", "skip_first": "--skip-first", "phases_regex": "--phases"}


def check_selection(values: dict[str, Any], names: dict[str, str]) -> None:
    """A UsageError for a value of Options' FLAGS fields (`values`, by field; None: not given)
    that Options refuses, naming it as `names` does: a keyword (`steps=`) or a flag (`--steps`)."""
    from census.load.patterns import check_pattern

    for field in ("steps_regex", "phases_regex"):
        value, name = values.get(field), names[field]
        if value is not None and not isinstance(value, str):
            raise UsageError(
                f"{name} takes a regular expression (a str), not {type(value).__name__}"
            )
        if value is not None:
            check_pattern(name, value)
    skip, name = values.get("skip_first"), names["skip_first"]
    if skip is None or (isinstance(skip, int) and not isinstance(skip, bool) and skip >= 0):
        return
    if name.startswith("--"):
        raise UsageError(f"{name} must be 0 or more")
    raise UsageError(f"{name} takes a whole number 0 or more, not {skip!r}")

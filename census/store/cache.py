"""Census results cached per export, keyed by the file's identity and census's own code.

The key is the file's size, mtime and a hash of its first and last MiB (hashing gigabytes would
cost more than the census), plus the options and a hash of every Python file of the package. An
export in SQLite WAL mode with a non-empty `-wal` log beside it is never cached: its content is
not in the file alone.
Each write first removes the temporary `.part` files that dead census processes of this host
left in that cache folder (kill -9 during a write): see census.paths.
Beside each census, renderings of it (the `summary --json` document) are cached too: for an
export of tens of thousands of steps, rebuilding and encoding that document costs more than
reading it back.
"""

from __future__ import annotations

import codecs
import contextlib
import functools
import hashlib
import json
import os
import tempfile
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any, BinaryIO

from census.heap import trim_heap
from census.paths import atomic_target, cache_dir, sweep_stale_parts, write_atomic
from census.sources.readonly import has_live_wal
from census.units import PIECE_CHARS, pieces

if TYPE_CHECKING:
    from census.model.census import Census

_EDGE_BYTES = 1 << 20


@functools.lru_cache(maxsize=1)
def code_hash() -> str:
    """A hash of every Python file of the package, by relative path and content: any change to
    census's code, in any stage, makes a new cache key, so no upgrade serves a stale result."""
    h = hashlib.sha256()
    package = Path(__file__).resolve().parents[1]
    for file in sorted(package.rglob("*.py")):
        h.update(file.relative_to(package).as_posix().encode() + b"\0")
        h.update(file.read_bytes())
    return h.hexdigest()[:16]


def file_key(path: Path, named: Path | None = None) -> str:
    """The identity of `path`, as if it lay at `named` (the same file, renamed there later)."""
    stat = path.stat()
    name = (named or path).resolve()
    h = hashlib.sha256(os.fsencode(name))  # any bytes: a name need not be UTF-8
    h.update(f"|{stat.st_size}|{stat.st_mtime_ns}".encode())
    with path.open("rb") as fh:
        h.update(fh.read(_EDGE_BYTES))
        if stat.st_size > _EDGE_BYTES:
            fh.seek(max(_EDGE_BYTES, stat.st_size - _EDGE_BYTES))
            h.update(fh.read(_EDGE_BYTES))
    return h.hexdigest()


def _entry(
    paths: list[Path], options: list, kind: str, named: list[Path] | None = None
) -> Path | None:
    if os.environ.get("CENSUS_NO_CACHE") or not all(p.is_file() for p in paths):
        return None
    if any(has_live_wal(p) for p in paths):
        return None
    files = "|".join(file_key(p, n) for p, n in zip(paths, named or paths, strict=True))
    key = hashlib.sha256(f"{files}|{json.dumps(options)}|{code_hash()}".encode()).hexdigest()
    return cache_dir() / kind / f"{key[:32]}.json"


def holds_census(path: Path, options: list) -> bool:
    """Whether the cache has an entry for the census of `path` with these options (read or not,
    it will not be computed)."""
    entry = _entry([path], options, "census")
    return entry is not None and entry.is_file()


def cached_census(
    path: Path, options: list, compute: Callable[[], Census], named: Path | None = None
) -> Census:
    """The census of `path` from the cache, else computed and stored; with `named`, stored as
    the census of the file `path` becomes once renamed there (a capture's rank export, summarized
    on its rank before the capture folder is moved into place)."""
    from census.store.codec import dump_record, load_record  # the model: not for cached texts

    entry = _entry([path], options, "census", None if named is None else [named])
    if entry is None:
        return compute()
    # an entry that is not a census of this code (cut, damaged, foreign) is computed again
    with contextlib.suppress(OSError, ValueError, KeyError, TypeError, AttributeError):
        return load_record(entry.read_bytes())
    census = compute()
    with contextlib.suppress(OSError):  # an unwritable cache only costs speed
        _write(entry, dump_record(census))
    trim_heap()  # the record's lists, freed: their memory back before a document is rendered
    return census


def cached_text(
    paths: list[Path], options: list, kind: str, render: Callable[[], tuple[dict, Iterable[str]]]
) -> tuple[dict, Iterable[str]]:
    """(a small JSON-able header, a text in pieces: their join) rendered from the census of
    `paths`, cached under `kind`; the key covers every file. `render`'s pieces are made as
    they are iterated, and may be iterated again: they are written to the entry as they come,
    then read back from it (a document of hundreds of MB is never held), or, without an entry,
    to a temporary file (`spooled`): the text is whole before any of it is given out."""
    entry = _entry(paths, options, kind)
    if entry is not None:
        hit = _read_text(entry)
        if hit is not None:
            with contextlib.suppress(UnicodeDecodeError):  # not UTF-8: foreign, recomputed
                return hit[0], [hit[1].decode("utf-8")]
    meta, text = render()
    stored = None if entry is None else _stored(entry, meta, text)
    return meta, spooled(text) if stored is None else stored  # no entry, or an unwritable cache


def spooled(text: Iterable[str]) -> Iterable[str]:
    """`text` made whole into an anonymous temporary file and read back from it (StoredText):
    an error while it is made comes before any of it is written out. The text as it is where
    no temporary file can be written."""
    if isinstance(text, (str, list, tuple)):  # already made
        return text
    try:
        fh = tempfile.TemporaryFile()  # noqa: SIM115 (StoredText owns and closes it)
    except OSError:
        return text
    try:
        _write_encoded(fh, text)
        fh.flush()
    except BaseException as exc:
        _close_quietly(fh)
        if isinstance(exc, OSError):
            return text
        raise
    return StoredText(fh, 0)


def _stored(entry: Path, meta: dict, text: Iterable[str]) -> StoredText | None:
    """Write the entry; its text as written (StoredText); None where the cache cannot be
    written."""
    fh = None
    try:
        _sweep(entry)
        with atomic_target(entry) as tmp:
            fh = tmp.open("w+b")
            start = _write_digested(fh, meta, text)
            fh.flush()  # whole, digest included, before it is renamed into place
    except BaseException as exc:
        if fh is not None:
            _close_quietly(fh)
        if isinstance(exc, OSError):
            return None
        raise
    return StoredText(fh, start)


def _close_quietly(fh: BinaryIO) -> None:
    """Close a file census gives up writing (its buffered bytes may fail to go, as the rest
    did)."""
    with contextlib.suppress(OSError):
        fh.close()


class StoredText:
    """A cache entry's text, read back a piece at a time (again each time it is iterated) from
    the file as written, held open: a census sweeping the cache meanwhile cannot take it away."""

    def __init__(self, fh: BinaryIO, start: int) -> None:
        self._fh, self._start = fh, start

    def __del__(self) -> None:
        self._fh.close()

    def __iter__(self) -> Iterator[str]:
        decode = codecs.getincrementaldecoder("utf-8")().decode
        at = self._start
        while data := os.pread(self._fh.fileno(), PIECE_CHARS, at):
            at += len(data)
            yield decode(data)
        yield decode(b"", final=True)


def _write_digested(fh: BinaryIO, meta: dict, text: Iterable[str]) -> int:
    """The entry: a header line (meta, and the text's digest), then the text, encoded a piece
    at a time, once: the digest is written over a placeholder when the text is done. Returns
    where the text starts."""
    placeholder = b"0" * 64
    header = json.dumps({"meta": meta, "sha256": placeholder.decode()}).encode("utf-8")
    fh.write(header + b"\n")
    digest = hashlib.sha256()
    _write_encoded(fh, text, digest)
    fh.seek(header.rindex(placeholder))  # the last key's value: after the meta's
    fh.write(digest.hexdigest().encode())
    return len(header) + 1


def _write_encoded(fh: BinaryIO, text: Iterable[str], digest: Any = None) -> None:
    """The text into `fh` as UTF-8, a piece at a time (and into `digest`, a hashlib hash)."""
    for piece in pieces(text):
        data = piece.encode("utf-8")
        if digest is not None:
            digest.update(data)
        fh.write(data)


def cached_bytes(paths: list[Path], options: list, kind: str) -> tuple[dict, bytes] | None:
    """What cached_text would give from the cache, its text as stored (UTF-8), or None when the
    cache does not hold it."""
    entry = _entry(paths, options, kind)
    return None if entry is None else _read_text(entry)


def _read_text(entry: Path) -> tuple[dict, bytes] | None:
    """(meta, text) of a cached rendering; None when absent, cut or foreign: the cache is data,
    not trust, and such an entry is recomputed, never printed."""
    with contextlib.suppress(OSError, ValueError, KeyError, TypeError):
        head, _, text = entry.read_bytes().partition(b"\n")
        header = json.loads(head)
        if header["sha256"] == _digest(text) and isinstance(header["meta"], dict):
            return header["meta"], text
    return None


_swept: set[Path] = set()


def _write(entry: Path, text: str | Iterable[bytes]) -> None:
    """Write a cache entry (after _sweep)."""
    _sweep(entry)
    write_atomic(entry, text)


def _sweep(entry: Path) -> None:
    """The first write of a process into a folder of the cache removes the `.part` leftovers
    of dead census processes there."""
    if entry.parent not in _swept:
        _swept.add(entry.parent)
        sweep_stale_parts(entry.parent)


def _digest(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()

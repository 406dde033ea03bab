"""An nsys `--type arrowdir` or `--type parquetdir` export (a folder of one file per table,
`TABLE.arrow` or `TABLE.parquet`) made an nsys-shaped SQLite export, so that the one engine reads
it through the one door, as a Kineto trace is made one (census/sources/kineto/export.py) and an
.nsys-rep by `nsys export` (census/sources/export.py).

Only the tables census reads are copied (TABLES: every column nsys wrote in each, under the
same names, so the engine's SQL and checks see what an nsys SQLite export holds); the others
(the enums, threads, diagnostics) are left. Read with pyarrow (an optional dependency: a clear
error names its install command), batch by batch, so memory stays bounded by one batch; written
in the cache folder (never beside the user's files), atomically, under a name keyed by the table
files' names, sizes and times (columnar_target): made again only when one of them changed.
"""

from __future__ import annotations

import hashlib
import sqlite3
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from census.errors import InputError, ToolMissingError
from census.paths import atomic_target, cache_dir
from census.sources import schema as sc

SUFFIXES = {".arrow": "arrowdir", ".parquet": "parquetdir"}  # a table file's suffix -> nsys --type
EXPORTED = ".columnar.sqlite"  # the end of the name of census's export of a columnar folder
EXPORT_VERSION = 1  # in the export's name: a census that writes exports otherwise makes its own
# Every table census reads (census.sources.schema); nsys writes a table only where it has rows.
TABLES = (*sc.READ_TABLES, sc.SESSION_START)
# nsys writes these in every export: a folder without them is an export cut short or not nsys's
NEEDED = (sc.STRINGS, "META_DATA_EXPORT")
BATCH_ROWS = 65_536  # rows a Parquet batch holds (an Arrow stream's batches are as nsys wrote them)
PYARROW_INSTALL = "pip install pyarrow"

Progress = Callable[..., None]


def columnar_suffix(folder: Path) -> str | None:
    """`.arrow` or `.parquet` where `folder` holds an nsys table file of that kind (its content
    decides, never its name), else None; InputError where it holds both kinds."""
    if not folder.is_dir():
        return None
    found = {s for s in SUFFIXES for t in TABLES if (folder / f"{t}{s}").is_file()}
    if len(found) > 1:
        raise InputError(
            f"{folder}: holds both .arrow and .parquet tables of nsys; keep one export per folder"
        )
    return found.pop() if found else None


def table_files(folder: Path, suffix: str) -> dict[str, Path]:
    """The tables census reads that `folder` holds, by table name; InputError where one nsys
    always writes (NEEDED) is missing."""
    files = {t: folder / f"{t}{suffix}" for t in TABLES if (folder / f"{t}{suffix}").is_file()}
    missing = [f"{t}{suffix}" for t in NEEDED if t not in files]
    if missing:
        raise InputError(
            f"{folder}: an nsys {SUFFIXES[suffix]} export without {', '.join(missing)} "
            "(every export holds it): was the export cut short? Export the report again"
        )
    return files


def columnar_target(folder: Path, files: dict[str, Path]) -> Path:
    """Where a folder's export goes: the cache folder, named by the folder's name and a digest of
    its table files' names, sizes and modification times."""
    digest = hashlib.sha256(str(folder.resolve()).encode())
    for table, path in sorted(files.items()):
        stat = path.stat()
        digest.update(f"{table}:{path.name}:{stat.st_size}:{stat.st_mtime_ns};".encode())
    stamp = f"{digest.hexdigest()[:16]}-v{EXPORT_VERSION}"
    return cache_dir() / "exports" / f"{folder.name}-{stamp}{EXPORTED}"


def export_columnar(folder: Path, progress: Progress | None = None) -> Path:
    """The nsys-shaped SQLite export of an arrowdir or parquetdir folder (columnar_target), made
    unless there; InputError naming the file where a table cannot be read (nothing is left
    behind), ToolMissingError without pyarrow."""
    suffix = columnar_suffix(folder)
    if suffix is None:
        raise InputError(f"{folder}: holds no nsys .arrow or .parquet table")
    files = table_files(folder, suffix)
    target = columnar_target(folder, files)
    if target.exists():
        return target
    _require_pyarrow(folder)
    if progress:
        progress(f"reading the nsys {SUFFIXES[suffix]} export {folder.name}")
    target.parent.mkdir(parents=True, exist_ok=True)
    with atomic_target(target) as tmp:
        conn = sqlite3.connect(tmp)
        try:
            conn.execute("PRAGMA journal_mode = OFF")
            conn.execute("PRAGMA synchronous = OFF")
            for table, path in files.items():
                _copy_table(conn, table, path)
            conn.commit()
        finally:
            conn.close()
    return target


def _require_pyarrow(folder: Path) -> None:
    try:
        import pyarrow  # noqa: F401
    except ImportError:
        raise ToolMissingError(
            f"{folder}: reading an nsys Arrow/Parquet export needs pyarrow: `{PYARROW_INSTALL}` "
            "(or give census the report's SQLite export: `nsys export --type sqlite`)"
        ) from None


def _copy_table(conn: sqlite3.Connection, table: str, path: Path) -> None:
    """Stream one table file into `table`, with its columns' names and SQLite types."""
    import pyarrow as pa

    try:
        schema, batches = _open(path)
        missing = [c for c in sc.REQUIRED_COLUMNS.get(table, ()) if c not in schema.names]
        if missing:
            raise InputError(
                f"{path}: table {table} lacks column(s) {', '.join(missing)}: "
                "unsupported nsys schema"
            )
        conn.execute(f'CREATE TABLE "{table}" ({_columns_sql(schema)})')
        marks = ", ".join("?" * len(schema.names))
        for batch in batches:
            columns = [_python_values(batch.column(i)) for i in range(batch.num_columns)]
            conn.executemany(f'INSERT INTO "{table}" VALUES ({marks})', zip(*columns, strict=True))
    except (pa.ArrowException, OSError) as exc:
        what = SUFFIXES[path.suffix].removesuffix("dir").capitalize()
        raise InputError(f"{path}: not a readable {what} table ({_first_line(exc)})") from None


def _open(path: Path) -> tuple[Any, Iterator[Any]]:
    """(the schema, an iterator of record batches) of one table file."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    if path.suffix == ".parquet":
        parquet = pq.ParquetFile(path)
        return parquet.schema_arrow, parquet.iter_batches(batch_size=BATCH_ROWS)
    source = pa.memory_map(str(path))
    try:  # nsys writes the Arrow IPC stream format; the file format is read too
        reader = pa.ipc.open_stream(source)
    except pa.ArrowInvalid:
        source.seek(0)
        file_reader = pa.ipc.open_file(source)
        count = file_reader.num_record_batches
        return file_reader.schema, (file_reader.get_batch(i) for i in range(count))
    return reader.schema, iter(reader)


def _columns_sql(schema: Any) -> str:
    """The column list of a CREATE TABLE: each field's name and SQLite type; nsys's one integer
    primary key (StringIds' `id`) made the rowid, as in its SQLite export."""
    keys = [f for f in schema if b"PK" in ((f.metadata or {}).get(b"schema_info") or b"")]
    parts = []
    for field in schema:
        kind = _sqlite_type(field.type)
        key = " PRIMARY KEY" if len(keys) == 1 and field is keys[0] and kind == "INTEGER" else ""
        parts.append(f'"{field.name}" {kind}{key}')
    return ", ".join(parts)


def _sqlite_type(kind: Any) -> str:
    import pyarrow as pa

    if pa.types.is_dictionary(kind):
        return _sqlite_type(kind.value_type)
    if pa.types.is_integer(kind) or pa.types.is_boolean(kind):
        return "INTEGER"
    if pa.types.is_floating(kind):
        return "REAL"
    if pa.types.is_binary(kind) or pa.types.is_large_binary(kind):
        return "BLOB"
    return "TEXT"


def _python_values(column: Any) -> list:
    """A column's values as SQLite takes them: unsigned 64-bit integers as the signed ones
    nsys's SQLite export stores (the same bits), booleans as 0/1."""
    import pyarrow as pa

    if pa.types.is_dictionary(column.type):
        column = column.dictionary_decode()
    if pa.types.is_uint64(column.type):
        column = column.view(pa.int64())
    elif pa.types.is_boolean(column.type):
        column = column.cast(pa.int8())
    return column.to_pylist()


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip() or type(exc).__name__
    return text.splitlines()[0]

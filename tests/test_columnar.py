"""nsys's Arrow and Parquet exports (`nsys export --type arrowdir|parquetdir`, #57) read through
census/sources/columnar.py: every census key equal to the SQLite route's on the H200 pair exported
all three ways by nsys 2025.3.1 (tests/data/columnar), the export made once per folder's files,
and bad input one line with exit code 1 (3 without pyarrow)."""

from __future__ import annotations

import json
import os
import shutil
import sys
import tarfile
from pathlib import Path

import pytest
from typer.testing import CliRunner

from census.cli import app
from census.errors import EXIT_BAD_INPUT, EXIT_TOOL_MISSING
from census.paths import cache_dir
from census.sources.columnar import columnar_target, export_columnar, table_files
from tests.helpers.files import DATA, fixture_file

runner = CliRunner()
ARCHIVE = DATA / "columnar" / "columnar-fixtures.tar.xz"
FIXTURES = ("h200_eager_3steps", "h200_compiled_3steps")
KINDS = ("arrowdir", "parquetdir")


@pytest.fixture(scope="module")
def exports(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The archive unpacked: NAME.sqlite, NAME-arrowdir/ and NAME-parquetdir/ of each fixture."""
    root = tmp_path_factory.mktemp("columnar")
    with tarfile.open(ARCHIVE) as tar:
        tar.extractall(root, filter="data")
    return root / "columnar"


def summary(path: Path) -> dict:
    r = runner.invoke(app, ["summary", str(path), "--json"])
    assert r.exit_code == 0, r.output
    return json.loads(r.stdout)


def refusal(args: list[str]) -> tuple[int, str]:
    r = runner.invoke(app, args)
    lines = r.output.strip().splitlines()
    assert len(lines) == 1, r.output
    return r.exit_code, lines[0]


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("name", FIXTURES)
def test_every_key_equal_to_sqlite(exports: Path, name: str, kind: str) -> None:
    sqlite, folder = summary(exports / f"{name}.sqlite"), summary(exports / f"{name}-{kind}")
    assert sqlite["source"].pop("path") == str(exports / f"{name}.sqlite")
    assert folder["source"].pop("path") == str(exports / f"{name}-{kind}")  # the folder named
    assert sqlite["totals"]["kernel_count"] > 100  # a real capture, not two empty ones
    assert folder == sqlite


@pytest.mark.parametrize("name", FIXTURES)
def test_equal_to_the_shared_fixture(exports: Path, name: str) -> None:
    """The same capture's SQLite export in the shared fixtures (the one the other tests read)."""
    shared, folder = (
        summary(fixture_file(f"{name}.sqlite")),
        summary(exports / f"{name}-parquetdir"),
    )
    shared["source"].pop("path"), folder["source"].pop("path")
    assert folder == shared


def test_diff_equal_to_sqlite(exports: Path) -> None:
    def diff(a: Path, b: Path) -> dict:
        r = runner.invoke(app, ["diff", str(a), str(b), "--json", "--labels", "eager,compiled"])
        assert r.exit_code == 0, r.output
        return json.loads(r.stdout)

    eager, compiled = FIXTURES
    sqlite = diff(exports / f"{eager}.sqlite", exports / f"{compiled}.sqlite")
    mixed = diff(exports / f"{eager}-arrowdir", exports / f"{compiled}-parquetdir")
    as_text = json.dumps(mixed)
    for name, kind in ((eager, "arrowdir"), (compiled, "parquetdir")):
        as_text = as_text.replace(str(exports / f"{name}-{kind}"), str(exports / f"{name}.sqlite"))
    assert json.loads(as_text) == sqlite


def test_dashboard_of_a_folder(exports: Path, tmp_path: Path) -> None:
    html = tmp_path / "eager.html"
    folder = exports / f"{FIXTURES[0]}-parquetdir"
    r = runner.invoke(app, ["dashboard", str(folder), "--html", str(html)])
    assert r.exit_code == 0, r.output
    assert html.read_text().startswith("<!DOCTYPE html>")


def test_export_made_once_and_again_when_a_table_changes(exports: Path, tmp_path: Path) -> None:
    folder = tmp_path / "eager-arrowdir"
    shutil.copytree(exports / f"{FIXTURES[0]}-arrowdir", folder)
    first = export_columnar(folder)
    assert first.parent == cache_dir() / "exports" and first.name.endswith(".columnar.sqlite")
    made_ns = first.stat().st_mtime_ns
    assert export_columnar(folder) == first and first.stat().st_mtime_ns == made_ns
    kernels = folder / "CUPTI_ACTIVITY_KIND_KERNEL.arrow"
    os.utime(kernels, ns=(kernels.stat().st_atime_ns, kernels.stat().st_mtime_ns + 10**9))
    assert export_columnar(folder) != first
    # only the tables census reads are copied: the enums and the threads' names are left
    assert sorted(table_files(folder, ".arrow")) == [
        "CUPTI_ACTIVITY_KIND_KERNEL", "CUPTI_ACTIVITY_KIND_MEMCPY", "CUPTI_ACTIVITY_KIND_MEMSET",
        "CUPTI_ACTIVITY_KIND_RUNTIME", "META_DATA_EXPORT", "NVTX_EVENTS", "StringIds",
        "TARGET_INFO_GPU", "TARGET_INFO_SESSION_START_TIME", "TARGET_INFO_SYSTEM_ENV",
    ]  # fmt: skip
    assert columnar_target(folder, table_files(folder, ".arrow")) == export_columnar(folder)


@pytest.mark.parametrize("kind", KINDS)
def test_half_the_tables(exports: Path, tmp_path: Path, kind: str) -> None:
    folder = tmp_path / kind
    shutil.copytree(exports / f"{FIXTURES[0]}-{kind}", folder)
    suffix = ".arrow" if kind == "arrowdir" else ".parquet"
    for table in ("StringIds", "META_DATA_EXPORT", "NVTX_EVENTS"):
        (folder / f"{table}{suffix}").unlink()
    code, line = refusal(["summary", str(folder), "--json"])
    assert code == EXIT_BAD_INPUT
    assert line == (
        f"Error: {folder}: an nsys {kind} export without StringIds{suffix}, "
        f"META_DATA_EXPORT{suffix} (every export holds it): was the export cut short? "
        "Export the report again"
    )
    assert not list((cache_dir() / "exports").glob(f"{kind}-*"))  # nothing left behind


@pytest.mark.parametrize("kind", KINDS)
def test_corrupt_table_file(exports: Path, tmp_path: Path, kind: str) -> None:
    folder = tmp_path / kind
    shutil.copytree(exports / f"{FIXTURES[0]}-{kind}", folder)
    suffix = ".arrow" if kind == "arrowdir" else ".parquet"
    kernels = folder / f"CUPTI_ACTIVITY_KIND_KERNEL{suffix}"
    data = kernels.read_bytes()
    kernels.write_bytes(data[: len(data) // 2])  # cut mid-file, as a copy that failed
    code, line = refusal(["summary", str(folder), "--json"])
    assert code == EXIT_BAD_INPUT
    what = "Arrow" if kind == "arrowdir" else "Parquet"
    assert line.startswith(f"Error: {kernels}: not a readable {what} table (")
    assert not list((cache_dir() / "exports").glob(f"{kind}-*"))


def test_both_kinds_in_one_folder(exports: Path, tmp_path: Path) -> None:
    folder = tmp_path / "both"
    shutil.copytree(exports / f"{FIXTURES[0]}-arrowdir", folder)
    shutil.copy(exports / f"{FIXTURES[0]}-parquetdir" / "StringIds.parquet", folder)
    code, line = refusal(["summary", str(folder)])
    assert code == EXIT_BAD_INPUT
    assert line == (
        f"Error: {folder}: holds both .arrow and .parquet tables of nsys; keep one export per folder"
    )


def test_without_pyarrow(exports: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "pyarrow", None)  # import pyarrow raises ImportError
    folder = exports / f"{FIXTURES[1]}-parquetdir"
    code, line = refusal(["summary", str(folder)])
    assert code == EXIT_TOOL_MISSING
    assert line == (
        f"Error: {folder}: reading an nsys Arrow/Parquet export needs pyarrow: "
        "`pip install pyarrow` (or give census the report's SQLite export: "
        "`nsys export --type sqlite`)"
    )


def test_a_table_without_a_column_census_reads(exports: Path, tmp_path: Path) -> None:
    import pyarrow.parquet as pq

    folder = tmp_path / "parquetdir"
    shutil.copytree(exports / f"{FIXTURES[0]}-parquetdir", folder)
    kernels = folder / "CUPTI_ACTIVITY_KIND_KERNEL.parquet"
    pq.write_table(pq.read_table(kernels).drop_columns(["shortName", "globalPid"]), kernels)
    code, line = refusal(["summary", str(folder)])
    assert code == EXIT_BAD_INPUT
    assert line == (
        f"Error: {kernels}: table CUPTI_ACTIVITY_KIND_KERNEL lacks column(s) globalPid, "
        "shortName: unsupported nsys schema"
    )


def test_a_folder_with_a_sqlite_export_reads_it(exports: Path, tmp_path: Path) -> None:
    """A capture folder's `.sqlite` is what it names, as before, whatever else it holds."""
    folder = tmp_path / "capture"
    shutil.copytree(exports / f"{FIXTURES[1]}-arrowdir", folder)
    shutil.copy(exports / f"{FIXTURES[0]}.sqlite", folder / "capture.sqlite")
    read = summary(folder)
    assert read["source"]["path"] == str(folder / "capture.sqlite")
    assert read["totals"] == summary(exports / f"{FIXTURES[0]}.sqlite")["totals"]

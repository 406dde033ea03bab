from __future__ import annotations

import lzma
import os
import shutil
from pathlib import Path

import pytest
from hypothesis import settings

# Fixtures live here; plain helpers in tests/helpers/ (test modules import those, never each
# other). The names below stay importable from here for tests written before the move.
from tests.helpers.files import DATA, FIXTURES, REPO, SHARED, fixture_file

__all__ = ["DATA", "FIXTURES", "REPO", "SHARED", "fixture_file"]

# CI runs the property tests on a fixed sequence of examples (a run that passed passes again);
# elsewhere each run draws new ones, and a failure found there becomes an @example.
settings.register_profile("ci", derandomize=True)
settings.load_profile("ci" if os.environ.get("CI") else "default")


@pytest.fixture(autouse=True)
def _isolated_cache(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv("CENSUS_CACHE_DIR", str(tmp_path_factory.mktemp("cache")))


@pytest.fixture
def fixture():
    return fixture_file


@pytest.fixture(scope="module")
def ab_demo(tmp_path_factory) -> Path:
    """The H200 `census ab --demo eager,compiled` experiment (8 arms, captures of the demo with
    census.phase ranges; backward launched from autograd's thread)."""
    folder = tmp_path_factory.mktemp("ab") / "demo"
    shutil.copytree(DATA / "ab-demo", folder, ignore=shutil.ignore_patterns("*.xz"))
    for side in ("a", "b"):
        packed = DATA / "ab-demo" / side / "capture.sqlite.xz"
        (folder / side / "capture.sqlite").write_bytes(lzma.decompress(packed.read_bytes()))
    return folder


@pytest.fixture
def export(tmp_path: Path) -> Path:
    """One step with one kernel (tests.helpers.exports.small_export)."""
    from tests.helpers.exports import small_export

    return small_export(tmp_path)


@pytest.fixture
def fallbacks(monkeypatch) -> list:
    """The rowid ranges census.sqlite.columns.read_batches leaves to SQL (the page reader's
    tests): recorded, then read with SQL as before."""
    from census.sqlite import columns

    asked, sql = [], columns._sql_batches

    def recorded(conn, table, names, rows, *rest):
        asked.append(rows)
        return sql(conn, table, names, rows, *rest)

    monkeypatch.setattr(columns, "_sql_batches", recorded)
    return asked

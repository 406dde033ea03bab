from __future__ import annotations

import lzma
import os
import shutil
from pathlib import Path

import pytest
from hypothesis import settings

# CI runs the property tests on a fixed sequence of examples (a run that passed passes again);
# elsewhere each run draws new ones, and a failure found there becomes an @example.
settings.register_profile("ci", derandomize=True)
settings.load_profile("ci" if os.environ.get("CI") else "default")

REPO = Path(__file__).resolve().parent.parent
SHARED = Path(os.environ.get("CENSUS_SHARED", REPO.parent / "shared"))
FIXTURES = SHARED / "fixtures" / "nsys"
DATA = Path(__file__).resolve().parent / "data"


@pytest.fixture(autouse=True)
def _isolated_cache(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv("CENSUS_CACHE_DIR", str(tmp_path_factory.mktemp("cache")))


def fixture_file(name: str) -> Path:
    path = FIXTURES / name
    if not path.exists():
        pytest.skip(f"shared fixture {path} is absent (needs ../shared beside the checkout)")
    return path


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

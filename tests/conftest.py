from __future__ import annotations

import os
from pathlib import Path

import pytest

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

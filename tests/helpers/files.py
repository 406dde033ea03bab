"""Where the tests' data lies: the checkout, ../shared (real nsys exports), tests/data."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
SHARED = Path(os.environ.get("CENSUS_SHARED", REPO.parent / "shared"))
FIXTURES = SHARED / "fixtures" / "nsys"
DATA = REPO / "tests" / "data"


def fixture_file(name: str) -> Path:
    """A shared fixture export; the test is skipped when ../shared is absent."""
    path = FIXTURES / name
    if not path.exists():
        pytest.skip(f"shared fixture {path} is absent (needs ../shared beside the checkout)")
    return path


# Programs the tests run (not modules they import): a stand-in nsys and a CPU training loop.
FAKE_NSYS = str(REPO / "tests" / "helpers" / "fake_nsys.py")
SLEEP_TRAIN = str(REPO / "tests" / "helpers" / "sleep_train.py")


_SCRATCH: list[Path] = []


def scratch_folder() -> Path:
    """A new folder for a built export where no tmp_path reaches (inside a hypothesis example):
    all of them under one folder of this test process, removed when it exits."""
    import atexit
    import shutil
    import tempfile

    if not _SCRATCH:
        _SCRATCH.append(Path(tempfile.mkdtemp(prefix="census-tests-")))
        atexit.register(shutil.rmtree, _SCRATCH[0], True)
    return Path(tempfile.mkdtemp(dir=_SCRATCH[0]))

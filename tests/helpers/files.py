"""Where the tests' data lies: the checkout, tests/data, and the real nsys exports: those of
../shared when it is beside the checkout, else the repository's copies of them."""

from __future__ import annotations

import lzma
import os
import shutil
import tempfile
import zlib
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
SHARED = Path(os.environ.get("CENSUS_SHARED", REPO.parent / "shared"))
# What Python says when another user runs the checkout but cannot read it (a clone under /root)
NO_CENSUS = "No module named 'census'"
DATA = REPO / "tests" / "data"
PACKED = DATA / "fixtures" / "nsys"  # the repository's copies, NAME.xz
CHECKSUMS = DATA / "fixtures" / "SHA256SUMS"  # of the unpacked files, as `sha256sum` writes


def unpacked_fixtures() -> Path:
    """The repository's fixture exports unpacked once, read-only, into a folder beside them
    named after SHA256SUMS (new copies, a new folder; git ignores it): in the checkout, not
    under /tmp, which the simulated nodes of tests/test_nodes.py hide. Built aside and renamed
    into place, so test processes starting together never see half of it."""
    key = zlib.crc32(CHECKSUMS.read_bytes())
    folder = PACKED.parent / f"unpacked-{key:08x}"
    if folder.is_dir():
        return folder
    fresh = Path(tempfile.mkdtemp(prefix=".unpacking-", dir=PACKED.parent))
    for packed in PACKED.glob("*.xz"):
        target = fresh / packed.stem
        target.write_bytes(lzma.decompress(packed.read_bytes()))
        target.chmod(0o444)  # inputs, as ../shared's are
    try:
        fresh.rename(folder)
    except OSError:  # another test process renamed its copy first
        shutil.rmtree(fresh)
    return folder


SHARED_FIXTURES = SHARED / "fixtures" / "nsys"
FIXTURES = SHARED_FIXTURES if SHARED_FIXTURES.is_dir() else unpacked_fixtures()


def fixture_file(name: str) -> Path:
    """A fixture export by name (tests/data/fixtures/README.md lists them)."""
    path = FIXTURES / name
    if not path.exists():
        raise FileNotFoundError(
            f"{path}: no such fixture (tests/data/fixtures/README.md lists them)"
        )
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

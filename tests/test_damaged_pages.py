"""Damaged pages of a real export's kernel table (#58): census gives SQLite's own scan of the
table or refuses the file in one line (exit 1) naming the file, the table and the page; never a
number from a page SQLite rejects. The two cases the issue met (a leaf's cell pointer past its
page; a rowid out of order in a leaf), then copies with a few bytes changed at random in one page
of the kernel table's b-tree (seeded), each checked against SQLite's scan of the same copy."""

from __future__ import annotations

import os
import random
import shutil
import sqlite3
from pathlib import Path

import pytest
from typer.testing import CliRunner

import census
from census.cli import app
from census.errors import CensusError
from census.sqlite.btree import walk

KERNEL = "CUPTI_ACTIVITY_KIND_KERNEL"
FUZZ_COPIES = int(os.environ.get("CENSUS_FUZZ_COPIES", "24"))  # 500 by hand: docs/robustness.md


@pytest.fixture(scope="module")
def source(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The bundled eager sample: a real H200 export (5,020 kernels, 4 KiB pages), unpacked into
    this module's own folder (a module fixture runs before the per-test cache folder is set, so
    sample_path would unpack into the user's cache, which other processes share)."""
    import lzma

    from census.sources.samples import SAMPLES_DIR

    path = tmp_path_factory.mktemp("sample") / "capture.sqlite"
    path.write_bytes(lzma.decompress((SAMPLES_DIR / "eager.sqlite.xz").read_bytes()))
    return path


def kernel_pages(path: Path) -> tuple[int, list[int]]:
    """(the kernel table's root page, its leaves in key order)."""
    conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    root = conn.execute("SELECT rootpage FROM sqlite_master WHERE name = ?", (KERNEL,)).fetchone()
    conn.close()
    with open(path, "rb") as fh:
        leaves = walk(fh, root[0], 4096, 4096, path.stat().st_size // 4096)
    return root[0], leaves.page.tolist()


def damaged_copy(source: Path, target: Path, changes: list[tuple[int, int, bytes]]) -> Path:
    """A writable copy of `source` with bytes changed: (page, offset in it, new bytes)."""
    shutil.copyfile(source, target)
    with open(target, "r+b") as fh:
        for page, offset, data in changes:
            fh.seek((page - 1) * 4096 + offset)
            fh.write(data)
    return target


def sqlite_scan(path: Path) -> tuple[int, int] | None:
    """SQLite's own scan of the kernel table: (rows, sum of end - start); None where it fails."""
    conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        count, total = conn.execute(f'SELECT count(*), sum("end" - start) FROM {KERNEL}').fetchone()
        return count, total or 0
    except sqlite3.DatabaseError:
        return None
    finally:
        conn.close()


def census_scan(path: Path) -> tuple[int, int] | CensusError:
    """census's kernel count and time, or its error."""
    try:
        totals = census.summarize(path, use_cache=False, workers=1).totals
    except CensusError as exc:
        return exc
    return totals.kernel_count, totals.kernel_time_ns


def cell_pointer(path: Path, page: int, nth: int) -> int:
    """Where cell `nth` of a leaf page starts in it."""
    with open(path, "rb") as fh:
        fh.seek((page - 1) * 4096 + 8 + 2 * nth)
        return int.from_bytes(fh.read(2), "big")


def assert_refused(path: Path, page: int | None, what: str, reader: str = "") -> None:
    """The CLI's one line, exit 1, naming the file, the table and the page (None: SQLite's
    error met first, naming the file)."""
    env = {"CENSUS_READER": reader, "CENSUS_NO_CACHE": "1"}
    result = CliRunner().invoke(app, ["summary", str(path), "--json"], env=env)
    assert result.exit_code == 1, result.output
    assert result.output.count("\n") == 1, result.output
    if page is None:
        assert result.output.startswith(f"Error: {path}: {what}"), result.output
    else:
        assert f"{path}: damaged SQLite file: {KERNEL}, page {page}: {what}" in result.output


@pytest.mark.parametrize("pointer", [b"\xff\xff", b"\x0f\xff"])
@pytest.mark.parametrize("reader", ["", "sql"])
def test_cell_pointer_past_the_page(source, tmp_path, pointer, reader):
    """A leaf's cell pointer of 65535 or 4095 (past a 4 KiB page): SQLite's scan fails; census
    read the rows before that leaf (SQLite's rowid-range scan stops there without an error) and
    now refuses the file."""
    _, leaves = kernel_pages(source)
    path = damaged_copy(source, tmp_path / "pointer.sqlite", [(leaves[3], 8, pointer)])
    assert sqlite_scan(path) is None
    assert_refused(path, leaves[3], "a cell pointer past its page", reader)


@pytest.mark.parametrize("reader", ["", "sql"])
def test_rowid_out_of_order(source, tmp_path, reader):
    """The first kernel's rowid 1 made 50: SQLite's scan counts all the rows (integrity_check
    says "Rowid 50 out of order"); census lost the rows of rowid 2..49 to the range MIN(rowid)
    gave, and now refuses the file."""
    _, leaves = kernel_pages(source)
    cell = cell_pointer(source, leaves[0], 0)
    path = damaged_copy(source, tmp_path / "rowid.sqlite", [(leaves[0], cell + 1, b"\x32")])
    assert sqlite_scan(path) == sqlite_scan(source)
    assert_refused(path, leaves[0], "rowids out of order", reader)


def test_child_page_loop(source, tmp_path):
    """An interior page whose right child is itself: a loop SQLite rejects (here before census
    walks the tree: MIN(rowid) meets it), one line all the same."""
    root, _ = kernel_pages(source)
    path = damaged_copy(source, tmp_path / "loop.sqlite", [(root, 8, root.to_bytes(4, "big"))])
    assert sqlite_scan(path) is None
    assert_refused(
        path, None, "corrupt or truncated SQLite file (database disk image is malformed)"
    )


def mutation(rng: random.Random, pages: list[int]) -> list[tuple[int, int, bytes]]:
    """1 to 4 random bytes in one of `pages`, each at a random offset, or half the time in its
    first 256 bytes (the header and cell pointers, where a byte changes the page's structure)."""
    page = rng.choice(pages)
    return [(page, rng.randrange(rng.choice([256, 4096])), bytes([rng.randrange(256)]))
            for _ in range(rng.randint(1, 4))]  # fmt: skip


def test_fuzzed_kernel_pages(source, tmp_path):
    """FUZZ_COPIES copies, each with 1 to 4 bytes changed in one page of the kernel table's
    b-tree (the root or a leaf; seeded: mutation): census equals SQLite's scan of the copy, or
    refuses it in one line naming the file (exit 1); where SQLite's scan fails, census always
    refuses."""
    rng = random.Random(58)
    root, leaves = kernel_pages(source)
    outcomes = {"equal": 0, "refused": 0}
    for i in range(FUZZ_COPIES):
        changes = mutation(rng, [root, *leaves])
        path = damaged_copy(source, tmp_path / f"fuzz{i}.sqlite", changes)
        want, got = sqlite_scan(path), census_scan(path)
        if isinstance(got, CensusError):
            assert got.exit_code == 1 and "\n" not in str(got) and str(path) in str(got), got
            outcomes["refused"] += 1
        else:
            assert got == want, (changes, got, want)
            outcomes["equal"] += 1
        path.unlink()
    assert sum(outcomes.values()) == FUZZ_COPIES

"""Exports the tests build (with tests/nsysdb.py) or unpack, shared by several test modules."""

from __future__ import annotations

import json
import lzma
import sqlite3
import subprocess
import sys
import tempfile
from pathlib import Path

from census.sources.samples import sample_path
from tests.helpers.files import DATA, FIXTURES, REPO, fixture_file
from tests.nsysdb import Export

MS = 1_000_000


def small_export(tmp_path: Path) -> Path:
    """One step with one kernel: the smallest export census gives a census of."""
    e = Export()
    e.range("step 0", 0, 100)
    e.launch("k", 1, 10, 20)
    return e.write(tmp_path / "ok.sqlite")


def generated(folder: Path, kernels: int) -> Path:
    """An export of about `kernels` kernels made by bench/generate.py (the bundled eager
    capture's rows replicated, as the bench makes its 10^6 and 10^7 files), in `folder`."""
    target = folder / f"generated-{kernels}.sqlite"
    if not target.exists():
        subprocess.run([sys.executable, str(REPO / "bench" / "generate.py"), "--kernels",
                        str(kernels), "-o", str(target)], check=True, capture_output=True)  # fmt: skip
    return target


def without_rowid(source: Path, target: Path, keys: dict[str, str]) -> Path:
    """A copy of `source` in which each table of `keys` is a table WITHOUT ROWID whose primary
    key is the given one (`"correlationId, start DESC"`), with the same rows."""
    import shutil

    shutil.copy(source, target)
    conn = sqlite3.connect(target)
    for table, key in keys.items():
        ddl = conn.execute("SELECT sql FROM sqlite_master WHERE name = ?", (table,)).fetchone()[0]
        body = ddl[ddl.index("(") + 1 : ddl.rindex(")")].replace("PRIMARY KEY", "")
        conn.execute(f'ALTER TABLE "{table}" RENAME TO old')
        conn.execute(f'CREATE TABLE "{table}" ({body}, PRIMARY KEY ({key})) WITHOUT ROWID')
        conn.execute(f'INSERT INTO "{table}" SELECT * FROM old')
        conn.execute("DROP TABLE old")
    conn.commit()
    conn.execute("VACUUM")
    conn.close()
    return target


def unpacked(xz: Path) -> Path:
    """An xz-compressed capture of our own (made on the H200 with `census capture`), unpacked:
    ddp/rank0 from `--demo ddp-eager` through torchrun; engine/ from `--demo eager|compiled`
    (5 warm-up + 20 steps), captured to check the columnar engine."""
    target = Path(tempfile.gettempdir()) / f"census-test-{xz.parent.name}-{xz.stem}"
    if not target.exists():
        target.write_bytes(lzma.decompress(xz.read_bytes()))
    return target


def launch_bound(name: str) -> Path:
    """The launch-bound demo's capture folder (`eager` or `compiled`: a 4-layer transformer at 4k
    tokens a step, 20 steps, calibrated; the bundled samples until the demo grew GPU-bound),
    unpacked: a real host-bound capture whose host never ran ahead."""
    folder = DATA / "launch-bound" / name
    target = Path(tempfile.gettempdir()) / f"census-test-launch-bound-{name}"
    if not (target / "capture.sqlite").exists():
        target.mkdir(exist_ok=True)
        (target / "run.json").write_bytes((folder / "run.json").read_bytes())
        part = target / "capture.sqlite.part"
        part.write_bytes(lzma.decompress((folder / "capture.sqlite.xz").read_bytes()))
        part.rename(target / "capture.sqlite")
    return target


def real_exports() -> list[Path]:
    """Every real export at hand: the fixtures (../shared's or their copies), the bundled samples, our
    own engine captures and the launch-bound demo's."""
    found = sorted(FIXTURES.glob("*.sqlite"))
    ours = [unpacked(DATA / "engine" / f"{n}.sqlite.xz") for n in ("eager", "compiled")]
    bound = [launch_bound(n) / "capture.sqlite" for n in ("eager", "compiled")]
    return found + [sample_path(n) / "capture.sqlite" for n in ("eager", "compiled")] + ours + bound


def build_run_ahead(tmp_path: Path, steps: int = 5) -> Path:
    """Step k's range is [4k, 4k + 3] ms; in it the host launches three kernels (3, 3 and 4 ms
    of GPU work) without waiting. The GPU runs them back to back, so it falls behind: step k's
    kernels start when step k-1's end, at 1000 ns + 10k ms."""
    e = Export()
    gpu = 0
    for k in range(steps):
        start = 4 * MS * k
        e.range(f"step {k}", start, start + 3 * MS)
        for i, (at, length) in enumerate(((100, 3 * MS), (MS, 3 * MS), (2 * MS, 4 * MS))):
            begin = max(start + at + 900, gpu)  # a queue: after the launch, after the last one
            e.launch(f"k{i}", start + at, begin, begin + length)
            gpu = begin + length
    return e.write(tmp_path / "ahead.sqlite")


def rank_folder(tmp_path: Path, *names: str) -> Path:
    """A multi-rank capture folder as `census capture` writes it: rankN.sqlite and a run.json
    that maps each rank to its export."""
    folder = tmp_path / "cap"
    folder.mkdir(parents=True)
    for i, name in enumerate(names):
        (folder / f"rank{i}.sqlite").symlink_to(fixture_file(name))
    ranks = {str(i): f"rank{i}.sqlite" for i in range(len(names))}
    (folder / "run.json").write_text(json.dumps({"calibration": None, "ranks": ranks}), "utf-8")
    return folder


def capture_folder(folder: Path, packed: Path, run_json: Path) -> Path:
    """A capture folder as census capture leaves one, from a packed export (`.sqlite.xz`) and
    its run.json: `folder`/capture.sqlite and `folder`/run.json."""
    folder.mkdir(parents=True)
    (folder / "capture.sqlite").write_bytes(lzma.decompress(packed.read_bytes()))
    (folder / "run.json").write_bytes(run_json.read_bytes())
    return folder


def query(path: Path, sql: str) -> list[tuple]:
    """The rows `sql` reads from the export at `path`, opened read-only."""
    conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        return conn.execute(sql).fetchall()
    finally:
        conn.close()

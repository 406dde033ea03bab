"""When the machine runs out: a memory limit, the file size limit, a full temporary folder or
disk. census, as a user runs it, under real limits (set in its preexec_fn) and on real file
systems (a small tmpfs, where this machine lets the tests mount one): one line naming what ran
out and where, the README's exit code (71 memory, 73 space and file size), never 70, no
traceback, and no process census started alive 1 s after it exits (tests/helpers/reaper.py)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from census.sources.samples import sample_path
from tests.helpers.disks import small_tmpfs
from tests.helpers.exports import generated
from tests.helpers.files import REPO
from tests.helpers.reaper import Reaped, reaped

pytestmark = pytest.mark.skipif(sys.platform != "linux", reason="limits and /proc are Linux's")
MIB = 1 << 20


@pytest.fixture(scope="module")
def big(tmp_path_factory) -> Path:
    """A real export large enough to be read by worker processes that spill (200,800 kernels,
    37 MiB: bench/generate.py)."""
    return generated(tmp_path_factory.mktemp("big"), 200_000)


def census(*args: str, tmp: Path, **kwargs) -> Reaped:
    """`python -m census ARGS` with its temporary folder `tmp`, reaped."""
    env = {**os.environ, "TMPDIR": str(tmp), "OPENBLAS_NUM_THREADS": "1"}
    return reaped([sys.executable, "-m", "census", *args], env=env, **kwargs)


def assert_one_line(run: Reaped, code: int, start: str) -> str:
    """The run failed as one line starting with `start` and exit `code`, leaving no process."""
    assert run.code == code, run.stderr[-3000:]
    assert len(run.lines) == 1 and run.lines[0].startswith(start), run.stderr[-3000:]
    assert run.left == []
    return run.lines[0]


# Memory


IMPORTS = ("census.cli.fast", "census.api", "census.load.profile", "census.load.pool",
           "census.load.finish", "census.render.json_docs", "census.store.cache", "sqlite3")  # fmt: skip


def imports_vm() -> int:
    """The address space a census process has once the summary's modules are loaded."""
    code = f"import {', '.join(IMPORTS)}; print(open('/proc/self/status').read())"
    env = {**os.environ, "OPENBLAS_NUM_THREADS": "1"}
    status = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                            check=True, env=env, cwd=REPO).stdout  # fmt: skip
    line = next(ln for ln in status.splitlines() if ln.startswith("VmPeak:"))
    return int(line.split()[1]) * 1024


def test_a_memory_limit_is_one_line_and_exit_71(big: Path, tmp_path: Path) -> None:
    """A summary needs ~160 MiB past its modules here: 16 MiB more than they take runs out in
    the passes, in census's process or a worker's."""
    limit = imports_vm() + 16 * MIB
    run = census("summary", str(big), "--json", tmp=tmp_path, limits={"RLIMIT_AS": limit})
    line = assert_one_line(run, 71, "Error: out of memory under the memory limit (ulimit -v: ")
    assert line.endswith("; raise the limit or free memory")
    assert list(tmp_path.iterdir()) == []


WORKER_DIES = """
import os, signal, sys, time
from pathlib import Path
from census.cli.stdout import error_exit
from census.load.pool import Runner
from census.sources.readonly import open_readonly

def job(conn, stuck, job, tick):
    if job == 0:  # killed outright, as the OOM killer does, once the other job is under way
        time.sleep(0.5)
        os.kill(os.getpid(), signal.SIGKILL)
    if stuck:  # a worker that SIGTERM does not end (one blocked on a result nobody reads)
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        time.sleep(300)
    return job

def terminate(signum, frame):  # what census's command line does with SIGTERM
    raise KeyboardInterrupt

signal.signal(signal.SIGTERM, terminate)
path = Path(sys.argv[2])
try:
    Runner(open_readonly(path), path, 2, lambda *a: None).map(job, sys.argv[1] == "stuck",
                                                              [0, 1], 2, "")
except BaseException as exc:
    sys.exit(error_exit(exc))
"""


@pytest.mark.parametrize("other", ["idle", "stuck"])
def test_a_worker_killed_outright_is_one_line_and_exit_71(tmp_path: Path, other: str) -> None:
    """The other worker idle (the pool's SIGTERM ended it through census's handler: a
    KeyboardInterrupt traceback) or stuck (the pool waited on it for ever)."""
    script = tmp_path / "dies.py"
    script.write_text(WORKER_DIES)
    export = sample_path("eager") / "capture.sqlite"  # the workers open it; the jobs read nothing
    run = reaped([sys.executable, str(script), other, str(export)], timeout=30,
                 env={**os.environ, "TMPDIR": str(tmp_path)})  # fmt: skip
    line = assert_one_line(run, 71, "Error: out of memory: a worker process was killed by SIGKILL")
    assert "out-of-memory killer" in line


# The file size limit


def test_the_file_size_limit_is_one_line_and_exit_73(big: Path, tmp_path: Path) -> None:
    run = census("summary", str(big), "--json", tmp=tmp_path, limits={"RLIMIT_FSIZE": 256 << 10})
    line = assert_one_line(run, 73, "Error: the file size limit (ulimit -f: 256.00 KiB) stopped "
                                    f"census writing {tmp_path}/census-")  # fmt: skip
    assert line.endswith(": raise it (ulimit -f unlimited)")
    assert list(tmp_path.iterdir()) == []


# A full temporary folder or disk


def test_a_full_temporary_folder_is_one_line_and_exit_73(big: Path, tmp_path: Path) -> None:
    with small_tmpfs(tmp_path / "tmp") as tmp:
        run = census("summary", str(big), "--json", tmp=tmp)
        line = assert_one_line(run, 73, "Error: no space left in the temporary folder (TMPDIR "
                                        f"at {tmp}: 1.00 MiB, ")  # fmt: skip
        assert f"(writing {tmp}/census-" in line
        assert line.endswith("; free space there, or set TMPDIR to a folder with room for "
                             "census's temporary files")  # fmt: skip
        assert list(tmp.iterdir()) == []


def test_a_report_on_a_full_disk_is_one_line_and_exit_73(tmp_path: Path) -> None:
    (tmp_path / "tmp").mkdir()
    with small_tmpfs(tmp_path / "disk", "256k") as disk:
        run = census("dashboard", "sample:eager", "--html", str(disk / "report.html"),
                     tmp=tmp_path / "tmp")  # fmt: skip
        line = assert_one_line(run, 73, f"Error: no space left on the disk at {disk} (256.00 KiB, ")
        assert f"(writing {disk}/report.html); free space there (the report takes " in line
        assert list(disk.iterdir()) == []

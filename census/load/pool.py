"""The one place census starts processes: forked workers over the rowid ranges of one export
(Runner), and a pool over independent jobs such as the exports of a rank folder (map_processes).

Runner's workers are forked, so they inherit what a pass shares (the step index, the API map)
instead of receiving copies; each opens its own read-only connection and reports the rows it has
read through a shared counter.

Workers die with census, however it ends: on Linux the kernel kills them when their parent dies
(PR_SET_PDEATHSIG), elsewhere each watches its parent. A census killed outright (kill -9, the OOM
killer) cannot remove its spill folder: the folder carries its pid, and the next pass that spills
removes the folders of pids that are gone.
"""

from __future__ import annotations

import contextlib
import ctypes
import multiprocessing
import os
import re
import shutil
import signal
import sqlite3
import sys
import tempfile
import threading
import time
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any, Protocol

import numpy as np

from census.errors import ran_out
from census.heap import keep_heap, trim_heap
from census.load.workers import Workers, broke
from census.paths import owner_tag, pid_alive, writing
from census.sources.export import Progress
from census.sqlite import notes

MAX_WORKERS = 8


def default_workers() -> int:
    """The worker processes to read with: $CENSUS_WORKERS, else one per core up to
    MAX_WORKERS."""
    env = os.environ.get("CENSUS_WORKERS", "")
    if env.isdigit() and int(env) > 0:
        return int(env)
    return max(1, min(MAX_WORKERS, os.cpu_count() or 1))


def map_processes(fn: Callable[[Any], Any], jobs: list, workers: int) -> list:
    """fn(job) for each job, in order: in this process when one worker suffices, else in a pool
    (fn must be a module-level function)."""
    if workers <= 1 or len(jobs) <= 1:
        return [fn(j) for j in jobs]
    ctx = multiprocessing.get_context()
    # a forkserver's children are its own, not census's: they die with it, and it with census
    parent = None if ctx.get_start_method() == "forkserver" else os.getpid()
    pool = Workers(workers, ctx, die_with_parent, (parent,))
    try:
        return pool.results([pool.submit(fn, job) for job in jobs])
    finally:
        pool.close()


def alone() -> bool:
    """Whether this process runs no other thread, as a process beside needs: one forked while
    another thread holds a lock (a module's import lock, say) would wait on it forever (a
    progress bar on a terminal, a caller's threads)."""
    return threading.active_count() <= 1


class SideProcess:
    """fn(*args) in a process of its own while this one goes on (a diff's second side, read
    while this process reads the first): `result()` is its value, or None when it failed in any
    way (the caller computes it again here, where its error is raised as it would be). The
    process dies with census, and `stop()` (also on leaving a `with`) kills it if it still
    runs. Where no process can be started (inside a daemonic process, such as a
    multiprocessing.Pool's worker), nothing runs and `result()` is None."""

    def __init__(self, fn: Callable[..., Any], *args: Any) -> None:
        ctx = multiprocessing.get_context("fork" if hasattr(os, "fork") else None)
        self._conn, child = ctx.Pipe(duplex=False)
        self._process: Any = ctx.Process(target=_side_process, args=(child, os.getpid(), fn, args))
        try:
            self._process.start()
        except (AssertionError, OSError):  # daemonic processes may not have children
            self._process = None
        child.close()

    def result(self) -> Any:
        """fn's value, once the process has sent it (the process then ends); None when it
        failed, died or never started."""
        if self._process is None:
            self.stop()
            return None
        try:
            ok, value = self._conn.recv()
        except (EOFError, OSError):  # it died without a word (killed, out of memory)
            return None
        finally:
            self.stop()
        return value if ok else None

    def stop(self) -> None:
        """End the process: SIGTERM, which it turns into SystemExit so that its own workers and
        spill folder go as on Ctrl-C, then SIGKILL if it has not ended after STOP_S."""
        if self._process is not None:
            if self._process.is_alive():
                self._process.terminate()
                self._process.join(STOP_S)
            if self._process.is_alive():
                self._process.kill()
            self._process.join()
        self._conn.close()

    def __enter__(self) -> SideProcess:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


STOP_S = 5  # how long a process beside may take to clean up after SIGTERM


def _side_process(conn: Any, parent: int, fn: Callable[..., Any], args: tuple) -> None:
    die_with_parent(parent)
    keep_heap()
    signal.signal(signal.SIGTERM, _exit_cleanly)
    try:
        value = (True, fn(*args))
    except BaseException:
        value = (False, None)
    with contextlib.suppress(Exception):
        conn.send(value)
    conn.close()


def _exit_cleanly(*_: object) -> None:
    raise SystemExit(1)  # through every `finally` and `with` (the workers, the spill folder)


PR_SET_PDEATHSIG = 1  # from <linux/prctl.h>
WATCH_S = 0.5


def die_with_parent(parent: int | None) -> None:
    """First thing in a worker: it ends when census does, even when census is killed outright
    (kill -9, the OOM killer), and never lives on as an orphan holding the export open. Ctrl-C
    is census's to handle (it stops the workers); SIGTERM and SIGHUP end a worker at once, not
    through the handler it inherits from census's command line (a KeyboardInterrupt and its
    traceback in each worker the pool stops)."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    for signum in (signal.SIGTERM, getattr(signal, "SIGHUP", None)):
        if signum is not None and signal.getsignal(signum) is not signal.SIG_IGN:
            signal.signal(signum, signal.SIG_DFL)
    if parent is None:
        return
    if not _kill_on_parent_death():
        threading.Thread(target=_watch_parent, args=(parent,), daemon=True).start()
    if os.getppid() != parent:  # the parent died before the worker could arm either
        os._exit(1)


def _kill_on_parent_death() -> bool:
    """Ask Linux to SIGKILL this process when its parent dies; False where it cannot."""
    if not sys.platform.startswith("linux"):
        return False
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        return libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0) == 0
    except (OSError, AttributeError):
        return False


def _watch_parent(parent: int) -> None:
    while os.getppid() == parent:  # an orphan is adopted: its parent pid changes
        time.sleep(WATCH_S)
    os._exit(1)


# A spill folder is census-PID-HOST-RANDOM (census.paths.owner_tag; RANDOM is mkdtemp's 8 of
# [a-z0-9_]): the process and the host whose it is.
_SPILL_NAME = re.compile(r"census-(\d{1,10})-([0-9a-f]{8})-[a-z0-9_]{8}")


_swept: set[str] = set()  # the folders this process (or the one it was forked from) swept


def make_spill_folder() -> str:
    """A new spill folder of this process in the temporary folder ($TMPDIR, else the system's),
    after sweeping dead ones: once per process (a summary makes five; a temporary folder of
    10,000 entries took 6 ms to read each time). Not a memory file system by choice: what
    census spills (at 3x10^7 kernels up to ~1 GB at once) is then the page cache's, which the
    system can take back, not memory held outside census's processes (/dev/shm: measured no
    faster; where $TMPDIR is a tmpfs, the spill is in memory all the same)."""
    root = tempfile.gettempdir()
    if root not in _swept:
        sweep_spill_folders(root)
        _swept.add(root)
    return tempfile.mkdtemp(prefix=f"census-{owner_tag()}-", dir=root)


def sweep_spill_folders(folder: str | None = None) -> list[str]:
    """Remove the temporary folders (a pass's spill folder, an experiment's arm records) that
    census processes of this host, now gone, left in `folder` (by default the temporary
    folder; killed outright, they could not): only folders named by census's pattern and owned
    by this user. Returns the folders removed."""
    folder = folder or tempfile.gettempdir()
    host = owner_tag().split("-")[1]
    removed = []
    with contextlib.suppress(OSError), os.scandir(folder) as entries:
        for entry in entries:
            match = _SPILL_NAME.fullmatch(entry.name)
            if match is None or match[2] != host or pid_alive(int(match[1])):
                continue
            with contextlib.suppress(OSError):
                if (
                    entry.is_dir(follow_symlinks=False)
                    and entry.stat(follow_symlinks=False).st_uid == os.getuid()
                ):
                    shutil.rmtree(entry.path, ignore_errors=True)
                    removed.append(entry.path)
    return removed


_inherited: dict = {}  # what forked workers find: the export's path, the pass's shared data


class Runner:
    """Runs fn(conn, shared, job, tick) for each job: inline, or in forked worker processes."""

    def __init__(self, conn: sqlite3.Connection, path: Path, size: int, progress: Progress,
                 side_work: Callable[[], Any] | None = None) -> None:  # fmt: skip
        if "fork" not in multiprocessing.get_all_start_methods():
            size = 1  # workers inherit by fork; where there is none (Windows), one process
        self.conn, self.path, self.size, self.progress = conn, path, size, progress
        # two ranges per worker: one that finishes early takes the next
        self.jobs = 1 if size <= 1 else 2 * size
        self._side_work, self._side_result = side_work, None  # this process's: run once

    def side_result(self) -> Any:
        """The result of the side work (work for this process while its workers read), run
        now unless it has run (None without any)."""
        if self._side_work is not None:
            work, self._side_work = self._side_work, None
            self._side_result = work()
            trim_heap()  # its temporaries: not held while the workers run
        return self._side_result

    def map(self, fn, shared, jobs: list, total: int, label: str) -> list:
        """fn's result for each job, in order (start, then wait for them)."""
        return self.start(fn, shared, jobs, total, label).result()

    def start(self, fn, shared, jobs: list, total: int, label: str) -> Started:
        """The jobs started (in forked workers) while this process goes on; result() waits for
        them, close() stops them. Inline, they run at result()."""
        if self.size <= 1 or len(jobs) <= 1:
            return _Inline(self, fn, shared, jobs, total, label)
        return _Forked(self, fn, shared, jobs, total, label)


class Started(Protocol):
    """Jobs under way: their results, or stopped."""

    def result(self) -> list:
        """Each job's result, in order, once all are done."""
        ...

    def close(self) -> None:
        """Stop what is still running (nothing once result() has returned)."""


class _Inline:
    def __init__(self, runner: Runner, fn, shared, jobs: list, total: int, label: str):
        self.args = (runner, fn, shared, jobs, total, label)

    def result(self) -> list:
        runner, fn, shared, jobs, total, label = self.args
        runner.progress(label, 0, total)
        done = [0]

        def tick(n: int) -> None:
            done[0] += n
            runner.progress(label, done[0], total)

        return [fn(runner.conn, shared, job, tick) for job in jobs]

    def close(self) -> None:
        pass


class _Forked:
    def __init__(self, runner: Runner, fn, shared, jobs: list, total: int, label: str):
        self.progress, self.total, self.label = runner.progress, total, label
        self.progress(label, 0, total)
        ctx = multiprocessing.get_context("fork")
        self.counter = ctx.Value("q", 0)
        self.pool: Workers | None = None
        self.spill = make_spill_folder()
        try:
            _inherited.update(path=runner.path, shared=shared, counter=self.counter,
                              spill=self.spill, parent=os.getpid())  # fmt: skip
            trim_heap()  # workers do not inherit the heap's free memory
            # A worker that dies (killed for memory, say) breaks the pool: its job fails with
            # BrokenProcessPool instead of being waited for forever.
            self.pool = Workers(min(runner.size, len(jobs)), ctx, _open_worker)
            with warnings.catch_warnings():
                # Python 3.12+ warns about forking a process that has threads (numpy's);
                # workers touch no lock those threads hold: they read SQLite and run numpy.
                warnings.simplefilter("ignore", DeprecationWarning)
                self.pending = [self.pool.submit(_run_job, fn, job) for job in jobs]
        except BaseException as exc:
            self.close()
            raise (ran_out(exc) or exc) from None

    def result(self) -> list:
        assert self.pool is not None
        pending, self.pending = self.pending, []  # the caller owns the results
        try:
            done = self.pool.results(pending, self._waiting)
        finally:
            self.close()
        for _, told in done:  # what each job noted (a table read with SQL): as if noted here
            notes.add(told)
        return [result for result, _ in done]

    def _waiting(self) -> None:
        self.progress(self.label, self.counter.value, self.total)

    def close(self) -> None:
        """A failed range, Ctrl-C or a caller that gave up: the other jobs' work is moot."""
        if self.pool is not None:
            self.pool.close()
            self.pool = None
        _inherited.clear()
        shutil.rmtree(self.spill, ignore_errors=True)


def _open_worker() -> None:
    from multiprocessing.reduction import ForkingPickler

    die_with_parent(_inherited["parent"])
    keep_heap()
    try:
        from census.sources.readonly import open_readonly

        _inherited["conn"] = open_readonly(_inherited["path"])
    except Exception as exc:  # raised by the first job: the pool's own report is a traceback
        _inherited["failed"] = exc
    ForkingPickler.register(np.ndarray, _spill_array)


SPILL_BYTES = 1 << 20


def _spill_array(a: np.ndarray):
    """Large result arrays travel as .npy files (one write, one mapped read), not through a
    pipe as pickled bytes (four copies)."""
    if a.nbytes < SPILL_BYTES or a.dtype.hasobject:  # Python ints cannot be mapped back
        return a.__reduce__()
    with writing(_inherited["spill"]):
        fd, name = tempfile.mkstemp(suffix=".npy", dir=_inherited["spill"])
    try:
        with writing(name), os.fdopen(fd, "wb") as fh:
            np.save(fh, np.ascontiguousarray(a))
    except BaseException:
        os.unlink(name)  # what was written of it: no more of a full folder's room
        raise
    return _unspill, (name,)


def _unspill(name: str) -> np.ndarray:
    """A spilled array, mapped (read in census's process, by the pool's thread: what fails
    here breaks the pool, and workers.broke keeps why)."""
    try:
        a = np.load(name, mmap_mode="r")
    except (MemoryError, OSError) as exc:
        broke.append(ran_out(exc, name) or exc)
        raise
    os.unlink(name)
    return a


def _run_job(fn, job):
    """(fn's result, the notes the job made: census.sqlite.notes)."""
    if "failed" in _inherited:
        raise ran_out(_inherited["failed"]) or _inherited["failed"]
    notes.taken()  # the parent's, inherited when it forked: its own
    try:
        return _job(fn, job), notes.taken()
    except Exception as exc:  # what ran out, said in one line, not a worker's MemoryError
        resource = ran_out(exc)
        if resource is None:
            raise
    raise resource


def _job(fn, job):
    counter = _inherited["counter"]

    def tick(n: int) -> None:
        with counter.get_lock():
            counter.value += n

    return fn(_inherited["conn"], _inherited["shared"], job, tick)

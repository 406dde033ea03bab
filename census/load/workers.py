"""A process pool (concurrent.futures) that fails as one line, for census.load.pool.

A worker's error comes back with its cause (census.errors.ran_out: out of memory, out of
space); a worker that died outright is named by how it ended (SIGKILL: the kernel's OOM killer);
a result census's process cannot read back (a spilled array it cannot map) and a pool thread
that could not start (no memory for its stack) say so too, where concurrent.futures would only
say BrokenProcessPool, print a traceback, or wait for ever. A pool that failed is never waited
on: its workers are killed.
"""

from __future__ import annotations

import contextlib
import signal
import threading
import time
from collections.abc import Callable
from concurrent.futures import FIRST_EXCEPTION, Future, ProcessPoolExecutor, wait
from concurrent.futures.process import BrokenProcessPool
from concurrent.futures.process import _ExecutorManagerThread as _ManagerThread
from multiprocessing.connection import wait as mp_wait
from typing import Any

from census.errors import memory_limited, out_of_memory, ran_out


class Workers:
    """A ProcessPoolExecutor of `size` workers, failing as one line (the module's docstring)."""

    def __init__(self, size: int, ctx: Any, initializer: Callable[..., None], initargs: tuple = ()):
        broke.clear()
        self.pool: ProcessPoolExecutor | None = ProcessPoolExecutor(size, ctx, initializer=initializer,
                                                                    initargs=initargs)  # fmt: skip
        self.done = False  # every result came back
        self._seen: dict[int, Any] = {}  # the pool's worker processes, as started
        self._hook = threading.excepthook  # put back by close()
        if self._hook is not _pool_thread_failed:
            _other_threads[0] = self._hook
            threading.excepthook = _pool_thread_failed

    def submit(self, fn: Callable[..., Any], *args: Any) -> Future:
        """fn(*args) in the pool: its future (the pool's processes noted as they start)."""
        assert self.pool is not None
        try:
            return self.pool.submit(fn, *args)
        finally:  # its processes start here, even where its thread then cannot
            self._seen.update(getattr(self.pool, "_processes", None) or {})

    def results(self, futures: list[Future], waiting: Callable[[], None] | None = None) -> list:
        """Each future's result, in order; `waiting()` every WAIT_S meanwhile (progress). The
        first failure is raised as soon as it is known, as its cause."""
        try:
            while not all(f.done() for f in futures):
                wait(futures, timeout=WAIT_S, return_when=FIRST_EXCEPTION)
                if waiting is not None:
                    waiting()
                if any(f.done() and not f.cancelled() and f.exception() for f in futures):
                    break
                if not self._running():
                    raise BrokenProcessPool("the pool's thread ended")
            out = [f.result() for f in futures]  # re-raises a worker's exception here
        except BaseException as exc:
            raise failure(exc, list(self._seen.values())) from None
        self.done = True
        return out

    def _running(self) -> bool:
        """Whether the pool's thread, which hands out jobs and takes results, still runs (it
        dies where it cannot start a thread of its own, under a memory limit)."""
        thread = getattr(self.pool, "_executor_manager_thread", None)
        return thread is None or thread.is_alive()

    def close(self) -> None:
        """Stop the pool: at once, killing its workers, unless every result came back."""
        if self.pool is None:
            return
        if not self.done:
            for proc in list(self._seen.values()):
                with contextlib.suppress(Exception):
                    proc.kill()
                    proc.join(KILL_S)
        with contextlib.suppress(RuntimeError):  # its thread never started: nothing to wait on
            self.pool.shutdown(wait=True, cancel_futures=True)
        self.pool = None
        threading.excepthook = self._hook


WAIT_S = 0.2
KILL_S = 10.0  # for a killed worker to be gone (one in the kernel's hands takes a while)
broke: list[BaseException] = []  # why the pool broke, as said here (pool._unspill, its thread)


def _pool_thread_failed(args: Any) -> None:
    """threading.excepthook while a pool runs: what ends a pool's thread is kept (its cause,
    said by Workers.results), not printed as a traceback."""
    if isinstance(args.thread, _ManagerThread):
        broke.append(ran_out(args.exc_value) or args.exc_value)
    else:
        _other_threads[0](args)


_other_threads = [threading.excepthook]  # what _pool_thread_failed hands other threads to


def failure(exc: BaseException, workers: list) -> BaseException:
    """What a pool's failure `exc` tells the user: the machine's resource that ran out, in one
    line (census.errors.ran_out), from a worker's error or a result that could not be read
    back; a worker that ended outright, by how (killed by SIGKILL: the kernel's OOM killer
    does so when memory runs out; any abrupt end under a memory limit); else `exc` itself."""
    if not isinstance(exc, BrokenProcessPool):
        return ran_out(exc) or exc
    if broke:
        return broke.pop()
    # the worker that broke the pool; the pool itself stops the others with SIGTERM
    ended = [code for code in _exit_codes(workers) if code != -signal.SIGTERM]
    if not ended:
        return exc
    how = _how(ended[0])
    if ended[0] == -signal.SIGKILL or memory_limited():
        return out_of_memory(f"a worker process was {how}, as the kernel's out-of-memory killer "
                             "ends a process when memory runs out")  # fmt: skip
    return BrokenProcessPool(f"a worker process ended abruptly ({how})")


def _exit_codes(workers: list) -> list[int]:
    """The exit codes of the workers that have ended: their sentinel says so as soon as they
    close their files, a moment before their exit code can be read (then waited for)."""
    by_sentinel = {}
    for proc in workers:
        with contextlib.suppress(ValueError):  # a process already closed
            by_sentinel[proc.sentinel] = proc
    codes = []
    deadline = time.monotonic() + EXIT_S
    for sentinel in mp_wait(list(by_sentinel), timeout=0):
        proc = by_sentinel[sentinel]
        proc.join(EXIT_S)
        while proc.exitcode is None and time.monotonic() < deadline:  # the pool's thread
            time.sleep(0.01)  # reaps it at the same time: its code is known in a moment
        if proc.exitcode is not None:
            codes.append(proc.exitcode)
    return codes


EXIT_S = 1.0  # from a worker's files closed to its exit code


def _how(code: int) -> str:
    if code < 0:
        with contextlib.suppress(ValueError):
            return f"killed by {signal.Signals(-code).name}"
    return f"ended with exit {code}"

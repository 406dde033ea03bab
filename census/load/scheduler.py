"""Where the exports of a rank folder are read: in a process pool on this machine (the default,
census.load.pool.map_processes), or on a Dask cluster when a scheduler's address is given
(`--scheduler ADDRESS`, else $DASK_SCHEDULER_ADDRESS; `pip install 'torch-census[dask]'`).

Each task reads one export where it lies (the cluster's workers see the same paths: a shared
filesystem) and returns that export's Census, which is small; the caller merges them
(census.load.finish.merge_census), so a cluster gives the pool's result exactly. A worker writes the
census cache as any census process does (atomically, under a name of its own), so a later
`census summary DIR` reads the caches. Dask is imported inside the functions that use it:
`census --help` stays fast, and Dask stays optional.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

from census.errors import UsageError
from census.load.pool import map_processes
from census.model.census import Census
from census.sources.export import Progress

SCHEDULER_ENV = "DASK_SCHEDULER_ADDRESS"
CONNECT_S = 10  # an address that answers nothing is said in seconds, not after Dask's 30 s
INSTALL_HINT = "pip install 'torch-census[dask]'"

# fn(export, arg, cores) -> the export's Census: a module-level function (it is pickled)
RankFn = Callable[..., Census]


def scheduler_address(given: str | None) -> str | None:
    """The Dask scheduler to use: `given` (--scheduler), else $DASK_SCHEDULER_ADDRESS; None (an
    empty --scheduler '' too) for the process pool."""
    address = os.environ.get(SCHEDULER_ENV, "") if given is None else given
    return address.strip() or None


def map_ranks(fn: RankFn, exports: list[Path], arg: Any, progress: Progress | None = None,
              workers: int | None = None, scheduler: str | None = None) -> list[Census]:  # fmt: skip
    """fn(export, arg, cores) for each export, in order: on the Dask cluster at `scheduler`
    (scheduler_address), else in a process pool of `workers` (default: a core per export),
    each export with the cores left to it."""
    address = scheduler_address(scheduler)
    if address is not None:
        return _on_dask(fn, exports, arg, address, progress)
    workers = workers or min(len(exports), os.cpu_count() or 1)
    cores = max(1, (os.cpu_count() or 1) // workers) if workers > 1 else None
    if progress:
        progress(f"{len(exports)} ranks on {workers} worker(s)")
    return _named(map_processes(_call, [(fn, p, arg, cores) for p in exports], workers), exports)


def _named(ranks: list[Census], exports: list[Path]) -> list[Census]:
    """Each rank's Census naming its export as this process named it: a worker was sent its
    absolute path, and a cached Census names it as whoever computed it first did."""
    return [replace(c, source=replace(c.source, path=str(p)))
            for c, p in zip(ranks, exports, strict=True)]  # fmt: skip


def _call(job: tuple[RankFn, Path, Any, int | None]) -> Census:
    fn, export, arg, cores = job
    return fn(export, arg, cores)


def _on_dask(
    fn: RankFn, exports: list[Path], arg: Any, address: str, progress: Progress | None
) -> list[Census]:
    client = connect(address)
    from distributed import as_completed  # there: connect says it when Dask is not installed

    try:
        stage = f"{len(exports)} ranks on Dask scheduler {address}"
        if progress:
            progress(stage)
        # absolute: a worker's working folder is not this one's
        futures = client.map(_on_worker, [fn] * len(exports), [p.absolute() for p in exports],
                             [arg] * len(exports), pure=False)  # fmt: skip
        for finished, _ in enumerate(as_completed(futures, loop=client.loop), 1):
            if progress:
                progress(f"{stage}: {finished} done")
        done = client.gather(futures)  # a task's exception (a bad export) is raised here
    finally:
        client.close()
    return _named(done, exports)


def connect(address: str) -> Any:
    """A Dask client of the scheduler at `address`; a UsageError (one line) when Dask is not
    installed, the address is not one (no port: `notanaddress`, `tcp://localhost`; said before
    connecting) or the scheduler does not answer within CONNECT_S. A client that failed to
    connect is closed here, within a second: its destructor would wait twice CONNECT_S, then
    print a traceback."""
    try:
        from distributed import Client
    except ImportError:
        raise UsageError(
            f"--scheduler {address}: Dask is not installed; {INSTALL_HINT} (or leave out "
            f"--scheduler and ${SCHEDULER_ENV} to read the ranks in a process pool)"
        ) from None
    _check_form(address)
    made: list[Any] = []

    class _Kept(Client):  # the client made, kept to be closed when its start fails
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            made.append(self)
            super().__init__(*args, **kwargs)

    try:
        return _Kept(address, timeout=CONNECT_S, set_as_default=False)
    except (OSError, ValueError) as exc:  # TimeoutError is an OSError
        for client in made:
            _abandon(client)
        raise UsageError(
            f"cannot reach the Dask scheduler at {address} ({exc}): start one (`dask scheduler`) "
            f"or fix --scheduler / ${SCHEDULER_ENV}"
        ) from None


def _check_form(address: str) -> None:
    """A UsageError unless `address` is a scheduler's address (a host and a port, but in-process)."""
    from distributed.comm.addressing import parse_address, parse_host_port

    try:
        scheme, location = parse_address(address)
        if scheme != "inproc":
            parse_host_port(location)
    except ValueError as exc:
        raise UsageError(
            f"--scheduler {address}: not a Dask scheduler's address ({exc}); give "
            f"tcp://HOST:PORT (a scheduler listens on port 8786 by default)"
        ) from None


def _abandon(client: Any) -> None:
    """Close a client whose start failed, in a second at most, and leave its destructor nothing
    to do."""
    import contextlib

    with contextlib.suppress(Exception):
        client.close(timeout=1)
    client.status = "closed"
    with contextlib.suppress(Exception):
        client._loop_runner.stop()


def _on_worker(fn: RankFn, export: Path, arg: Any) -> Census:
    return fn(export, arg, _worker_cores())


def _worker_cores() -> int:
    """The cores a task may use in its Dask worker: Dask's worker processes are daemonic by
    default, and a daemonic process may start none of its own (the passes run inline); else the
    worker's cores shared among its threads."""
    import multiprocessing

    if multiprocessing.current_process().daemon:
        return 1
    from distributed import get_worker

    return max(1, (os.cpu_count() or 1) // max(1, get_worker().nthreads))

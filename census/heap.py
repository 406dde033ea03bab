"""The process's memory: glibc's heap tuned and trimmed (keep_heap, trim_heap), numpy's arrays
in ordinary pages meanwhile (small_pages), and the cyclic garbage collector paused while census
makes objects by the hundred thousand (collector_paused). The ground floor: the command line,
the engine's pools, the store, the operations' reader and the renderers call it."""

from __future__ import annotations

import contextlib
import gc
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any


@contextmanager
def collector_paused() -> Iterator[None]:
    """The cyclic garbage collector off meanwhile (when it was on): a census of tens of
    thousands of steps makes an object per step, phase and their figures, and its JSON a dict
    for each, none in a cycle, and the collector would sweep the whole heap several times to
    free nothing (half the time of a 10^7-kernel census)."""
    if not gc.isenabled():
        yield
        return
    gc.disable()
    try:
        yield
    finally:
        gc.enable()


@contextmanager
def small_pages() -> Iterator[None]:
    """numpy's new arrays in ordinary pages meanwhile: numpy asks Linux for transparent huge
    pages (madvise) on every array of 4 MiB or more, and where the kernel compacts memory to
    find a huge page on the first touch (THP `defrag` = `madvise`, its default), the faults of
    the operations' (#56) temporaries took 2.2 s of system time of a 10^6-kernel census's 8
    (docs/performance.md, "Operations (#56)"); elsewhere ordinary pages cost more faults than
    they save. Through numpy's own switch (NUMPY_MADVISE_HUGEPAGE's); nothing where it has none."""
    import numpy

    core = getattr(numpy, "_core", None) or getattr(numpy, "core", None)
    switch = getattr(getattr(core, "multiarray", None), "_set_madvise_hugepage", None)
    if switch is None:
        yield
        return
    before = switch(False)
    try:
        yield
    finally:
        switch(before)


def trim_heap() -> None:
    """Hand the heap's free memory back to the system: glibc keeps what Python and numpy freed
    (a forked worker would inherit it; a large rendering would come on top of it)."""
    _glibc(lambda libc: libc.malloc_trim(0))


HEAP_ARRAY_BYTES = 16 << 20  # arrays up to this size come from the heap
HEAP_KEEP_BYTES = 64 << 20  # free memory the heap keeps (the idle split's window: ~50 MiB)
_M_TRIM_THRESHOLD, _M_MMAP_THRESHOLD = -1, -3  # glibc's <malloc.h>


def keep_heap() -> None:
    """Let glibc keep numpy's temporary arrays in the heap: by default one of more than 128 KiB
    (up to 32 MiB as it adapts) is mapped on its own and unmapped when freed, and the heap
    hands back free memory past 2 x that, so every first touch of the next temporary's pages
    faults again: the idle split's windows ran 3x slower (docs/performance.md). Census calls
    it in its own processes only (the command line and its workers); the processes that fork
    workers trim their heap first (trim_heap)."""

    def tune(libc) -> None:
        libc.mallopt(_M_MMAP_THRESHOLD, HEAP_ARRAY_BYTES)
        libc.mallopt(_M_TRIM_THRESHOLD, HEAP_KEEP_BYTES)

    _glibc(tune)


def _glibc(call: Callable[[Any], object]) -> None:
    """call(the C library) on Linux; nothing elsewhere, or with a libc without the function."""
    if not sys.platform.startswith("linux"):
        return
    import ctypes

    with contextlib.suppress(OSError, AttributeError, TypeError):
        call(ctypes.CDLL(None))

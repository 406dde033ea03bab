"""Time bounds that hold on a busy machine: CPU seconds, not wall seconds.

A test that bounds how long census takes ("a catastrophic pattern stops in seconds") measures
the CPU time census spends, which other processes (parallel test workers, other users) do not
inflate as they inflate the wall time: the bound can still fail, where census does the work it
should not, and no longer fails because the machine was shared.
"""

from __future__ import annotations

import resource


def cpu_seconds() -> float:
    """User and system CPU seconds of this process and of its children that have ended (a pool's
    workers once joined, a subprocess once waited for)."""
    own, children = (resource.getrusage(who) for who in (resource.RUSAGE_SELF, resource.RUSAGE_CHILDREN))  # fmt: skip
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime

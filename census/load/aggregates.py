"""The reduce's end: the passes' merged accumulators (census.load.passes) as what the census is
computed from. The rows per kernel name, copy kind and launch API are finished here; the per-key
accumulators each pass declares (census.load.accumulators.declared) are kept merged and
unfinished, for census.load.finish to finish straight into the step table's columns
(census.load.accumulators.finish_declared: the key table and the whole capture's totals), each
figure computed once.
"""

from __future__ import annotations

import sqlite3
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, NamedTuple

import numpy as np

from census.load.accumulators import PerKey, declared
from census.load.figures import Columns
from census.sources import schema as sc

if TYPE_CHECKING:
    from census.load.api_calls import RuntimePart
    from census.load.kernels import PartResult
    from census.load.memory import MemoryResult
    from census.load.rank_kernels import RankColumns


class KernelGroup(NamedTuple):
    """The kernels of one (demangled name, short name) pair, with or without a launching API
    row: over the whole capture, and those launched in the selected steps."""

    demangled_id: int | None  # StringIds ids; None: no such column, or NULL
    short_id: int | None
    has_api: bool
    count: int
    time_ns: int
    step_count: int
    step_time_ns: int


class ApiSums(NamedTuple):
    """The calls of one launch API: over the whole capture, and those made in the steps."""

    count: int = 0
    time_ns: int = 0
    step_count: int = 0
    step_time_ns: int = 0


@dataclass
class Aggregates:
    """What the census is computed from: the whole capture's rows per kernel name, copy kind and
    launch API, and the passes' per-key accumulators (a step's or a phase segment's idx: the
    work launched in it), merged, to be finished into columns (census.load.finish)."""

    kernel_groups: list[KernelGroup]
    names: dict[int, str]
    launch_by_api: dict[str, ApiSums]
    memory: dict[int, list[int]]  # per copy kind (MEMSET_KIND: memsets): accumulators.KindSums
    # the passes' per-key accumulators (accumulators.declared), `keys` rows each: the steps, or
    # with phases the segments (segment i inside step parents[i]); their total()s are the whole
    # capture's sums of the kernels, launch calls, copies and memsets and its unions
    per_key: tuple[PerKey, ...]
    keys: int
    parents: np.ndarray | None = None
    # with phases, the steps' own unions (swept under parent_scope keys; a union does not add up
    # over segments); None without
    step_unions: Columns | None = None
    any_nccl: bool = False  # some kernel name can be NCCL
    orphan_kernels: int = 0  # kernels without a launching API row (sliced exports)
    orphan_copies: int = 0  # memcpys and memsets without one
    bad_kernels: int = 0  # kernels with a missing or negative duration
    devices: frozenset[int] = frozenset()  # the deviceIds of the GPU work
    graph_executions: int = 0  # CUDA graphs traced whole (--cuda-graph-trace=graph)
    # per process its kernels, and its NCCL kernels (census.load.rank_kernels); per deviceId
    # the whole capture's NCCL kernel time not overlapped by non-NCCL kernels there (when
    # any_nccl): |all-kernel union| − |non-NCCL union|
    ranks: RankColumns | None = None
    exposed_by_device: dict[int, int] = field(default_factory=dict)


def finish_aggregates(
    conn: sqlite3.Connection,
    schema: sc.Schema,
    results: tuple[PartResult, MemoryResult, RuntimePart],
    any_nccl: bool,
    steps: int,
    parents: np.ndarray | None,
) -> Aggregates:
    """The aggregates of the passes' merged results: the GPU work's, the memcpys' and memsets',
    the runtime calls'; their per-key accumulators kept unfinished (`declared`). With phases
    the passes attributed the work to segments (segment i inside step parents[i] of `steps`):
    the steps' figures are their segments' sums, and their unions their own, swept under
    parent_scope keys."""
    from census.load.api_names import read_strings
    from census.load.kernels import parent_scope

    gpu, memory, runtime = results
    groups = [KernelGroup(*key, *v) for key, v in gpu.groups.items()]
    ids = {i for g in groups for i in (g.demangled_id, g.short_id) if i is not None}
    names = read_strings(conn, ids) if schema.has(sc.STRINGS) else {}
    keys = steps if parents is None else len(parents)
    by_api = {a: ApiSums(*v) for a, v in runtime.launch.by_api(keys).items()}
    agg = Aggregates(groups, names, by_api, dict(memory.kinds), declared(results), keys,
                     parents, any_nccl=any_nccl)  # fmt: skip
    agg.orphan_kernels = sum(g.count for g in groups if not g.has_api)
    agg.orphan_copies = memory.unlaunched.n
    agg.ranks = gpu.ranks.finish()
    agg.exposed_by_device = gpu.unions.exposed_by_device() if any_nccl else {}
    agg.bad_kernels, agg.devices = gpu.bad_kernels.n, frozenset(gpu.devices)
    if schema.has(sc.GRAPH_TRACE):
        count = f'SELECT COUNT(*) FROM "{sc.GRAPH_TRACE}"'
        agg.graph_executions = conn.execute(count).fetchone()[0]
    if parents is not None:
        agg.step_unions = gpu.unions.finish(steps, first=parent_scope(0, keys))
    return agg

"""The names of the CUDA API calls census reads (launches, memcpys, memsets, and the
synchronising calls of the idle split), by StringIds id: which rows the runtime pass reads and
what each launch name denotes (census.load.api_calls); and any StringIds values by id
(read_strings: kernel names)."""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterable
from dataclasses import dataclass
from functools import cached_property

import numpy as np

from census.definitions import GRAPH_LAUNCH_APIS, SYNC_APIS, launch_api_kind, normalise_api_name
from census.sources import schema as sc

CANDIDATE_WORDS = ("launch", "memcpy", "memset")  # runtime calls that can issue GPU work


@dataclass(frozen=True)
class ApiNames:
    """Name ids of the runtime rows census reads, and what each launch id denotes."""

    candidates: tuple[int, ...]  # launches, memcpys, memsets
    launch_ids: np.ndarray  # sorted
    launch_api: tuple[str, ...]  # per launch id
    graph: np.ndarray  # per launch id: 1 for a graph launch
    # synchronising calls (SYNC_APIS), read beside the candidates only for the idle split
    sync_ids: tuple[int, ...] = ()
    timeline: bool = False  # gather the launch and sync calls of the idle split

    @property
    def where(self) -> str:
        """The SQL condition on nameId for the candidate calls (launches, memcpys, memsets)."""
        return name_in(self.candidates)

    @property
    def pass_where(self) -> str:
        """The rows the runtime pass reads: the candidates, and the syncs when asked for."""
        return name_in(sorted({*self.candidates, *self.sync_ids}))

    def is_candidate(self, name: np.ndarray) -> np.ndarray:
        """Whether each name id is a candidate's: a launch, memcpy or memset call."""
        return self._among(name, self.candidates, _CANDIDATE)

    def is_sync(self, name: np.ndarray) -> np.ndarray:
        """Whether each name id is a synchronising call's (SYNC_APIS)."""
        return self._among(name, self.sync_ids, _SYNC)

    def _among(self, name: np.ndarray, ids: tuple[int, ...], bit: int) -> np.ndarray:
        """Whether each name id is one of `ids` (the kind table's `bit`)."""
        table = self._tables
        if table is None:
            return np.isin(name, np.array(ids, np.int64))
        return (_by_id(table[1], name) & bit) != 0

    def launch_code(self, name: np.ndarray) -> np.ndarray:
        """Index into launch_ids of each name id, -1 when it is not a launch."""
        table = self._tables
        if table is not None:
            return _by_id(table[0], name).astype(np.int64)
        if not len(self.launch_ids):
            return np.full(len(name), -1, np.int64)
        i = np.searchsorted(self.launch_ids, name)
        ii = np.minimum(i, len(self.launch_ids) - 1)
        return np.where(self.launch_ids[ii] == name, ii, -1)

    @cached_property
    def _tables(self) -> tuple[np.ndarray, np.ndarray] | None:
        """(launch code, _CANDIDATE | _SYNC bits) per name id + 1 (_by_id), up to the largest
        id read: one lookup per row instead of a search or a pass per id (launch_code took 2 ms
        of every 100,000 rows); None where the ids are too large for a table."""
        ids = [*self.candidates, *self.sync_ids, *self.launch_ids.tolist()]
        top = max(ids, default=-1)
        if top >= TABLE_IDS or min(ids, default=0) < 0:
            return None
        code = np.full(top + 3, -1, np.int32)
        code[self.launch_ids + 1] = np.arange(len(self.launch_ids), dtype=np.int32)
        kind = np.zeros(top + 3, np.uint8)
        kind[np.array(self.candidates, np.int64) + 1] |= _CANDIDATE
        kind[np.array(self.sync_ids, np.int64) + 1] |= _SYNC
        return code, kind


TABLE_IDS = 1 << 24  # name ids up to this are looked up in tables (ApiNames._tables)
_CANDIDATE, _SYNC = 1, 2


def _by_id(table: np.ndarray, name: np.ndarray) -> np.ndarray:
    """table[id + 1] for each name id: a negative id (NULL) reads entry 0, an id past the
    table's ids its last entry (both entries say "none of these")."""
    return np.take(table, name + 1, mode="clip")


def name_in(ids) -> str:
    """The SQL condition: a runtime row's name is one of `ids` (none: no row)."""
    return f"nameId IN ({','.join(map(str, ids))})" if len(ids) else "0"


def read_api_names(conn: sqlite3.Connection, schema: sc.Schema, syncs: bool = False) -> ApiNames:
    """The runtime names census reads; `syncs`: the synchronising calls too (idle split)."""
    found = []
    if schema.has(sc.STRINGS):
        syncing = " OR value LIKE '%synchronize%'" if syncs else ""
        found = conn.execute(
            f"""SELECT id, value FROM "{sc.STRINGS}" WHERE id IS NOT NULL AND (value LIKE
                '%launch%' OR value LIKE '%memcpy%' OR value LIKE '%memset%'{syncing})"""
        ).fetchall()
    # SQLite's LIKE ignores ASCII case: so does this
    rows = [(i, v) for i, v in found if any(w in str(v).lower() for w in CANDIDATE_WORDS)]
    launches = sorted((int(i), api) for i, v in rows if (api := launch_api_kind(str(v))))
    return ApiNames(
        candidates=tuple(sorted({int(i) for i, _ in rows})),
        launch_ids=np.array([i for i, _ in launches], np.int64),
        launch_api=tuple(api for _, api in launches),
        graph=np.array([int(api in GRAPH_LAUNCH_APIS) for _, api in launches], np.int64),
        sync_ids=tuple(sorted(int(i) for i, v in found
                              if normalise_api_name(str(v)) in SYNC_APIS)) if syncs else (),
        timeline=syncs,
    )  # fmt: skip


def read_strings(conn: sqlite3.Connection, ids: Iterable[int]) -> dict[int, str]:
    """StringIds values of the given ids (ids without a value are left out)."""
    wanted = sorted(set(ids))
    if not wanted:
        return {}
    rows = conn.execute(
        'SELECT id, value FROM "StringIds" WHERE id IN (SELECT value FROM json_each(?))',
        (json.dumps(wanted),),
    )
    return {int(i): str(v) for i, v in rows if v is not None}

"""Build tiny, exact nsys-shaped SQLite exports with sqlite-utils for edge-case tests.

Times are integer nanoseconds. Processes and threads are encoded as nsys does:
globalPid = pid << 24 and globalTid = (pid << 24) | tid.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import sqlite_utils

KERNEL_COLUMNS = {
    "start": int,
    "end": int,
    "deviceId": int,
    "contextId": int,
    "streamId": int,
    "correlationId": int,
    "globalPid": int,
    "demangledName": int,
    "shortName": int,
    "gridId": int,
    "graphNodeId": int,
}
RUNTIME_COLUMNS = {
    "start": int,
    "end": int,
    "eventClass": int,
    "globalTid": int,
    "correlationId": int,
    "nameId": int,
    "returnValue": int,
}
MEMCPY_COLUMNS = {
    "start": int,
    "end": int,
    "deviceId": int,
    "contextId": int,
    "streamId": int,
    "correlationId": int,
    "globalPid": int,
    "bytes": int,
    "copyKind": int,
}
MEMSET_COLUMNS = {
    "start": int,
    "end": int,
    "deviceId": int,
    "contextId": int,
    "streamId": int,
    "correlationId": int,
    "globalPid": int,
    "value": int,
    "bytes": int,
}
NVTX_COLUMNS = {
    "start": int,
    "end": int,
    "eventType": int,
    "rangeId": int,
    "text": str,
    "globalTid": int,
    "textId": int,
    "domainId": int,
}

PUSH_POP = 59


def gpid(pid: int) -> int:
    return pid << 24


def gtid(pid: int, tid: int) -> int:
    return (pid << 24) | tid


@dataclass
class Export:
    """Accumulates rows; `write(path)` creates the database."""

    schema_version: str = "3.20.3"
    legacy_meta: bool = False
    strings: dict[str, int] = field(default_factory=dict)
    kernels: list[dict] = field(default_factory=list)
    runtime: list[dict] = field(default_factory=list)
    memcpy: list[dict] = field(default_factory=list)
    memset: list[dict] = field(default_factory=list)
    nvtx: list[dict] = field(default_factory=list)
    gpus: list[dict] = field(default_factory=list)
    omit: set[str] = field(default_factory=set)
    # TARGET_INFO_SESSION_START_TIME's row (utcEpochNs, systemClockNs: the session's start on
    # the wall clock and on the trace's clock), written when given
    session: tuple[int, int] | None = None
    _corr: int = 0

    def sid(self, text: str) -> int:
        if text not in self.strings:
            self.strings[text] = len(self.strings) + 1
        return self.strings[text]

    def next_corr(self) -> int:
        self._corr += 1
        return self._corr

    def api(
        self,
        name: str,
        start: int,
        end: int,
        pid: int = 1,
        tid: int = 1,
        corr: int | None = None,
        event_class: int = 0,
    ) -> int:
        corr = self.next_corr() if corr is None else corr
        self.runtime.append(
            {
                "start": start,
                "end": end,
                "eventClass": event_class,
                "globalTid": gtid(pid, tid),
                "correlationId": corr,
                "nameId": self.sid(name),
                "returnValue": 0,
            }
        )
        return corr

    def kernel(
        self,
        name: str,
        start: int,
        end: int,
        device: int = 0,
        pid: int = 1,
        corr: int | None = None,
        stream: int = 7,
        short: str | None = None,
    ) -> None:
        self.kernels.append(
            {
                "start": start,
                "end": end,
                "deviceId": device,
                "contextId": 1,
                "streamId": stream,
                "correlationId": corr,
                "globalPid": gpid(pid),
                "demangledName": self.sid(name),
                "shortName": self.sid(short or name),
                "gridId": len(self.kernels),
                "graphNodeId": None,
            }
        )

    def launch(
        self,
        name: str,
        api_start: int,
        k_start: int,
        k_end: int,
        api: str = "cudaLaunchKernel_v7000",
        api_len: int = 5,
        pid: int = 1,
        tid: int = 1,
        device: int = 0,
        stream: int = 7,
    ) -> int:
        corr = self.api(api, api_start, api_start + api_len, pid, tid)
        self.kernel(name, k_start, k_end, device, pid, corr, stream)
        return corr

    def copy(
        self,
        kind: int,
        nbytes: int,
        api_start: int,
        start: int,
        end: int,
        pid: int = 1,
        device: int = 0,
    ) -> None:
        corr = self.api("cudaMemcpyAsync_v3020", api_start, api_start + 3, pid)
        self.memcpy.append(
            {
                "start": start,
                "end": end,
                "deviceId": device,
                "contextId": 1,
                "streamId": 7,
                "correlationId": corr,
                "globalPid": gpid(pid),
                "bytes": nbytes,
                "copyKind": kind,
            }
        )

    def set(self, nbytes: int, api_start: int, start: int, end: int, pid: int = 1) -> None:
        corr = self.api("cudaMemsetAsync_v3020", api_start, api_start + 3, pid)
        self.memset.append(
            {
                "start": start,
                "end": end,
                "deviceId": 0,
                "contextId": 1,
                "streamId": 7,
                "correlationId": corr,
                "globalPid": gpid(pid),
                "value": 0,
                "bytes": nbytes,
            }
        )

    def range(
        self,
        text: str,
        start: int,
        end: int | None,
        pid: int = 1,
        tid: int = 1,
        registered: bool = False,
        event_type: int = PUSH_POP,
    ) -> None:
        self.nvtx.append(
            {
                "start": start,
                "end": end,
                "eventType": event_type,
                "rangeId": None,
                "text": None if registered else text,
                "globalTid": gtid(pid, tid),
                "textId": self.sid(text) if registered else None,
                "domainId": 0,
            }
        )

    def write(self, path: Path) -> Path:
        db = sqlite_utils.Database(path)
        meta = "EXPORT_META_DATA" if self.legacy_meta else "META_DATA_EXPORT"
        if meta not in self.omit:
            db[meta].insert_all(
                [
                    {"name": "EXPORT_SCHEMA_VERSION", "value": self.schema_version},
                    {"name": "EXPORT_PRODUCT_VERSION", "value": "2099.1.1.0-test"},
                ]
            )
        if "StringIds" not in self.omit:
            db["StringIds"].create({"id": int, "value": str}, pk="id")
            db["StringIds"].insert_all([{"id": i, "value": v} for v, i in self.strings.items()])
        tables = (
            ("CUPTI_ACTIVITY_KIND_KERNEL", KERNEL_COLUMNS, self.kernels),
            ("CUPTI_ACTIVITY_KIND_RUNTIME", RUNTIME_COLUMNS, self.runtime),
            ("CUPTI_ACTIVITY_KIND_MEMCPY", MEMCPY_COLUMNS, self.memcpy),
            ("CUPTI_ACTIVITY_KIND_MEMSET", MEMSET_COLUMNS, self.memset),
            ("NVTX_EVENTS", NVTX_COLUMNS, self.nvtx),
        )
        for name, columns, rows in tables:
            if name in self.omit:
                continue
            db[name].create(columns)
            db[name].insert_all(rows)
        if self.gpus:
            db["TARGET_INFO_GPU"].insert_all(self.gpus)
        if self.session is not None:
            utc, system = self.session
            db["TARGET_INFO_SESSION_START_TIME"].insert(
                {"utcEpochNs": utc, "utcTime": "", "localTime": "", "systemClockNs": system}
            )
        db.close()
        return path

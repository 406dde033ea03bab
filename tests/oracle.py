"""A slow, obviously-correct reading of the issue's definitions, for cross-checking census.

It loads whole tables into Python, which census must not do; fine for test-sized exports.
"""

from __future__ import annotations

import bisect
import itertools
import re
import sqlite3
from pathlib import Path

# copyKind -> the census keys' prefix: Device-to-Device, Host-to-Device, Device-to-Host (written
# here, not read from census.metrics: the oracle is an independent reading of the definitions)
COPIES = {8: "d2d", 1: "h2d", 2: "d2h"}
LAUNCH = {
    "cudaLaunchKernel",
    "cudaLaunchKernelExC",
    "cudaLaunchKernelEx",
    "cudaLaunchCooperativeKernel",
    "cudaLaunchCooperativeKernelMultiDevice",
    "cuLaunchKernel",
    "cuLaunchKernelEx",
    "cuLaunchCooperativeKernel",
    "cuLaunchCooperativeKernelMultiDevice",
    "cuLaunchGrid",
    "cuLaunchGridAsync",
    "cudaGraphLaunch",
    "cuGraphLaunch",
}


def _tables(conn: sqlite3.Connection) -> set[str]:
    return {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type='table'")}


def _union(intervals: list[tuple[int, int]]) -> int:
    total, cur_s, cur_e = 0, None, None
    for s, e in sorted((s, e) for s, e in intervals if e > s):  # no extent, no coverage
        if cur_e is None or s > cur_e:
            if cur_e is not None:
                total += cur_e - cur_s
            cur_s, cur_e = s, e
        else:
            cur_e = max(cur_e, e)
    if cur_e is not None:
        total += cur_e - cur_s
    return total


def oracle(path: Path, steps_regex: str = r"^(step\b|ProfilerStep#)") -> dict:
    conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    t = _tables(conn)
    names = dict(conn.execute("SELECT id, value FROM StringIds")) if "StringIds" in t else {}
    api_start: dict[tuple[int, int], int] = {}
    launches: dict[tuple, tuple[int, int, str]] = {}
    if "CUPTI_ACTIVITY_KIND_RUNTIME" in t:
        for i, (s, e, tid, corr, nid) in enumerate(
            conn.execute(
                "SELECT start, end, globalTid, correlationId, nameId FROM CUPTI_ACTIVITY_KIND_RUNTIME"
            )
        ):
            proc = tid >> 24
            key = (proc, corr)
            api_start[key] = min(api_start.get(key, s), s)
            base = re.sub(r"_(ptsz|ptds)$", "", re.sub(r"_v\d+$", "", names.get(nid, "")))
            if base in LAUNCH:
                k = key if corr is not None else (proc, None, i)
                if k not in launches or e - s > launches[k][1] - launches[k][0]:
                    launches[k] = (s, e, base)
    steps = []
    if "NVTX_EVENTS" in t:
        for s, e, text, tid in conn.execute(
            "SELECT n.start, n.end, COALESCE(n.text, (SELECT value FROM StringIds WHERE id = n.textId)),"
            " n.globalTid FROM NVTX_EVENTS n WHERE eventType IN (59, 60, 70) ORDER BY n.start"
        ):
            if text and re.search(steps_regex, text) and e is not None:
                steps.append((s, e, tid >> 24))

    def step_of(proc: int, time: int) -> int | None:
        for i, (s, e, p) in enumerate(steps):
            if p == proc and s <= time <= e:
                return i
        return None

    kernels = []
    if "CUPTI_ACTIVITY_KIND_KERNEL" in t:
        for s, e, dev, corr, pid, dn, sn in conn.execute(
            "SELECT start, end, deviceId, correlationId, globalPid, demangledName, shortName"
            " FROM CUPTI_ACTIVITY_KIND_KERNEL"
        ):
            name = names.get(dn, names.get(sn, ""))
            launched = api_start.get((pid >> 24, corr))
            st = step_of(pid >> 24, launched) if launched is not None else None
            kernels.append((s, e, dev, "nccl" in name.lower(), st))
    copies = []  # (prefix, bytes, step) of the copy kinds census counts per step
    if "CUPTI_ACTIVITY_KIND_MEMCPY" in t:
        for corr, pid, nbytes, kind in conn.execute(
            "SELECT correlationId, globalPid, bytes, copyKind FROM CUPTI_ACTIVITY_KIND_MEMCPY"
        ):
            if kind in COPIES:
                launched = api_start.get((pid >> 24, corr))
                st = step_of(pid >> 24, launched) if launched is not None else None
                copies.append((COPIES[kind], nbytes, st))
    if "CUPTI_ACTIVITY_KIND_MEMSET" in t:  # memsets count as the copies do
        for corr, pid, nbytes in conn.execute(
            "SELECT correlationId, globalPid, bytes FROM CUPTI_ACTIVITY_KIND_MEMSET"
        ):
            launched = api_start.get((pid >> 24, corr))
            st = step_of(pid >> 24, launched) if launched is not None else None
            copies.append(("memset", nbytes or 0, st))

    def metrics(step: int | None) -> dict:
        ks = [k for k in kernels if step is None or k[4] == step]
        ls = [v for v in launches.values() if step is None or step_of_launch(v) == step]
        cs = [c for c in copies if step is None or c[2] == step]
        devices = {k[2] for k in ks}
        return {
            "kernel_count": len(ks),
            "kernel_time_ns": sum(k[1] - k[0] for k in ks),
            "nccl_kernel_count": sum(1 for k in ks if k[3]),
            "nccl_kernel_time_ns": sum(k[1] - k[0] for k in ks if k[3]),
            "non_nccl_kernel_count": sum(1 for k in ks if not k[3]),
            "non_nccl_kernel_time_ns": sum(k[1] - k[0] for k in ks if not k[3]),
            "non_nccl_union_ns": sum(
                _union([(k[0], k[1]) for k in ks if k[2] == d and not k[3]]) for d in devices
            ),
            "launch_api_count": len(ls),
            "launch_api_time_ns": sum(e - s for s, e, _ in ls),
            "graph_launch_count": sum(1 for *_, n in ls if "GraphLaunch" in n),
            **{
                f"{key}_{what}": sum(1 if what == "count" else b for k, b, _ in cs if k == key)
                for key in (*COPIES.values(), "memset")
                for what in ("count", "bytes")
            },
        }

    launch_proc = {v: k[0] for k, v in launches.items()}

    def step_of_launch(v: tuple[int, int, str]) -> int | None:
        return step_of(launch_proc[v], v[0])

    return {"totals": metrics(None), "steps": [metrics(i) for i in range(len(steps))]}


def phase_oracle(
    path: Path,
    steps_regex: str = r"^(step\b|ProfilerStep#)",
    phases_regex: str = r"^(forward|backward|optimizer)\b",
) -> list[dict[str, dict[str, int]]]:
    """Per step, per phase name (and "(outside phases)"): kernel and launch counts and times,
    D2D copies and bytes, duration_ns and gpu_busy_ns, straight from the definitions: a phase
    owns each instant of its step that it is the latest-started covering range of; a call that
    starts exactly where one owned stretch ends and the next begins belongs to the later one."""
    conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    names = dict(conn.execute("SELECT id, value FROM StringIds"))
    steps, owned, _ = _owned(conn, steps_regex, phases_regex)

    def slot(proc: int, t: int) -> tuple[int, str] | None:
        # the later of two steps that meet at t: the one that begins there (as for stretches)
        for i in reversed(range(len(steps))):
            s, e, p = steps[i]
            if p == proc and s <= t <= e:
                return i, [o for a, b, o in owned[i] if a <= t][-1]
        return None

    api: dict[tuple[int, int], tuple[int, int, str]] = {}
    for s, e, tid, corr, nid in conn.execute(
        "SELECT start, end, globalTid, correlationId, nameId FROM CUPTI_ACTIVITY_KIND_RUNTIME"
    ):
        api[(tid >> 24, corr)] = (s, e, re.sub(r"_v\d+$", "", names.get(nid, "")))
    out = [dict() for _ in steps]

    def add(where: tuple[int, str] | None, **values: int) -> None:
        if where is not None:
            row = out[where[0]].setdefault(where[1], {})
            for k, v in values.items():
                row[k] = row.get(k, 0) + v

    for (proc, _), (s, e, name) in api.items():
        if name in LAUNCH:
            add(slot(proc, s), launch_api_count=1, launch_api_time_ns=e - s)
    busy: dict[int, list[tuple[int, int]]] = {}
    for table in ("KERNEL", "MEMCPY", "MEMSET"):
        extra = {"MEMCPY": ", bytes, copyKind", "MEMSET": ", bytes, -1"}.get(table, ", 0, 0")
        for s, e, pid, corr, nbytes, kind in conn.execute(
            f"SELECT start, end, globalPid, correlationId{extra} FROM CUPTI_ACTIVITY_KIND_{table}"
        ):
            busy.setdefault(pid >> 24, []).append((s, e))
            call = api.get((pid >> 24, corr))
            where = slot(pid >> 24, call[0]) if call else None
            if table == "KERNEL":
                add(where, kernel_count=1, kernel_time_ns=e - s)
            elif kind in COPIES:
                add(where, **{f"{COPIES[kind]}_count": 1, f"{COPIES[kind]}_bytes": nbytes})
            elif table == "MEMSET":
                add(where, memset_count=1, memset_bytes=nbytes or 0)
    sync = {"cudaDeviceSynchronize", "cudaStreamSynchronize", "cudaEventSynchronize", "cudaMemcpy"}
    for (proc, _), (s, e, name) in api.items():
        if name in sync:
            add(slot(proc, s), sync_count=1, sync_time_ns=e - s)
    for i, (_, _, p) in enumerate(steps):
        for a, b, owner in owned[i]:
            clipped = [(max(s, a), min(e, b)) for s, e in busy.get(p, []) if e > a and s < b]
            add((i, owner), duration_ns=b - a, gpu_busy_ns=_union(clipped))
        _idle_oracle(
            steps[i], owned[i], busy.get(p, []), api, sync, lambda o, i=i, **v: add((i, o), **v)
        )
    return out


def _owned(
    conn: sqlite3.Connection, steps_regex: str, phases_regex: str
) -> tuple[list, list, bool]:
    """The steps (start, end, process) by start, per step the stretches each phase owns:
    [(a, b, owner)], the latest-started phase covering a stretch owning it, and whether any
    phase range starts inside a step."""
    ranges = [
        (s, e, text, tid >> 24)
        for s, e, text, tid in conn.execute(
            "SELECT n.start, n.end, COALESCE(n.text, (SELECT value FROM StringIds WHERE id ="
            " n.textId)), n.globalTid FROM NVTX_EVENTS n WHERE eventType IN (59, 60, 70)"
            " ORDER BY n.start"
        )
        if text and e is not None
    ]
    steps = [(s, e, p) for s, e, text, p in ranges if re.search(steps_regex, text)]
    owned = []  # per step: [(a, b, owner)]
    inside = False
    for s, e, p in steps:
        phases = [(ps, min(pe, e), t) for ps, pe, t, pp in ranges
                  if pp == p and s <= ps <= e and re.search(phases_regex, t)]  # fmt: skip
        inside = inside or bool(phases)
        cuts = sorted({s, e, *(x for a, b, _ in phases for x in (a, b))})
        segs = []
        for a, b in itertools.pairwise(cuts):
            owners = [t for ps, pe, t in phases if ps <= a and pe >= b]
            segs.append((a, b, owners[-1] if owners else "(outside phases)"))
        owned.append(segs or [(s, e, "(outside phases)")])
    return steps, owned, inside


def span_oracle(
    path: Path,
    steps_regex: str = r"^(step\b|ProfilerStep#)",
    phases_regex: str | None = r"^(forward|backward|optimizer)\b",
) -> list[dict]:
    """Per step: gpu_start_ns and gpu_span_ns of the kernels, memcpys and memsets (start and end
    known, end >= start) whose launching API call (same process and correlationId, any thread,
    its earliest row) starts in the step, and the same per phase name ("phases", empty when no
    phase range lies inside any step). A call belongs to the latest-started range (a phase's
    stretch, or without phases a step) of its process that began at or before it, if that has
    not ended before it; None for a range without GPU work."""
    conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    t = _tables(conn)
    if "NVTX_EVENTS" not in t:
        return []
    steps, owned, inside = _owned(conn, steps_regex, phases_regex or "(?!)")
    if not inside:
        owned = [[(s, e, None)] for s, e, _ in steps]  # no phases: the steps themselves
    pieces = [(a, b, p, i, o) for i, (segs, (_, _, p)) in enumerate(zip(owned, steps, strict=True))
              for a, b, o in segs]  # fmt: skip
    calls: dict[tuple[int, int], int] = {}
    if "CUPTI_ACTIVITY_KIND_RUNTIME" in t:
        for s, tid, corr in conn.execute(
            "SELECT start, globalTid, correlationId FROM CUPTI_ACTIVITY_KIND_RUNTIME"
        ):
            key = (tid >> 24, corr)
            calls[key] = min(calls.get(key, s), s)

    def piece_at(proc: int, time: int) -> tuple | None:
        best = None
        for piece in pieces:  # the latest-started one; on equal starts, the later listed
            if piece[2] == proc and piece[0] <= time and (best is None or piece[0] >= best[0]):
                best = piece
        return best if best is not None and best[1] >= time else None

    spans: dict[tuple, list[int]] = {}
    for table in ("KERNEL", "MEMCPY", "MEMSET"):
        if f"CUPTI_ACTIVITY_KIND_{table}" not in t:
            continue
        for s, e, pid, corr in conn.execute(
            f"SELECT start, end, globalPid, correlationId FROM CUPTI_ACTIVITY_KIND_{table}"
        ):
            call = calls.get((pid >> 24, corr)) if pid is not None else None
            if s is None or e is None or e < s or call is None:
                continue
            piece = piece_at(pid >> 24, call)
            if piece is None:
                continue
            for key in ((piece[3],), (piece[3], piece[4])):
                span = spans.setdefault(key, [s, e])
                span[0], span[1] = min(span[0], s), max(span[1], e)

    def values(key: tuple) -> dict:
        span = spans.get(key)
        return {"gpu_start_ns": span and span[0], "gpu_span_ns": span and span[1] - span[0]}

    return [
        {**values((i,)), "phases": {o: values((i, o)) for _, _, o in segs if o is not None}}
        for i, segs in enumerate(owned)
    ]


def _idle_oracle(step, owned, gpu, api, sync, add) -> None:
    """Classify every elementary stretch of the step's idle time by the definitions."""
    s0, e0, p = step
    # Only what overlaps the step can be busy, covering or starting inside it (every test below
    # asks about instants in [s0, e0]): the same answers, without the capture's other steps.
    gpu = [(s, e) for s, e in gpu if s < e0 and e > s0]
    launches = [(s, e) for (q, _), (s, e, n) in api.items()
                if q == p and n in LAUNCH and s < e0 and e > s0]  # fmt: skip
    ends = [e for (q, _), (s, e, n) in api.items() if q == p and n in sync and s0 <= e < e0]
    cuts = sorted({s0, e0, *(x for iv in (*gpu, *launches) for x in iv), *ends}
                  | {a for a, _, _ in owned})  # fmt: skip
    cuts = [c for c in cuts if s0 <= c <= e0]

    def busy_at(a: int, b: int) -> bool:
        return any(s < b and e > a for s, e in gpu)

    for a, b in itertools.pairwise(cuts):
        if b <= a or busy_at(a, b):
            continue
        owner = [o for x, _, o in owned if x <= a][-1]
        # After a sync: a sync call ended at t <= a while the GPU was idle, and no GPU work
        # (a zero-length kernel too) has started since, up to a.
        after = any(t <= a and not any(s <= t < e for s, e in gpu)
                    and not any(t < s <= a for s, _ in gpu) for t in ends)  # fmt: skip
        if after:
            add(owner, idle_after_sync_ns=b - a)
        elif any(s <= a and e >= b for s, e in launches):
            add(owner, idle_launch_ns=b - a)
        else:
            add(owner, idle_other_ns=b - a)


def idle_by_range_oracle(path: Path, steps_regex: str = r"^(step\b|ProfilerStep#)") -> dict:
    """Range text -> GPU idle ns inside it, summed over the steps: every stretch of a step
    (between consecutive bounds of any interval involved) in which no kernel, memcpy or memset
    of the step's process runs goes to the innermost NVTX range open over it on the step
    range's thread (the latest-started; at equal starts the one that ends first), the step
    ranges excluded; a stretch with no range open goes to none. An op range (`aten::mm, seq = 3,
    op_id = 9`, `Torch-Compiled Region: 0/0, op_id = 5`) counts under its text before the
    first comma."""
    conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    ranges = [
        (s, e, text, tid)
        for s, e, text, tid in conn.execute(
            "SELECT n.start, n.end, COALESCE(n.text, (SELECT value FROM StringIds WHERE id ="
            " n.textId)), n.globalTid FROM NVTX_EVENTS n WHERE eventType IN (59, 60, 70)"
        )
        if e is not None and s is not None and e > s
    ]
    steps = [(s, e, t, tid) for s, e, t, tid in ranges if t and re.search(steps_regex, t)]
    gpu: dict[int, list[tuple[int, int]]] = {}
    for table in ("KERNEL", "MEMCPY", "MEMSET"):
        if f"CUPTI_ACTIVITY_KIND_{table}" not in _tables(conn):
            continue
        for s, e, pid in conn.execute(
            f"SELECT start, end, globalPid FROM CUPTI_ACTIVITY_KIND_{table}"
        ):
            if s is not None and e is not None and e >= s:
                gpu.setdefault(pid >> 24, []).append((s, e))
    out: dict[str, int] = {}
    own = set(steps)
    for s0, e0, _, tid in steps:
        merged: list[list[int]] = []  # the GPU's busy union over the step, merged by hand
        for s, e in sorted(x for x in gpu.get(tid >> 24, []) if x[1] > s0 and x[0] < e0):
            if merged and s <= merged[-1][1]:
                merged[-1][1] = max(merged[-1][1], e)
            else:
                merged.append([s, e])
        starts = [m[0] for m in merged]
        mine = [r for r in ranges if r[3] == tid and r not in own and r[1] > s0 and r[0] < e0]
        cuts = sorted({s0, e0, *(x for m in merged for x in m),
                       *(x for a, b, _, _ in mine for x in (a, b))})  # fmt: skip
        cuts = [c for c in cuts if s0 <= c <= e0]
        for a, b in itertools.pairwise(cuts):
            i = bisect.bisect_right(starts, a) - 1  # a stretch is all busy or all idle
            if i >= 0 and merged[i][1] > a:
                continue
            open_ = [r for r in mine if r[0] <= a and r[1] >= b]
            if open_:
                inner = max(open_, key=lambda r: (r[0], -r[1]))
                name = inner[2] if inner[2] is not None else "(unnamed range)"
                if re.search(r", (seq|op_id) = [0-9]+", name):
                    name = name[: name.index(",")].strip()
                out[name] = out.get(name, 0) + b - a
    return out

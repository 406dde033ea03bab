"""The steps as columns (census.model.step_table) against the Step objects they hold: random steps
(phases or none, idle splits or none, GPU spans or none, values past int64, names that read
"None"), checked against brute force over the objects: the sequence, slices, concatenation,
the columns, the Census means, the JSON rows and the cache's record."""

from __future__ import annotations

import json
import random
import statistics
from dataclasses import replace
from typing import Any

import pytest

from census.definitions import HOST_AHEAD_SHARE, OUTSIDE_PHASES
from census.metrics import IDLE_KEYS, METRIC_KEYS
from census.model.census import Census, Source
from census.model.step import IdleSplit, Metrics, Phase, Step
from census.model.step_table import Rows, StepTable, concat, from_steps, int_sum
from census.render import json_docs, json_rows
from census.store.codec import dump_record, load_record

NAMES = ["forward", "backward", "optimizer", 'a "None" \\ phase', OUTSIDE_PHASES]


def _int(rng: random.Random, huge: bool) -> int:
    return rng.choice([rng.randrange(0, 10**9), 1 << 64 + rng.randrange(3)]) if huge else (
        rng.randrange(0, 10**9))  # fmt: skip


def _metrics(rng: random.Random, huge: bool) -> Metrics:
    return Metrics(*(_int(rng, huge) for _ in METRIC_KEYS))


def _idle(rng: random.Random, split: str) -> IdleSplit | None:
    """split: "all", "none", or "mixed" (a census merged from ranks summarized apart)."""
    if split == "none" or (split == "mixed" and rng.random() < 0.5):
        return None
    return IdleSplit(*(rng.randrange(10**6) for _ in IDLE_KEYS))


def _gpu(rng: random.Random) -> tuple[int | None, int | None]:
    return (None, None) if rng.random() < 0.3 else (rng.randrange(10**9), rng.randrange(10**7))


def random_steps(rng: random.Random, n: int, huge: bool = False) -> tuple[Step, ...]:
    split = rng.choice(["all", "all", "none", "mixed"])
    steps = []
    for i in range(n):
        start = rng.randrange(10**12)
        phases = tuple(
            Phase(
                name,
                rng.randrange(10**7),
                _metrics(rng, huge),
                rng.randrange(10**7),
                _idle(rng, split),
                *_gpu(rng),
            )
            for name in rng.sample(NAMES, rng.randrange(len(NAMES) + 1))
        )
        steps.append(Step(f"step {i}" if rng.random() < 0.9 else "None", start,
                          start + rng.randrange(1, 10**8), _metrics(rng, huge),
                          rng.randrange(10**8), rng.randrange(10**6), phases, _idle(rng, split),
                          *_gpu(rng)))  # fmt: skip
    return tuple(steps)


def census_of(steps) -> Census:
    return Census(Source("x", None, None, ()), Metrics(), steps, (), (), (), (), ())


# 5000 steps: more than one chunk of the steps made into objects (or rows written) at a time
CASES = [(seed, n, huge) for seed in range(8) for n in (0, 1, 7, 60) for huge in (False, True)]
CASES += [(8, 5000, False), (9, 5000, True)]


@pytest.mark.parametrize(("seed", "n", "huge"), CASES)
def test_the_table_holds_the_steps(seed: int, n: int, huge: bool) -> None:
    rng = random.Random(seed)
    steps = random_steps(rng, n, huge)
    table = from_steps(steps)
    assert len(table) == n and table == steps and tuple(table) == steps
    if n:
        i = rng.randrange(n)
        assert table[i] == steps[i] and table[-1] == steps[-1]
        assert table[i : i + 3] == steps[i : i + 3] and table[::-2] == steps[::-2]
        order = [rng.randrange(n) for _ in range(5)]
        assert table.take(order) == tuple(steps[k] for k in order)
        with pytest.raises(IndexError):
            table[n]
    for key in ("start_ns", "gpu_busy_ns", "nccl_overlap_ns", "duration_ns", "gpu_idle_ns",
                *METRIC_KEYS):  # fmt: skip
        assert table.column(key).tolist() == [_attr(s, key) for s in steps]
    launched = [s.gpu_start_ns is not None for s in steps]
    assert table.launched.tolist() == launched
    leads = table.column("host_lead_ns")[table.launched].tolist()
    assert leads == [s.host_lead_ns for s in steps if s.gpu_start_ns is not None]
    assert table.phase_step().tolist() == [i for i, s in enumerate(steps) for _ in s.phases]


def _attr(s: Step, key: str) -> int:
    return getattr(s.metrics, key) if key in METRIC_KEYS else getattr(s, key)


def test_concat_is_the_tables_one_after_another_renamed() -> None:
    rng = random.Random(1)
    parts = [random_steps(rng, n, huge=n == 3) for n in (4, 0, 3)]
    joined = concat([from_steps(p) for p in parts], ["r0: ", "r1: ", "r2: "])
    want = tuple(replace(s, name=f"r{k}: {s.name}") for k, p in enumerate(parts) for s in p)
    assert joined == want


def test_int_sum_is_exact_past_int64() -> None:
    import numpy as np

    big = np.array([2**62, 2**62, 2**62], np.int64)
    assert int_sum(big) == 3 * 2**62
    assert int_sum(np.array([-(2**63), -1], np.int64)) == -(2**63) - 1
    assert int_sum(np.array([2**70, 1], object)) == 2**70 + 1
    assert int_sum(np.zeros(0, np.int64)) == 0


@pytest.mark.parametrize(("seed", "n", "huge"), CASES)
def test_the_means_are_those_of_the_objects(seed: int, n: int, huge: bool) -> None:
    steps = random_steps(random.Random(seed), n, huge)
    c = census_of(steps)
    assert c.per_step() == _per_step(steps)
    assert c.per_step_timing() == _per_step_timing(steps)
    assert c.per_phase() == _per_phase(steps)
    assert c.host_ran_ahead() == _host_ran_ahead(steps)


def _mean(total: int, n: int) -> float | None:
    return total / n if n else None


def _per_step(steps):
    if not steps:
        return None
    return {k: _mean(sum(getattr(s.metrics, k) for s in steps), len(steps)) for k in METRIC_KEYS}


def _per_step_timing(steps):
    if not steps:
        return None
    n = len(steps)
    duration = sum(s.duration_ns for s in steps)
    busy = sum(s.gpu_busy_ns for s in steps)
    split = all(s.idle is not None for s in steps)
    launched = [s for s in steps if s.gpu_start_ns is not None]
    return {
        "step_time_ns": duration / n, "gpu_busy_ns": busy / n, "gpu_idle_ns": (duration - busy) / n,
        "gpu_span_ns": _mean(sum(s.gpu_span_ns for s in launched), len(launched)),
        "host_lead_ns": _mean(sum(s.host_lead_ns for s in launched), len(launched)),
        **{k: sum(getattr(s.idle, k) for s in steps) / n if split else None for k in IDLE_KEYS},
    }  # fmt: skip


def _per_phase(steps):
    by_name: dict[str, list[Phase]] = {}
    for s in steps:
        for p in s.phases:
            by_name.setdefault(p.name, []).append(p)
    out = {}
    for name in sorted(by_name, key=lambda name: name == OUTSIDE_PHASES):
        ps = by_name[name]
        split = all(p.idle is not None for p in ps)
        row = {k: sum(getattr(p.metrics, k) for p in ps) / len(steps) for k in METRIC_KEYS}
        row["duration_ns"] = sum(p.duration_ns for p in ps) / len(steps)
        row["gpu_busy_ns"] = sum(p.gpu_busy_ns for p in ps) / len(steps)
        row.update({k: sum(getattr(p.idle, k) for p in ps) / len(steps) if split else None
                    for k in IDLE_KEYS})  # fmt: skip
        spans = [p.gpu_span_ns for p in ps if p.gpu_span_ns is not None]
        row["gpu_span_ns"] = _mean(sum(spans), len(spans))
        out[name] = row
    return out


def _host_ran_ahead(steps):
    leads = [s.host_lead_ns for s in steps if s.gpu_start_ns is not None]
    if not leads:
        return None
    return statistics.median(leads) > HOST_AHEAD_SHARE * statistics.median(
        s.duration_ns for s in steps)  # fmt: skip


@pytest.mark.parametrize(("seed", "n", "huge"), CASES)
def test_json_rows_and_the_record_of_a_table(seed: int, n: int, huge: bool) -> None:
    steps = random_steps(random.Random(seed), n, huge)
    table = from_steps(steps)
    assert json_rows.steps_text(table).text() == json.dumps([json_docs._step(s) for s in steps])
    assert json_rows.timing_text(table).text() == json.dumps(
        [json_docs._step_timing(s) for s in steps]
    )
    c = census_of(steps)
    back = Census.from_record(json.loads(json.dumps(c.to_record())))
    assert back.steps == table and tuple(back.steps) == steps
    assert isinstance(back.steps, StepTable)

    def dtypes(rows: Rows) -> dict[str, Any]:
        return {k: v.dtype for k, v in rows.columns.items()}

    assert dtypes(back.steps.steps) == dtypes(table.steps)
    # the cache entry's bytes: int64 and bool columns raw, object ones in the JSON line
    entry = b"".join(dump_record(c))
    binary = load_record(entry)
    assert binary.steps == table and tuple(binary.steps) == steps
    assert dtypes(binary.steps.steps) == dtypes(table.steps)
    assert binary.per_step() == c.per_step() and binary.per_phase() == c.per_phase()
    flipped = bytearray(entry)
    flipped[-1] ^= 1  # a bit of the last column (or of the JSON line): its digest tells
    for damaged in (entry[:-1], entry[: len(entry) // 2], entry + b"\0", bytes(flipped)):
        with pytest.raises((ValueError, KeyError, TypeError)):
            load_record(damaged)


def test_a_foreign_record_with_a_valid_digest_is_refused() -> None:
    """An entry that is well formed and digested but not a census's (a column table that is a
    list) raises what the cache recomputes on, not AttributeError."""
    import hashlib

    body = b'{"steps": {"steps": [], "phases": [], "bounds": []}}\n'
    with pytest.raises(ValueError):
        load_record(hashlib.sha256(body).hexdigest().encode() + b"\n" + body)


@pytest.mark.parametrize("seed", range(12))
def test_the_tail_is_that_of_the_objects(seed: int) -> None:
    """tails.tail_steps over the columns against the same rule over the Step objects, on both
    clocks (a step with no GPU work left out of the GPU's)."""
    from census.findings import tails

    rng = random.Random(seed)
    steps = list(random_steps(rng, rng.choice([1, 9, 200])))
    if seed % 2:  # the host ran ahead: each step's GPU work starts after its range ends
        steps = [s if s.gpu_start_ns is None else replace(s, gpu_start_ns=s.end_ns + 10**9)
                 for s in steps]  # fmt: skip
    for k in rng.sample(range(len(steps)), min(3, len(steps))):  # a few slow steps
        s = steps[k]
        steps[k] = replace(s, end_ns=s.end_ns + 10**9, gpu_span_ns=s.gpu_span_ns and 10**9)
    c = census_of(steps)
    tail = tails.tail_steps(c)
    on_gpu = tail.clock == tails.GPU_SPAN
    assert on_gpu == bool(c.host_ran_ahead())
    assert on_gpu == (seed % 2 == 1 and any(s.gpu_start_ns is not None for s in steps))
    step_time, phase_time = tails.CLOCKS[tail.clock]
    counted = [(i, s) for i, s in enumerate(steps) if step_time(s) is not None]
    times = [step_time(s) for _, s in counted]
    median, mad = tails.median_mad(times)
    threshold = tails.tail_threshold(median, mad)
    typical = _median_step([s for _, s in counted], phase_time)
    want = tuple(tails._outlier(i, s, step_time(s) - median, typical, phase_time)
                 for i, s in counted if step_time(s) > threshold)  # fmt: skip
    assert (tail.steps, tail.median_ns, tail.mad_ns, tail.outliers) == (
        len(times), median, mad, want)  # fmt: skip


def _median_step(steps: list[Step], phase_time) -> dict[str, float]:
    names = {p.name for s in steps for p in s.phases}
    out = {
        "kernel_count": statistics.median(s.metrics.kernel_count for s in steps),
        "launch_api_count": statistics.median(s.metrics.launch_api_count for s in steps),
        "gpu_busy_ns": statistics.median(s.gpu_busy_ns for s in steps),
        "gpu_idle_ns": statistics.median(s.gpu_idle_ns for s in steps),
    }
    for name in names:
        times = [t for s in steps if (t := phase_time(s, name)) is not None]
        if times:
            out[f"phase:{name}"] = statistics.median(times)
    return out

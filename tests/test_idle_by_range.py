"""GPU idle time by host range (definitions.IDLE_BY_RANGE_RULE) and the idle split gathered by
the engine's passes: exact values on built exports, the slow oracle on real ones."""

from __future__ import annotations

import json
import lzma
from pathlib import Path

import numpy as np
import pytest

import census
from census.cli import app
from census.load.finish import compute_census
from census.load.idle import idle_splits, read_timelines
from census.load.idle_ranges import innermost
from census.load.profile import load_profile
from census.sources import schema as sc
from census.sources.readonly import open_readonly
from tests.helpers.exports import launch_bound
from tests.helpers.files import fixture_file
from tests.nsysdb import Export
from tests.oracle import idle_by_range_oracle

START_END = 60
STEPS = r"^(step\b|ProfilerStep#)"
REPO = Path(__file__).parent.parent


def _nested(tmp_path: Path) -> Path:
    """Two steps. Step 0 [0, 1000] on thread 1: GPU busy [450, 500] and [700, 800]; ranges
    outer [100, 900] ⊃ inner [200, 400], `late` [300, 600] (start/end, crossing inner),
    tieA [820, 880] and tieB [820, 850] (same start: tieB ends first, so it is inner); a range on
    thread 2 over the whole step is another thread's. Step 1 [2000, 3000] on thread 3, no GPU
    work, one range t3 [2000, 2500]."""
    e = Export()
    e.range("step 0", 0, 1000)
    e.range("outer", 100, 900)
    e.range("inner", 200, 400)
    e.range("late", 300, 600, event_type=START_END)
    e.range("tieA", 820, 880)
    e.range("tieB", 820, 850, registered=True)
    e.range("other thread", 0, 1000, tid=2)
    e.launch("k1", 10, 450, 500)
    e.launch("k2", 20, 700, 800)
    e.kernel("zero-length", 850, 850, corr=e.api("cudaLaunchKernel_v7000", 30, 35))
    e.range("step 1", 2000, 3000, tid=3)
    e.range("t3", 2000, 2500, tid=3)
    return e.write(tmp_path / "nested.sqlite")


# Idle stretches of step 0: [0, 450) [500, 700) [800, 1000). Innermost open range:
# [0,100) none; [100,200) outer; [200,300) inner; [300,450) late (started after inner);
# [500,600) late; [600,700) outer; [800,820) outer; [820,850) tieB; [850,880) tieA;
# [880,900) outer; [900,1000) none. Step 1: [2000,2500) t3, [2500,3000) none.
EXPECTED = {"outer": 240, "late": 250, "inner": 100, "t3": 500, "tieA": 30, "tieB": 30}


def test_built_export_exact(tmp_path: Path) -> None:
    path = _nested(tmp_path)
    c = census.summarize(path, use_cache=False)
    assert {r.range: r.idle_ns for r in c.idle_by_range} == EXPECTED
    assert idle_by_range_oracle(path) == EXPECTED
    idle = 850 + 1000  # the steps' GPU idle time
    assert sum(s.gpu_idle_ns for s in c.steps) == idle
    rows = c.idle_ranges()
    assert [r["range"] for r in rows] == ["t3", "late", "outer", "inner", "tieA", "tieB"]
    assert rows[0] == {"range": "t3", "idle_ns_per_step": 250.0, "share": 500 / idle}
    assert sum(r["share"] for r in rows) <= 1


def test_summary_json_and_limiter_name_the_range(tmp_path: Path) -> None:
    from typer.testing import CliRunner

    path = _nested(tmp_path)
    done = CliRunner().invoke(app, ["summary", str(path), "--json"])
    assert done.exit_code == 0, done.output
    doc = json.loads(done.stdout)
    assert doc["idle_by_range"][1] == {"range": "late", "idle_ns_per_step": 125.0,
                                       "share": 250 / 1850}  # fmt: skip
    assert "idle_by_range" in doc["definitions"]
    assert doc["limiter"] == "host (other)"
    c = census.summarize(path, use_cache=False)
    from census.findings.limiter import summary_lead

    assert summary_lead(c).endswith(", most inside t3 (27% of the idle)")


def test_no_idle_turns_it_off(tmp_path: Path) -> None:
    c = census.summarize(_nested(tmp_path), use_cache=False, idle=False)
    assert c.idle_by_range is None and c.idle_ranges() is None
    assert all(s.idle is None for s in c.steps)
    from census.findings.limiter import summary_lead

    assert summary_lead(c) == (
        "host-bound: GPU idle 92% of the step (the idle split was off: --no-idle)"
    )


def test_diff_shows_which_ranges_idle_moved(tmp_path: Path) -> None:
    a = _nested(tmp_path)
    e = Export()
    e.range("step 0", 0, 1000)
    e.range("outer", 100, 900)
    e.launch("k1", 10, 100, 800)  # busy [100, 800): outer keeps [800, 900) idle only
    e.range("step 1", 2000, 3000, tid=3)
    b = e.write(tmp_path / "b.sqlite")
    d = census.diff(census.summarize(a, use_cache=False), census.summarize(b, use_cache=False))
    moved = {n: (v.a, v.b) for n, v in d.idle_by_range.items()}
    assert moved == {"t3": (250.0, 0.0), "late": (125.0, 0.0), "outer": (120.0, 50.0),
                     "inner": (50.0, 0.0), "tieA": (15.0, 0.0), "tieB": (15.0, 0.0)}  # fmt: skip
    assert list(moved)[:2] == ["t3", "late"]  # by |delta|


def test_innermost_against_brute_force() -> None:
    import numpy as np

    rng = np.random.default_rng(7)
    for _ in range(50):
        n = int(rng.integers(0, 40))
        start = rng.integers(0, 100, n)
        end = start + rng.integers(1, 60, n)
        order = np.lexsort((-end, start))
        start, end = start[order], end[order]
        t = rng.integers(-5, 170, 200)
        got = innermost(start, end, t)
        for q, g in zip(t.tolist(), got.tolist(), strict=True):
            open_ = [i for i in range(n) if start[i] <= q < end[i]]
            assert g == (max(open_) if open_ else -1)


def _real_exports() -> list[Path]:
    paths = [REPO / "census" / "samples" / f"{n}.sqlite.xz" for n in ("eager", "compiled")]
    paths += [REPO / "tests" / "data" / p for p in
              ("runahead/ra-eager.sqlite.xz", "ddp/rank0.sqlite.xz", "ab-demo/b/capture.sqlite.xz")]  # fmt: skip
    return paths + [fixture_file(f"h200_{n}_3steps.sqlite") for n in ("eager", "compiled")]


def _plain(path: Path, tmp_path: Path) -> Path:
    if path.suffix != ".xz":
        return path
    out = tmp_path / path.stem
    out.write_bytes(lzma.decompress(path.read_bytes()))
    return out


@pytest.mark.parametrize("path", _real_exports(), ids=lambda p: p.name)
def test_real_exports_agree_with_the_oracle(path: Path, tmp_path: Path) -> None:
    plain = _plain(path, tmp_path)
    profile = load_profile(plain, STEPS, 0, None, 2, 500, None)
    expected = {k: v for k, v in idle_by_range_oracle(plain).items() if v}
    assert {k: v for k, v in profile.idle_by_range.items() if v} == expected
    assert expected  # every one of these has idle time inside its phase ranges


@pytest.mark.parametrize("path", _real_exports(), ids=lambda p: p.name)
def test_gathered_timelines_equal_a_separate_read(path: Path, tmp_path: Path) -> None:
    """The idle split from the intervals the passes gathered equals the one from reading the
    GPU and runtime tables again, with phases, 1 to 3 workers and batches down to 64 rows."""
    plain = _plain(path, tmp_path)
    conn = open_readonly(plain)
    try:
        for phases in (None, r"^(forward|backward|optimizer)\b"):
            for workers, batch in ((1, None), (2, 64), (3, 997)):
                p = load_profile(plain, STEPS, 0, None, workers, batch, phases)
                timelines = read_timelines(conn, sc.read_schema(conn), {s.proc for s in p.steps})
                assert idle_splits(timelines, list(p.steps), list(p.segments)) == (
                    p.step_idle, p.segment_idle)  # fmt: skip
                # the law: the parts add up to the step's idle time (the census's steps are in
                # the profile's order)
                for s, c in zip(p.steps, compute_census(p).steps, strict=True):
                    i, busy = p.step_idle[s.idx], c.gpu_busy_ns
                    assert i.idle_after_sync_ns + i.idle_launch_ns + i.idle_other_ns == (
                        s.end_ns - s.start_ns - busy)  # fmt: skip
    finally:
        conn.close()


@pytest.mark.parametrize("path", _real_exports(), ids=lambda p: p.name)
def test_step_threads_read_beside_equal_those_read_inline(path, tmp_path, monkeypatch) -> None:
    """The step threads' NVTX ranges read in a process beside (from EARLY_MIN_ROWS NVTX rows,
    forced here for every export) give the same split by host range as read inline,
    and a process beside that fails leaves them read inline."""
    import census.load.idle_pass as idle_pass
    from census.load.pool import SideProcess

    plain = _plain(path, tmp_path)
    inline = load_profile(plain, STEPS, 0, None, 2, 500, None)
    started = []
    real = SideProcess.__init__

    def counted(self, *args):
        started.append(args[0].__name__)
        real(self, *args)

    monkeypatch.setattr(idle_pass, "EARLY_MIN_ROWS", 0)
    monkeypatch.setattr(SideProcess, "__init__", counted)
    alone = idle_pass.alone
    monkeypatch.setattr(idle_pass, "alone", lambda: True)  # whatever threads other tests left
    beside = load_profile(plain, STEPS, 0, None, 2, 500, None)
    assert started == ["_read_threads"]
    assert beside.idle_by_range == inline.idle_by_range and inline.idle_by_range
    monkeypatch.setattr(idle_pass, "_read_threads", _fail)
    assert load_profile(plain, STEPS, 0, None, 2, 500, None).idle_by_range == inline.idle_by_range
    # another thread runs (a caller's, a progress bar's): nothing is forked beside
    import threading

    monkeypatch.setattr(idle_pass, "alone", alone)
    done = threading.Event()
    other = threading.Thread(target=done.wait)
    other.start()
    try:
        started.clear()
        again = load_profile(plain, STEPS, 0, None, 2, 500, None)
    finally:
        done.set()
        other.join()
    assert started == [] and again.idle_by_range == inline.idle_by_range


def _fail(*_args):
    raise RuntimeError("the process beside fails")


def test_step_threads_are_read_from_the_export(tmp_path: Path) -> None:
    p = load_profile(_nested(tmp_path), STEPS, 0, None)
    assert [s.tid for s in p.steps] == [(1 << 24) | 1, (1 << 24) | 3]


def _host_heavy(tmp_path: Path, name: str, kernel_ns: int) -> Path:
    """Ten steps of 1000 ns on thread 1, each inside `Engine.forward` then
    `Engine.allreduce_gradients`; one kernel of `kernel_ns` starts 100 ns into each step, and
    its launch call lasts 5 ns: the rest of the step the host is elsewhere."""
    e = Export()
    for i in range(10):
        t = 2000 * i
        e.range(f"step {i}", t, t + 1000)
        e.range("Engine.forward", t + 50, t + 500)
        e.range("Engine.allreduce_gradients", t + 500, t + 990)
        e.launch("gemm", t + 60, t + 100, t + 100 + kernel_ns)
    return e.write(tmp_path / f"{name}.sqlite")


def test_a_non_gain_is_explained_as_host_bound(tmp_path: Path) -> None:
    """B removes GPU work (700 -> 300 ns busy per step) while the step stays 1000 ns: the
    explanation says host-bound, how much work went, and which ranges gained the idle time."""
    a = census.summarize(_host_heavy(tmp_path, "eager", 700), use_cache=False)
    b = census.summarize(_host_heavy(tmp_path, "compiled", 300), use_cache=False)
    d = census.diff(a, b, labels=("eager", "compiled"))
    assert d.within_noise  # every step lasts 1000 ns on both sides
    lines = census.explain(d)
    (sentence,) = [s for s in lines if s.startswith("host-bound:")]
    assert sentence == (
        "host-bound: compiled removed GPU work (GPU busy -400 ns/step (-57.1%), 0 "
        "kernels/step) but its step did not follow (step time 0 ns/step (+0.0%)): GPU idle "
        "+400 ns/step, mostly in other host work; the idle grew most inside "
        "Engine.allreduce_gradients (+300 ns/step), Engine.forward (+100 ns/step); compiled is "
        "host-bound: GPU idle 70% of the step, mostly in other host work (695 ns/step), most "
        "inside Engine.allreduce_gradients (70% of the idle)"
    )
    assert lines.index(sentence) == 1  # right after the headline
    # per step, A idles [0, 100) and [800, 1000): forward [50, 100), allreduce [800, 990);
    # B idles [0, 100) and [400, 1000): forward [50, 100) + [400, 500), allreduce [500, 990)
    ra = {r.range: r.idle_ns for r in a.idle_by_range}
    rb = {r.range: r.idle_ns for r in b.idle_by_range}
    assert ra == {"Engine.allreduce_gradients": 10 * 190, "Engine.forward": 10 * 50}
    assert rb == {"Engine.allreduce_gradients": 10 * 490, "Engine.forward": 10 * 150}


def test_a_real_gain_names_its_cause_from_the_split() -> None:
    a, b = (str(launch_bound(n)) for n in ("eager", "compiled"))  # the launch-bound demo
    d = census.diff(a, b, labels=("eager", "compiled"))
    head = census.explain(d)[0]
    assert "mostly fewer GPU gaps in other host work" in head
    assert "launch/CPU-bound" not in head
    assert not any(s.startswith("host-bound:") for s in census.explain(d))


def test_the_gap_classifier_equals_the_bound_classifier() -> None:
    """ByGaps (the engine's: linear in the idle gaps) and ByBounds (every bound sorted and
    searched) agree on random timelines: zero-length GPU work, sync ends inside and outside
    busy time and at gap edges, launch calls across gaps, steps that touch, segment cuts."""
    import numpy as np

    from census.load.idle import ByBounds, ByGaps
    from census.load.timeline import union

    rng = np.random.default_rng(11)
    for trial in range(400):  # large ones too: ByGaps merges sorted bounds past 64 of them
        n = int(rng.integers(0, 30) if trial % 2 else rng.integers(100, 600))
        s = rng.integers(0, 1000, n)
        busy = union(s, s + rng.integers(0, 40, n) * (rng.random(n) > 0.2))
        ls = rng.integers(0, 1000, int(rng.integers(0, 20 if trial % 2 else 300)))
        launch = union(ls, ls + rng.integers(1, 60, len(ls)))
        ends = np.concatenate([rng.integers(0, 1000, int(rng.integers(0, 8))), busy[1][:2]])
        sync = (ends - 3, ends)
        cuts = np.unique(rng.integers(0, 1000, int(rng.integers(2, 10))))
        steps = (cuts[:-1], cuts[1:])  # touching, disjoint
        inner = np.unique(np.concatenate([cuts, rng.integers(0, 1000, 5)]))
        lo, hi = inner[:-1], inner[1:]
        lo, hi = lo[(lo >= cuts[0]) & (hi <= cuts[-1])], hi[(lo >= cuts[0]) & (hi <= cuts[-1])]
        timeline = (busy, launch, sync)
        by_gaps = ByGaps(timeline, steps)
        by_bounds = ByBounds(timeline, steps, np.concatenate([cuts, lo, hi]))
        for rows in ((lo, hi), steps):
            got = [c.tolist() for c in by_gaps.measure(*rows)]
            assert got == [c.tolist() for c in by_bounds.measure(*rows)]


def _disjoint(rng, n: int, span: int, touching: bool = False):
    """n sorted, disjoint intervals in [0, span) (with `touching`, some end where the next
    starts, and some have no length)."""
    import numpy as np

    t = np.sort(rng.choice(span, 2 * n, replace=False)).astype(np.int64)
    s, e = t[0::2].copy(), t[1::2].copy()
    if touching and n > 1:
        seam = rng.random(n - 1) < 0.4
        e[:-1][seam] = s[1:][seam]
        empty = rng.random(n) < 0.1
        e[empty] = s[empty]
    return s, e


def test_idle_gaps_against_brute_force() -> None:
    """idle_gaps equals its definition read literally: each window's overlaps with the busy
    union's complement (from -inf to +inf), in order, none of no length; windows that touch,
    windows of no length, windows outside the work, zero-length work; sizes on both sides of
    the vectorised paths."""
    import numpy as np

    from census.load.idle import _MAX, _MIN, idle_gaps
    from census.load.timeline import union

    rng = np.random.default_rng(5)
    for trial in range(500):
        n, m = int(rng.integers(0, 200 if trial % 3 else 20)), int(rng.integers(0, 40))
        span = int(rng.integers(300, 5000))
        s = rng.integers(0, span, n)
        busy = union(s, s + rng.integers(0, 30, n) * (rng.random(n) > 0.2))
        windows = _disjoint(rng, min(m, span // 4), span, touching=True)
        holes = list(zip([_MIN, *busy[1].tolist()], [*busy[0].tolist(), _MAX], strict=True))
        want = [(max(g0, w0), min(g1, w1)) for w0, w1 in zip(*(w.tolist() for w in windows),
                                                             strict=True)
                for g0, g1 in holes if min(g1, w1) > max(g0, w0)]  # fmt: skip
        got = idle_gaps(busy, windows)
        assert list(zip(*(g.tolist() for g in got), strict=True)) == want


def test_ordered_search_equals_a_binary_search() -> None:
    """The merged search of sorted times equals np.searchsorted(..., "right"): ties, repeats,
    empty and one-sided inputs, sizes on both sides of its cut-over."""
    import numpy as np

    from census.load.intervals import ordered_search

    rng = np.random.default_rng(8)
    for _ in range(400):
        a = np.sort(rng.integers(0, 300, int(rng.integers(0, 400))))
        t = np.sort(rng.integers(-5, 305, int(rng.integers(0, 400))))
        assert ordered_search(a, t).tolist() == np.searchsorted(a, t, "right").tolist()


def test_idle_by_range_attribution_against_brute_force() -> None:
    """A thread's idle ns per range text: every gap ns inside each stretch between two range
    bounds goes to that stretch's owner (-1: none), as a sum over gap-stretch overlaps."""
    import numpy as np

    from census.load.idle_ranges import _attribute

    rng = np.random.default_rng(9)
    for trial in range(400):
        span = int(rng.integers(200, 3000))
        gaps = _disjoint(rng, int(rng.integers(0, 300 if trial % 2 else 10)) % (span // 2), span)
        cuts = np.unique(rng.integers(0, span, int(rng.integers(2, 200 if trial % 2 else 8))))
        owner = rng.integers(-1, 4, len(cuts) - 1)
        want: dict[int, int] = {}
        for g0, g1 in zip(*(g.tolist() for g in gaps), strict=True):
            for k in range(len(cuts) - 1):
                ns = min(g1, int(cuts[k + 1])) - max(g0, int(cuts[k]))
                if ns > 0 and owner[k] >= 0:
                    want[int(owner[k])] = want.get(int(owner[k]), 0) + ns
        assert _attribute(gaps, cuts, owner, 4) == want


def test_windows_against_a_plain_reference(monkeypatch) -> None:
    """windows() (arrays) equals the plain per-object reading of its rule on random steps of
    several processes: overlapping or touching steps, idx not in start order, segments given
    out of order, steps without segments or thread, chunks of 1 to 5 steps."""
    import itertools

    import census.load.idle_windows as iw
    from census.load.phases import Segment
    from census.load.steps import StepRange

    def reference(steps, segments):
        by_step: dict[int, list] = {}
        last: dict[int, int] = {}
        for g in segments:
            last[g.step] = g.idx
            by_step.setdefault(g.step, []).append(g)
        out = []
        for proc in sorted({s.proc for s in steps}):
            mine = sorted((s for s in steps if s.proc == proc), key=lambda s: s.start_ns)
            seam = {a.idx for a, b in itertools.pairwise(mine) if a.end_ns == b.start_ns}
            overlap = any(b.start_ns < a.end_ns for a, b in itertools.pairwise(mine))
            size = len(mine) if overlap else iw.CHUNK_STEPS
            for i in range(0, len(mine), size):
                chunk = mine[i : i + size]
                segs = [g for st in chunk for g in by_step.get(st.idx, ())]
                out.append((proc, [(s.idx, s.start_ns, s.end_ns, s.idx not in seam,
                                    iw.NO_TID if s.tid is None else s.tid) for s in chunk],
                            [(g.idx, g.start_ns, g.end_ns, last[g.step] == g.idx and
                              g.step not in seam) for g in segs]))  # fmt: skip
        return out

    rng = np.random.default_rng(3)
    for trial in range(300):
        monkeypatch.setattr(iw, "CHUNK_STEPS", int(rng.integers(1, 6)))
        n = int(rng.integers(1, 12))
        t, steps = 0, []
        for k in range(n):
            t += int(rng.integers(0, 3)) * 10  # 0: touching the previous one
            length = int(rng.integers(5, 30))
            start = t - (5 if trial % 3 == 0 and k else 0)  # every third trial overlaps
            steps.append((start, start + length))
            t = start + length
        order = rng.permutation(n)  # idx not in start order
        ranges = [StepRange(int(order[k]), "step", int(rng.integers(0, 2)), a, b,
                            None if rng.random() < 0.2 else int(rng.integers(1, 3)))
                  for k, (a, b) in enumerate(steps)]  # fmt: skip
        segments = [Segment(0, s.idx, "p", s.proc, s.start_ns + j, s.start_ns + j + 1)
                    for s in ranges for j in range(int(rng.integers(0, 3)))]  # fmt: skip
        segments = [Segment(i, g.step, g.name, g.proc, g.start_ns, g.end_ns)
                    for i, g in enumerate(segments[j] for j in rng.permutation(len(segments)))]  # fmt: skip
        got = [(w.proc,
                list(zip(*(x.tolist() for x in (w.steps.idx, w.steps.start_ns, w.steps.end_ns,
                                                  w.steps.closed, w.steps.tid)), strict=True)),
                list(zip(*(x.tolist() for x in (w.segs.idx, w.segs.start_ns, w.segs.end_ns,
                                                  w.segs.closed)), strict=True)))
               for w in iw.windows(ranges, segments)]  # fmt: skip
        assert got == reference(ranges, segments), trial


# -- a real third-party host-bound non-gain: DeepSpeed on the H200 -------------------------------
def _deepspeed(tmp_path: Path, side: str) -> Path:
    """tests/data/deepspeed/ds-SIDE: 3 steps (steps 10-12 of 15; every row outside them
    deleted, nothing else changed) of examples/deepspeed_moe.py, HF Qwen3-MoE (8 layers x 16
    experts, transformers' per-expert loop) under DeepSpeed 0.19.8 ZeRO-1 in bf16, captured with
    `census capture --calibrate` on an H200 (scripts/gpu_check.sh deepspeed), eager and with
    `engine.compile()`; run.json holds the full calibration runs (208.5 and 231.0 ms/step)."""
    folder = tmp_path / f"ds-{side}"
    folder.mkdir()
    data = REPO / "tests" / "data" / "deepspeed" / f"ds-{side}"
    (folder / "capture.sqlite").write_bytes(
        lzma.decompress((data / "capture.sqlite.xz").read_bytes())
    )
    (folder / "run.json").write_bytes((data / "run.json").read_bytes())
    return folder


def test_deepspeed_compile_removes_gpu_work_and_is_host_bound(tmp_path: Path) -> None:
    fa, fb = _deepspeed(tmp_path, "eager"), _deepspeed(tmp_path, "compiled")
    a, b = census.summarize(fa, use_cache=False), census.summarize(fb, use_cache=False)
    for side in (a, b):  # the engine and the slow reference agree on DeepSpeed's own ranges
        path = Path(side.source.path)
        assert {r.range: r.idle_ns for r in side.idle_by_range} == idle_by_range_oracle(path)
    assert [r["range"] for r in b.idle_ranges()][:3] == [
        "DeepSpeedEngine.backward", "DeepSpeedEngine.forward", "optimizer"]  # fmt: skip
    d = census.diff(fa, fb, labels=("eager", "compiled"))  # the folders: their calibration runs
    (sentence,) = [s for s in census.explain(d) if s.startswith("host-bound:")]
    assert sentence == SENTENCE


SENTENCE = (
    "host-bound: compiled removed GPU work (GPU busy -3.56 ms/step (-14.7%), -964.3 "
    "kernels/step) but its step did not follow (without nsys: step time +22.44 ms/step "
    "(+10.8%)); compiled is host-bound: GPU idle 94% of the step, mostly in other host work "
    "(234.52 ms/step), most inside DeepSpeedEngine.backward (51% of the idle)"
)


@pytest.mark.parametrize("path", _real_exports()[:3], ids=lambda p: p.name)
def test_steps_classified_a_few_at_a_time_give_the_same_split(path, tmp_path, monkeypatch):
    """idle_splits takes CHUNK_STEPS steps at a time, each on a window of the timeline: with
    chunks of 1, 3 and 7 steps the split equals the one of all steps at once."""
    import census.load.idle_windows as idle

    plain = _plain(path, tmp_path)
    p = load_profile(plain, STEPS, 0, None, 2, None, r"^(forward|backward|optimizer)\b")
    conn = open_readonly(plain)
    try:
        timelines = read_timelines(conn, sc.read_schema(conn), {s.proc for s in p.steps})
    finally:
        conn.close()
    import census.load.idle_ranges as ranges

    def both() -> tuple:
        conn = open_readonly(plain)
        try:
            by_range = ranges.idle_by_range(conn, sc.read_schema(conn), list(p.steps), timelines)
        finally:
            conn.close()
        return idle_splits(timelines, list(p.steps), list(p.segments)), by_range

    monkeypatch.setattr(idle, "CHUNK_STEPS", 10**9)
    whole = both()
    for size in (1, 3, 7):
        monkeypatch.setattr(idle, "CHUNK_STEPS", size)
        assert both() == whole


def test_deepspeed_arms_place_the_loss_in_forward() -> None:
    """tests/data/ab-deepspeed/ds/ab.json: `census ab` on the H200 (2026-12-03), 8 uncaptured
    arms of examples/deepspeed_moe.py (the pair captured above), 5 warm-up + 10 steps each:
    compile removes GPU work yet the arms are slower, and the arms place it in forward."""
    exp = census.load_experiment(REPO / "tests" / "data" / "ab-deepspeed" / "ds")
    st = exp.stats
    assert (st.verdict, round(st.delta_median_ns), st.pairs_agreeing) == ("slower", 71106028, 4)
    assert [round(x) for x in st.ci95_ns] == [5516087, 136695969]
    phases = {
        n: (p.verdict, round(p.delta_median_ns), p.pairs_agreeing) for n, p in st.phases.items()
    }
    assert phases == {"forward": ("slower", 47772621, 4),
                      "backward": ("no difference", 22268726, 3),
                      "optimizer": ("no difference", 2355360, 3)}  # fmt: skip
    assert max(st.phases, key=lambda n: st.phases[n].residual_sd_ns) == "forward"


def test_an_experiment_says_host_bound_on_the_arms_step_times(tmp_path: Path) -> None:
    """In `census ab`, the non-gain is judged on the uncaptured arms (their medians of arm
    medians), not on the captures: arms 10% slower on B, captures with 57% less GPU busy."""
    from census.compare.ab.experiment import Experiment, explain_parts
    from census.compare.ab.stats import analyze
    from census.model.ab import Arm

    a = census.summarize(_host_heavy(tmp_path, "eager", 700), use_cache=False)
    b = census.summarize(_host_heavy(tmp_path, "compiled", 300), use_cache=False)
    times = {"a": (1000, 1010, 990), "b": (1100, 1110, 1090)}
    order = ["a", "a", "b", "b", "a", "b", "a", "a", "b"]
    arms = tuple(Arm(s, i, i == 0, times[s]) for i, s in enumerate(order))
    exp = Experiment(("eager", "compiled"), {}, arms, analyze(list(arms)),
                     census.diff(a, b, labels=("eager", "compiled")))  # fmt: skip
    lines = explain_parts(exp).lines
    bound = [s for s in lines if s.startswith("host-bound:")]
    assert len(bound) == 1 and lines.index(bound[0]) > 0  # after the verdict
    assert (
        "but its step did not follow (uncaptured arms: step time +100 ns/step (+10.0%), 95% CI "
        "+100 ns to +100 ns: slower)" in bound[0]
    )
    # arms faster by a point estimate but not settled: still "did not follow", and said so
    noisy = [(1000, 1010, 990), (900, 910, 890), (1200, 1210, 1190), (1000, 1010, 990),
             (1050, 1060, 1040), (900, 910, 890), (1400, 1410, 1390), (950, 960, 940),
             (1100, 1110, 1090)]  # fmt: skip
    arms = tuple(Arm(s, i, i == 0, t) for i, (s, t) in enumerate(zip(order, noisy, strict=True)))
    st = analyze(list(arms))
    assert st.verdict == "no difference" and st.delta_median_ns < 0
    exp = Experiment(("eager", "compiled"), {}, arms, st, exp.diff)
    (bound,) = [s for s in explain_parts(exp).lines if s.startswith("host-bound:")]
    assert ": not shown faster)" in bound


def test_the_gathered_timeline_goes_to_files_that_go_away(tmp_path: Path, monkeypatch) -> None:
    """With worker processes the passes write each gathered batch to a file of their spill
    folder (the workers hold none of it) and the idle split reads them a window at a time; the
    split equals the in-memory one, and the folder is gone afterwards."""
    import tempfile

    import census.load.timeline as timeline

    plain = _plain(_real_exports()[0], tmp_path)
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    monkeypatch.setenv("TMPDIR", str(tmp_path))  # the spill folders (census.load.pool)
    seen: list[tuple[str | None, list]] = []  # (spill folder, piece paths) at close
    close = timeline.TimelineParts.close

    def spy(self) -> None:
        kinds = (self.busy, self.launch or {}, self.sync or {})
        paths = [piece.path for k in kinds for pieces in k.values() for piece in pieces]
        seen.append((self.folder, paths))
        close(self)

    monkeypatch.setattr(timeline.TimelineParts, "close", spy)
    spilled = load_profile(plain, STEPS, 0, None, 2, 500, r"^(forward|backward|optimizer)\b")
    ((folder, paths),) = seen
    assert folder and paths and all(p and p.startswith(folder) for p in paths)
    assert not [p for p in tmp_path.iterdir() if p.name.startswith("census-")]
    seen.clear()
    kept = load_profile(plain, STEPS, 0, None, 1, 500, r"^(forward|backward|optimizer)\b")
    ((folder, paths),) = seen
    assert folder is None and paths and not any(paths)  # one process: kept in memory
    assert (spilled.step_idle, spilled.segment_idle, spilled.idle_by_range) == (
        kept.step_idle, kept.segment_idle, kept.idle_by_range)  # fmt: skip


def test_a_spilled_piece_reads_back_its_intervals(tmp_path: Path) -> None:
    """Spilled, a piece is sorted and packed as 32-bit gaps and lengths where they fit, else
    kept as 64-bit starts and ends: either way the same intervals come back (order aside)."""
    import census.load.timeline as timeline

    rng = np.random.default_rng(5)
    start = rng.integers(0, 10**9, 5000)
    cases = {
        "packed": (start, start + rng.integers(0, 10**6, 5000)),
        "long": (start, start + np.where(np.arange(5000) == 7, 2**33, 5)),  # a 8.6 s interval
        "far": (np.append(start, 2**40), np.append(start, 2**40) + 1),  # a gap over 4.3 s
        "backwards": (start, start - 1),
        "one": (start[:1], start[:1] + 3),
    }
    with timeline.spilling(str(tmp_path)):
        pieces = {k: timeline.Piece.of("busy", 1, s, e) for k, (s, e) in cases.items()}
    assert {k: p.packed for k, p in pieces.items()} == {
        "packed": True, "long": False, "far": False, "backwards": False, "one": True}  # fmt: skip
    for k, (s, e) in cases.items():
        got_s, got_e = pieces[k].load()
        order = np.lexsort((e, s))
        back = np.lexsort((got_e, got_s))
        assert got_s.dtype == got_e.dtype == np.int64
        np.testing.assert_array_equal(got_s[back], s[order], err_msg=k)
        np.testing.assert_array_equal(got_e[back], e[order], err_msg=k)
        assert (pieces[k].lo, pieces[k].hi) == (s.min(), e.max())


def test_a_spilled_piece_reads_back_a_window_from_its_blocks(tmp_path: Path, monkeypatch) -> None:
    """A packed piece read for a window [lo, hi] (only the blocks that can hold an interval
    touching it) gives the same intervals touching the window as the whole piece: ties across
    block edges, long intervals reaching in from blocks before, ends exactly at lo, windows
    before, across and past the piece."""
    import census.load.timeline as timeline

    monkeypatch.setattr(timeline, "BLOCK", 2)
    # pinned: the longest interval [10, 15) ends at the window's lo, in the block before the
    # one whose first start (10) is lo - longest
    with timeline.spilling(str(tmp_path)):
        piece = timeline.Piece.of("launch", 1, np.array([0, 10, 10, 10]), np.array([1, 15, 11, 11]))
    s, e = piece.load(15, 20)
    assert [(a, b) for a, b in zip(s.tolist(), e.tolist(), strict=True) if b >= 15] == [(10, 15)]
    # an unpacked piece (a gap past 4.3 s) with an interval that ends before it starts
    with timeline.spilling(str(tmp_path)):
        back = timeline.Piece.of("busy", 1, np.array([0, 50, 2**40]), np.array([100, 10, 2**40]))
    assert not back.packed
    got = timeline.TimelineParts(busy={1: [back]}).intervals("busy", 1, 40, 60)
    assert [g.tolist() for g in got] == [[0], [100]]
    monkeypatch.setattr(timeline, "BLOCK", 8)
    rng = np.random.default_rng(12)
    for trial in range(200):
        n = int(rng.integers(1, 300))
        start = rng.integers(0, 2000, n) * (1 + 9 * (trial % 2))  # coarse: many ties
        end = start + rng.integers(0, 50, n) * (rng.random(n) < 0.9) + (rng.random(n) < 0.05) * 900
        with timeline.spilling(str(tmp_path)):
            piece = timeline.Piece.of("launch", 1, start, end)
        assert piece.packed
        whole_s, whole_e = piece.load()
        for _ in range(10):
            lo = int(rng.integers(-100, 21000))
            hi = lo + int(rng.integers(0, 3000))
            s, e = piece.load(lo, hi)

            assert _touching(s, e, lo, hi) == _touching(whole_s, whole_e, lo, hi), (trial, lo)
            # and the timeline's read: those intervals, in the piece's order (by start)
            parts = timeline.TimelineParts(launch={1: [piece]})
            keep = (whole_e >= lo) & (whole_s <= hi)
            got = parts.intervals("launch", 1, lo, hi)
            assert [g.tolist() for g in got] == [whole_s[keep].tolist(), whole_e[keep].tolist()]


def _touching(s: np.ndarray, e: np.ndarray, lo: int, hi: int) -> list:
    keep = (e >= lo) & (s <= hi)
    return sorted(zip(s[keep].tolist(), e[keep].tolist(), strict=True))

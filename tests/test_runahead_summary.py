"""The summary of a host that ran ahead of its GPU (issue #27, steps as the GPU ran them): the
first line says so and by how many steps, the step and phase tables carry the GPU spans, the tail
steps are taken on the GPU spans, in the terminal, the JSON and the page; unchanged otherwise.
Exact output on the H200 captures of such a host, on built exports and on the bundled sample."""

from __future__ import annotations

import html
import json
import lzma
import re
import statistics
from pathlib import Path

import pytest
from typer.testing import CliRunner

import census
from census.api import census_view
from census.cli import app
from census.findings.limiter import summary_lead
from census.findings.tails import GPU_SPAN, HOST_RANGE, tail_steps
from census.render.html import render_summary_html
from census.render.table import render_summary
from tests.helpers.exports import build_run_ahead, launch_bound
from tests.helpers.files import DATA
from tests.helpers.terminal import cells, terminal_tables
from tests.nsysdb import Export

runner = CliRunner()
MS = 1_000_000
AHEAD = (
    "the host ran ahead of the GPU by ~{n}: step and phase times below are the GPU's (GPU span: "
    "first to last GPU op launched in the range); "
)
SAMPLE_LEAD = (
    "host-bound: GPU idle 58% of the step, mostly in other host work (5.56 ms/step), most inside "
    "backward (52% of the idle)"
)


def summary(path: Path | str, *args: str) -> list[str]:
    r = runner.invoke(app, ["summary", str(path), *args], env={"COLUMNS": "200"})
    assert r.exit_code == 0, r.output
    return r.stdout.splitlines()


def table(lines: list[str], title: str) -> list[list[str]]:
    """The cells of the table printed under `title`: its header (joined over its lines), then
    each row."""
    at = lines.index(title)
    t = terminal_tables("\n".join(lines[at + 1 :]))[0]
    rule = next(i for i, ln in enumerate(t) if ln.startswith("┡"))
    head_lines = [[c.strip() for c in ln.strip("┃").split("┃")] for ln in t[1:rule]]
    head = [" ".join(filter(None, parts)) for parts in zip(*head_lines, strict=True)]
    return [head] + [cells(ln) for ln in t if ln.startswith("│")]


def page_text(page: str) -> list[str]:
    """The page's text, one item per element, from its first line to its kernel table."""
    body = page.split("<body>", 1)[1].split("<h2>Kernels</h2>", 1)[0]
    texts = (html.unescape(s).strip() for s in re.split("<[^>]+>", body))
    return [t.replace("\u00a0", " ") for t in texts if t]  # no-break spaces read as spaces


# -- the H200 capture of a host running ahead ---------------------------------------------------
@pytest.fixture(scope="module")
def ra_eager(tmp_path_factory: pytest.TempPathFactory) -> Path:
    packed = DATA / "runahead" / "ra-eager.sqlite.xz"
    if not packed.exists():
        pytest.skip(f"{packed} is absent")
    path = tmp_path_factory.mktemp("runahead") / "ra-eager.sqlite"
    path.write_bytes(lzma.decompress(packed.read_bytes()))
    return path


def test_real_run_ahead_capture_first_line_and_tables(ra_eager: Path) -> None:
    """examples/gpu_bound.py on the H200: NVTX steps of ~5 ms then ~47 ms (the launch queue
    full), every step ~44-47 ms on the GPU, which ends its work 215 ms after the host's range on
    average: a median lead of 264.6 ms over a median span of 47.16 ms is ~6 steps."""
    lines = summary(ra_eager)
    assert lines[0] == AHEAD.format(n="6 steps") + "GPU-bound: GPU busy 99% of the step"
    window = table(lines, "Step window (the step's NVTX range; GPU time clipped to it)")
    assert window[1] == ["step time", "22.41 ms"]
    launched = table(
        lines, "Kernel census: Work launched in the step (GPU time not clipped to the step)"
    )
    assert launched[-2:] == [
        ["GPU span (first to last GPU op)", "", "46.70 ms"],
        ["GPU end after the step's range", "", "+215.02 ms"],
    ]
    steps = table(lines, "Steps: their windows (NVTX range; GPU time clipped to it)")
    assert steps[0] == ["step", "step time", "GPU busy in the step window",
                        "GPU idle in the step window"]  # fmt: skip
    assert steps[1] == ["step 5", "6.34 ms", "5.81 ms", "528.2 µs"]
    work = table(lines, "Steps: the work launched in each (GPU time not clipped to the step)")
    assert work[0] == ["step", "GPU kernels", "non-NCCL union (unclipped)", "launch API time",
                       "GPU span (first to last GPU op)", "GPU end after the step's range"]  # fmt: skip
    assert work[1] == ["step 5", "131", "43.96 ms", "1.08 ms", "44.41 ms", "+38.39 ms"]
    assert work[-1] == ["step 16", "131", "47.15 ms", "36.19 ms", "47.44 ms", "+291.42 ms"]
    # on the NVTX ranges steps 12-16 were the tail (47 ms against a 5.94 ms median); on the GPU
    # every step takes 44-47 ms: no tail
    assert (
        "GPU span: median 47.16 ms, p95 47.45 ms (of 12 steps, fewer than 20: between the two "
        "largest), max 47.46 ms; tail above 48.40 ms: 0 of 12 "
        "step(s)"
    ) in lines
    assert not any("(tail)" in ln for ln in lines)
    phases = table(lines, "Phases (per step, mean; GPU busy: in the phase's window; GPU span: "
                   "unclipped)")  # fmt: skip
    assert phases[0] == ["phase", "phase GPU span (unclipped)", "phase time",
                         "GPU busy in the phase window", "GPU kernels", "launch API calls",
                         "launch API time", "D2D bytes"]  # fmt: skip
    assert phases[1] == ["forward", "14.34 ms", "5.47 ms", "5.40 ms", "42", "42", "3.33 ms", "0 B"]
    assert phases[2][:3] == ["backward", "27.96 ms", "12.95 ms"]
    assert phases[4][:3] == ["(outside phases)", "", "47.4 µs"]  # no GPU work: no span


def test_real_run_ahead_capture_tail_json_and_page(ra_eager: Path) -> None:
    c = census.summarize(ra_eager)
    spans = [s.gpu_span_ns for s in c.steps]
    tail = json.loads(runner.invoke(app, ["summary", str(ra_eager), "--json"]).stdout)["tail"]
    assert next(iter(tail)) == "clock" and tail["clock"] == GPU_SPAN == "gpu span"
    assert (tail["steps"], tail["median_ns"], tail["max_ns"]) == (12, statistics.median(spans),
                                                                  max(spans))  # fmt: skip
    assert tail["outliers"] == []
    page = render_summary_html(census_view(c, "ra-eager"))
    text = page_text(page)
    assert text[0] == summary_lead(c)
    assert text[0].startswith("the host ran ahead of the GPU by ~6 steps:")
    assert text[3:11] == [
        "46.70 ms", "GPU span (first to last GPU op) (per step)",
        "+215.02 ms", "GPU end after the step's range (per step)",
        "22.41 ms", "step time (per step)",
        "22.25 ms", "GPU busy in the step window (per step)",
    ]  # fmt: skip
    head = text.index("Phases (per step, mean; GPU span: unclipped)")
    assert text[head + 1 : head + 4] == ["phase", "phase GPU span (unclipped)", "phase time"]
    forward = text.index("forward", head)
    assert text[forward : forward + 4] == ["forward", "14.34 ms", "5.47 ms", "5.40 ms"]


def test_real_run_ahead_capture_fits_80_columns_and_keeps_window_and_work_apart(
    ra_eager: Path,
) -> None:
    text = render_summary(census_view(census.summarize(ra_eager)), width=80)
    assert max(len(line) for line in text.splitlines()) <= 80
    for t in terminal_tables(text):
        body = "\n".join(t)
        assert not ("GPU busy" in body and "union" in body), body


# -- built exports --------------------------------------------------------------------------------
def test_built_host_ahead_first_line_and_steps(tmp_path: Path) -> None:
    """tests/helpers/exports.build_run_ahead: 3 ms ranges, 10 ms of GPU work each, run back to
    back; leads 7, 13, 19, 25, 31 ms (+1 µs): a median of 19 ms over 10 ms spans is ~2 steps.
    The GPU is busy in every window but the first's first microsecond."""
    lines = summary(build_run_ahead(tmp_path))
    assert lines[0] == AHEAD.format(n="2 steps") + "GPU-bound: GPU busy 100% of the step"
    work = table(lines, "Steps: the work launched in each (GPU time not clipped to the step)")
    assert work[1:] == [[f"step {k}", "3", "10.00 ms", "15 ns", "10.00 ms", f"+{7 + 6 * k}.00 ms"]
                        for k in range(5)]  # fmt: skip
    assert (
        "GPU span: median 10.00 ms, p95 10.00 ms (of 5 steps, fewer than 20: between the two "
        "largest), max 10.00 ms; tail above 15.00 ms: 0 of 5 step(s)"
    ) in lines


def test_a_lead_of_less_than_a_step_is_about_one_step(tmp_path: Path) -> None:
    """One step [0, 1000]: its kernel runs [50, 1101], a lead of 101 ns (more than 10% of the
    step) but a tenth of its 1051 ns span: at least one step, said in the singular."""
    e = Export()
    e.range("step 0", 0, 1000)
    e.launch("k", 10, 50, 1101)
    c = census.summarize(e.write(tmp_path / "one.sqlite"), use_cache=False)
    assert c.host_ran_ahead() is True
    assert summary_lead(c) == AHEAD.format(n="1 step") + "GPU-bound: GPU busy 95% of the step"


def build_long_gpu_step(tmp_path: Path) -> Path:
    """Steps k = 0..9 with 2 ms ranges [10k, 10k + 2] ms, forward and backward 1 ms each; forward
    launches a kernel that runs [+1, +4] ms, backward one that runs [+4, +5] ms (in step 6:
    [+4, +9] ms). Every range is 2 ms; every GPU span 4 ms but step 6's, 8 ms. Step 10 launches
    nothing."""
    e = Export()
    for k in range(10):
        t = 10 * MS * k
        e.range(f"step {k}", t, t + 2 * MS)
        e.range("forward", t, t + MS)
        e.range("backward", t + MS, t + 2 * MS)
        e.launch("fwd", t + 100, t + MS, t + 4 * MS)
        e.launch("bwd", t + MS + 100, t + 4 * MS, t + (9 if k == 6 else 5) * MS)
    e.range("step 10", 100 * MS, 102 * MS)
    return e.write(tmp_path / "long.sqlite")


def test_tails_on_gpu_spans_when_the_host_ran_ahead(tmp_path: Path) -> None:
    path = build_long_gpu_step(tmp_path)
    c = census.summarize(path, use_cache=False)
    assert {s.duration_ns for s in c.steps} == {2 * MS}  # no tail on the NVTX ranges
    assert c.host_ran_ahead() is True  # each step's GPU work ends 3 ms after its range
    tail = tail_steps(c)
    assert (tail.clock, tail.steps, tail.median_ns, tail.mad_ns) == (GPU_SPAN, 10, 4 * MS, 0)
    assert (tail.max_ns, tail.threshold_ns) == (8 * MS, 6 * MS)
    (o,) = tail.outliers
    assert (o.index, o.name, o.step_time_ns, o.gpu_span_ns, o.excess_ns) == (
        6, "step 6", 2 * MS, 8 * MS, 4 * MS)  # fmt: skip
    # backward's GPU span: 1 ms in the median step, 5 ms in step 6
    assert (o.phase, o.phase_delta_ns, o.kernel_count_delta) == ("backward", 4 * MS, 0)
    lines = summary(path)
    assert lines[0].startswith(AHEAD.format(n="1 step"))  # a 3 ms lead over 4 ms spans
    assert (
        "GPU span: median 4.00 ms, p95 6.20 ms (of 10 steps, fewer than 20: between the two "
        "largest), max 8.00 ms; tail above 6.00 ms: 1 of 10 step(s) "
        "(1 without GPU work left out)"
    ) in lines
    assert table(lines, "Tail steps against the median step") == [
        ["step", "GPU span (first to last GPU op)", "over median", "phase that grew (GPU span)",
         "Δ GPU kernels", "Δ launch API calls"],
        ["step 6", "8.00 ms", "+4.00 ms", "backward +4.00 ms", "0", "0"],
    ]  # fmt: skip
    work = table(lines, "Steps: the work launched in each (GPU time not clipped to the step)")
    assert work[7] == ["step 6 (tail)", "2", "8.00 ms", "10 ns", "8.00 ms", "+7.00 ms"]
    assert work[11] == ["step 10", "0", "0 ns", "0 ns", "", ""]  # no GPU work: no span, no lead
    doc = json.loads(runner.invoke(app, ["summary", str(path), "--json"]).stdout)["tail"]
    assert (doc["clock"], doc["steps"]) == ("gpu span", 10)
    assert doc["outliers"][0] == {
        "index": 6, "name": "step 6", "step_time_ns": 2 * MS, "excess_ns": 4 * MS,
        "phase": "backward", "phase_delta_ns": 4 * MS, "kernel_count_delta": 0,
        "launch_count_delta": 0, "gpu_busy_delta_ns": 0, "gpu_idle_delta_ns": 0,
        "gpu_span_ns": 8 * MS,
    }  # fmt: skip


# -- a host that did not run ahead: the launch-bound demo's capture ------------------------------
def test_the_launch_bound_capture_keeps_its_first_line_and_the_host_clock() -> None:
    c = census.summarize(str(launch_bound("eager")))
    assert c.host_ran_ahead() is False
    lines = summary(launch_bound("eager"))
    assert lines[0] == SAMPLE_LEAD == summary_lead(c)
    window = table(lines, "Step window (the step's NVTX range; GPU time clipped to it)")
    assert window[1] == ["step time", "11.70 ms"]
    launched = table(
        lines, "Kernel census: Work launched in the step (GPU time not clipped to the step)"
    )
    assert launched[-2:] == [
        ["GPU span (first to last GPU op)", "", "11.62 ms"],
        ["GPU end after the step's range", "", "+112.0 µs"],
    ]
    work = table(lines, "Steps: the work launched in each (GPU time not clipped to the step)")
    assert work[0] == ["step", "GPU kernels", "non-NCCL union (unclipped)", "launch API time",
                       "GPU span (first to last GPU op)"]  # fmt: skip
    assert work[1] == ["step 5", "247", "4.94 ms", "1.84 ms", "11.17 ms"]
    assert (
        "step time: median 11.33 ms, p95 14.15 ms, max 17.41 ms; tail above 14.88 ms: 1 of 20 "
        "step(s); --all-steps lists every step"
    ) in lines
    assert table(lines, "Tail steps against the median step")[0][:2] == ["step", "step time"]
    phases = table(lines, "Phases (per step, mean; GPU busy: in the phase's window; GPU span: "
                   "unclipped)")  # fmt: skip
    assert phases[0][:3] == ["phase", "phase time", "GPU busy in the phase window"]
    assert phases[0][-1] == "phase GPU span (unclipped)"
    assert phases[1][0] == "forward" and phases[1][-1] == "3.39 ms"
    assert tail_steps(c).clock == HOST_RANGE
    doc = json.loads(runner.invoke(app, ["summary", str(launch_bound("eager")), "--json"]).stdout)
    assert doc["tail"]["clock"] == "host range" and doc["host_ran_ahead"] is False
    text = page_text(render_summary_html(census_view(c, "eager")))
    assert text[0] == SAMPLE_LEAD
    assert text[4:12:2] == ["step time (per step)", "GPU busy in the step window (per step)",
                            "GPU idle in the step window (per step)",
                            "GPU span (first to last GPU op) (per step)"]  # fmt: skip
    assert text[9] == "11.62 ms"


def test_the_page_charts_the_gpu_spans_and_drops_empty_idle_columns(ra_eager: Path) -> None:
    from census.render.charts import summary_charts

    c = census.summarize(ra_eager, use_cache=False, idle=False)  # --no-idle
    titles = [ch.title for ch in summary_charts(c)]
    assert titles[2:4] == [
        "GPU span of each step: its work as the GPU ran it (ms)",
        "Host windows: GPU busy + GPU idle in each step's NVTX range (ms)",
    ]
    (span,) = [ch for ch in summary_charts(c) if ch.title.startswith("GPU span of each step")]
    assert [round(y * 1e6) for y in span.figure.data[0].y] == [s.gpu_span_ns for s in c.steps]
    page = render_summary_html(census_view(c, "ra-eager"))
    assert "<th class=''>idle after a sync</th>" not in page
    with_idle = render_summary_html(
        census_view(census.summarize(ra_eager, use_cache=False, idle=True), "x")
    )
    assert "<th class=''>idle after a sync</th>" in with_idle
    plain = [ch.title for ch in summary_charts(census.summarize(str(launch_bound("eager"))))]
    assert not any(t.startswith("GPU span of each step") for t in plain)

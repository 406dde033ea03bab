"""The limiter of a capture's step (census.definitions.LIMITER_RULE), on built exports whose
idle split is known to the nanosecond, and on the bundled H200 sample."""

from __future__ import annotations

from pathlib import Path

import census
from census.findings.limiter import find_limiter, limiter_sentence, summary_lead
from tests.helpers.exports import launch_bound
from tests.nsysdb import Export


def _step(tmp_path: Path, name: str, build) -> census.Census:
    e = Export()
    e.range("step 0", 0, 1000)
    build(e)
    return census.summarize(e.write(tmp_path / f"{name}.sqlite"), use_cache=False, idle=True)


def test_a_gpu_busy_step_is_gpu_bound(tmp_path: Path) -> None:
    c = _step(tmp_path, "gpu", lambda e: e.launch("k", 10, 100, 900))  # busy 800 of 1000
    lim = find_limiter(c)
    assert (lim.kind, lim.busy_share) == ("gpu", 0.8)
    assert limiter_sentence(lim) == "GPU-bound: GPU busy 80% of the step"


def test_idle_after_a_sync_makes_it_sync_bound(tmp_path: Path) -> None:
    def build(e: Export) -> None:
        e.launch("k1", 40, 100, 300)
        e.api("cudaStreamSynchronize_v3020", 120, 310)
        e.launch("k2", 880, 890, 900)  # idle after the sync: [310, 890] = 580 ns

    lim = find_limiter(_step(tmp_path, "sync", build))
    assert (lim.kind, lim.cause_ns) == ("sync", 580)
    assert limiter_sentence(lim) == (
        "sync-bound: GPU idle 79% of the step, mostly after host syncs (580 ns/step)"
    )


def test_idle_inside_launch_calls_is_host_launch(tmp_path: Path) -> None:
    def build(e: Export) -> None:
        e.launch("k1", 0, 10, 110, api_len=400)  # the call [0, 400]: idle [0, 10], [110, 400]
        e.launch("k2", 400, 700, 800, api_len=300)  # [400, 700] in it; [800, 1000] other

    lim = find_limiter(_step(tmp_path, "launch", build))
    assert (lim.kind, lim.cause_ns) == ("host (launch)", 600)
    assert limiter_sentence(lim).startswith("host-bound: GPU idle 80% of the step, mostly inside")


def test_other_host_work_and_no_split(tmp_path: Path) -> None:
    c = _step(tmp_path, "other", lambda e: e.launch("k", 10, 100, 200))
    lim = find_limiter(c)
    assert (lim.kind, lim.cause_ns) == ("host (other)", 895)  # 900 idle, 5 in the launch call
    plain = census.summarize(Path(c.source.path), use_cache=False, idle=False)  # --no-idle
    assert find_limiter(plain).kind == "host"
    assert limiter_sentence(find_limiter(plain)) == (
        "host-bound: GPU idle 90% of the step (the idle split was off: --no-idle)"
    )


def test_no_steps_no_limiter(tmp_path: Path) -> None:
    e = Export()
    e.launch("k", 10, 100, 200)
    assert find_limiter(census.summarize(e.write(tmp_path / "n.sqlite"), use_cache=False)) is None


def test_the_launch_bound_demo_is_host_bound_in_other_host_work() -> None:
    path = str(launch_bound("eager"))
    lim = find_limiter(census.summarize(path, idle=True))
    assert lim.kind == "host (other)"
    assert limiter_sentence(lim) == (
        "host-bound: GPU idle 58% of the step, mostly in other host work (5.56 ms/step)"
    )
    assert summary_lead(census.summarize(path)) == (
        "host-bound: GPU idle 58% of the step, mostly in other host work (5.56 ms/step), most "
        "inside backward (52% of the idle)"
    )


def test_the_bundled_sample_is_gpu_bound() -> None:
    lim = find_limiter(census.summarize("sample:eager"))
    assert lim.kind == "gpu"
    assert limiter_sentence(lim) == "GPU-bound: GPU busy 97% of the step"


def test_the_verdict_and_the_limiter_come_first_in_every_format() -> None:
    """The first non-blank line of the diff (terminal, markdown, page) is the verdict; of the
    summary (terminal, page), what limits the step."""
    import re

    from typer.testing import CliRunner

    from census.api import census_view, diff_view
    from census.cli import app
    from census.render.html import render_diff_html, render_summary_html

    run = CliRunner()
    verdict = "compiled is faster than eager on the GPU: GPU span -1.76 ms/step (-11.5%)"
    args = ["diff", "sample:eager", "sample:compiled", "--labels", "eager,compiled"]
    table = run.invoke(app, args, env={"COLUMNS": "200"}).stdout
    assert table.lstrip().startswith(verdict)
    markdown = run.invoke(app, [*args, "--format", "markdown"]).stdout
    assert markdown.lstrip().startswith(f"**{verdict}")
    a, b = census.summarize("sample:eager"), census.summarize("sample:compiled")
    d = census.diff(a, b, labels=("eager", "compiled"))
    page = render_diff_html(diff_view(d))
    body = page.split("<body>", 1)[1].replace("\u00a0", " ")  # a number kept with its unit
    assert re.sub("<[^>]+>", "", body).lstrip().startswith(verdict)
    summary = render_summary_html(census_view(a, "eager"))
    first = re.sub("<[^>]+>", "", summary.split("<body>", 1)[1]).lstrip()
    assert first.startswith("the host ran ahead of the GPU by ~3 steps")

"""A torch.profiler (Kineto) trace names its tracer wherever census names nsys's (#55): the
summary's header in every format and its no-steps warning, and a diff against an nsys export,
which says first that the tracers differ."""

from __future__ import annotations

import json

from typer.testing import CliRunner

from census.cli import app
from tests.helpers.files import fixture_file
from tests.helpers.kineto_oracle import KINETO

runner = CliRunner()
TRACE = KINETO / "h200_eager_3steps.kineto.json.gz"
TRACER = "torch.profiler (Kineto)"


def run(*args: str) -> str:
    r = runner.invoke(app, [*args], env={"COLUMNS": "400"})  # one header line
    assert r.exit_code == 0, r.output
    return r.stdout


def test_the_summary_header_names_the_tracer_in_every_format() -> None:
    about = f"{TRACER} · GPUs 0: NVIDIA H200 ·"
    table = run("summary", str(TRACE))
    markdown = run("summary", str(TRACE), "--format", "markdown")
    doc = json.loads(run("summary", str(TRACE), "--json"))
    assert about in table and about in markdown
    assert "nsys ?" not in table + markdown
    assert doc["source"]["tracer"] == TRACER and doc["source"]["nsys_version"] is None
    nsys = json.loads(run("summary", str(fixture_file("h200_eager_3steps.sqlite")), "--json"))
    assert nsys["source"]["tracer"] == "nsys 2025.3.2.0"


def test_a_trace_without_steps_is_told_of_profiler_steps_not_nvtx() -> None:
    doc = json.loads(run("summary", str(KINETO / "tracelens_b200__eager_trace.json.gz"), "--json"))
    (warning,) = [w for w in doc["warnings"] if "matched --steps" in w]
    assert warning.startswith("no `ProfilerStep#N` or `step N` ranges matched --steps")
    assert warning.endswith("call prof.step() once per step (ranges `ProfilerStep#N`), wrap each "
                            "step in torch.profiler.record_function('step N'), or name them with "
                            "--steps")  # fmt: skip
    assert "NVTX" not in warning and "-t nvtx" not in warning


def test_a_diff_across_tracers_says_so_first() -> None:
    nsys = str(fixture_file("h200_eager_3steps.sqlite"))
    said = ("nsys was traced by nsys 2025.3.2.0, kineto by torch.profiler (Kineto): kernel, "
            "launch and copy counts (and copy bytes) stay comparable; times differ by the two "
            "tracers' overheads as well as by the runs")  # fmt: skip
    labels = ("--labels", "nsys,kineto")
    table = run("diff", nsys, str(TRACE), *labels)
    first = next(ln for ln in table.splitlines() if ln.startswith("not directly comparable"))
    assert first.startswith(f"not directly comparable: {said}")
    doc = json.loads(run("diff", nsys, str(TRACE), *labels, "--format", "json"))
    assert doc["comparability"]["problems"][0] == said
    assert not any("nsys versions" in n for n in doc["comparability"]["notes"])
    assert doc["metrics"]["kernel_count"]["delta"] == 0
    assert doc["metrics"]["launch_api_count"]["delta"] == 0


def test_the_definitions_name_each_keys_kineto_source() -> None:
    """docs/definitions.md's table (generated from census.metrics) has a Kineto column."""
    from census.render.markdown import render_metric_table

    rows = {ln.split(" | ")[0]: ln.split(" | ")[-1] for ln in render_metric_table().splitlines()}
    assert rows["| `kernel_count`"].startswith("`X` events of category `kernel`")
    assert (
        rows["| `d2h_count`"]
        == "`gpu_memcpy` events named `Memcpy DtoH ...` (the kind from the name) |"
    )
    assert rows["| `memset_bytes`"] == "Σ `args.bytes` over those memsets |"
    assert (
        rows["| `step_time_ns`"]
        == "`dur` of the `ProfilerStep#N` or `step N` `user_annotation` range |"
    )

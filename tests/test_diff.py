"""`census diff` on the real pairs: exact deltas, buckets, explanation, formats."""

from __future__ import annotations

import json
import math
import statistics
from dataclasses import replace

import pytest
from typer.testing import CliRunner

import census
from census.api import diff_view, summarize
from census.cli import app
from census.compare.diff import diff_census
from census.compare.explain import explain_diff
from census.errors import CensusError
from census.render.json_docs import diff_json
from census.render.markdown import render_diff_markdown
from tests.helpers.files import fixture_file

runner = CliRunner()


@pytest.fixture
def h200():
    a = summarize(fixture_file("h200_eager_3steps.sqlite"))
    b = summarize(fixture_file("h200_compiled_3steps.sqlite"))
    return diff_census(a, b, ("eager", "compiled"))


def test_h200_headline_deltas(h200) -> None:
    m = h200.metrics
    assert h200.per_step
    assert (m["kernel_count"].a, m["kernel_count"].b, m["kernel_count"].delta) == (287, 244, -43)
    assert m["kernel_count"].pct == pytest.approx(-14.98, abs=0.01)
    assert m["non_nccl_union_ns"].delta == pytest.approx((13561734 - 16929824) / 3)
    assert m["d2d_bytes"].delta == 16777216 - 117440512
    assert m["step_time_ns"].a == pytest.approx(
        (27413837 - 11342289 + 41606489 - 27616791 + 55295063 - 41744119) / 3
    )
    assert m["gpu_busy_ns"].a == pytest.approx((5750717 + 5743425 + 5741185) / 3)
    # Step accounting adds up exactly.
    assert m["step_time_ns"].delta == pytest.approx(m["gpu_busy_ns"].delta + m["gpu_idle_ns"].delta)
    assert m["launch_api_count"].delta == -43


def test_h200_classes_and_buckets(h200) -> None:
    classes = {c.cls: c.count.delta for c in h200.classes}
    assert classes["Triton"] == 151
    assert classes["copy/memset"] == -120
    assert classes["reduction"] == -39
    assert classes["elementwise"] == -35
    assert classes["GEMM"] == 0
    added = h200.bucket("added")
    assert len(added) == len({k.name for k in added})
    assert all(k.cls == "Triton" for k in added)
    assert sum(k.count.b for k in added) == 151
    assert h200.kernels[0].bucket == "removed"  # largest |Δ time| first
    assert abs(h200.kernels[0].time_ns.delta) >= abs(h200.kernels[1].time_ns.delta)


def test_h200_explanation_numbers_come_from_the_tables(h200) -> None:
    lines = explain_diff(h200)
    assert lines[0] == (
        "compiled and eager are within noise: step time -996.0 µs/step (-6.9%) is inside "
        "±4.07 ms, the 95% spread of the difference of their step means (3 and 3 steps, one "
        "capture each; GPU busy -1.20 ms + GPU idle +204.3 µs); `census ab` settles it with "
        "repeated uncaptured runs"
    )
    text = "\n".join(lines)
    assert (
        "-43 kernels/step (-15.0%): Triton +151 (fused), copy/memset -120, reduction -39, elementwise -35"
        in text
    )
    assert "cudaLaunchKernel -194/step, cuLaunchKernel +151/step (Triton)" in text
    assert "D2D -96.00 MiB/step (-85.7%) in -12 copies/step" in text
    assert (
        "triton_poi_fused_gelu_gelu_backward_view_2 (pointwise: gelu + gelu_backward + view" in text
    )


def test_noise_is_the_welch_interval_of_the_step_means(h200) -> None:
    eager = [27413837 - 11342289, 41606489 - 27616791, 55295063 - 41744119]
    compiled = [s.duration_ns for s in h200.b.steps]
    se = math.sqrt(statistics.variance(eager) / 3 + statistics.variance(compiled) / 3)
    assert h200.noise_ns == pytest.approx(4.302653 * se)
    assert h200.within_noise is True
    assert h200.spread[0].mean_ns == pytest.approx(sum(eager) / 3)
    # the same pair with the noise taken away is beyond it, and says how it was judged
    quiet = replace(h200, spread=tuple(replace(s, sd_ns=1.0) for s in h200.spread))
    assert explain_diff(quiet)[0].startswith(
        "compiled is faster than eager: step time -996.0 µs/step (-6.9%) = GPU busy -1.20 ms + "
        "GPU idle +204.3 µs; mostly less GPU work (beyond the ±"
    )


def test_calibration_runs_are_compared_beside_the_captures(h200) -> None:
    d = diff_census(h200.a, h200.b, h200.labels, uncaptured_ns=(9e6, 9.5e6))
    assert "without nsys (the captures' calibration runs): compiled − eager = +500.0 µs/step " \
        "(+5.6%) against -996.0 µs/step under nsys" in explain_diff(d)  # fmt: skip
    assert any("disagree in sign" in w for w in d.warnings)
    agree = diff_census(h200.a, h200.b, h200.labels, uncaptured_ns=(9.5e6, 9e6))
    assert not any("disagree in sign" in w for w in agree.warnings)
    # beyond the captures' noise, a delta nsys reversed still gets no verdict, only a qualified
    # account, after the line that says why
    quiet = replace(d, spread=tuple(replace(s, sd_ns=1.0) for s in d.spread))
    why = explain_diff(quiet)
    assert why[0].startswith("not directly comparable: ") and "disagree in sign" in why[0]
    assert why[1].startswith(
        "under nsys only, compiled's steps are shorter than eager's: step time -996.0 µs/step "
        "(-6.9%) = GPU busy -1.20 ms + GPU idle +204.3 µs; mostly less GPU work; not a verdict"
    )
    assert not any("is faster than" in line for line in why)


def test_launch_time_with_the_same_calls_says_so(h200) -> None:
    from census.compare.diff import Delta

    same = {**h200.metrics, "launch_api_count": Delta(200.0, 200.0),
            "launch_api_time_ns": Delta(1e6, 1.5e6)}  # fmt: skip
    text = "\n".join(explain_diff(replace(h200, metrics=same)))
    assert "launch API time +500.0 µs/step (+50.0%) with the same 200 calls/step" in text
    assert "over 0 calls" not in text


def test_diff_json_contract(h200) -> None:
    doc = diff_json(diff_view(h200))
    assert set(doc) >= {"a", "b", "metrics", "classes", "kernels", "explanation", "warnings"}
    assert set(doc["kernels"]) == {"added", "removed", "increased", "decreased"}
    assert set(doc["metrics"]["kernel_count"]) == {"a", "b", "delta", "pct"}
    assert {"step_time_ns", "gpu_busy_ns", "gpu_idle_ns", "d2d_bytes"} <= set(doc["metrics"])
    assert "eager" not in json.dumps(doc["metrics"])  # labels never become field names


def test_markdown_is_a_pasteable_table(h200) -> None:
    md = render_diff_markdown(diff_view(h200))
    assert "| Metric | eager | compiled | Delta | Delta % |" in md
    assert "| GPU kernels | 287 | 244 | -43 | -15.0% |" in md
    assert "| NCCL kernels | 0 | 0 | unchanged |  |" in md
    assert "| = Δ step time | -996.0 µs |" in md
    for line in md.splitlines():
        if line.startswith("| removed ") or line.startswith("| added "):
            assert line.count(" | ") == 7  # no `|` inside a name breaks the row


def test_two_gpu_pair_compares_whole_captures() -> None:
    a = summarize(fixture_file("nsysai_mfu_2gpu_before.sqlite"))
    b = summarize(fixture_file("nsysai_mfu_2gpu_after.sqlite"))
    d = diff_census(a, b, ("before", "after"))
    assert not d.per_step
    assert d.metrics["kernel_count"].delta == 3587 - 4010
    assert d.metrics["nccl_kernel_count"].delta == 62 - 66
    assert d.metrics["nccl_kernel_time_ns"].delta == 33742101 - 25401752
    assert d.metrics["step_time_ns"].a is None
    assert d.warnings[0] == (
        "before and after have no step ranges: whole captures are compared, not steps"
    )
    assert any("sliced" in w for w in d.warnings)
    assert "NCCL -4 kernels" in "\n".join(explain_diff(d))


def test_comparability_warnings() -> None:
    a = summarize(fixture_file("h200_eager_3steps.sqlite"))
    b = summarize(fixture_file("nsysai_mfu_2gpu_after.sqlite"))
    d = diff_census(a, b, ("x", "y"))
    assert d.comparability.problems == (
        "y has no step ranges: whole captures are compared, not steps",
        "different GPUs (x: 1 × NVIDIA H200; y: 2 × unknown)",
    )
    assert d.comparability.notes == (
        "different nsys versions: x 2025.3.2.0, y 2026.2.1.210",
        "y is a sliced export: some kernels have no launching API row",
    )
    assert d.warnings == (*d.comparability.problems, *d.comparability.notes)
    why = explain_diff(d)
    assert why[0] == "not directly comparable: " + "; ".join(d.comparability.problems)


def test_cli_diff_formats() -> None:
    ea = str(fixture_file("h200_eager_3steps.sqlite"))
    cb = str(fixture_file("h200_compiled_3steps.sqlite"))
    r = runner.invoke(app, ["diff", ea, cb, "--format", "json"])
    assert r.exit_code == 0, r.output
    doc = json.loads(r.stdout)
    assert doc["labels"] == {"a": "h200_eager_3steps", "b": "h200_compiled_3steps"}
    assert doc["metrics"]["kernel_count"]["delta"] == -43
    r = runner.invoke(app, ["diff", ea, cb, "--labels", "eager,compiled", "--format", "markdown"])
    assert r.exit_code == 0 and "| Metric | eager | compiled |" in r.stdout
    r = runner.invoke(app, ["diff", ea, cb, "--format", "yaml"])
    assert r.exit_code == 2 and "Error: --format 'yaml': choose table, markdown or json" in r.stderr
    r = runner.invoke(app, ["diff", ea, cb, "--labels", "only-one"])
    assert r.exit_code == 2


def test_the_same_side_twice_is_said_first(tmp_path) -> None:
    ea = fixture_file("h200_eager_3steps.sqlite")
    said = f"warning: A and B are the same file ({ea}): every difference below is zero"
    r = runner.invoke(app, ["diff", str(ea), str(ea)])
    assert r.exit_code == 0, r.output
    assert r.stderr.splitlines()[0] == said  # was: a diff of zeros, nothing said
    r = runner.invoke(app, ["diff", str(ea), str(ea), "--json"])
    assert said in r.stderr.splitlines()
    assert json.loads(r.stdout)["metrics"]["kernel_count"]["delta"] == 0
    r = runner.invoke(app, ["diff", str(tmp_path), str(tmp_path)])  # a side that fails: its error
    assert r.exit_code == 1 and r.stderr.startswith(f"Error: {tmp_path} holds no ")
    (tmp_path / "link.sqlite").symlink_to(ea)  # another name for the same file
    r = runner.invoke(app, ["diff", str(ea), str(tmp_path / "link.sqlite")])
    assert r.stderr.startswith("warning: A and B are the same file")
    cb = str(fixture_file("h200_compiled_3steps.sqlite"))
    r = runner.invoke(app, ["diff", str(ea), cb, "--labels", "eager, eager"])
    assert r.exit_code == 2  # was: two columns named eager
    assert r.stderr.strip() == (
        "Error: --labels 'eager, eager': both sides would be 'eager': give each side its own label"
    )
    with pytest.raises(CensusError, match=r"^labels \('a', 'a'\): both sides would be 'a'"):
        census.diff(ea, cb, labels=("a", "a"))


PIDS = """
import os, sys
from pathlib import Path
import census.load.finish as cc
from census.api import diff_document
from census.options import Options

compute, marks = cc.compute_census, Path(sys.argv[3])

def marked(profile):
    (marks / str(os.getpid())).write_text("")
    return compute(profile)

cc.compute_census = marked
meta, text = diff_document(Path(sys.argv[1]), Path(sys.argv[2]), None, Options(), 5)
sys.stdout.write("".join(text))
"""


@pytest.mark.parametrize("workers", ["1", "2", "4"])
def test_two_exports_are_read_side_by_side_into_the_same_diff(tmp_path, workers) -> None:
    """With two workers or more, the second side is computed in a process of its own while the
    first is computed here (census.api._read_sides); the document is the one of one side after
    the other; with one worker, or a side already in the cache, one process computes."""
    import os
    import subprocess
    import sys

    a, b = fixture_file("h200_eager_3steps.sqlite"), fixture_file("h200_compiled_3steps.sqlite")
    script = tmp_path / "pids.py"
    script.write_text(PIDS)
    env = {**os.environ, "CENSUS_WORKERS": workers, "CENSUS_CACHE_DIR": str(tmp_path / "cache")}
    env.pop("CENSUS_NO_CACHE", None)

    def run(name: str) -> tuple[str, int]:
        marks = tmp_path / name
        marks.mkdir()
        out = subprocess.run([sys.executable, str(script), str(a), str(b), str(marks)], env=env,
                             capture_output=True, text=True, check=True, timeout=120)  # fmt: skip
        return out.stdout, len(list(marks.iterdir()))

    def forget(kind: str, entries: int = 99) -> None:
        for entry in sorted((tmp_path / "cache" / kind).iterdir())[:entries]:
            entry.unlink()

    cold, processes = run("cold")
    assert processes == (2 if workers != "1" else 1)
    forget("diff-json")
    cached, computed = run("cached")  # both sides from the cache: nothing computed
    assert computed == 0
    forget("diff-json")
    forget("census", 1)  # one side cached, the other computed here with every worker
    one, processes = run("one")
    assert processes == 1
    env["CENSUS_NO_CACHE"] = "1"
    env["CENSUS_WORKERS"] = "1"
    alone, _ = run("alone")
    assert json.loads(cold) == json.loads(alone) and cold == alone == cached == one


THREADS = """
import sys, threading, census
a, b = sys.argv[1], sys.argv[2]
t = threading.Thread(target=census.diff, args=(a, b))
t.start()
census.diff(a, b)
t.join()
print("done")
"""


def test_diffs_from_two_threads_of_a_fresh_process_end(tmp_path) -> None:
    """With another thread running, a diff reads its sides one after the other: a process
    forked beside a thread that was importing a module hung there (found by a review)."""
    import os
    import subprocess
    import sys

    script = tmp_path / "threads.py"
    script.write_text(THREADS)
    a, b = fixture_file("h200_eager_3steps.sqlite"), fixture_file("h200_compiled_3steps.sqlite")
    env = {**os.environ, "CENSUS_NO_CACHE": "1", "CENSUS_WORKERS": "2"}
    for _ in range(3):
        out = subprocess.run([sys.executable, str(script), str(a), str(b)], env=env,
                             capture_output=True, text=True, timeout=60)  # fmt: skip
        assert out.stdout == "done\n", out.stderr[-2000:]


def without_cuda_trace(source, target):
    """A copy of a real export as nsys writes it without `-t cuda`: no CUPTI_* table."""
    import shutil
    import sqlite3

    shutil.copyfile(source, target)
    conn = sqlite3.connect(target)
    names = [r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")]
    for name in names:
        if name.startswith("CUPTI_"):
            conn.execute(f"DROP TABLE {name}")
    conn.commit()
    conn.close()
    return target


def test_a_side_without_cuda_trace_is_not_comparable_first(tmp_path) -> None:
    """#58: against a capture with no kernel and no CUDA API table, the diff said "-287
    kernels/step (-100.0%)", "launch API time -2.25 ms/step (-100.0%)" and "host-bound: nocuda
    removed GPU work" as if real; now every format says first that the sides are not directly
    comparable, naming the side and why, and no GPU sentence follows."""
    a = fixture_file("h200_eager_3steps.sqlite")
    b = without_cuda_trace(a, tmp_path / "nocuda.sqlite")
    problem = ("nocuda recorded no CUDA kernels and no CUDA API calls (was nsys run without "
               "`-t cuda`?): GPU busy and idle, kernels, launches and copies are unknown there, "
               "not zero, and are not compared; only step times are")  # fmt: skip
    html = tmp_path / "diff.html"
    outputs = {fmt: runner.invoke(app, ["diff", str(a), str(b), "--format", fmt, "--html",
                                        str(html)], env={"COLUMNS": "400"})
               for fmt in ("table", "markdown", "json")}  # fmt: skip
    assert all(r.exit_code == 0 for r in outputs.values()), outputs
    table = outputs["table"].stdout
    assert table.startswith(f"not directly comparable: {problem}\n")
    assert outputs["markdown"].stdout.startswith(f"**not directly comparable: {problem}**")
    doc = json.loads(outputs["json"].stdout)
    assert doc["comparability"]["problems"] == [problem]
    assert doc["explanation"][0] == f"not directly comparable: {problem}"
    assert f"<body><p class='verdict'>not directly comparable: {problem}</p>" in html.read_text()
    why = table[: table.index("Per step:")]
    assert "-100.0%" not in why and "host-bound" not in why and "kernels" not in why.split(
        "only step times are")[1]  # fmt: skip
    assert "nocuda and h200_eager_3steps are within noise: step time 0 ns/step (+0.0%)" in why

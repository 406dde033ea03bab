"""The public Python API and its DataFrames: the same numbers as the JSON documents."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

import census
from census.api import census_view, diff_view
from census.metrics import METRIC_KEYS, TIMING_KEYS
from census.render.json_docs import diff_json, summary_json
from census.store import cache
from tests.helpers.files import REPO, fixture_file

FRAMES_LOADED = (
    "import sys, census; print([m for m in ('pandas', 'census.api') if m in sys.modules])"
)


def test_import_census_is_light() -> None:
    out = subprocess.run([sys.executable, "-c", FRAMES_LOADED], capture_output=True, text=True)
    assert out.stdout.strip() == "[]"


def test_public_names() -> None:
    assert census.summarize.__module__ == "census.api"
    assert census.phase.__module__ == "census.capture.steps"
    assert issubclass(census.CensusError, Exception)
    with pytest.raises(census.CensusError, match="not a valid regular expression"):
        census.summarize("sample:eager", steps="(")
    with pytest.raises(AttributeError):
        census.no_such_name  # noqa: B018


def test_summarize_and_diff_take_paths_strings_and_censuses() -> None:
    eager = fixture_file("h200_eager_3steps.sqlite")
    c = census.summarize(str(eager))
    assert c == census.summarize(eager) and c.totals.kernel_count == 861
    d = census.diff(c, fixture_file("h200_compiled_3steps.sqlite"))
    assert d.labels == ("h200_eager_3steps", "h200_compiled_3steps")
    assert d.metrics["kernel_count"].a == 287 and d.metrics["kernel_count"].b == 244
    assert census.explain(d)[0].startswith("h200_compiled_3steps and h200_eager_3steps are within")
    assert census.diff("sample:eager", "sample:compiled", labels=("e", "c")).labels == ("e", "c")


def _records(frame) -> list[dict]:
    """A frame's rows with pandas' missing values as None, numbers as plain Python numbers."""
    plain = frame.astype(object).where(frame.notna(), None)
    return [{k: _plain(v) for k, v in row.items()} for row in plain.to_dict("records")]


def _plain(v):
    return v.item() if hasattr(v, "item") else v


def test_frames_equal_the_summary_json() -> None:
    c = census.summarize("sample:eager")
    doc = summary_json(census_view(c), top=len(c.kernels))
    assert _records(census.frames.kernels(c)) == doc["top_kernels"]
    assert _records(census.frames.classes(c)) == doc["classes"]
    assert _records(census.frames.memory(c)) == doc["memory"]
    steps = census.frames.steps(c)
    assert steps["step_name"].tolist() == [s["name"] for s in doc["steps"]]
    assert steps["step"].tolist() == list(range(len(doc["steps"])))
    for key in (*METRIC_KEYS, "start_ns", "end_ns"):
        assert steps[key].tolist() == [s[key] for s in doc["steps"]], key
    for key in TIMING_KEYS:
        assert steps[key].tolist() == [s[key] for s in doc["timing"]["steps"]], key
    assert str(steps["kernel_time_ns"].dtype) == "int64"
    assert str(census.frames.kernels(c)["per_step_time_ns"].dtype) == "Float64"
    assert steps.attrs["definitions"] == {
        k: v
        for k, v in doc["definitions"].items()
        if "." not in k and k not in ("limiter", "host_ran_ahead", "idle_by_range", "graph_trace")
    }
    assert doc["limiter"] == "gpu"  # the sample (the GPU-bound demo) is busy 97% of its step
    assert census.frames.idle_by_range(c).to_dict("records") == doc["idle_by_range"]


def test_frames_without_steps_have_missing_means() -> None:
    c = census.summarize(fixture_file("nsysai_mock.sqlite"))
    k = census.frames.kernels(c)
    assert k["count"].sum() == 2 and k["per_step_count"].isna().all()
    assert _records(k) == summary_json(census_view(c))["top_kernels"]


def test_diff_frames_equal_the_diff_json() -> None:
    d = census.diff("sample:eager", "sample:compiled", labels=("eager", "compiled"))
    doc = diff_json(diff_view(d, explanation=[]), top=20)
    m = census.frames.metrics(d)
    assert {r.pop("metric"): r for r in _records(m)} == doc["metrics"]
    assert m.attrs["labels"] == {"a": "eager", "b": "compiled"}
    changes = census.frames.kernel_changes(d)
    for bucket, rows in doc["kernels"].items():
        for row in rows:
            mine = changes[(changes.name == row["name"]) & (changes.bucket == bucket)]
            for measure in ("count", "time_ns"):
                got = _records(mine[mine.measure == measure])[0]
                assert {k: got[k] for k in ("a", "b", "delta", "pct")} == row[measure]
    assert len(changes) == 2 * len(d.kernels)


def test_code_hash_covers_every_file_of_the_package(tmp_path: Path, monkeypatch) -> None:
    """The cache key changes with any module: a copy of the package with one byte changed in
    the explanation (not a module that computes numbers) hashes differently."""
    import shutil

    copy = tmp_path / "census"
    shutil.copytree(REPO / "census", copy, ignore=shutil.ignore_patterns("__pycache__", "*.xz"))
    monkeypatch.setattr(cache, "__file__", str(copy / "store" / "cache.py"))
    cache.code_hash.cache_clear()
    try:
        before = cache.code_hash()
        explain = copy / "compare" / "explain.py"
        explain.write_text(explain.read_text() + "\n# changed\n")
        cache.code_hash.cache_clear()
        assert cache.code_hash() != before
        (copy / "new_stage.py").write_text("")
        cache.code_hash.cache_clear()
        assert cache.code_hash() not in (before,)
    finally:
        monkeypatch.undo()
        cache.code_hash.cache_clear()


def test_docs_metric_table_is_generated_from_the_definitions() -> None:
    from census.render.markdown import render_metric_table

    readme = (REPO / "docs" / "definitions.md").read_text(encoding="utf-8")
    block = readme.split("<!-- metrics:start -->\n")[1].split("\n<!-- metrics:end -->")[0]
    assert block == render_metric_table()


def test_summary_help_lists_every_key() -> None:
    from typer.testing import CliRunner

    from census.cli import app

    out = CliRunner().invoke(app, ["summary", "--help"], env={"COLUMNS": "400"}).stdout
    for key in (*METRIC_KEYS, *TIMING_KEYS):
        assert key in out, key


def test_frames_steps_and_phases_join_on_the_step() -> None:
    c = census.summarize("sample:eager")
    steps, phases = census.frames.steps(c), census.frames.phases(c)
    assert list(steps.columns[:2]) == list(phases.columns[:2]) == ["step", "step_name"]
    joined = steps.merge(phases, on=["step", "step_name"], suffixes=("", "_phase"))
    assert len(joined) == len(phases) and joined["step"].nunique() == c.step_count
    doc_steps = summary_json(census_view(c))["steps"]
    for row in _records(joined):
        step = doc_steps[row["step"]]
        doc_phase = next(p for p in step["phases"] if p["name"] == row["phase"])
        assert (row["step_name"], row["end_ns"]) == (step["name"], step["end_ns"])
        assert row["gpu_span_ns_phase"] == doc_phase["gpu_span_ns"]
        assert row["gpu_start_ns_phase"] == doc_phase["gpu_start_ns"]
    assert phases["gpu_span_ns"].notna().any()


def test_dir_of_frames_shows_only_the_frames() -> None:
    assert [n for n in dir(census.frames) if not n.startswith("__")] == [
        "arm_phases", "arms", "classes", "idle_by_range", "kernel_changes", "kernels",
        "memory", "metrics", "ops", "phases", "steps",
    ]  # fmt: skip

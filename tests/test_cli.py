"""The command line: JSON contract, exit codes, stdout vs stderr, samples, help speed."""

from __future__ import annotations

import json
import re
import subprocess
import sys

import pytest
from typer.testing import CliRunner

from census.cli import app
from census.metrics import METRIC_KEYS
from tests.helpers.files import fixture_file

runner = CliRunner()


def test_summary_json_contract() -> None:
    r = runner.invoke(app, ["summary", str(fixture_file("h200_eager_3steps.sqlite")), "--json"])
    assert r.exit_code == 0, r.output
    doc = json.loads(r.stdout)  # stdout is pure JSON; progress and warnings go to stderr
    assert {
        "census_version",
        "source",
        "totals",
        "steps",
        "per_step",
        "classes",
        "top_kernels",
        "warnings",
    } <= set(doc)
    assert set(doc["source"]) == {"path", "tracer", "nsys_version", "schema_version", "gpus"}
    assert doc["source"]["gpus"] == [{"id": 0, "name": "NVIDIA H200"}]
    assert set(doc["totals"]) == set(METRIC_KEYS)
    assert set(doc["per_step"]) == set(METRIC_KEYS)
    for step in doc["steps"]:
        assert set(step) == {"name", "start_ns", "end_ns", "phases", *METRIC_KEYS}
    assert all(isinstance(v, int) for v in doc["totals"].values())
    assert doc["totals"]["kernel_count"] == 861
    assert doc["per_step"]["launch_api_time_ns"] == 6740355 / 3
    assert doc["capture"] is None


def test_summary_table_and_skip_first() -> None:
    path = str(fixture_file("h200_eager_3steps.sqlite"))
    r = runner.invoke(app, ["summary", path, "--skip-first", "1", "--json"])
    doc = json.loads(r.stdout)
    assert [s["name"] for s in doc["steps"]] == ["step 1", "step 2"]
    r = runner.invoke(app, ["summary", path])
    assert r.exit_code == 0 and "Kernel census" in r.stdout and "861" in r.stdout


def test_bad_regex_and_negative_skip_are_usage_errors() -> None:
    path = str(fixture_file("h200_eager_3steps.sqlite"))
    r = runner.invoke(app, ["summary", path, "--steps", "("])
    assert r.exit_code == 2 and r.stderr.startswith(
        "Error: --steps '(' is not a valid regular expression"
    )
    r = runner.invoke(app, ["summary", path, "--skip-first", "-1"])
    assert r.exit_code == 2


def test_samples_and_sample_overhead() -> None:
    r = runner.invoke(app, ["summary", "--sample", "compiled", "--json"])
    assert r.exit_code == 0, r.output
    doc = json.loads(r.stdout)
    assert len(doc["steps"]) == 20
    # the host ran ahead of the GPU in this sample: its calibration run's GPU-clock mean (CUDA
    # events), not the host's 13401830.0
    assert doc["capture"]["uncaptured_mean_step_time_ns"] == 13409366.4
    assert doc["capture"]["overhead_ratio"] > 1
    r = runner.invoke(app, ["summary", "--sample", "nope"])
    assert r.exit_code == 2 and "unknown sample 'nope'" in r.stderr
    r = runner.invoke(app, ["diff", "sample:eager", "sample:compiled", "--format", "markdown"])
    assert r.exit_code == 0 and "| Metric | eager | compiled |" in r.stdout


def test_demo_falls_back_to_bundled_captures(tmp_path, monkeypatch) -> None:
    monkeypatch.setenv("PATH", "/nonexistent")
    monkeypatch.delenv("CENSUS_NSYS", raising=False)
    report = tmp_path / "demo.html"
    r = runner.invoke(app, ["demo", "--html", str(report)])
    assert r.exit_code == 0, r.output
    assert "nsys is not installed; using the bundled H200 captures instead" in r.stderr
    assert "compiled is faster than eager" in r.stdout
    assert report.stat().st_size > 100_000


def test_help_is_fast_and_imports_nothing_heavy() -> None:
    code = (
        "import sys, census.cli; census.cli.app; "
        "print(sorted(m for m in ('torch', 'plotly', 'pandas') if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"
    r = subprocess.run(
        [sys.executable, "-m", "census", "--help"], capture_output=True, text=True, check=False
    )
    assert r.returncode == 0 and "summary" in r.stdout


def test_internal_errors_are_one_line_unless_debug(monkeypatch) -> None:
    import census.api

    def boom(*a, **k):
        raise RuntimeError("kaboom")

    monkeypatch.setattr(census.api, "summarize_with", boom)
    r = runner.invoke(app, ["summary", "x.sqlite"])
    assert r.exit_code == 70
    assert (
        r.stderr.strip()
        == "Error: internal error: RuntimeError: kaboom (run with --debug for details)"
    )
    r = runner.invoke(app, ["--debug", "summary", "x.sqlite"])
    assert isinstance(r.exception, RuntimeError)


def test_help_names_values_by_meaning_not_type() -> None:
    from typer.testing import CliRunner

    from census.cli import app

    for command in ("summary", "diff", "dashboard", "capture", "ab", "demo", "doctor"):
        out = CliRunner().invoke(app, [command, "--help"], env={"COLUMNS": "200"}).stdout
        for typed in ("<str>", "<bool>", "<int>", "<list", "<path>"):
            assert typed not in out, (command, typed)
    out = CliRunner().invoke(app, ["summary", "--help"], env={"COLUMNS": "200"}).stdout
    assert re.search(r"--steps +REGEX", out) and re.search(r"--fail-if +GATE", out)


def test_a_long_document_is_written_whole_a_piece_at_a_time():
    """GuardedStdout writes a long text in slices (no encoded copy of a whole document): the
    stream gets every character in order; a reader gone mid-way is ReaderGone."""
    import io

    from census.cli.stdout import GuardedStdout
    from census.errors import ReaderGone
    from census.units import PIECE_CHARS

    text = "".join(chr(65 + i % 26) for i in range(3 * PIECE_CHARS + 17)) + "é"
    sink = io.StringIO()
    assert GuardedStdout(sink).write(text) == len(text) and sink.getvalue() == text

    class Closing(io.StringIO):
        def write(self, s: str) -> int:
            if self.tell() >= PIECE_CHARS:
                raise BrokenPipeError
            return super().write(s)

    with pytest.raises(ReaderGone):
        GuardedStdout(Closing()).write(text)

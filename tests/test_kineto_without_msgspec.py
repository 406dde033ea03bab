"""A Kineto trace read where msgspec cannot be imported (#55: a GPU machine's checkout without
it failed with exit 70): the standard library's json reads it instead (census.sources.kineto.
decoder), with the same census, one line on stderr saying so, and the same bad-input errors."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from census.cli import app
from census.sources.kineto.decoder import INSTALL, SLOW_NOTE
from tests.helpers.files import DATA, REPO
from tests.helpers.kineto_oracle import KINETO

runner = CliRunner()
TRACES = sorted(KINETO.glob("*.json.gz"))
SIMPLE_ADD = DATA / "kineto_ranks" / "hta_execution_trace__benchmark_simple_add_trace.json.gz"


def _without_msgspec(tmp_path: Path, *args: str) -> subprocess.CompletedProcess:
    """`census ARGS` in a process (and its workers) where `import msgspec` fails, as where it
    is not installed: a package of that name first on the path that raises on import."""
    blocker = tmp_path / "blocker" / "msgspec"
    blocker.mkdir(parents=True, exist_ok=True)
    (blocker / "__init__.py").write_text(
        "raise ModuleNotFoundError(\"No module named 'msgspec'\", name='msgspec')\n"
    )
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(blocker.parent), str(REPO)])
    env["CENSUS_CACHE_DIR"] = str(tmp_path / "cache")  # its own export, made through json
    code = "import sys; from census.cli import app; app(sys.argv[1:], prog_name='census')"
    return subprocess.run(
        [sys.executable, "-c", code, *args], capture_output=True, text=True, env=env, timeout=600
    )


@pytest.mark.parametrize("trace", [*TRACES, SIMPLE_ADD], ids=lambda p: p.name)
def test_summary_without_msgspec_equals_msgspec_route(trace: Path, tmp_path: Path) -> None:
    r = runner.invoke(app, ["summary", str(trace), "--json"])
    assert r.exit_code == 0, r.output
    want = json.loads(r.stdout)
    got = _without_msgspec(tmp_path, "summary", str(trace), "--json")
    assert got.returncode == 0, got.stderr
    assert SLOW_NOTE in got.stderr and INSTALL in SLOW_NOTE
    assert json.loads(got.stdout) == want


def test_a_generated_trace_without_msgspec(tmp_path: Path) -> None:
    """bench/kineto_generate.py's trace (4 MB of JSON, many batches; kernel names with braces
    and commas, so that some cuts fall inside a string and are tried again, and the stream's
    buffer grows while a failed batch's error is held): the same census through json."""
    import runpy

    generate = runpy.run_path(str(REPO / "bench" / "kineto_generate.py"))["main"]
    assert generate(["--kernels", "3000", "-o", str(tmp_path / "gen")]) == 0
    trace = tmp_path / "gen" / "rank0.pt.trace.json.gz"
    r = runner.invoke(app, ["summary", str(trace), "--json"])
    assert r.exit_code == 0, r.output
    got = _without_msgspec(tmp_path, "summary", str(trace), "--json")
    assert got.returncode == 0, got.stderr
    assert json.loads(got.stdout) == json.loads(r.stdout)


@pytest.mark.parametrize(
    ("text", "says"),
    [
        (b'{"traceEvents": [{"ph": "X", "ts": NaN}]}', "NaN or Infinity"),
        (b'{"traceEvents": [{"ph": "X"}, 2, {"ph": "X"}]}', "not JSON"),
        (b'{"traceEvents": [{"ph": "X", "args": 3}]}', "not JSON"),
        (b'{"traceEvents": [{"ph": "X"}] x', "not a PyTorch profiler trace"),
    ],
)
def test_bad_input_without_msgspec_is_one_line(text: bytes, says: str, tmp_path: Path) -> None:
    """Bad input read through json: exit 1 and the one line that msgspec's route gives."""
    trace = tmp_path / "bad.json"
    trace.write_bytes(text)
    want = runner.invoke(app, ["summary", str(trace), "--json"])
    got = _without_msgspec(tmp_path, "summary", str(trace), "--json")
    assert (got.returncode, want.exit_code) == (1, 1), got.stderr
    error = [line for line in got.stderr.splitlines() if line.startswith("Error:")]
    assert len(error) == 1 and str(trace) in error[0] and says in error[0], got.stderr
    assert _plain(error[0]) == _plain(want.output.strip())  # msgspec's route's line


def _plain(line: str) -> str:
    """An error line without the parser's own words in brackets (msgspec's and json's differ)."""
    return re.sub(r" \((?:JSON is malformed|Expected|invalid JSON).*\) at byte", " at byte", line)

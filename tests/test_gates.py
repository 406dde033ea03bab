"""CI gates: `--fail-if` on a diff and on one capture; exit 5 after the output."""

from __future__ import annotations

import pytest
from typer.testing import CliRunner

from census.cli import app
from census.compare.gates import parse_gate
from census.errors import UsageError
from tests.helpers.files import fixture_file

runner = CliRunner()
pytestmark = pytest.mark.fixtures


def paths() -> tuple[str, str]:
    return (str(fixture_file("h200_eager_3steps.sqlite")),
            str(fixture_file("h200_compiled_3steps.sqlite")))  # fmt: skip


def test_parse() -> None:
    g = parse_gate("d2d_bytes>+5%")
    assert (g.phase, g.key, g.op, g.value, g.percent) == (None, "d2d_bytes", ">", 5.0, True)
    g = parse_gate(" forward.launch_api_count >= -2 ")
    assert (g.phase, g.key, g.op, g.value, g.percent) == (
        "forward",
        "launch_api_count",
        ">=",
        -2,
        False,
    )
    g = parse_gate("(outside phases).d2d_count<1")
    assert g.phase == "(outside phases)" and g.label == "(outside phases).d2d_count"
    for bad, message in (("kernels>1", "unknown key 'kernels'"), ("kernel_count", "KEY OP VALUE"),
                         ("forward.bogus>1", "'bogus' is not a phase key"),
                         ("kernel_count=>1", "unknown key 'kernel_count='")):  # fmt: skip
        with pytest.raises(UsageError, match=message):
            parse_gate(bad)


def test_a_diff_gate_fails_after_printing_the_diff() -> None:
    compiled, eager = paths()[1], paths()[0]
    r = runner.invoke(app, ["diff", compiled, eager, "--format", "markdown",
                            "--fail-if", "kernel_count>+0", "--fail-if", "d2d_bytes>+5%",
                            "--fail-if", "launch_api_count<-100"])  # fmt: skip
    assert r.exit_code == 5
    assert "| GPU kernels | 244 | 287 | +43 | +17.6% |" in r.stdout
    assert r.stderr.splitlines() == [
        "gate failed: kernel_count>+0: kernel_count +43 per step (244 -> 287)",
        "gate failed: d2d_bytes>+5%: d2d_bytes +600.0% per step (16.00 MiB -> 112.00 MiB)",
    ]


def test_diff_gates_pass_and_phase_gates() -> None:
    eager, compiled = paths()
    ok = ["--fail-if", "kernel_count>+0", "--fail-if", "d2d_bytes>+5%", "--fail-if",
          "launch_api_count>+0", "--fail-if", "forward.kernel_count>+0"]  # fmt: skip
    r = runner.invoke(app, ["diff", eager, compiled, "--format", "json", *ok])
    assert r.exit_code == 0, r.stderr
    r = runner.invoke(app, ["diff", eager, compiled, "--fail-if", "optimizer.duration_ns>+0"])
    assert r.exit_code == 5
    assert "gate failed: optimizer.duration_ns>+0: optimizer.duration_ns +197.2 µs" in r.stderr
    r = runner.invoke(app, ["diff", eager, compiled, "--fail-if", "sampler.kernel_count>+0"])
    assert r.exit_code == 2 and "no phase 'sampler' in this diff" in r.stderr


def test_summary_gates() -> None:
    eager = paths()[0]
    r = runner.invoke(app, ["summary", eager, "--fail-if", "kernel_count>250"])
    assert r.exit_code == 5 and "Kernel census" in r.stdout
    assert r.stderr.strip() == "gate failed: kernel_count>250: kernel_count is 287 per step"
    r = runner.invoke(app, ["summary", eager, "--json", "--fail-if", "kernel_count>2500",
                            "--fail-if", "backward.d2d_count>12"])  # fmt: skip
    assert r.exit_code == 0 and r.stdout.startswith("{")
    r = runner.invoke(app, ["summary", eager, "--fail-if", "kernel_count>+5%"])
    assert r.exit_code == 2 and r.stdout == ""
    assert "a percentage needs two captures" in r.stderr

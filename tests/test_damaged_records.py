"""Records census reads back are data, not trust: an arm's step-times record, an experiment's
ab.json, a capture's run.json, damaged, are refused naming the first bad field, never used; a cut
cache entry is recomputed, never printed."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from census.capture.records import check_record
from census.cli import app
from tests.helpers.files import fixture_file

runner = CliRunner()


# An arm's step-times record is checked before any number of it is used


GOOD = {"clock": "host", "step_time_ns": [5, 6, 7], "host_step_time_ns": [5, 6, 0],
        "phase_time_ns": {"forward": [1, 0, 2]}, "peak_allocated_bytes": None,
        "peak_reserved_bytes": 0, "dynamo": {"frames_compiled": 0, "graph_breaks": 2}}  # fmt: skip


@pytest.mark.parametrize(
    ("change", "why"),
    [
        ({"step_time_ns": [5, -5, 7]}, "step_time_ns[1] is -5, not a positive integer"),
        ({"step_time_ns": [5, 6, 0]}, "step_time_ns[2] is 0, not a positive integer"),
        ({"step_time_ns": ["5"]}, 'step_time_ns[0] is "5", not a positive integer'),
        ({"step_time_ns": [5.0]}, "step_time_ns[0] is 5.0, not a positive integer"),
        ({"step_time_ns": [True]}, "step_time_ns[0] is true, not a positive integer"),
        ({"step_time_ns": [float("nan")]}, "step_time_ns[0] is NaN, not a positive integer"),
        ({"step_time_ns": [float("inf")]}, "step_time_ns[0] is Infinity, not a positive integer"),
        ({"step_time_ns": [1 << 62]}, f"step_time_ns[0] is {1 << 62}, not a positive integer"),
        ({"step_time_ns": {"0": 5}}, 'step_time_ns is {"0": 5}, not a JSON list'),
        ({"step_time_ns": None}, "step_time_ns is null, not a JSON list"),
        ({"clock": "wall"}, 'clock is "wall", not "cuda_events" or "host"'),
        ({"clock": None}, 'clock is null, not "cuda_events" or "host"'),
        ({"host_step_time_ns": [1, 2]}, "host_step_time_ns has 2 steps, step_time_ns 3"),
        ({"host_step_time_ns": [1, -2, 3]}, "host_step_time_ns[1] is -2, not an integer, 0 or "),
        ({"phase_time_ns": {"fwd": [1, 2]}}, 'phase_time_ns["fwd"] is not a list of 3 times'),
        ({"phase_time_ns": {"fwd": [1, 2, -1]}}, 'phase_time_ns["fwd"][2] is -1, not an integer'),
        ({"phase_time_ns": [1]}, "phase_time_ns is [1], not a JSON object"),
        ({"peak_reserved_bytes": -1}, "peak_reserved_bytes is -1, not an integer, 0 or more"),
        ({"peak_allocated_bytes": "1 GiB"}, 'peak_allocated_bytes is "1 GiB", not an integer'),
        ({"dynamo": [1]}, "dynamo is [1], not a JSON object"),
        ({"dynamo": {"graph_breaks": 1.5}}, "dynamo.graph_breaks is 1.5, not an integer"),
    ],
)
def test_a_damaged_record_names_its_first_bad_field(change: dict, why: str) -> None:
    check_record(GOOD)
    with pytest.raises(ValueError) as info:
        check_record({**GOOD, **change})
    assert str(info.value).startswith(why)


def test_a_record_without_clock_or_of_another_shape_is_damaged() -> None:
    for record, why in (([1, 2], "it is [1, 2], not a JSON object"),
                        ({"step_time_ns": [1]}, "clock is null")):  # fmt: skip
        with pytest.raises(ValueError, match=f"^{re.escape(why)}"):
            check_record(record)
    check_record({})  # no steps at all: said by the caller as "recorded no steps"


WRITE_RECORD = "import os, sys; open(os.environ['CENSUS_STEP_TIMES'], 'w').write(sys.argv[1])"


def ab_with_records(tmp_path: Path, a: str, b: str):
    def arm(text: str) -> str:
        return " ".join([sys.executable, "-c", json.dumps(WRITE_RECORD), json.dumps(text)])

    return runner.invoke(app, ["ab", "exp", "-o", str(tmp_path), "--no-capture", "--labels",
                               "eager,compiled", "--a", arm(a), "--b", arm(b)],
                         env={"CENSUS_NSYS": ""})  # fmt: skip


@pytest.mark.parametrize(
    ("b", "why"),
    [
        ('{"clock": "host", "step_time_ns": [1000, 1000, -5]}', "step_time_ns[2] is -5, not a "
         "positive integer"),
        ('{"clock": "host", "step_time_ns": [1e400]}', "step_time_ns[0] is Infinity, not a"),
        ('{"clock": "host", "step_time_ns": [1000', "not JSON (Expecting ',' delimiter: "),
    ],
)  # fmt: skip
def test_ab_stops_at_a_damaged_record_naming_the_arm(tmp_path: Path, b: str, why: str) -> None:
    r = ab_with_records(tmp_path, '{"clock": "host", "step_time_ns": [1000, 1000, 1000]}', b)
    assert r.exit_code == 4, r.output
    assert r.stderr.splitlines()[-1].startswith(
        "Error: arm 2 (B, compiled): its step-times record ($CENSUS_STEP_TIMES) is damaged: " + why
    )
    assert not (tmp_path / "exp").exists()


# An experiment's ab.json, read back, is checked as the arms' own records were


@pytest.fixture(scope="module")
def experiment_record(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    """A real experiment folder and its ab.json as census wrote it."""
    out = tmp_path_factory.mktemp("ab")
    r = ab_with_records(out, '{"clock": "host", "step_time_ns": [1000, 1001, 999]}',
                        '{"clock": "host", "step_time_ns": [1100, 1101, 1099]}')  # fmt: skip
    assert r.exit_code == 0, r.output
    return out / "exp", (out / "exp" / "ab.json").read_text()


@pytest.mark.parametrize(
    ("field", "value", "why"),
    [
        ("step_time_ns", "1e400", "step_time_ns[1] is Infinity, not a positive integer"),
        ("step_time_ns", "-5", "step_time_ns[1] is -5, not a positive integer"),
        ("step_time_ns", '"7"', 'step_time_ns[1] is "7", not a positive integer'),
        ("step_time_ns", "true", "step_time_ns[1] is true, not a positive integer"),
        ("step_time_ns", "5.7", "step_time_ns[1] is 5.7, not a positive integer"),
        ("clock", '"wall"', 'clock is "wall", not "cuda_events" or "host"'),
        ("peak_reserved_bytes", "-1", "peak_reserved_bytes is -1, not an integer, 0 or more"),
        ("recompiles", "1e400", "recompiles is Infinity, not an integer, 0 or more"),
        ("graph_breaks", "1.5", "graph_breaks is 1.5, not an integer, 0 or more"),
        ("index", "1e400", "its side, index or discarded flag is damaged"),
        ("discarded", '"false"', "its side, index or discarded flag is damaged"),
    ],
)
def test_a_damaged_ab_json_names_the_arm_and_its_field(
    experiment_record: tuple[Path, str], field: str, value: str, why: str
) -> None:
    folder, text = experiment_record
    record = json.loads(text)
    arm = record["arms"][2]
    if field == "step_time_ns":
        arm[field][1] = "@"
    else:
        arm[field] = "@"
    (folder / "ab.json").write_text(json.dumps(record).replace('"@"', value))
    try:
        r = runner.invoke(app, ["diff", str(folder)])
    finally:
        (folder / "ab.json").write_text(text)
    assert r.exit_code == 1, r.output
    assert r.stderr.splitlines() == [
        f"Error: {folder / 'ab.json'}: not a census experiment record (arm 2: {why})"
    ]


def test_an_undamaged_ab_json_reads_back(experiment_record: tuple[Path, str]) -> None:
    r = runner.invoke(app, ["diff", str(experiment_record[0])])
    assert r.exit_code == 0 and r.stdout.startswith(
        "compiled is slower than eager by 100 ns/step"
    ), r.output


# A capture's run.json and the cache


def test_a_malformed_run_json_is_an_input_error(tmp_path: Path) -> None:
    folder = tmp_path / "cap"
    folder.mkdir()
    shutil.copy(fixture_file("h200_eager_3steps.sqlite"), folder / "capture.sqlite")
    (folder / "run.json").write_text('["not", "a", "record"]')
    r = runner.invoke(app, ["summary", str(folder)])
    assert r.exit_code == 1
    assert r.stderr.strip().endswith(
        "run.json: not a census capture record (a JSON object with a calibration)"
    )


def test_a_cut_cache_entry_is_recomputed_not_printed(export: Path, tmp_path: Path) -> None:
    env = {**os.environ, "CENSUS_CACHE_DIR": str(tmp_path / "cache")}
    env.pop("CENSUS_NO_CACHE", None)

    def run() -> subprocess.CompletedProcess:
        return subprocess.run([sys.executable, "-m", "census", "summary", str(export), "--json"],
                              capture_output=True, text=True, env=env, check=False)  # fmt: skip

    first = run()
    assert first.returncode == 0
    (entry,) = (tmp_path / "cache" / "summary-json").iterdir()
    data = entry.read_bytes()
    entry.write_bytes(data[: len(data) - 40])
    again = run()
    assert again.returncode == 0 and json.loads(again.stdout) == json.loads(first.stdout)
    entry.write_text('{"meta": [], "sha256": "x"}\n{}')
    assert json.loads(run().stdout) == json.loads(first.stdout)

"""`census capture --profiler torch` and `census ab --profiler torch` on the CPU: real processes
under the real torch.profiler (no nsys), the trace read back independently (gzip + json +
Decimal, none of census's code) and against `census summary FOLDER --json`.

tests/helpers/torch_train.py is the loop: census.steps with phases forward, backward and
optimizer around a tiny model; with --warmup 2 --active 3 the measured steps are 2, 3 and 4. On
the CPU a trace holds no kernels: these tests hold census's steps and phases, the window and the
files, not kernel counts (the GPU proof: docs/capture.md)."""

from __future__ import annotations

import gzip
import json
import os
import sys
from decimal import Decimal
from pathlib import Path

import pytest
from typer.testing import CliRunner

import census
from census.api import capture_steps
from census.capture.run import CaptureSpec, capture_foreign
from census.cli import app

pytest.importorskip("torch", reason="torch.profiler captures need torch")

TRAIN = str(Path(__file__).parent / "helpers" / "torch_train.py")
PHASES = ("forward", "backward", "optimizer")
runner = CliRunner()


def annotations(trace: Path) -> tuple[dict, list[tuple[str, int, int]]]:
    """The trace's document and its host annotations (`user_annotation` complete events) as
    (name, start_ns, end_ns), in start order: the times exact from the decimal text."""
    with gzip.open(trace, "rt", encoding="utf-8") as fh:
        doc = json.load(fh, parse_float=str)
    out = []
    for e in doc["traceEvents"]:
        if e.get("ph") == "X" and e.get("cat") == "user_annotation":
            start, dur = Decimal(str(e["ts"])) * 1000, Decimal(str(e["dur"])) * 1000
            out.append((e["name"], int(start), int(start + dur)))
    return doc, sorted(out, key=lambda a: a[1])


def steps_of(marks: list[tuple[str, int, int]]) -> list[dict]:
    """Each `step N` annotation with the census phases inside it (name, duration), then the
    step's time outside them."""
    out = []
    for name, s, e in (m for m in marks if m[0].startswith("step ")):
        phases = [(p, pe - ps) for p, ps, pe in marks if p in PHASES and s <= ps and pe <= e]
        outside = [("(outside phases)", e - s - sum(d for _, d in phases))] if phases else []
        out.append({"name": name, "start_ns": s, "end_ns": e, "phases": phases + outside})
    return out


@pytest.fixture(scope="module")
def captured(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("profiles")
    env = {"OMP_NUM_THREADS": "1", "CENSUS_CACHE_DIR": str(out / "cache")}
    r = runner.invoke(app, ["capture", "mine", "-o", str(out), "--profiler", "torch", "--warmup",
                            "2", "--active", "3", "--", sys.executable, TRAIN], env=env)  # fmt: skip
    assert r.exit_code == 0, r.output
    assert "nsys" not in r.stderr.replace("nsys_", "")  # nothing said of a tool not used
    return out / "mine"


def test_the_capture_folder_holds_the_trace_and_says_its_profiler(captured: Path) -> None:
    assert sorted(p.name for p in captured.iterdir()) == ["capture.pt.trace.json.gz", "run.json"]
    info = json.loads((captured / "run.json").read_text())
    assert info["profiler"] == "torch.profiler" and info["nsys_command"] is None
    assert info["nsys_version"] is None and (info["warmup"], info["active"]) == (2, 3)
    assert info["profile_command"] == [sys.executable, TRAIN]
    assert capture_foreign(captured) is None  # census's own: --force may replace it


def test_the_trace_holds_the_measured_steps_and_their_phases(captured: Path) -> None:
    doc, marks = annotations(captured / "capture.pt.trace.json.gz")
    steps = steps_of(marks)
    # the warm-up (steps 0, 1) is outside the window, and census stops the loop after step 4
    assert [s["name"] for s in steps] == ["step 2", "step 3", "step 4"]
    for s in steps:
        assert [p for p, _ in s["phases"]] == [*PHASES, "(outside phases)"]
    assert not any(name.startswith("ProfilerStep#") for name, *_ in marks)
    assert "distributedInfo" not in doc  # one process, no torch.distributed


def test_summary_of_the_folder_equals_the_trace(captured: Path) -> None:
    r = runner.invoke(app, ["summary", str(captured), "--json"])
    assert r.exit_code == 0, r.output
    doc = json.loads(r.stdout)
    assert doc["source"]["tracer"] == "torch.profiler (Kineto)"
    expected = steps_of(annotations(captured / "capture.pt.trace.json.gz")[1])
    got = [{"name": s["name"], "start_ns": s["start_ns"], "end_ns": s["end_ns"],
            "phases": [(p["name"], p["duration_ns"]) for p in s["phases"]]}
           for s in doc["steps"]]  # fmt: skip
    assert got == expected and len(got) == 3
    assert doc["totals"]["kernel_count"] == 0  # the CPU: no kernels


def test_a_running_torch_profiler_gets_census_steps_and_phases(tmp_path: Path) -> None:
    import torch

    trace = tmp_path / "mine.pt.trace.json"
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU]) as prof:
        for i in census.steps(range(3)):
            with census.phase("forward"):
                torch.ones(4).sum()
            assert i in range(3)
        with census.step(7):
            pass
    prof.export_chrome_trace(str(trace))
    with trace.open("rb") as src, gzip.open(tmp_path / "t.json.gz", "wb") as dst:
        dst.write(src.read())
    marks = annotations(tmp_path / "t.json.gz")[1]
    shown = [(s["name"], [p for p, _ in s["phases"]][:1]) for s in steps_of(marks)]
    assert shown == [("step 0", ["forward"]), ("step 1", ["forward"]), ("step 2", ["forward"]),
                     ("step 7", [])]  # fmt: skip


def test_a_users_own_profiler_is_left_running(tmp_path: Path, monkeypatch) -> None:
    import torch

    from census.capture.torch_trace import TorchTrace

    monkeypatch.setenv("CENSUS_PROFILER", "torch")
    monkeypatch.setenv("CENSUS_TRACE_DIR", str(tmp_path))
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU]) as prof:
        trace = TorchTrace.from_env()
        assert trace is not None
        trace.start()  # no second profiler over the user's (its stop would end theirs)
        trace.stop()
        with census.step(3):
            pass
    assert os.listdir(tmp_path) == []
    assert [e.name for e in prof.events() if e.name == "step 3"] == ["step 3"]


def test_no_mark_without_a_running_profiler() -> None:
    from census.capture.torch_trace import mark_open

    assert mark_open("step 1") is None


def test_two_gloo_ranks_write_a_trace_each(tmp_path: Path) -> None:
    command = (sys.executable, "-m", "torch.distributed.run", "--nproc-per-node", "2",
               "--standalone", TRAIN, "--dist")  # fmt: skip
    spec = CaptureSpec("ddp", command, tmp_path, warmup=1, active=2, profiler="torch",
                       env={"OMP_NUM_THREADS": "1"})  # fmt: skip
    folder = capture_steps(spec)
    names = ["rank0.pt.trace.json.gz", "rank1.pt.trace.json.gz"]
    assert sorted(p.name for p in folder.iterdir()) == [*names, "run.json"]
    info = json.loads((folder / "run.json").read_text())
    assert info["world_size"] == 2 and info["ranks"] == {"0": names[0], "1": names[1]}
    assert info["profiler"] == "torch.profiler"
    for rank, name in enumerate(names):
        doc, marks = annotations(folder / name)
        assert (doc["distributedInfo"]["rank"], doc["distributedInfo"]["world_size"]) == (rank, 2)
        assert [s["name"] for s in steps_of(marks)] == ["step 1", "step 2"]
        assert info["rank_places"][str(rank)]["local_rank"] == rank
    r = runner.invoke(app, ["summary", str(folder), "--json"])  # read as a rank folder
    assert r.exit_code == 0, r.output
    doc = json.loads(r.stdout)
    assert [x["rank"] for x in doc["ranks"]] == ["rank0", "rank1"]
    assert [x["name"] for x in doc["steps"]] == [
        f"rank{r}: step {i}" for r in (0, 1) for i in (1, 2)
    ]


def test_ab_captures_each_side_with_torch_profiler(tmp_path: Path) -> None:
    side = f"{sys.executable} {TRAIN} --torch-when-captured"  # the arms without torch: faster
    r = runner.invoke(app, ["ab", "e", "-o", str(tmp_path), "--profiler", "torch", "--arms", "4",
                            "--warmup", "1", "--active", "2", "--a", side, "--b", side,
                            "--json"], env={"OMP_NUM_THREADS": "1"})  # fmt: skip
    assert r.exit_code == 0, r.output
    assert "capture of A under torch.profiler" in r.stderr
    folder = tmp_path / "e"
    record = json.loads((folder / "ab.json").read_text())
    assert record["capture"] is None and len(record["arms"]) == 5  # the arms: no profiler
    for s in ("a", "b"):
        assert sorted(p.name for p in (folder / s).iterdir()) == [
            "capture.pt.trace.json.gz", "run.json"]  # fmt: skip
        marks = annotations(folder / s / "capture.pt.trace.json.gz")[1]
        assert [x["name"] for x in steps_of(marks)] == ["step 1", "step 2"]
        assert json.loads((folder / s / "run.json").read_text())["profiler"] == "torch.profiler"


def test_capture_without_nsys_names_profiler_torch(tmp_path: Path) -> None:
    env = {"PATH": str(tmp_path), "CENSUS_NSYS": None}
    r = runner.invoke(app, ["capture", "x", "-o", str(tmp_path / "p"), "--", "true"], env=env)
    assert r.exit_code == 3
    assert (
        r.stderr.startswith("Error: nsys not found on PATH: ") and len(r.stderr.splitlines()) == 1
    )
    assert r.stderr.rstrip().endswith(
        "or capture without nsys: census capture --profiler torch (torch is installed here)"
    )


def test_a_program_that_wrote_no_trace_is_a_failed_capture(tmp_path: Path) -> None:
    r = runner.invoke(app, ["capture", "x", "-o", str(tmp_path), "--profiler", "torch", "--",
                            sys.executable, "-c", "pass"])  # fmt: skip
    assert r.exit_code == 4
    assert (
        "Error: the program wrote no torch.profiler trace: did it import torch and reach its "
        "measured steps (census.steps)?" in r.stderr
    )
    assert os.listdir(tmp_path) == []


@pytest.mark.parametrize(
    ("args", "said"),
    [(["--profiler", "perf"], "--profiler 'perf': choose nsys or torch"),
     (["--profiler", "torch", "--nsys", "/x/nsys"], "--nsys: only with --profiler nsys")],
)  # fmt: skip
def test_profiler_usage_errors(tmp_path: Path, args: list[str], said: str) -> None:
    r = runner.invoke(app, ["capture", "x", "-o", str(tmp_path), *args, "--", "true"])
    assert r.exit_code == 2 and r.stderr.strip() == f"Error: {said}"

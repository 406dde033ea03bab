"""One vocabulary across commands (issue #59): an HTML file is `--html FILE` everywhere (the old
`dashboard -o` and `demo --report` kept, hidden, with one warning line); `-o` is a folder
everywhere; `--sample` wherever a profile is read; `doctor --json`; `dashboard --open`; and
`--help` says why there is no shell completion."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
import typer
from typer.testing import CliRunner

from census.cli import app

runner = CliRunner()
COMMANDS = ("summary", "diff", "dashboard", "capture", "ab", "demo", "doctor")
READ_PROFILES = ("summary", "diff", "dashboard")


def params(command: str) -> list:
    group = typer.main.get_command(app)
    ctx = typer.Context(group)
    cmd = group.get_command(ctx, command)
    return cmd.get_params(ctx)


def test_dashboard_writes_html_file_and_keeps_o_as_a_deprecated_alias(tmp_path: Path) -> None:
    page = tmp_path / "e.html"
    r = runner.invoke(app, ["dashboard", "sample:eager", "--html", str(page)])
    assert r.exit_code == 0, r.output
    assert r.stderr == f"wrote {page}\n" and "sample:eager · nsys" in page.read_text("utf-8")
    old = tmp_path / "old.html"
    r = runner.invoke(app, ["dashboard", "sample:eager", "-o", str(old)])
    assert r.exit_code == 0, r.output
    assert r.stderr == (
        "warning: -o/--output (a file here; -o names a folder elsewhere) is deprecated: "
        f"use --html FILE\nwrote {old}\n"
    )
    assert old.read_bytes() == page.read_bytes()
    r = runner.invoke(app, ["dashboard", "sample:eager", "-o", str(old), "--html", str(page)])
    assert r.exit_code == 2
    assert r.stderr == (
        "Error: give --html FILE alone (-o/--output (a file here; -o names a folder elsewhere) "
        "is its old spelling)\n"
    )


def test_demo_writes_html_file_and_keeps_report_as_a_deprecated_alias(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PATH", "/nonexistent")
    monkeypatch.delenv("CENSUS_NSYS", raising=False)
    page = tmp_path / "demo.html"
    r = runner.invoke(app, ["demo", "--report", str(page)])
    assert r.exit_code == 0, r.output
    assert r.stderr.splitlines()[0] == "warning: --report is deprecated: use --html FILE"
    assert r.stderr.endswith(f"wrote {page}\n") and page.stat().st_size > 100_000
    assert "--report" not in runner.invoke(app, ["demo", "--help"]).stdout


@pytest.mark.parametrize("command", COMMANDS)
def test_o_is_a_folder_and_an_html_file_is_html_file(command: str) -> None:
    for p in params(command):
        if p.param_type_name != "option" or p.hidden:
            continue
        if "-o" in p.opts:
            assert p.metavar == "FOLDER", (command, p.opts)
        if "--html" in p.opts:
            assert p.metavar == "FILE", (command, p.opts)
        assert "--report" not in p.opts, command


def test_diff_takes_sample_names_as_summary_does() -> None:
    by_args = runner.invoke(app, ["diff", "sample:eager", "sample:compiled", "--json"])
    by_flag = runner.invoke(app, ["diff", "--sample", "eager,compiled", "--json"])
    assert by_flag.exit_code == 0, by_flag.output
    assert json.loads(by_flag.stdout) == json.loads(by_args.stdout)
    assert json.loads(by_flag.stdout)["labels"] == {"a": "eager", "b": "compiled"}
    r = runner.invoke(app, ["diff", "x.sqlite", "--sample", "eager,compiled"])
    assert r.exit_code == 2
    assert r.stderr == "Error: give either x.sqlite or --sample eager,compiled, not both\n"
    r = runner.invoke(app, ["summary", "--sample", "eager,compiled"])
    assert r.exit_code == 2 and r.stderr == "Error: --sample 'eager,compiled': give one name\n"
    r = runner.invoke(app, ["diff"])
    assert r.exit_code == 2
    assert r.stderr == "Error: name a profile (.sqlite, .nsys-rep or capture folder) or --sample\n"


@pytest.mark.parametrize("command", READ_PROFILES)
def test_every_profile_argument_names_samples(command: str) -> None:
    arguments = [p for p in params(command) if p.param_type_name == "argument"]
    assert arguments
    for p in arguments:
        assert "sample:NAME" in (p.help or ""), (command, p.name)
    assert any("--sample" in p.opts for p in params(command)), command


def test_doctor_json_is_what_it_checked_with_the_same_exit_code(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import census.capture.doctor

    monkeypatch.setattr(census.capture.doctor, "_run", lambda *a, **k: (127, "not found"))
    args = ["doctor", "--nsys", str(tmp_path / "no-nsys"), "-o", str(tmp_path / "p")]
    text = runner.invoke(app, args)
    r = runner.invoke(app, [*args, "--json"])
    assert r.exit_code == text.exit_code == 3
    doc = json.loads(r.stdout)
    assert set(doc) == {"ok", "checks"} and doc["ok"] is False
    names = [c["name"] for c in doc["checks"]]
    assert names == ["nsys", "torch", "NVIDIA driver", f"{tmp_path / 'p'}/ writable"]
    assert [c["ok"] for c in doc["checks"]] == [False, False, False, True]
    assert all(set(c) == {"name", "ok", "detail"} for c in doc["checks"])
    lines = text.stdout.splitlines()[2:]  # after what works here and what capturing needs
    assert [line.split(" ", 1)[0] for line in lines] == ["FAIL", "FAIL", "FAIL", "ok"]


def test_dashboard_open_opens_the_written_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import webbrowser

    opened = []
    monkeypatch.setattr(webbrowser, "open", lambda url, *a, **k: opened.append(url) or True)
    page = tmp_path / "e.html"
    r = runner.invoke(app, ["dashboard", "--sample", "eager", "--html", str(page), "--open"])
    assert r.exit_code == 0, r.output
    assert opened == [page.resolve().as_uri()] and page.exists()
    runner.invoke(app, ["dashboard", "--sample", "eager", "--html", str(page)])
    assert len(opened) == 1


def test_help_says_why_there_is_no_shell_completion() -> None:
    out = runner.invoke(app, ["--help"], env={"COLUMNS": "300"}).stdout
    assert "--install-completion" not in out
    assert "No shell completion: typer's would start census in full at every Tab" in " ".join(
        out.split()
    )


def test_demo_json_is_the_diff_json_of_the_bundled_captures(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PATH", "/nonexistent")
    monkeypatch.delenv("CENSUS_NSYS", raising=False)
    monkeypatch.chdir(tmp_path)
    r = runner.invoke(app, ["demo", "--json"])
    assert r.exit_code == 0, r.output
    diff = runner.invoke(app, ["diff", "--sample", "eager,compiled", "--json"])
    assert json.loads(r.stdout) == json.loads(diff.stdout)
    assert "using the bundled H200 captures instead" in r.stderr
    assert list(tmp_path.iterdir()) == []  # no dashboard unless --html names one
    page = tmp_path / "demo.html"
    r = runner.invoke(app, ["demo", "--json", "--html", str(page)])
    assert r.exit_code == 0 and json.loads(r.stdout) == json.loads(diff.stdout)
    assert r.stderr.endswith(f"wrote {page}\n") and page.stat().st_size > 100_000


def test_capture_json_is_the_summary_json_with_the_capture_s_own_facts(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`census capture --json` (a stand-in nsys copying a real export; a real calibration run
    of a CPU loop): the summary --json of its folder, with "folder" and "run" (its run.json,
    calibration included); progress on stderr."""
    from tests.helpers.files import FAKE_NSYS, SLEEP_TRAIN, fixture_file

    monkeypatch.setenv("FAKE_NSYS_MODE", "copy")
    monkeypatch.setenv("FAKE_NSYS_SQLITE", str(fixture_file("h200_eager_3steps.sqlite")))
    loop = [sys.executable, SLEEP_TRAIN, "--ms", "1", "--steps", "4"]
    r = runner.invoke(app, ["capture", "run", "-o", str(tmp_path), "--nsys", FAKE_NSYS,
                            "--calibrate", "--json", "--", *loop])  # fmt: skip
    assert r.exit_code == 0, r.output
    folder = tmp_path / "run"
    doc, run = json.loads(r.stdout), json.loads((folder / "run.json").read_text("utf-8"))
    assert doc.pop("folder") == str(folder) and doc.pop("run") == run
    assert run["command"] == loop and len(run["calibration"]["uncaptured_step_time_ns"]) == 4
    summary = runner.invoke(app, ["summary", str(folder), "--json"])
    assert summary.exit_code == 0 and doc == json.loads(summary.stdout)
    assert doc["totals"]["kernel_count"] == 861
    calibrated = run["calibration"]["uncaptured_mean_step_time_ns"]
    assert doc["capture"]["uncaptured_mean_step_time_ns"] == calibrated
    assert r.stderr.endswith(f"capture written to {folder}\n")


def test_capture_json_of_a_launcher_s_ranks_is_the_rank_folder_s_document(tmp_path: Path) -> None:
    """A launcher's ranks (a rank folder of two real exports and its run.json): the capture's
    document is the rank folder's `census summary --json`, with "folder" and "run"."""
    import shutil

    from census.api import summary_view
    from census.capture.records import read_run_info
    from census.render import render
    from census.render.views import CaptureView
    from tests.helpers.files import fixture_file

    folder = tmp_path / "ddp"
    folder.mkdir()
    for rank in (0, 1):
        shutil.copy(fixture_file("h200_eager_3steps.sqlite"), folder / f"rank{rank}.sqlite")
    record = {
        "name": "ddp",
        "ranks": {"0": "rank0.sqlite", "1": "rank1.sqlite"},
        "calibration": None,
    }
    (folder / "run.json").write_text(json.dumps(record), "utf-8")
    view = CaptureView(summary_view(folder), str(folder), read_run_info(folder))
    doc = json.loads(render(view, "json", top=15))
    assert doc.pop("folder") == str(folder) and doc.pop("run") == record
    summary = runner.invoke(app, ["summary", str(folder), "--json"])
    assert summary.exit_code == 0 and doc == json.loads(summary.stdout)
    assert [rank["rank"] for rank in doc["ranks"]] == ["rank0", "rank1"]

"""Never hang, never leave orphans, never an internal error: census's worker processes, the
arms of `census ab` and a capture's program as real processes (kill -9, Ctrl-C twice, SIGTERM,
a child left holding the output), their output (200 MiB, bytes that are not UTF-8), damaged
step-times records and ab.json, and arms whose statistics are degenerate."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest
from typer.testing import CliRunner

from census.capture.arms import arm_order, check_record
from census.capture.process import ProgramError, run_group
from census.cli.app import app
from census.compare.experiment import Experiment
from census.compare.stats import analyze
from census.load.pool import sweep_spill_folders
from census.model import Arm
from census.paths import owner_tag
from census.sources.samples import sample_path

pytestmark = pytest.mark.skipif(sys.platform != "linux", reason="reads processes from /proc")
ROOT = Path(__file__).parent.parent
runner = CliRunner()


def alive(pid: int) -> bool:
    """Whether `pid` runs (a zombie nobody reaped has ended)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except (FileNotFoundError, ProcessLookupError):
        return False
    return stat.rsplit(")", 1)[1].split()[0] not in ("Z", "X")


def wait_until(cond: Callable[[], bool], timeout: float = 30.0) -> bool:
    deadline = time.monotonic() + timeout
    while not cond():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.05)
    return True


def pids_in(marks: Path) -> list[int]:
    """The pids the processes under test wrote down, as `PID.pid` or `PID-PID.pids` names."""
    return [int(p) for f in marks.iterdir() for p in f.name.split(".")[0].split("-")]


def reaped_pid() -> int:
    """The pid of a process that has ended."""
    with subprocess.Popen([sys.executable, "-c", ""]) as proc:
        proc.wait()
    return proc.pid


# -- worker processes die with census; their spill folder is swept --------------------------------
WORKERS = """
import os, sys, time
from pathlib import Path
import census.load.pool as pool
from census.sources.readonly import open_readonly

def nap(conn, shared, job, tick):
    Path(shared, f"{os.getpid()}.pid").write_text("")
    time.sleep(300)

def nap_alone(marks):
    nap(None, marks, None, None)

mode, path, marks = sys.argv[1], Path(sys.argv[2]), sys.argv[3]
if mode == "watch":  # where the kernel cannot kill a worker with its parent
    pool._kill_on_parent_death = lambda: False
if mode == "ranks":
    pool.map_processes(nap_alone, [marks, marks], 2)
else:
    pool.Runner(open_readonly(path), path, 2, lambda *a: None).map(nap, marks, [1, 2, 3, 4], 4, "")
"""


@pytest.mark.parametrize("mode", ["pdeathsig", "watch", "ranks"])
def test_workers_die_with_a_census_killed_outright(tmp_path: Path, mode: str) -> None:
    script, marks, tmp = tmp_path / "workers.py", tmp_path / "marks", tmp_path / "tmp"
    script.write_text(WORKERS)
    marks.mkdir()
    tmp.mkdir()
    export = sample_path("eager") / "capture.sqlite"
    env = {**os.environ, "TMPDIR": str(tmp)}
    with subprocess.Popen([sys.executable, str(script), mode, str(export), str(marks)],
                          env=env, cwd=ROOT) as parent:  # fmt: skip
        assert wait_until(lambda: len(list(marks.iterdir())) == 2), "the workers did not start"
        workers = pids_in(marks)
        assert all(alive(p) for p in workers)
        parent.kill()  # SIGKILL: census can clean up nothing itself
    assert wait_until(lambda: not any(alive(p) for p in workers), timeout=10), "orphans left"
    if mode == "ranks":
        return  # a pool over rank exports spills nothing
    (left,) = tmp.iterdir()
    assert left.name.startswith(f"census-{parent.pid}-")
    (left / "part.npy").write_bytes(b"a result in transit")
    next_pass(tmp)  # sweeps it before it spills, and removes its own folder when it ends
    assert list(tmp.iterdir()) == []


def next_pass(tmp: Path) -> None:
    """A summary's passes over a real export with two workers, in a process of its own."""
    code = (
        "import sys; from pathlib import Path; from census.load.aggregates import load_profile; "
        "load_profile(Path(sys.argv[1]), r'^step', 0, lambda *a: None, 2, 50)"
    )
    export = sample_path("eager") / "capture.sqlite"
    subprocess.run([sys.executable, "-c", code, str(export)], check=True, timeout=60,
                   env={**os.environ, "TMPDIR": str(tmp)})  # fmt: skip


def test_a_later_pass_sweeps_a_dead_census_spill_folder_and_nothing_else(tmp_path: Path) -> None:
    dead, host = reaped_pid(), owner_tag().split("-")[1]
    stale = tmp_path / f"census-{dead}-{host}-abcd_123"
    stale.mkdir()
    (stale / "x.npy").write_bytes(b"x")
    keep = [
        tmp_path / f"census-{os.getpid()}-{host}-abcdefgh",  # a live census's
        tmp_path / f"census-1-{host}-abcdefgh",  # a live process (init)
        tmp_path / f"census-{dead}-0badc0de-abcdefgh",  # another host's
        tmp_path / f"census-{dead}-{host}-abcdefghi",  # not census's pattern
        tmp_path / f"census-{dead}-abcdefgh",
        tmp_path / "census-arms-abcdefgh",
        tmp_path / f"other-{dead}-{host}-abcdefgh",
    ]
    for folder in keep:
        folder.mkdir()
    (tmp_path / f"census-{dead}-{host}-filefile").write_text("a file, not a folder")
    target = tmp_path / "target"
    target.mkdir()
    (tmp_path / f"census-{dead}-{host}-linklink").symlink_to(target)
    keep += [tmp_path / f"census-{dead}-{host}-filefile", tmp_path / f"census-{dead}-{host}-linklink",
             target]  # fmt: skip
    assert sweep_spill_folders(str(tmp_path)) == [str(stale)]
    assert sorted(tmp_path.iterdir()) == sorted(keep)
    # a real pass with workers sweeps before it spills
    (tmp_path / f"census-{dead}-{host}-again123").mkdir()
    next_pass(tmp_path)
    assert sorted(tmp_path.iterdir()) == sorted(keep)


# -- an arm's whole process group is stopped, however census ends -------------------------------
ARM = """
import json, os, signal, subprocess, sys, time
from pathlib import Path

mode, marks = sys.argv[1], Path(sys.argv[2])
if mode == "stubborn":  # ignores Ctrl-C and SIGTERM, and so does its child
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
child = subprocess.Popen(["sleep", "300"])  # holds the arm's output open
(marks / f"{os.getpid()}-{child.pid}.pids").write_text("")
if mode == "leave":  # a record, then an exit that leaves the child running
    record = {"clock": "host", "step_time_ns": [1000, 1001, 999]}
    Path(os.environ["CENSUS_STEP_TIMES"]).write_text(json.dumps(record))
    sys.exit(0)
time.sleep(300)
"""


def start_ab(tmp_path: Path, mode: str) -> tuple[subprocess.Popen, Path]:
    script, marks, tmp = tmp_path / "arm.py", tmp_path / "marks", tmp_path / "tmp"
    script.write_text(ARM)
    marks.mkdir()
    tmp.mkdir()
    arm = f"{sys.executable} {script} {mode} {marks}"
    command = [sys.executable, "-m", "census", "ab", "exp", "-o", str(tmp_path / "out"),
               "--no-capture", "--arms", "4", "--a", arm, "--b", arm]  # fmt: skip
    env = {**os.environ, "TMPDIR": str(tmp), "CENSUS_NSYS": ""}
    proc = subprocess.Popen(command, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    return proc, marks


@pytest.mark.parametrize(
    "signals", [(signal.SIGINT, signal.SIGINT), (signal.SIGTERM,), (signal.SIGHUP,)]
)
def test_ctrl_c_twice_or_sigterm_leaves_no_process_of_the_arm(
    tmp_path: Path, signals: tuple[int, ...]
) -> None:
    proc, marks = start_ab(tmp_path, "stubborn")
    with proc:
        assert wait_until(lambda: any(marks.iterdir())), "the arm did not start"
        arm, grandchild = pids_in(marks)
        for signum in signals:  # the second arrives while census stops the arm's group
            proc.send_signal(signum)
            time.sleep(0.3)
        assert proc.wait(timeout=30) == 130
        assert proc.stderr is not None and proc.stderr.read().decode().endswith(
            "Error: interrupted\n"
        )
    assert wait_until(lambda: not alive(arm) and not alive(grandchild), timeout=10)
    assert list((tmp_path / "tmp").iterdir()) == [] and not (tmp_path / "out" / "exp").exists()


def test_an_arm_that_leaves_a_child_holding_its_output_does_not_hang(tmp_path: Path) -> None:
    proc, marks = start_ab(tmp_path, "leave")
    with proc:
        assert proc.wait(timeout=60) == 0, proc.stderr.read().decode() if proc.stderr else ""
    pids = pids_in(marks)
    assert len(pids) == 10  # five arms, each with a child
    assert wait_until(lambda: not any(alive(p) for p in pids), timeout=10)
    assert (tmp_path / "out" / "exp" / "ab.json").is_file()


# -- an arm's output: read as it comes, a bounded tail kept, any bytes ----------------------------
LOUD = """
import sys
from census.capture.process import ProgramError, run_group

arm = [sys.executable, "-c", "import sys; out = sys.stdout.buffer; "
       "[out.write(b'x' * 1023 + b'\\\\n') for _ in range(200 * 1024)]; "
       "out.write(b'almost done\\\\nnot UTF-8: \\\\xff\\\\xfe\\\\n'); sys.exit(3)"]
try:
    run_group(arm, {}, "arm 1 (A)")
except ProgramError as exc:
    # VmHWM, this process's peak RSS (ru_maxrss would keep the peak of the process that forked
    # it: Linux carries it across exec)
    status = open("/proc/self/status").read()
    print(int(status.split("VmHWM:")[1].split()[0]) // 1024)
    print(exc)
    print(exc.details)
"""


def test_200_mib_of_arm_output_keep_census_small(tmp_path: Path) -> None:
    script = tmp_path / "loud.py"
    script.write_text(LOUD)
    out = subprocess.run([sys.executable, str(script)], capture_output=True, check=True,
                         timeout=60, cwd=ROOT).stdout.decode()  # fmt: skip
    rss_mib, message, *tail = out.splitlines()
    assert int(rss_mib) < 100  # it held 437 MiB when it kept the whole output
    assert message.startswith("arm 1 (A) failed (exit 3): ")
    assert message.endswith(": not UTF-8: \\xff\\xfe")
    assert tail[-2:] == ["almost done", "not UTF-8: \\xff\\xfe"]
    assert 2 < len(tail) <= 40 and all(line == "x" * 1023 for line in tail[1:-2])


def test_a_failed_arm_prints_its_tail_as_lines(tmp_path: Path) -> None:
    code = (
        "import sys; print('step 1'); sys.stdout.flush(); "
        "sys.stdout.buffer.write(b'\\xff\\rprogress 50%\\rprogress 100%\\n'); "
        "print('Traceback: boom\\x1b[2J'); sys.exit(3)"
    )
    arm = f"{sys.executable} -c {json.dumps(code)}"
    r = runner.invoke(app, ["ab", "exp", "-o", str(tmp_path), "--no-capture", "--a", arm,
                            "--b", arm], env={"CENSUS_NSYS": ""})  # fmt: skip
    assert r.exit_code == 4
    lines = r.stderr.splitlines()
    assert lines[-4].startswith("Error: arm 0 (A, the discarded warm arm) failed (exit 3): ")
    assert lines[-4].endswith(": Traceback: boom\\x1b[2J")
    assert lines[-3:] == ["  | step 1", "  | progress 100%", "  | Traceback: boom\\x1b[2J"]


def test_an_arm_that_cannot_start_is_a_capture_error(tmp_path: Path) -> None:
    with pytest.raises(Exception, match=r"^arm 1 \(A\) could not start: /no/such/program x: No "):
        run_group(["/no/such/program", "x"], {}, "arm 1 (A)")


def test_an_arm_killed_by_a_signal_says_so() -> None:
    with pytest.raises(ProgramError, match=r"^arm 1 \(A\) failed \(killed by SIGKILL\): "):
        run_group(["sh", "-c", "echo bye; kill -9 $$"], {}, "arm 1 (A)")


# -- a capture's program (under nsys, or its calibration run without): the same runner, shown live
FAKE_NSYS = str(ROOT / "tests" / "helpers" / "fake_nsys.py")  # runs the program ("crash" mode)
NOT_UTF8 = "import sys; sys.stdout.buffer.write(b'caf\\xc3\\xa9 \\xff\\xfe\\n'); sys.exit(3)"


@pytest.mark.parametrize(
    ("extra", "what"), [((), "nsys profile"), (("--calibrate",), "calibration run (without nsys)")]
)
def test_a_capture_whose_program_prints_bytes_not_utf8_shows_them_escaped(
    tmp_path: Path, extra: tuple[str, ...], what: str
) -> None:
    r = runner.invoke(app, ["capture", "c", "-o", str(tmp_path), "--nsys", FAKE_NSYS, *extra,
                            "--", sys.executable, "-c", NOT_UTF8],
                      env={"FAKE_NSYS_MODE": "crash"})  # fmt: skip
    assert r.exit_code == 4, r.output  # it was 70: a UnicodeDecodeError
    *_, shown, error = r.stderr.splitlines()
    assert shown == "café \\xff\\xfe"  # as it came, on stderr
    assert error.startswith(f"Error: {what} failed (exit 3): ")
    assert error.endswith(": café \\xff\\xfe")
    assert list(tmp_path.iterdir()) == []


LOUD_CAPTURE = """
import io, sys
from census.cli import app

class Tail(io.TextIOBase):  # stderr, of which only the end is kept
    text = ""
    def write(self, s):
        Tail.text = (Tail.text + s)[-4096:]
        return len(s)

sys.stderr = Tail()
try:
    app(sys.argv[1:])
except SystemExit as exc:
    code = exc.code
status = open("/proc/self/status").read()
print(int(status.split("VmHWM:")[1].split()[0]) // 1024)
print(code)
print(Tail.text)
"""


def test_200_mib_of_a_captured_program_s_output_keep_census_small(tmp_path: Path) -> None:
    script, loud = tmp_path / "census_loud.py", tmp_path / "loud.py"
    script.write_text(LOUD_CAPTURE)
    loud.write_text(
        "import sys; out = sys.stdout.buffer\n"
        "for _ in range(200 * 1024): out.write(b'x' * 1023 + b'\\n')\n"
        "out.write(b'almost done\\nnot UTF-8: \\xff\\xfe\\n'); sys.exit(3)\n"
    )
    args = ["capture", "c", "-o", tmp_path / "out", "--nsys", FAKE_NSYS, "--", sys.executable, loud]
    out = subprocess.run([sys.executable, str(script), *map(str, args)], capture_output=True,
                         check=True, timeout=120, cwd=ROOT,
                         env={**os.environ, "FAKE_NSYS_MODE": "crash"}).stdout.decode()  # fmt: skip
    out = out.rstrip("\n")  # Tail.text ends with one
    rss_mib, code, *tail = out.splitlines()
    assert int(rss_mib) < 100, rss_mib  # it held 488 MiB when it kept the whole output
    assert code == "4"
    assert tail[-4:-1] == ["x" * 1023, "almost done", "not UTF-8: \\xff\\xfe"]  # shown live
    assert tail[-1].startswith("Error: nsys profile failed (exit 3): ")
    assert tail[-1].endswith(": not UTF-8: \\xff\\xfe")


@pytest.mark.parametrize("nsys", ["runs the program", "ignores Ctrl-C"])
def test_ctrl_c_twice_during_a_capture_leaves_no_process_of_it(tmp_path: Path, nsys: str) -> None:
    """Census sends nsys SIGINT, to write its report, and waits up to 10 s before SIGKILL: a
    second Ctrl-C cuts that short; either way the program's whole group is gone."""
    script, marks, tmp = tmp_path / "arm.py", tmp_path / "marks", tmp_path / "tmp"
    script.write_text(ARM)
    marks.mkdir()
    tmp.mkdir()
    program = [sys.executable, str(script), "stubborn", str(marks)]  # with a child `sleep 300`
    fake = FAKE_NSYS
    if nsys == "ignores Ctrl-C":  # an nsys that is itself the stubborn program
        fake = str(tmp_path / "nsys")
        Path(fake).write_text(f"#!/bin/sh\nexec {' '.join(program)}\n")
        Path(fake).chmod(0o755)
    command = [sys.executable, "-m", "census", "capture", "c", "-o", str(tmp_path / "out"),
               "--nsys", fake, "--", *program]  # fmt: skip
    env = {**os.environ, "TMPDIR": str(tmp), "FAKE_NSYS_MODE": "crash"}
    with subprocess.Popen(command, env=env, stderr=subprocess.PIPE) as proc:
        assert wait_until(lambda: any(marks.iterdir())), "the program did not start"
        pids = pids_in(marks)
        proc.send_signal(signal.SIGINT)
        time.sleep(0.05)  # the second arrives while nsys finishes (fake nsys takes 0.25 s)
        first = time.monotonic()
        proc.send_signal(signal.SIGINT)
        assert proc.wait(timeout=30) == 130
        assert time.monotonic() - first < 8  # not the 10 s of grace
        assert proc.stderr is not None
        assert proc.stderr.read().decode().endswith("Error: interrupted\n")
    assert wait_until(lambda: not any(alive(p) for p in pids), timeout=10), "orphans left"
    assert list((tmp_path / "out").iterdir()) == []


# -- an arm's step-times record is checked before any number of it is used -----------------------
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


# -- an experiment's ab.json, read back, is checked as the arms' own records were -----------------
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


# -- degenerate arms: no difference is "no difference", a zero time no division --------------------
def experiment(a: tuple[int, ...], b: tuple[int, ...], arms: int = 4) -> Experiment:
    order = arm_order(arms)
    runs = tuple(Arm(s, i, i == 0, a if s == "a" else b) for i, s in enumerate(order))
    return Experiment(("A", "B"), {"a": ["a"], "b": ["b"]}, runs, analyze(list(runs)), None, "x")


def test_identical_arms_are_no_difference_never_slower_by_0_ns() -> None:
    for steps in ((1000, 1000, 1000), (1000, 1001, 1000, 999), (7,)):
        st = experiment(steps, steps, 8).stats
        assert st.verdict == "no difference"
        assert (st.delta_median_ns, st.ci95_ns, st.residual_sd_ns) == (0.0, (0.0, 0.0), 0.0)
        assert st.pairs_agreeing == 4 and st.arms_needed is None


def test_an_exact_difference_without_spread_is_settled() -> None:
    st = experiment((1000,) * 3, (1005,) * 3).stats
    assert st.verdict == "slower" and st.residual_sd_ns == 0
    assert st.ci95_ns[0] == st.ci95_ns[1] == pytest.approx(5)
    assert st.pairs_agreeing == 2


def test_a_difference_under_a_nanosecond_is_never_claimed() -> None:
    # every arm of B is exactly 0.5 ns slower: a difference under the record's unit
    st = experiment((1000, 1000), (1000, 1001)).stats
    assert abs(st.delta_median_ns) < 1 and st.verdict == "no difference"
    assert st.arms_needed is None


def test_zero_time_steps_render_without_dividing_by_zero() -> None:
    from census.api import experiment_view
    from census.render import render
    from census.render.ab import delta_line, e2e_rows

    for a, b in (((0, 0), (0, 0)), ((0, 0), (5, 5)), ((5, 5), (0, 0))):
        exp = experiment(a, b)
        assert e2e_rows(exp)[1][5] == ""  # no throughput to compare with a step of no time
        assert "()" not in delta_line(exp)
        view = experiment_view(exp)
        assert "B − A" in render(view, "terminal", width=200)
        assert "| throughput |" in render(view, "markdown")
        assert "<html" in render(view, "html").lower()
        json.loads(render(view, "json"))

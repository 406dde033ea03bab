"""Never hang, never leave orphans, never an internal error: census's worker processes, the
arms of `census ab` and a capture's program as real processes (kill -9, Ctrl-C twice, SIGTERM,
a child left holding the output), their output (200 MiB, bytes that are not UTF-8), and census's
own standard output (full, closed, a reader that stopped early)."""

from __future__ import annotations

import contextlib
import json
import os
import re
import shlex
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from typer.testing import CliRunner

from census.capture.process import ProgramError, run_group
from census.cli import app
from census.load.pool import sweep_spill_folders
from census.paths import owner_tag
from census.sources.samples import sample_path
from tests.helpers.alive import alive
from tests.helpers.cli import census_process, started
from tests.helpers.exports import small_export
from tests.helpers.files import FAKE_NSYS, REPO, SLEEP_TRAIN
from tests.helpers.reaper import reaped

# census.render.progress's line for work past its quiet seconds: `census: LABEL: STAGE (1.1s)`
PROGRESS_LINE = re.compile(r"census: .+: .+ \(\d+\.\ds\)")

pytestmark = pytest.mark.skipif(sys.platform != "linux", reason="reads processes from /proc")
runner = CliRunner()


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


# Worker processes die with census; their spill folder is swept


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
elif mode == "beside":  # a diff's second side, read beside the first
    with pool.SideProcess(nap_alone, marks):
        nap_alone(marks)
else:
    pool.Runner(open_readonly(path), path, 2, lambda *a: None).map(nap, marks, [1, 2, 3, 4], 4, "")
"""


@pytest.mark.parametrize("mode", ["pdeathsig", "watch", "ranks", "beside"])
def test_workers_die_with_a_census_killed_outright(tmp_path: Path, mode: str) -> None:
    script, marks, tmp = tmp_path / "workers.py", tmp_path / "marks", tmp_path / "tmp"
    script.write_text(WORKERS)
    marks.mkdir()
    tmp.mkdir()
    export = sample_path("eager") / "capture.sqlite"
    env = {**os.environ, "TMPDIR": str(tmp)}
    with subprocess.Popen([sys.executable, str(script), mode, str(export), str(marks)],
                          env=env, cwd=REPO) as parent:  # fmt: skip
        assert wait_until(lambda: len(list(marks.iterdir())) == 2), "the workers did not start"
        workers = pids_in(marks)
        assert all(alive(p) for p in workers)
        parent.kill()  # SIGKILL: census can clean up nothing itself
    assert wait_until(lambda: not any(alive(p) for p in workers), timeout=10), "orphans left"
    if mode in ("ranks", "beside"):
        return  # a pool over rank exports, or a side beside, spills nothing here
    (left,) = tmp.iterdir()
    assert left.name.startswith(f"census-{parent.pid}-")
    (left / "part.npy").write_bytes(b"a result in transit")
    next_pass(tmp)  # sweeps it before it spills, and removes its own folder when it ends
    assert list(tmp.iterdir()) == []


def next_pass(tmp: Path) -> None:
    """A summary's passes over a real export with two workers, in a process of its own."""
    code = (
        "import sys; from pathlib import Path; from census.load.profile import load_profile; "
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


def test_spill_folders_go_to_the_temporary_folder(tmp_path: Path, monkeypatch) -> None:
    """A spill folder goes to the temporary folder ($TMPDIR, else the system's), never to a
    memory file system census picks itself (/dev/shm): what it spills stays the page cache's."""
    import tempfile

    import census.load.pool as pool

    monkeypatch.setattr(tempfile, "tempdir", None)  # read $TMPDIR again
    monkeypatch.setenv("TMPDIR", str(tmp_path))
    monkeypatch.setattr(pool, "_swept", set())
    folder = Path(pool.make_spill_folder())
    assert folder.parent == tmp_path and folder.name.startswith(f"census-{os.getpid()}-")
    for name in ("TMPDIR", "TEMP", "TMP"):  # the system's: /dev/shm has room, and is not taken
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setattr(tempfile, "tempdir", None)
    folder = Path(pool.make_spill_folder())
    try:
        assert folder.parent == Path(tempfile.gettempdir()) != Path("/dev/shm")
    finally:
        folder.rmdir()


# An arm's whole process group is stopped, however census ends


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


@contextlib.contextmanager
def ab_started(tmp_path: Path, mode: str) -> Iterator[tuple[subprocess.Popen, Path]]:
    """`census ab` of the ARM program in `mode`, running (killed if it still runs at the end)."""
    script, marks, tmp = tmp_path / "arm.py", tmp_path / "marks", tmp_path / "tmp"
    script.write_text(ARM)
    marks.mkdir()
    tmp.mkdir()
    arm = f"{sys.executable} {script} {mode} {marks}"
    command = [sys.executable, "-m", "census", "ab", "exp", "-o", str(tmp_path / "out"),
               "--no-capture", "--arms", "4", "--a", arm, "--b", arm]  # fmt: skip
    env = {**os.environ, "TMPDIR": str(tmp), "CENSUS_NSYS": ""}
    with started(command, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE) as proc:
        yield proc, marks


@pytest.mark.parametrize(
    "signals", [(signal.SIGINT, signal.SIGINT), (signal.SIGTERM,), (signal.SIGHUP,)]
)
def test_ctrl_c_twice_or_sigterm_leaves_no_process_of_the_arm(
    tmp_path: Path, signals: tuple[int, ...]
) -> None:
    with ab_started(tmp_path, "stubborn") as (proc, marks):
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


def test_sigterm_ends_census_like_ctrl_c(tmp_path: Path) -> None:
    """SIGTERM during an experiment's arm: exit 130, the arm's process group stopped, no
    experiment folder and no temporary folder left."""
    arm = f"{sys.executable} {SLEEP_TRAIN} --ms 50 --steps 400"
    env = {**os.environ, "TMPDIR": str(tmp_path / "tmp"), "PYTHONUNBUFFERED": "1"}
    (tmp_path / "tmp").mkdir()
    command = [sys.executable, "-m", "census", "ab", "exp", "-o", str(tmp_path / "out"),
               "--no-capture", "--a", arm, "--b", arm]  # fmt: skip
    with started(command, env=env, stderr=subprocess.PIPE, text=True) as proc:
        assert proc.stderr is not None
        for line in proc.stderr:
            if "warm arm" in line:
                break
        time.sleep(1.0)
        proc.terminate()
        assert proc.wait(timeout=30) == 130
    assert not (tmp_path / "out" / "exp").exists()
    assert list((tmp_path / "tmp").iterdir()) == []


def test_an_arm_that_leaves_a_child_holding_its_output_does_not_hang(tmp_path: Path) -> None:
    with ab_started(tmp_path, "leave") as (proc, marks):
        assert proc.wait(timeout=60) == 0, proc.stderr.read().decode() if proc.stderr else ""
    pids = pids_in(marks)
    assert len(pids) == 10  # five arms, each with a child
    assert wait_until(lambda: not any(alive(p) for p in pids), timeout=10)
    assert (tmp_path / "out" / "exp" / "ab.json").is_file()


DAEMON_ARM = """
import json, os, sys, time
from pathlib import Path

mode, marks = sys.argv[1], Path(sys.argv[2])
if os.fork() == 0:  # a daemon: forked twice into a session of its own, its output closed
    os.setsid()
    if os.fork() == 0:
        (marks / f"{os.getpid()}.pid").write_text("")
        for fd in (0, 1, 2):
            os.close(fd)
        time.sleep(300)
    os._exit(0)
os.wait()
if mode == "exits":
    record = {"clock": "host", "step_time_ns": [1000, 1001, 999]}
    Path(os.environ["CENSUS_STEP_TIMES"]).write_text(json.dumps(record))
    sys.exit(0)
if mode == "captured":  # under a stand-in nsys: fails, as nsys's program may
    sys.exit(3)
time.sleep(300)
"""


@pytest.mark.parametrize("mode", ["exits", "stays", "captured"])
def test_a_program_s_daemons_end_with_it(tmp_path: Path, mode: str) -> None:
    """Each arm (or captured program) leaves a daemon outside its process group (setsid,
    forked twice): they come back to census (a child subreaper) and end with their program,
    whether the experiment ends (5 arms, 5 daemons: all were alive after it), SIGTERM stops it
    during the warm arm, or the capture ends (a program that fails under a stand-in nsys)."""
    script, marks, tmp = tmp_path / "arm.py", tmp_path / "marks", tmp_path / "tmp"
    script.write_text(DAEMON_ARM)
    marks.mkdir()
    tmp.mkdir()
    arm = [sys.executable, str(script), mode, str(marks)]
    command = [sys.executable, "-m", "census", "ab", "exp", "-o", str(tmp_path / "out"),
               "--no-capture", "--arms", "4", "--a", shlex.join(arm), "--b", shlex.join(arm)]  # fmt: skip
    if mode == "captured":
        command = [sys.executable, "-m", "census", "capture", "c", "-o", str(tmp_path / "out"),
                   "--nsys", FAKE_NSYS, "--", *arm]  # fmt: skip
    env = {**os.environ, "TMPDIR": str(tmp), "CENSUS_NSYS": "", "FAKE_NSYS_MODE": "crash"}
    stop = (marks, signal.SIGTERM) if mode == "stays" else None
    run = reaped(command, env=env, timeout=60, interrupt=stop)
    assert run.code == {"exits": 0, "stays": 130, "captured": 4}[mode], run.stderr[-2000:]
    assert len(pids_in(marks)) == (5 if mode == "exits" else 1)
    assert run.left == [] and not any(alive(p) for p in pids_in(marks))


def test_only_what_the_program_left_is_ended(tmp_path: Path) -> None:
    """census in a notebook: a child of the caller's, started before the program or beside it
    (without the program's mark), outlives the program; the program's daemon does not."""
    (marks := tmp_path / "marks").mkdir()
    (script := tmp_path / "arm.py").write_text(DAEMON_ARM)
    env = {k: v for k, v in os.environ.items() if k != "CENSUS_PROGRAM"}
    with subprocess.Popen(["sleep", "30"], env=env) as before:
        try:
            with pytest.raises(ProgramError, match=r"arm failed \(exit 3\)"):
                run_group([sys.executable, str(script), "captured", str(marks)], env, "arm")
            assert before.poll() is None  # still running
        finally:
            before.kill()
    assert wait_until(lambda: not any(alive(p) for p in pids_in(marks)), timeout=5)


# An arm's output: read as it comes, a bounded tail kept, any bytes


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
                         timeout=60, cwd=REPO).stdout.decode()  # fmt: skip
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


# A capture's program (under nsys, or its calibration run without): the same runner, shown live


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
                         check=True, timeout=120, cwd=REPO,
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
    with started(command, env=env, stderr=subprocess.PIPE) as proc:
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


# census's own standard output


def test_a_full_stdout_is_one_line_and_exit_74(tmp_path: Path) -> None:
    export = small_export(tmp_path)
    with open("/dev/full", "w") as full:
        r = census_process("summary", str(export), "--json", stdout=full, stderr=subprocess.PIPE,
                           text=True)  # fmt: skip
    assert r.returncode == 74
    # past a second (a busy machine), progress lines come first: the error is still one line
    lines = [ln for ln in r.stderr.splitlines() if not PROGRESS_LINE.fullmatch(ln)]
    assert lines == ["Error: cannot write to standard output (No space left on device)"]


def test_help_on_a_full_stdout_is_one_line_and_exit_74() -> None:
    with open("/dev/full", "w") as full:
        r = census_process("summary", "--help", stdout=full, stderr=subprocess.PIPE, text=True)
    assert r.returncode == 74
    assert r.stderr == "Error: cannot write to standard output (No space left on device)\n"


def test_a_closed_stdout_is_one_line_and_exit_74(tmp_path: Path) -> None:
    export = small_export(tmp_path)
    command = f'exec "{sys.executable}" -m census summary "{export}" >&-'
    r = subprocess.run(["sh", "-c", command], stderr=subprocess.PIPE, text=True, timeout=120,
                       check=False)  # fmt: skip
    assert r.returncode == 74
    assert r.stderr.strip() == "Error: standard output is closed: census has nowhere to write"


def test_a_closed_stderr_leaves_stdout_clean(fixture) -> None:
    """Warnings have nowhere to go: they must not land in the JSON on stdout, nor fail census."""
    mock = fixture("nsysai_mock.sqlite")  # it warns about two missing tables
    command = f'exec "{sys.executable}" -m census summary "{mock}" --json 2>&-'
    r = subprocess.run(["sh", "-c", command], capture_output=True, text=True, timeout=120,
                       check=False)  # fmt: skip
    assert r.returncode == 0
    assert json.loads(r.stdout)["totals"]["kernel_count"] == 2


def test_a_reader_that_stops_early_is_exit_141_even_with_a_failing_gate(fixture) -> None:
    """`census diff ... --fail-if ... | head` must not pass a CI gate by the broken pipe."""
    eager, compiled = fixture("h200_eager_3steps.sqlite"), fixture("h200_compiled_3steps.sqlite")
    for args in (["summary", str(eager)], ["--help"],
                 ["diff", str(eager), str(compiled), "--fail-if", "kernel_count<+0"]):  # fmt: skip
        read, write = os.pipe()
        os.close(read)  # the reader is gone before census writes a byte
        r = census_process(*args, stdout=write, stderr=subprocess.PIPE, text=True)
        os.close(write)
        assert r.returncode == 141, args
        # A progress line may come first on a loaded machine (the read took over QUIET_SECONDS);
        # nothing else may: no error, no traceback.
        said = [line for line in r.stderr.splitlines() if not PROGRESS_LINE.fullmatch(line)]
        assert said == [], r.stderr


def _fails() -> None:
    raise ValueError("a side that cannot be read")


def test_a_process_beside_gives_its_value_none_when_it_failed_and_stops_with_its_owner() -> None:
    from census.load.pool import SideProcess

    with SideProcess(pow, 3, 50) as side:
        assert side.result() == 3**50
    with SideProcess(_fails) as side:
        assert side.result() is None  # the caller computes it again, where its error is raised
    started = time.monotonic()
    with SideProcess(time.sleep, 300) as side:
        pid = side._process.pid
        assert alive(pid)
    assert not alive(pid) and time.monotonic() - started < 10


def _side_process_in_a_daemon(_: int) -> object:
    from census.load.pool import SideProcess

    with SideProcess(pow, 2, 10) as side:
        return side.result()


def test_a_process_beside_inside_a_daemonic_process_runs_nothing() -> None:
    """A multiprocessing.Pool's workers are daemonic and may not start processes: SideProcess then
    gives None, and a diff computes its second side itself."""
    import multiprocessing

    with multiprocessing.get_context("fork").Pool(1) as pool:
        assert pool.map(_side_process_in_a_daemon, [0]) == [None]

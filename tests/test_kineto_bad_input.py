"""Damaged and odd Kineto traces: one InputError line naming the file (exit code 1), or notes
with counts where the rest of the trace is still read right; never a traceback, memory bounded
(a gzip bomb read in a process of its own, its peak RSS checked)."""

from __future__ import annotations

import gzip
import json
import re
import subprocess
import sys
import zlib
from decimal import Decimal
from pathlib import Path

import pytest

from census.errors import EXIT_BAD_INPUT, InputError
from census.sources.kineto import read_kineto
from census.sources.kineto.numbers import NO_VALUE
from tests.helpers.files import DATA, REPO

TRITON = DATA / "kineto" / "hta_triton_example__triton_example.json.gz"
EAGER = DATA / "kineto" / "h200_eager_3steps.kineto.json.gz"


def refused(path: Path) -> str:
    with pytest.raises(InputError) as info:
        read_kineto(path)
    message = str(info.value)
    assert info.value.exit_code == EXIT_BAD_INPUT
    assert message.startswith(f"{path}: ") and "\n" not in message
    return message[len(str(path)) + 2 :]


def test_truncated_gzip(tmp_path: Path) -> None:
    path = tmp_path / "cut.json.gz"
    data = EAGER.read_bytes()
    path.write_bytes(data[: len(data) // 2])
    assert refused(path) == "truncated gzip file (it ends inside compressed data)"


def test_damaged_gzip(tmp_path: Path) -> None:
    path = tmp_path / "damaged.json.gz"
    data = bytearray(EAGER.read_bytes())
    data[5000:5100] = bytes(100)
    path.write_bytes(bytes(data))
    assert refused(path).startswith("damaged gzip data (Error -3 while decompressing data")


def test_not_json(tmp_path: Path) -> None:
    path = tmp_path / "trace.json"
    path.write_bytes(b"\x89PNG\r\n\x1a\n" + bytes(64))
    assert refused(path) == (
        "not a PyTorch profiler trace: expected a JSON object with `traceEvents` at byte 0, "
        "found '\ufffdPNG\\r\\n\\x1a\\n\\x00\\x00\\x00\\x00\\x00\\x00\\x00\\x00\\x00\\x00"
        "\\x00\\x00\\x00\\x00\\x00\\x00'"
    )


@pytest.mark.parametrize(
    ("text", "said"),
    [
        (b'{"schemaVersion": 1, "deviceProperties": []}',
         "a JSON object without `traceEvents` at byte 43, found '}'"),
        (b'[{"ph": "X"}]', "expected a JSON object with `traceEvents` at byte 0, found '[{\"ph\": \"X\"}]'"),
        (b'{"traceEvents": 7}', "expected the events array `[` at byte 16, found '7}'"),
        (b'{"traceEvents": [{"ph": "X"}',
         "the events array cut short or not JSON at byte 17, found '{\"ph\": \"X\"}'"),
        (b'{"traceEvents": []} {}', "data after the trace's end at byte 20, found '{}'"),
        (b"", "expected a JSON object with `traceEvents` at byte 0, found the end of the file"),
    ],
)  # fmt: skip
def test_json_that_is_not_a_trace(tmp_path: Path, text: bytes, said: str) -> None:
    path = tmp_path / "other.json"
    path.write_bytes(text)
    assert refused(path) == f"not a PyTorch profiler trace: {said}"


def test_nan_and_infinity_are_named(tmp_path: Path) -> None:
    text = gzip.decompress(TRITON.read_bytes())
    at = text.index(b'"dur": 1.760')
    path = tmp_path / "nan.json"
    path.write_bytes(text.replace(b'"dur": 1.760', b'"dur": NaN'))
    assert refused(path) == (
        "not a PyTorch profiler trace: NaN or Infinity, which JSON does not allow, "
        f"at byte {at + 7}, found 'NaN,\\n    \"args\": {{\\n     '"
    )
    path.write_bytes(text.replace(b'"dur": 1.760', b'"dur": -Infinity'))
    assert "NaN or Infinity, which JSON does not allow" in refused(path)


def kernel_edits(text: str, edits: list[tuple[str, str]], cat: str = "kernel") -> str:
    """The text with the n-th `cat` event's first match of edits[n][0] (a regex) replaced."""
    starts = [m.start() for m in re.finditer(f'"cat": "{cat}"', text)]
    for start, (pattern, new) in reversed(list(zip(starts, edits, strict=False))):
        m = re.compile(pattern).search(text, start)
        text = text[: m.start()] + new + text[m.end() :]
    return text


def test_events_missing_fields_and_negative_durations(tmp_path: Path) -> None:
    """Kernels without ts, without dur, with negative durations, without args; a cpu_op whose
    ts is a word: each kind counted in a note; the rest equal to an independent reading of
    the edited file."""
    text = gzip.decompress(EAGER.read_bytes()).decode()
    text = kernel_edits(text, [
        (r'"ts": [0-9.]+, ', ""), (r'"dur": [0-9.]+,', ""), (r'"dur": [0-9.]+', '"dur": -1.5'),
        (r'"dur": [0-9.]+', '"dur": -0.250'), (r'"args": \{', '"args": null, "was": {'),
    ])  # fmt: skip
    text = kernel_edits(text, [(r'"ts": [0-9.]+', '"ts": "soon"')], cat="cpu_op")
    path = tmp_path / "edited.json"
    path.write_text(text)
    trace = read_kineto(path)
    assert trace.notes == [
        "1 cpu_ops events without a readable ts or dur, left out",
        "2 kernels events without a readable ts or dur, left out",
        "2 kernels events with a negative duration, left out",
    ]
    events = json.loads(text, parse_float=Decimal)["traceEvents"]
    kernels = [e for e in events if e.get("cat") == "kernel" and "ts" in e and "dur" in e]
    kept = [e for e in kernels if e["dur"] >= 0]
    k = trace.tables["kernels"]
    assert len(k["start_ns"]) == len(kept) == 861 - 4
    assert int((k["end_ns"] - k["start_ns"]).sum()) == sum(int(e["dur"] * 1000) for e in kept)
    assert k["start_ns"].tolist() == [int(e["ts"] * 1000) for e in kept]
    assert k["correlation"][0] == NO_VALUE and k["device"][0] == 0  # no args: the pid
    assert len(trace.tables["cpu_ops"]["start_ns"]) == 7182 - 1


BOMB = r"""
import sys, zlib
sys.path.insert(0, sys.argv[1])
from census.errors import InputError
from census.sources.kineto import read_kineto
from census.sources.kineto.numbers import NO_VALUE
try:
    read_kineto(sys.argv[2])
except InputError as exc:
    print(str(exc).split(": ", 1)[1])
# VmHWM: this program's own peak (ru_maxrss would also hold the forking test worker's size,
# which exec does not reset: 407 MB in a full run for a 60 MB peak)
hwm = next(line for line in open("/proc/self/status") if line.startswith("VmHWM:"))
print(int(hwm.split()[1]) // 1024)
"""


def bomb(path: Path, head: bytes, fill: bytes, mib: int) -> None:
    """A gzip file of `head` and then `mib` MiB of `fill` (a few hundred KiB on disk)."""
    packer = zlib.compressobj(9, zlib.DEFLATED, 31)
    block = fill * ((1 << 20) // len(fill))
    with path.open("wb") as fh:
        fh.write(packer.compress(head))
        for _ in range(mib):
            fh.write(packer.compress(block))
        fh.write(packer.flush())


@pytest.mark.parametrize(
    ("head", "fill", "said"),
    [
        (b"", b"\0", "not a PyTorch profiler trace: expected a JSON object with `traceEvents`"),
        (b'{"traceEvents": [{"ph": "X", "name": "', b"a",
         "not a PyTorch profiler trace: no event ends within 64 MiB at byte 17"),
        (b'{"traceEvents": [', b" ", "not a PyTorch profiler trace: the events array cut short"),
    ],
)  # fmt: skip
def test_gzip_bomb_in_bounded_memory(tmp_path: Path, head: bytes, fill: bytes, said: str) -> None:
    path = tmp_path / "bomb.json.gz"
    bomb(path, head, fill, 160)
    assert path.stat().st_size < 1 << 20
    done = subprocess.run(
        [sys.executable, "-c", BOMB, str(REPO), str(path)],
        capture_output=True,
        text=True,
        check=True,
    )
    message, peak_mb = done.stdout.strip().splitlines()
    assert message.startswith(said)
    assert int(peak_mb) < 160  # below the 160 MiB of text: never held whole (the cap is 64 MiB)

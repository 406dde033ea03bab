#!/usr/bin/env python3
"""A stand-in `nsys` for testing how census reacts to nsys failing (never its success path).

Its behaviour comes from $FAKE_NSYS_MODE:
  fail     print an error and exit 1
  qdstrm   write only OUTPUT.qdstrm (an nsys whose importer is missing), exit 0
  noreport write nothing, exit 0
  copy     copy $FAKE_NSYS_SQLITE to OUTPUT.sqlite and touch OUTPUT.nsys-rep, exit 0
           (OUTPUT's `%q{RANK}` is $RANK, as nsys expands it under torchrun); then, with
           $FAKE_NSYS_FILL, write that file until its disk is full (a disk that fills meanwhile)
  crash    run the program, and exit with its status as nsys does
  hang     sleep until killed
"""

import os
import shutil
import subprocess
import sys
import time
from pathlib import Path


def fill(path: str) -> None:
    """`path` written until its disk is full."""
    with open(path, "ab", buffering=0) as fh:
        try:
            while True:
                fh.write(b"x" * 4096)
        except OSError:
            pass


def main() -> int:
    args = sys.argv[1:]
    if args[:1] == ["--version"]:
        print("NVIDIA Nsight Systems version 0000.0.0-fake")
        return 0
    if args[:1] == ["status"]:
        print("Fake nsys: environment unknown")
        return 1
    mode = os.environ.get("FAKE_NSYS_MODE", "fail")
    out = next((a.split("=", 1)[1] for a in args if a.startswith("--output=")), None)
    if args[:1] == ["export"]:
        out = args[args.index("--output") + 1]
        if mode == "fail":
            print("fake nsys export: cannot import report", file=sys.stderr)
            return 1
        shutil.copy(os.environ["FAKE_NSYS_SQLITE"], out)
        return 0
    program = [a for a in args[1:] if not a.startswith("--")]
    if mode == "fail":
        print("fake nsys: something went wrong\nERROR: profiling failed", file=sys.stderr)
        return 1
    if mode == "qdstrm":
        Path(out + ".qdstrm").write_bytes(b"qdstrm")
        return 0
    if mode == "noreport":
        return 0
    if mode == "copy":
        out = out.replace("%q{RANK}", os.environ.get("RANK", ""))
        shutil.copy(os.environ["FAKE_NSYS_SQLITE"], out + ".sqlite")
        Path(out + ".nsys-rep").write_bytes(b"rep")
        if os.environ.get("FAKE_NSYS_FILL"):
            fill(os.environ["FAKE_NSYS_FILL"])
        return 0
    if mode == "crash":
        return subprocess.run(program, check=False).returncode
    if mode == "hang":
        time.sleep(600)
    return 2


if __name__ == "__main__":
    sys.exit(main())

"""One rank's command under `census capture --summarize-on-ranks` (torchrun): the rank's `nsys
profile`, then, once nsys has stopped and written its export, the census of that export, computed
on the rank's own node and cached as the census of the export's place in the finished capture
folder; the census capture prints, and any later `census summary FOLDER`, read the caches.

    python -m census.cli.on_rank WORK FOLDER -- nsys profile ... --output=WORK/rank%q{RANK} ...

WORK is the folder the capture is assembled in, FOLDER where it is moved once finished; the rank
is torchrun's $RANK. torchrun stops a rank by signalling its process group, so nsys gets the
signal itself: this process waits for nsys to finish its report, then exits without a census.
A census that fails is one line on stderr, never a failed rank: `census summary` says it again.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

STOPPING = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)
USAGE = "usage: python -m census.cli.on_rank WORK FOLDER -- NSYS_COMMAND..."


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if len(args) < 4 or args[2] != "--":
        print(USAGE, file=sys.stderr)
        return 2
    work, folder, command = Path(args[0]), Path(args[1]), args[3:]
    status = run_nsys(command)
    if status == 0:
        return summarize_rank(work / f"rank{os.environ.get('RANK', '0')}.sqlite", folder)
    return status


def run_nsys(command: list[str]) -> int:
    """nsys's exit status (128 + N for signal N, as a shell says it); a stop signal that came
    meanwhile (128 + it) when nsys itself ended well."""
    proc = subprocess.Popen(command)
    stopped: list[int] = []
    previous = {s: signal.signal(s, lambda signum, _: stopped.append(signum)) for s in STOPPING}
    try:
        status = proc.wait()
    finally:
        for s, handler in previous.items():
            signal.signal(s, handler)
    status = 128 - status if status < 0 else status
    return 128 + stopped[0] if stopped and status == 0 else status


def summarize_rank(export: Path, folder: Path) -> int:
    """The census of `export`, cached as that of FOLDER/its name (census.api.summarize_with),
    with this node's cores shared among its ranks; 0 whatever came of it, but Ctrl-C (130)."""
    from census.api import Options, summarize_with
    from census.units import one_line

    local = os.environ.get("LOCAL_WORLD_SIZE", "1")  # the ranks of this node, torchrun says
    workers = max(1, (os.cpu_count() or 1) // max(1, int(local) if local.isdigit() else 1))
    try:
        summarize_with(export, Options(), workers=workers, cache_as=folder / export.name)
    except KeyboardInterrupt:
        return 130
    except Exception as exc:  # a census of one rank is a head start, never the capture's failure
        print(f"census: {export.name}: no census on this rank ({one_line(str(exc))}); "
              "census summary computes it", file=sys.stderr)  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())

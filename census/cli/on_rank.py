"""Each rank's command under a `census capture` of several ranks (torchrun, srun, mpirun): the
rank's `nsys profile`, then, with --summarize, the census of its export on the rank's own node.

    python -m census.cli.on_rank WORK --nsys NSYS --trace TRACE [--summarize FOLDER] -- PROGRAM...

WORK is the folder the capture is assembled in (which every node must see), FOLDER where it is
moved once finished. The rank comes from its launcher's variables (census.capture.launcher), as
census.steps reads them: this process writes WORK/.rankN.json (census.capture.launcher.PLACE:
its place in the job) and runs `nsys profile --output=WORK/rankN ... PROGRAM`. A rank whose node
cannot write into WORK says so in one line (census.capture.launcher.CANNOT_WRITE) and runs PROGRAM
without nsys, so that the other ranks are not left waiting in a collective, then exits 1: census
capture names the ranks and their hosts.

With --summarize, once nsys has stopped and written its export, the census of that export is
computed here, with this node's cores shared among its ranks, and cached as the census of the
export's place in FOLDER; census capture, and any later `census summary FOLDER`, read the
caches. A census that fails is one line on stderr, never a failed rank. A launcher stops a rank
by signalling its process group, so nsys gets the signal itself: this process waits for nsys to
finish its report, then exits without a census.
"""

from __future__ import annotations

import os
import socket
import sys
from pathlib import Path

USAGE = ("usage: python -m census.cli.on_rank WORK --nsys NSYS --trace TRACE "
         "[--summarize FOLDER] -- PROGRAM...")  # fmt: skip


def _options(args: list[str]) -> tuple[dict[str, str], list[str]] | None:
    """(the options, PROGRAM); None when the command line is not USAGE's."""
    if "--" not in args or not args:
        return None
    cut = args.index("--")
    head, program = args[1:cut], args[cut + 1 :]
    if len(head) % 2 or not program:
        return None
    options = dict(zip(head[::2], head[1::2], strict=True))
    if set(options) - {"--nsys", "--trace", "--summarize"} or "--nsys" not in options:
        return None
    return {"work": args[0], **options}, program


def main(argv: list[str] | None = None) -> int:
    """Run this rank (module docstring); its exit status: 2 for a command line not USAGE's, 1 when
    WORK cannot be written, else nsys's (summarize_rank's 0 or 130 with --summarize)."""
    from census.capture.launcher import CANNOT_WRITE, rank_env, write_place
    from census.capture.per_rank import run_rank
    from census.capture.run import DEFAULT_TRACE, nsys_profile_command

    parsed = _options(sys.argv[1:] if argv is None else argv)
    if parsed is None:
        print(USAGE, file=sys.stderr)
        return 2
    options, program = parsed
    work, env, host = Path(options["work"]), rank_env(), socket.gethostname()
    why = write_place(work, env, host)
    if why is not None:
        print(f"{CANNOT_WRITE.format(rank=env.rank, world=env.world, host=host)}: {why}: {work}; "
              "every node must see the capture folder (census capture -o); this rank runs "
              "without nsys", file=sys.stderr, flush=True)  # fmt: skip
        run_rank(program)
        return 1
    export = work / f"rank{env.rank}"
    trace = options.get("--trace", DEFAULT_TRACE)
    status = run_rank(nsys_profile_command(options["--nsys"], export, tuple(program), trace))
    if status == 0 and "--summarize" in options:
        local = env.local_world or 1
        return summarize_rank(export.with_suffix(".sqlite"), Path(options["--summarize"]), local)
    return status


def summarize_rank(export: Path, folder: Path, local_ranks: int = 1) -> int:
    """The census of `export`, cached as that of FOLDER/its name (census.api.summarize_with),
    with this node's cores shared among its `local_ranks`; 0 whatever came of it, but Ctrl-C
    (130)."""
    from census.api import Options, summarize_with
    from census.units import one_line

    workers = max(1, (os.cpu_count() or 1) // max(1, local_ranks))
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

"""The options of the commands that run programs (census capture, census ab), typed once:
census.cli.programs declares its commands with them."""

from __future__ import annotations

from typing import Annotated

import typer

from census.errors import UsageError

# One meaning per name: --steps is the step-range regex of summary and diff; the number of
# measured steps of capture, ab and demo is --active N, as in census.steps(loader, active=N).
ActiveOpt = Annotated[
    int | None,
    typer.Option("--active", help="Measured steps (census.steps(loader, warmup=K, active=N))."),
]
StepsRefusedOpt = Annotated[str | None, typer.Option("--steps", hidden=True)]
CaptureJsonOpt = Annotated[
    bool,
    typer.Option("--json", help='JSON on stdout: the folder\'s `census summary --json` with '
                 '"folder" and "run" (its run.json, the calibration run\'s step times included).'),
]  # fmt: skip
OpsOpt = Annotated[
    bool,
    typer.Option(
        "--ops",
        help="Record op ranges (aten:: NVTX ranges) in the captured run: nsys's "
        "--pytorch=autograd-nvtx where the nsys has it, else torch's emit_nvtx entered by "
        "census.steps around the measured steps; never in the calibration run, so its "
        "overhead covers nsys and op ranges together. With --profiler torch, ops come with "
        "the trace: --ops changes nothing.",
    ),
]
ABFailIfOpt = Annotated[
    list[str] | None,
    typer.Option(
        "--fail-if",
        help="A CI gate on the arms' interval (95%; with --arms auto the stopping look's) "
        "('slower>2%', 'faster>=1ms'); repeatable; exit 5 when one fails.",
    ),
]

ArmsOpt = Annotated[
    str,
    typer.Option(help="Measured arms, a multiple of 4; or auto: blocks until the interval resolves "
                 "--min-effect (a sequential rule at 5% A/A), up to --max-arms."),
]  # fmt: skip
MaxArmsOpt = Annotated[int | None, typer.Option(help="With --arms auto: the most arms (48).")]
MinEffectOpt = Annotated[
    str | None,
    typer.Option(help="With --arms auto: the smallest difference worth resolving, a share of A's "
                 "step (1%, the default) or a time (0.5ms)."),
]  # fmt: skip
BudgetOpt = Annotated[
    str | None,
    typer.Option(help="With --arms auto: stop at the look after which 8 more arms would not fit "
                 "in this time (30m, 1h, 900s)."),
]  # fmt: skip


OnRanksOpt = Annotated[
    bool,
    typer.Option("--summarize-on-ranks",
                 help="Under torchrun, srun or mpirun: each rank computes the census of its own "
                 "export on its node as soon as its nsys stops (cached; the summary then reads "
                 "it)."),
]  # fmt: skip


def refuse_steps(steps: str | None, after_dash: bool = False) -> None:
    """`--steps` given to a command that counts steps: a usage error naming --active."""
    if steps is None:
        return
    where = "; a program's own --steps goes after --" if after_dash else ""
    raise UsageError(
        f"--steps {steps!r}: --steps is the step-range regex of census summary and census diff; "
        f"the number of measured steps is --active N{where}"
    )

"""CLI commands that run things: capture, demo, doctor. Registered on the main app lazily."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated

import typer

from census.errors import EXIT_TOOL_MISSING, CaptureError, ToolMissingError, UsageError
from census.pipeline import DEFAULT_STEPS_REGEX as STEPS

DEMO_MODES = ("eager", "compiled")
DDP_MODES = ("ddp-eager", "ddp-compiled")


def demo_command(mode: str, warmup: int, steps: int, nproc: int = 2) -> tuple[str, ...]:
    """The built-in workload; ddp-* modes run it on `nproc` GPUs through torchrun and NCCL."""
    if mode in DDP_MODES:
        import shutil
        from pathlib import Path as _P

        script = str(_P(__file__).parent / "demo" / "train.py")
        launcher = shutil.which("torchrun")
        head = (launcher,) if launcher else (sys.executable, "-m", "torch.distributed.run")
        return (*head, "--nproc-per-node", str(nproc), script, "--ddp",
                "--mode", mode.removeprefix("ddp-"), "--warmup", str(warmup), "--steps", str(steps))  # fmt: skip
    if mode not in DEMO_MODES:
        raise UsageError(f"--demo {mode!r}: choose eager, compiled, ddp-eager or ddp-compiled")
    return (
        sys.executable,
        "-m",
        "census.demo.train",
        "--mode",
        mode,
        "--warmup",
        str(warmup),
        "--steps",
        str(steps),
    )


def overhead_line(folder: Path, census) -> str | None:
    from census.capture import capture_overhead
    from census.render.units import fmt_ns

    o = capture_overhead(folder, census.per_step_timing())
    if o is None:
        return None
    return (
        f"capture overhead: {fmt_ns(o['captured_mean_step_time_ns'])}/step inside nsys vs "
        f"{fmt_ns(o['uncaptured_mean_step_time_ns'])}/step uncaptured "
        f"(x{o['overhead_ratio']:.2f}): nsys narrows or widens the gaps you compare"
    )


def register(app: typer.Typer, handle_errors) -> None:
    @app.command(context_settings={"allow_extra_args": True, "ignore_unknown_options": True})
    @handle_errors
    def capture(
        ctx: typer.Context,
        name: Annotated[str, typer.Argument(help="Capture name: the folder under -o.")],
        warmup: Annotated[int | None, typer.Option(help="Steps before the capture range.")] = None,
        steps: Annotated[int | None, typer.Option(help="Steps inside the capture range.")] = None,
        nsys: Annotated[str | None, typer.Option(help="Path to nsys.")] = None,
        trace: Annotated[str, typer.Option(help="nsys --trace value.")] = "cuda,nvtx",
        output: Annotated[Path, typer.Option("-o", "--output", help="Where captures go.")] = Path(
            "profiles"
        ),
        demo: Annotated[
            str | None,
            typer.Option(help="The built-in workload: eager, compiled, ddp-eager or ddp-compiled."),
        ] = None,
        nproc: Annotated[int, typer.Option(help="GPUs for the ddp-* demo modes.")] = 2,
        force: Annotated[bool, typer.Option(help="Replace an existing capture.")] = False,
        calibrate: Annotated[
            bool | None,
            typer.Option(
                help="First run without nsys to measure overhead (default: on for --demo)."
            ),
        ] = None,
    ) -> None:
        """Run COMMAND (after --) under nsys and print its census."""
        command = tuple(ctx.args)
        if demo:
            if command:
                raise UsageError("give either --demo or a command after --, not both")
            command = demo_command(
                demo, 5 if warmup is None else warmup, 3 if steps is None else steps, nproc
            )
        folder = do_capture(
            name,
            command,
            warmup,
            steps,
            nsys,
            trace,
            output,
            force,
            bool(demo) if calibrate is None else calibrate,
        )
        print(f"capture written to {folder}", file=sys.stderr)

    @app.command()
    @handle_errors
    def demo(
        steps: Annotated[int, typer.Option(help="Measured steps per capture.")] = 20,
        warmup: Annotated[int, typer.Option(help="Warm-up steps (compilation happens here).")] = 5,
        output: Annotated[Path, typer.Option("-o", "--output", help="Where captures go.")] = Path(
            "profiles"
        ),
        report: Annotated[Path, typer.Option(help="Dashboard to write.")] = Path(
            "reports/demo.html"
        ),
        nsys: Annotated[str | None, typer.Option(help="Path to nsys.")] = None,
        force: Annotated[bool, typer.Option(help="Replace existing demo captures.")] = True,
    ) -> None:
        """Capture eager and compiled runs of the built-in workload, diff them, write a dashboard.

        Without a GPU or nsys, uses the bundled real captures and says so."""
        from census.diff import diff_census
        from census.explain import explain_diff
        from census.render.diff_table import render_diff_table
        from census.render.html import write_diff_html
        from census.samples import sample_path

        reason = _cannot_capture(nsys)
        if reason:
            print(
                f"census demo: {reason}; using the bundled H200 captures instead", file=sys.stderr
            )
            paths = [sample_path("eager"), sample_path("compiled")]
        else:
            paths = [
                do_capture(
                    f"demo-{mode}",
                    demo_command(mode, warmup, steps),
                    warmup,
                    steps,
                    nsys,
                    "cuda,nvtx",
                    output,
                    force,
                    True,
                )
                for mode in DEMO_MODES
            ]
        from census.cli import _summarize

        ca, cb = (_summarize(p, STEPS, 0) for p in paths)
        d = diff_census(ca, cb, ("eager", "compiled"))
        explanation = explain_diff(d)
        from rich.console import Console

        render_diff_table(d, explanation, Console())
        write_diff_html(d, explanation, report)
        print(f"wrote {report}", file=sys.stderr)

    @app.command()
    @handle_errors
    def doctor(
        nsys: Annotated[str | None, typer.Option(help="Path to nsys.")] = None,
        output: Annotated[Path, typer.Option("-o", "--output", help="Where captures go.")] = Path(
            "profiles"
        ),
    ) -> None:
        """Check that this machine can capture: nsys, GPU, torch, CUDA, profiles/."""
        from census.doctor import run_checks

        checks = run_checks(nsys, output)
        for c in checks:
            print(f"{'ok  ' if c.ok else 'FAIL'} {c.name}: {c.detail}")
        if not all(c.ok for c in checks):
            raise typer.Exit(EXIT_TOOL_MISSING)


def _cannot_capture(nsys: str | None) -> str | None:
    import subprocess

    from census.export import find_nsys

    try:
        find_nsys(nsys)
    except ToolMissingError:
        return "nsys is not installed"
    probe = subprocess.run(
        [
            sys.executable,
            "-c",
            "import torch, sys; sys.exit(0 if torch.cuda.is_available() else 1)",
        ],
        capture_output=True,
        check=False,
    )
    return None if probe.returncode == 0 else "no CUDA GPU visible to torch"


def do_capture(name, command, warmup, steps, nsys, trace, output, force, calibrate) -> Path:
    from census.capture import CaptureSpec, run_capture
    from census.cli import _summarize
    from census.export import find_nsys
    from census.render.table import render_summary

    spec = CaptureSpec(
        name=name,
        command=tuple(command),
        out_dir=output,
        nsys=find_nsys(nsys),
        trace=trace,
        warmup=warmup,
        steps=steps,
        force=force,
        calibrate=calibrate,
    )

    def verify(work: Path) -> None:
        from census.load import has_step_ranges

        if not has_step_ranges(work, STEPS):
            raise CaptureError(
                f"{name}: the capture holds no NVTX step ranges, so it was discarded: wrap each "
                "training step with census.step(i) or iterate with census.steps(loader)",
                list(command),
            )

    folder = run_capture(spec, verify)
    census = _summarize(folder, STEPS, 0)
    from rich.console import Console

    render_summary(census, Console())
    line = overhead_line(folder, census)
    if line:
        print(line, file=sys.stderr)
    return folder

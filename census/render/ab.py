"""An A/B experiment for a person: the end-to-end table of the uncaptured arms (the verdict),
their phases, the arms in run order, then the census diff of the captures (the reasons).
Terminal and markdown share the rows built here."""

from __future__ import annotations

from rich.console import Console
from rich.markup import escape
from rich.table import Table

from census.compare.ab.experiment import Experiment, Explanation
from census.compare.ab.stats import ABStats, Side
from census.definitions import few_values_note, p95_text
from census.model.ab import Arm
from census.render.fit import print_fit
from census.render.text import rich_text
from census.render.views import ExperimentView
from census.units import coverage_name, fmt_bytes, fmt_ci, fmt_count, fmt_ns, fmt_pct, one_line

E2E_HEAD = ["side", "median", "p95", "arm median", "steps", "throughput", "peak alloc",
            "peak resv", "recompiles"]  # fmt: skip


def _side_row(label: str, s: Side, gain: str) -> list[str]:
    recompiles = "" if s.recompiles is None else fmt_count(s.recompiles)
    return [label, fmt_ns(s.median_ns), p95_text(fmt_ns(s.p95_ns), s.steps),
            fmt_ns(s.median_of_arm_medians_ns), fmt_count(s.steps), gain, fmt_bytes(s.peak_allocated_bytes),
            fmt_bytes(s.peak_reserved_bytes), recompiles]  # fmt: skip


def e2e_rows(exp: Experiment) -> list[list[str]]:
    """One row a side: median and p95 over all its measured steps, median of its arm medians,
    steps, throughput against A (from the arm medians), peak memory, recompilations."""
    a, b = exp.stats.a, exp.stats.b
    gain = None  # a step of no time has no throughput to compare
    if a.median_of_arm_medians_ns > 0 and b.median_of_arm_medians_ns > 0:
        gain = 100 * (a.median_of_arm_medians_ns / b.median_of_arm_medians_ns - 1)
    return [_side_row(exp.labels[0], a, "baseline"), _side_row(exp.labels[1], b, fmt_pct(gain))]


def delta_line(exp: Experiment) -> str:
    """B − A per step with its interval (t, df, arms as the unit; --arms auto's stopping look) and,
    where both sides have it, the change in peak allocated and reserved memory."""
    st, (la, lb) = exp.stats, exp.labels
    memory = ""
    if st.a.peak_allocated_bytes is not None and st.b.peak_allocated_bytes is not None:
        memory = (
            f"; peak allocated {_signed_bytes(st.a.peak_allocated_bytes, st.b.peak_allocated_bytes)},"
            f" reserved {_signed_bytes(st.a.peak_reserved_bytes, st.b.peak_reserved_bytes)}"
        )
    return (
        f"{lb} − {la}: {fmt_ns(st.delta_median_ns, signed=True)}/step{_pct(st.delta_pct)}, "
        f"{fmt_ci(st.ci_ns, st.ci_coverage)} (t, {st.df} df, arms as the unit{_look(st)}){memory}"
    )


def _look(st: ABStats) -> str:
    return "" if not st.looks else f"; --arms auto, look {st.looks[-1].number}"


def _pct(pct: float | None) -> str:
    return "" if pct is None else f" ({fmt_pct(pct)})"


def _signed_bytes(a: int | None, b: int | None) -> str:
    return "" if a is None or b is None else fmt_bytes(b - a, signed=True)


def phase_head(st: ABStats) -> list[str]:
    """The phase table's columns (its interval at the step's coverage)."""
    return ["phase", "A median", "B median", "delta", f"{coverage_name(st.ci_coverage)} CI",
            "pairs agreeing", "verdict", "arm-to-arm sd"]  # fmt: skip


def phase_title(labels: tuple[str, str]) -> str:
    """The title of the arms' phase table, naming A and B."""
    return (f"Phases, uncaptured arms (per step, medians of arm medians; A = {labels[0]}, "
            f"B = {labels[1]})")  # fmt: skip


def phase_rows(st: ABStats) -> list[list[str]]:
    """One row a phase every measured arm recorded: A's and B's medians of arm medians, the
    block fit's delta and interval (95%; under --arms auto the stopping look's), pairs
    agreeing, verdict, the residual sd of the arm medians (how much arms disagree there)."""
    rows = []
    for name, p in st.phases.items():
        lo, hi = p.ci_ns
        rows.append([
            name, fmt_ns(p.a_median_ns), fmt_ns(p.b_median_ns),
            fmt_ns(p.delta_median_ns, signed=True),
            f"{fmt_ns(lo, signed=True)} to {fmt_ns(hi, signed=True)}",
            f"{p.pairs_agreeing}/{len(p.pairs)}", p.verdict, fmt_ns(p.residual_sd_ns),
        ])  # fmt: skip
    return rows


def captures_title(view: ExperimentView) -> str:
    """The title over an experiment's captures' diff, naming the profiler that made them."""
    diff = view.diff.diff if view.diff is not None else None
    by = " and ".join(sorted({c.source.profiler for c in (diff.a, diff.b)} if diff else {"nsys"}))
    return f"Census of the captures (under {by})"


TAIL_TITLE = "Tail steps, uncaptured arms (each against its own arm's median)"
TAIL_HEAD = ["arm", "side", "step", "time", "arm median", "excess", "phase that grew", "by",
             "other phases"]  # fmt: skip


def tail_rows(exp: Experiment) -> list[list[str]]:
    """One row a tail step of a measured arm, in run order: its time, the arm's median, the
    phase that grew most against the arm's median of it, and the other phases' changes."""
    return [
        [str(t.arm_index), exp.label(t.side), str(t.step), fmt_ns(t.step_time_ns),
         fmt_ns(t.median_ns), fmt_ns(t.excess_ns, signed=True), t.phase or "",
         "" if t.phase_delta_ns is None else fmt_ns(t.phase_delta_ns, signed=True),
         ", ".join(f"{n} {fmt_ns(d, signed=True)}" for n, d in t.phase_deltas_ns[1:])]
        for t in exp.tails
    ]  # fmt: skip


ARM_HEAD = ["#", "side", "median", "p95", "steps", "peak alloc", "recompiles", "clock",
            "CPU share", "other cores", "disturbed"]  # fmt: skip


def _env_cells(arm: Arm, why: str | None) -> list[str]:
    env = arm.env
    share = "" if env is None or env.cpu_share is None else f"{env.cpu_share:.2f}"
    other = "" if env is None or env.other_cpu_cores is None else f"{env.other_cpu_cores:.1f}"
    return [share, other, why or ""]


def arm_rows(exp: Experiment) -> list[list[str]]:
    """One row an arm, in run order (the warm one marked discarded), as ARM_HEAD: its median, p95,
    steps, peak memory, recompilations, clock, CPU share, other cores and why it is disturbed."""
    rows = []
    for arm in exp.arms:
        label = exp.labels[0 if arm.side == "a" else 1]
        rows.append([
            str(arm.index), f"{label} (warm, discarded)" if arm.discarded else label,
            fmt_ns(arm.median_ns), p95_text(fmt_ns(arm.p95_ns), len(arm.step_time_ns)),
            fmt_count(len(arm.step_time_ns)),
            fmt_bytes(arm.peak_allocated_bytes),
            "" if arm.recompiles is None else fmt_count(arm.recompiles), arm.clock,
            *_env_cells(arm, exp.stats.disturbed.get(arm.index)),
        ])  # fmt: skip
    return rows


def p95_notes(exp: Experiment) -> tuple[str, str]:
    """The notes under the end-to-end table and the arms' table for their p95s of fewer than
    P95_MIN_VALUES steps ("" where none is)."""
    sides = few_values_note([exp.stats.a.steps, exp.stats.b.steps])
    return sides, few_values_note([len(a.step_time_ns) for a in exp.arms])


def pairs_line(st: ABStats, labels: tuple[str, str]) -> str:
    """The B − A of each AB/BA pair's arm medians, their range, and how many agree in sign with the
    estimate."""
    deltas = [p.delta_ns for p in st.pairs]
    listed = ", ".join(fmt_ns(d, signed=True) for d in deltas)
    return (
        f"paired deltas ({labels[1]} − {labels[0]}, arm medians, per AB/BA pair): {listed}; "
        f"range {fmt_ns(min(deltas), signed=True)} to {fmt_ns(max(deltas), signed=True)}; "
        f"{st.pairs_agreeing}/{len(deltas)} agree in sign with the estimate"
    )


def render_experiment_table(
    view: ExperimentView, top: int = 15, width: int | None = None, color: bool = False
) -> str:
    """The experiment for a terminal (rich, `width` columns; `color`: ANSI styles), then its
    captures' diff (its `top` kernels) when it has one."""
    from census.render.diff_table import render_diff_table

    exp, parts = view.experiment, view.explanation
    text = rich_text(lambda console: _draw(exp, parts, console), width, color)
    if view.diff is not None:
        text += rich_text(lambda console: console.print(f"[bold]{captures_title(view)}[/bold]"),
                          width, color)  # fmt: skip
        text += render_diff_table(view.diff, top, width, color)
    return text


def filled(head: list[str], rows: list[list[str]]) -> tuple[list[str], list[list[str]]]:
    """The columns that are not empty in every row (no torch: no memory, no recompilations; no
    phases recorded: no phase that grew), the first always."""
    keep = [i for i in range(len(head)) if i == 0 or any(r[i] for r in rows)]
    return [head[i] for i in keep], [[r[i] for i in keep] for r in rows]


def _table(title: str, head: list[str], rows: list[list[str]], cols=None) -> Table:
    """The columns `cols` (default all) that are not empty in every row (no torch: no memory,
    no recompilations); nothing wraps."""
    keep = [i for i in (cols or range(len(head))) if i == 0 or any(r[i] for r in rows)]
    t = Table(title=escape(one_line(title)), title_justify="left")
    for i in keep:
        left = head[i] in ("side", "#", "phase")
        t.add_column(escape(head[i]), justify="left" if left else "right", no_wrap=True)
    for row in rows:
        t.add_row(*(escape(one_line(row[i])) for i in keep))
    return t


def _draw(exp: Experiment, parts: Explanation, console: Console) -> None:
    console.print(f"[bold]{escape(one_line(parts.verdict))}[/bold]")
    for line in parts.said_next:
        console.print(escape(one_line(line)))
    for line in parts.warnings:
        console.print(f"warning: {escape(one_line(line))}")
    title = f"Uncaptured arms, end to end: {exp.labels[0]} vs {exp.labels[1]} (per step)"
    rows = e2e_rows(exp)
    # two tables on a terminal: the times, then memory and compilation (markdown has one)
    console.print(_table(title, E2E_HEAD, rows, range(6)))
    sides_note, arms_note = p95_notes(exp)
    if sides_note:
        console.print(escape(sides_note))
    if any(r[i] for r in rows for i in (6, 7, 8)):
        console.print(_table("Memory and compilation", E2E_HEAD, rows, (0, 6, 7, 8)))
    console.print(escape(one_line(delta_line(exp))))
    console.print(escape(one_line(pairs_line(exp.stats, exp.labels))))
    if exp.stats.phases:  # split over several tables when it is wider than the terminal
        print_fit(console, phase_title(exp.labels), phase_head(exp.stats), phase_rows(exp.stats))
    for line in parts.phases:
        console.print(escape(one_line(line)))
    if exp.tails:
        print_fit(console, TAIL_TITLE, *filled(TAIL_HEAD, tail_rows(exp)))
    for line in parts.arm_notes:
        console.print(escape(one_line(line)))
    if exp.ranks:
        print_fit(console, ranks_title(exp.labels), ranks_head(exp), ranks_rows(exp), left=2)
    for line in parts.ranks:
        console.print(escape(one_line(line)))
    # split over several tables when wider than the terminal, each led by the arm (# and side)
    head, rows = filled(ARM_HEAD, arm_rows(exp))
    print_fit(console, "Arms in run order", ["arm", *head[2:]],
              [[f"{r[0]} {r[1]}", *r[2:]] for r in rows])  # fmt: skip
    if arms_note:
        console.print(escape(arms_note))
    if exp.diff is None:
        for line in parts.findings:
            console.print(escape(one_line(line)))


def render_experiment_markdown(view: ExperimentView, top: int = 15) -> str:
    """The experiment as markdown, then its captures' diff (its `top` kernels) or why there is
    none."""
    from census.render.markdown import markdown_table, render_diff_markdown

    exp, parts = view.experiment, view.explanation
    la, lb = exp.labels
    out = [one_line(f"### {la} vs {lb}: {len(exp.arms) - 1} uncaptured arms (+1 warm, discarded)"),
           "", one_line(f"**{parts.verdict}**"), ""]  # fmt: skip
    out += [x for line in parts.said_next for x in (one_line(line), "")]
    out += [one_line(f"> warning: {w}") for w in parts.warnings]
    sides_note, arms_note = p95_notes(exp)
    out += ["", markdown_table(E2E_HEAD, e2e_rows(exp)), "",
            *([sides_note, ""] if sides_note else []), one_line(delta_line(exp)), "",
            one_line(pairs_line(exp.stats, exp.labels)), ""]  # fmt: skip
    if exp.stats.phases:
        out += [one_line(f"#### {phase_title(exp.labels)}"), "",
                markdown_table(phase_head(exp.stats), phase_rows(exp.stats)), ""]  # fmt: skip
    out += [x for line in parts.phases for x in (one_line(line), "")]
    if exp.tails:
        out += [f"#### {TAIL_TITLE}", "", markdown_table(*filled(TAIL_HEAD, tail_rows(exp))), ""]
    out += [x for line in parts.arm_notes for x in (one_line(line), "")]
    if exp.ranks:
        out += [one_line(f"#### {ranks_title(exp.labels)}"), "",
                markdown_table(ranks_head(exp), ranks_rows(exp)), ""]  # fmt: skip
    out += [x for line in parts.ranks for x in (one_line(line), "")]
    out += ["<details><summary>Arms in run order</summary>", "",
            markdown_table(*filled(ARM_HEAD, arm_rows(exp))), "", *([arms_note, ""] if arms_note else []),
            "</details>", ""]  # fmt: skip
    if view.diff is not None:
        out += [f"### {captures_title(view)}", "", render_diff_markdown(view.diff, top)]
    else:
        out += [one_line(line) for line in parts.findings]
    return "\n".join(out)


# -- the ranks of arms of several ranks (census.compare.ab.rank_table) -------------------------------
def ranks_title(labels: tuple[str, str]) -> str:
    """The title of the arms' rank table, naming A and B."""
    return (f"Ranks, uncaptured arms, by host (over the measured arms; A = {labels[0]}, "
            f"B = {labels[1]})")  # fmt: skip


def ranks_head(exp: Experiment) -> list[str]:
    """The ranks table's columns: place, each side's median and slowest arms, compilation,
    memory, then a column per census.count name."""
    names = dict.fromkeys(n for row in exp.ranks for s in (row.a, row.b) if s for n in s.counts)
    return ["host", "rank", "local", "GPU", "A median", "B median", "A slowest", "B slowest",
            "recompiles A/B", "graph breaks A/B", "peak alloc A/B",
            *(f"{name} A/B" for name in names)]  # fmt: skip


def ranks_rows(exp: Experiment) -> list[list[str]]:
    """One row a rank (exp.ranks), in host order."""
    names = ranks_head(exp)[11:]
    rows = []
    for row in exp.ranks:
        a, b = row.a, row.b
        gpu = "" if row.gpu_index is None else str(row.gpu_index)
        if row.gpu_uuid:
            gpu += f" {row.gpu_uuid[:12]}"
        rows.append([
            row.host or "", str(row.rank), "" if row.local_rank is None else str(row.local_rank),
            gpu, fmt_ns(a and a.median_ns), fmt_ns(b and b.median_ns),
            _of(a, "slowest_arms"), _of(b, "slowest_arms"), _pair(a, b, "recompiles"),
            _pair(a, b, "graph_breaks"), _pair(a, b, "peak_allocated_bytes", fmt_bytes),
            *(_pair(a, b, name[: -len(" A/B")], _counted) for name in names),
        ])  # fmt: skip
    return rows


def _of(side, key: str) -> str:
    return "" if side is None else f"{getattr(side, key)}/{side.arms}"


def _pair(a, b, key: str, fmt=fmt_count) -> str:
    """`A / B` of a side's figure (`key` of RankSide, else a census.count name)."""
    cells = [fmt(_figure(s, key)) if s is not None else "" for s in (a, b)]
    return "" if not any(cells) else f"{cells[0] or '–'} / {cells[1] or '–'}"


def _figure(side, key: str):
    return getattr(side, key) if hasattr(side, key) else side.counts.get(key)


def _counted(low_high: tuple[int, int] | None) -> str:
    """A counter's per-arm total, or its range when the arms disagree."""
    if low_high is None:
        return ""
    low, high = low_high
    return fmt_count(low) if low == high else f"{fmt_count(low)}–{fmt_count(high)}"

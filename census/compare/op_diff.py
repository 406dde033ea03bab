"""The diff's operations (#56): both sides' OpTables matched (census.compare.op_match) over the
steps, and per phase where both sides have phases, or the one line that says why there is no
Operations table; and the waterfall of Δ kernel time by operation group.

Sums stay integer: a row's change per step is b_sum / b_steps − a_sum / a_steps, kept as the
integer b_sum · a_steps − a_sum · b_steps over the scale a_steps · b_steps, so the waterfall's
bars add up to the total Δ kernel time exactly; a renderer divides.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace

import numpy as np

from census.compare.op_match import (
    TOP_SENTENCES,
    OpMatch,
    change_sentence,
    changed,
    group_label,
    match_ops,
    side_label,
    stayed_sentence,
)
from census.definitions import OUTSIDE_PHASES
from census.findings.ops import OpTable
from census.metrics import KERNEL_COUNT, KERNEL_TIME_NS
from census.model.census import Census
from census.units import fmt_count, fmt_ns

WATERFALL_BARS = 12  # operation groups drawn one by one; the rest are one bar
HOW_TO_GET_OPS = "capture with `census capture --ops` or a torch.profiler trace"


@dataclass(frozen=True)
class OpsDiff:
    """The Operations table over the compared steps (`rows`; the whole captures' when the diff
    compares whole captures) and per phase (`phases`, empty unless both sides have them), each
    largest |Δ kernel time per step| first; or `missing`, why there is none."""

    rows: tuple[OpMatch, ...] = ()
    phases: dict[str, tuple[OpMatch, ...]] = field(default_factory=dict)
    missing: str | None = None

    @property
    def scale(self) -> int:
        """a_steps · b_steps: what the integer changes (scaled_delta) are divided by."""
        m = self.rows[0] if self.rows else None
        return 1 if m is None else max(m.a_steps, 1) * max(m.b_steps, 1)


def scaled_delta(m: OpMatch, field_name: str = "time_ns") -> int:
    """A row's change per step times a_steps · b_steps, exactly (an integer)."""
    a, b = getattr(m, f"a_{field_name}"), getattr(m, f"b_{field_name}")
    return b * max(m.a_steps, 1) - a * max(m.b_steps, 1)


def whole_capture(t: OpTable) -> OpTable:
    """The table with one window, the whole capture (its `total_*` columns): what a diff of
    whole captures compares."""
    return replace(
        t,
        kernel_count=t.total_count[:, None],
        launch_count=t.total_launches[:, None],
        kernel_time_ns=t.total_time_ns[:, None],
    )


def missing_ops(labels: tuple[str, str], has: tuple[bool, bool]) -> str | None:
    """Why there is no Operations table (None when both sides have op ranges)."""
    lacking = [label for label, h in zip(labels, has, strict=True) if not h]
    if not lacking:
        return None
    return f"no operation ranges in {' or '.join(lacking)}: {HOW_TO_GET_OPS}"


def diff_ops(
    a: OpTable | None,
    b: OpTable | None,
    labels: tuple[str, str],
    per_step: bool,
    phases: tuple[Mapping[str, OpTable], Mapping[str, OpTable]] = ({}, {}),
) -> OpsDiff:
    """B's operations against A's: over the steps when `per_step`, else over the whole
    captures; per phase name of either side when both have phases (a phase one side lacks
    matches nothing there)."""
    missing = missing_ops(labels, (a is not None, b is not None))
    if missing is not None or a is None or b is None:
        return OpsDiff(missing=missing)
    if not per_step:
        return OpsDiff(rows=tuple(match_ops(whole_capture(a), whole_capture(b))))
    pa, pb = phases
    by_phase: dict[str, tuple[OpMatch, ...]] = {}
    if pa and pb:
        names = sorted(dict.fromkeys([*pa, *pb]), key=lambda n: n == OUTSIDE_PHASES)
        for name in names:
            ta = pa.get(name) or _empty_like(pb[name], a)
            tb = pb.get(name) or _empty_like(pa[name], b)
            by_phase[name] = tuple(match_ops(ta, tb))
    return OpsDiff(rows=tuple(match_ops(a, b)), phases=by_phase)


def census_ops(a: Census, b: Census, labels: tuple[str, str], per_step: bool) -> OpsDiff:
    """diff_ops of two captures' operations (census.findings.ops.op_table), per phase name
    where both have phases and the steps are compared."""
    from census.findings.ops import op_table

    ta, tb = op_table(a), op_table(b)
    if ta is None or tb is None or not per_step:
        return diff_ops(ta, tb, labels, per_step)
    return diff_ops(ta, tb, labels, per_step, (phase_tables(a), phase_tables(b)))


def phase_tables(c: Census) -> dict[str, OpTable]:
    """Per phase name, the capture's operations in that phase, summed per step over the phase's
    rows (a step without the phase holds zeros): the OpTable the phase's per-step means come
    from, as Census.per_phase's do. Empty without phases or operations."""
    from census.findings.ops import op_table

    rows = op_table(c, phases=True)
    groups = c.steps.phases.groups() if c.steps else {}
    if rows is None or not groups:
        return {}
    step_of = c.steps.phase_step()
    out = {}
    for name, at in groups.items():
        cols = {}
        for f in (KERNEL_COUNT, "launch_count", KERNEL_TIME_NS):
            col = np.zeros((len(rows.keys), len(c.steps)), dtype=np.int64)
            np.add.at(col, (slice(None), step_of[at]), getattr(rows, f)[:, at])
            cols[f] = col
        out[name] = replace(rows, **cols)
    return out


def _empty_like(other: OpTable, side: OpTable) -> OpTable:
    """A phase a side lacks: only its unattributed row, empty, over the side's steps."""
    steps = side.kernel_count.shape[1]
    zero = np.zeros((1, steps), dtype=np.int64)
    one = np.zeros(1, dtype=np.int64)
    return OpTable(keys=(None,), lists=(frozenset(),), forward=((),), kernel_count=zero,
                   launch_count=zero, kernel_time_ns=zero, total_count=one, total_launches=one,
                   total_time_ns=one)  # fmt: skip


@dataclass(frozen=True)
class Bar:
    """One bar of the waterfall: its label and its Δ kernel time per step times the scale."""

    label: str
    scaled_ns: int


def unattributed(m: OpMatch) -> bool:
    """Whether the row is the unattributed work (no operation around the launch)."""
    return None in m.a_keys or None in m.b_keys


def table_rows(
    matches: tuple[OpMatch, ...], top: int | None = None
) -> list[tuple[str, str, OpMatch]]:
    """(A's operations, B's, the row) of a table: the `top` groups (all when None) by |Δ|, the
    other groups summed in one row, the unattributed last; the rows add up to the matches."""
    groups = [m for m in matches if not unattributed(m)]
    shown = groups if top is None else groups[:top]
    rows = [(side_label(m.a_keys), side_label(m.b_keys), m) for m in shown]
    rest = groups[len(shown) :]
    if rest:
        label = f"{len(rest)} other operations"
        rows.append((label, label, _summed(rest)))
    return rows + [("unattributed", "unattributed", m) for m in matches if unattributed(m)]


def _summed(matches: list[OpMatch]) -> OpMatch:
    """Rows summed into one, with no keys."""
    first = matches[0]
    total = {f"{side}_{f}": sum(getattr(m, f"{side}_{f}") for m in matches)
             for side in "ab" for f in ("count", "launches", "time_ns")}  # fmt: skip
    return OpMatch(a_keys=(), b_keys=(), a_steps=first.a_steps, b_steps=first.b_steps, **total)


def waterfall_bars(ops: OpsDiff, top: int = WATERFALL_BARS) -> list[Bar]:
    """Δ kernel time by operation group over the compared steps: the `top` groups by |Δ|, the
    other groups as one bar, the unattributed as its own; the bars add up to the total Δ
    kernel time exactly (scaled by ops.scale)."""
    return [Bar(a if a == b else f"{a} → {group_label(m.b_keys) if m.b_keys else b}",
                scaled_delta(m)) for a, b, m in table_rows(ops.rows, top)]  # fmt: skip


def total_scaled_ns(ops: OpsDiff) -> int:
    """The total Δ kernel time per step over the compared steps, times ops.scale: B's kernel
    time times A's steps minus A's times B's."""
    if not ops.rows:
        return 0
    m = ops.rows[0]
    a = sum(r.a_time_ns for r in ops.rows)
    b = sum(r.b_time_ns for r in ops.rows)
    return b * max(m.a_steps, 1) - a * max(m.b_steps, 1)


def explain_ops(
    ops: OpsDiff | None, labels: tuple[str, str], unit: str, top: int = TOP_SENTENCES
) -> list[tuple[float, str]]:
    """The explanation's operation sentences, weighted by their Δ kernel time per step: the top
    changes one each, what stayed the same in one line (weight 0), and the unattributed work
    where either side has any and it is not among the top changes."""
    if ops is None or not ops.rows:
        return []
    rows = list(ops.rows)
    top_rows = changed(rows)[:top]
    out = [(m.per_step("time_ns")[2], change_sentence(m, unit)) for m in top_rows]
    stayed = stayed_sentence(rows, unit)
    out += [(0.0, stayed)] if stayed else []
    none = next((m for m in rows if unattributed(m)), None)
    if none is not None and (none.a_count or none.b_count) and none not in top_rows:
        (ca, cb, _), (ta, tb, dt) = none.per_step("count"), none.per_step("time_ns")
        out.append((dt, f"unattributed (no aten:: operation around the launch): "
                        f"{fmt_count(ca)} kernels ({fmt_ns(ta)}{unit}) in {labels[0]}, "
                        f"{fmt_count(cb)} ({fmt_ns(tb)}{unit}) in {labels[1]}"))  # fmt: skip
    return out

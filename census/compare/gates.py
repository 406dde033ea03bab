"""CI gates on the counters that do not drift: `--fail-if "kernel_count>+0"`.

A gate is KEY OP VALUE. KEY is a census key, a step-timing key, or PHASE.KEY for a phase key
(`forward.kernel_count`, `"(outside phases).d2d_bytes"`); OP is one of > >= < <=; VALUE a number
in ASCII digits, optionally signed, optionally a percentage. On a diff the gate tests B's change
against A (per-step means; a percentage is of A's value); on one capture it tests the value
(per-step mean when the capture has steps, else the total; no percentages). Kernel counts,
launch counts and bytes are deterministic for a given program, so they make reliable gates;
times drift.

The amounts of `census ab` (its gates' values, census.compare.ab.gates; the --equivalence
margin) are a percentage of A or a time with its unit: Amount, parse_amount.
"""

from __future__ import annotations

import math
import operator
import re
from collections.abc import Callable
from dataclasses import dataclass

from census.compare.diff import CensusDiff, Delta
from census.errors import UsageError
from census.metrics import METRIC_KEYS, PHASE_KEYS, TIMING_KEYS
from census.model.census import Census
from census.units import fmt_metric

OPS: dict[str, Callable[[float, float], bool]] = {
    ">=": operator.ge,
    "<=": operator.le,
    ">": operator.gt,
    "<": operator.lt,
}
# ASCII digits only: Python's \d, int() and float() also take ١٠٠ or １００ for 100.
_GATE = re.compile(
    r"^\s*(?P<key>.+?)\s*(?P<op>>=|<=|>|<)\s*(?P<value>[+-]?[0-9]+(?:\.[0-9]+)?)(?P<pct>%?)\s*$",
    re.ASCII,
)


@dataclass(frozen=True)
class Gate:
    """One --fail-if gate on a capture or a diff (module docstring); `phase`: None for a census or
    step-timing key."""

    text: str
    phase: str | None
    key: str
    op: str
    value: float
    percent: bool

    @property
    def label(self) -> str:
        """KEY, or PHASE.KEY for a phase key."""
        return self.key if self.phase is None else f"{self.phase}.{self.key}"


def parse_gate(text: str) -> Gate:
    """The Gate `text` writes; a UsageError naming what is wrong (its form, an unknown key or phase
    key)."""
    m = _GATE.match(text)
    if not m:
        raise UsageError(
            f"--fail-if {text!r}: write KEY OP VALUE (VALUE in digits 0-9), e.g. 'kernel_count>+0' "
            "or 'd2d_bytes>+5%'"
        )
    key, phase = m["key"], None
    if key not in (*METRIC_KEYS, *TIMING_KEYS) and "." in key:
        phase, key = key.rsplit(".", 1)
        if key not in PHASE_KEYS:
            raise UsageError(
                f"--fail-if {text!r}: {key!r} is not a phase key ({', '.join(PHASE_KEYS)})"
            )
    elif key not in (*METRIC_KEYS, *TIMING_KEYS):
        raise UsageError(
            f"--fail-if {text!r}: unknown key {key!r}; use one of {', '.join((*METRIC_KEYS, *TIMING_KEYS))}"
            " or PHASE.KEY"
        )
    return Gate(text.strip(), phase, key, m["op"], float(m["value"]), m["pct"] == "%")


def check_diff(gates: list[Gate], d: CensusDiff) -> list[str]:
    """One line per failed gate: the change it tested and both sides."""
    failed = []
    for g in gates:
        delta = _diff_value(g, d)
        if delta.delta is None:
            raise UsageError(f"--fail-if {g.text!r}: {g.label} is not available on both sides")
        change = delta.pct if g.percent else delta.delta
        if change is None:  # a percentage of zero
            change = float("inf") if delta.delta > 0 else float("-inf") if delta.delta < 0 else 0.0
        if OPS[g.op](change, g.value):
            shown = fmt_metric(g.key, delta.delta, signed=True)
            if g.percent:
                shown = f"{change:+.1f}%" if delta.pct is not None else f"{shown} from 0"
            failed.append(
                f"gate failed: {g.text}: {g.label} {shown} per step "
                f"({fmt_metric(g.key, delta.a)} -> {fmt_metric(g.key, delta.b)})"
            )
    return failed


def _diff_value(g: Gate, d: CensusDiff) -> Delta:
    if g.phase is None:
        return d.metrics[g.key]
    if g.phase not in d.phases:
        known = ", ".join(d.phases) or "none"
        raise UsageError(
            f"--fail-if {g.text!r}: no phase {g.phase!r} in this diff (phases: {known})"
        )
    return d.phases[g.phase][g.key]


def check_summary_gates(gates: list[Gate]) -> None:
    """What one capture cannot test, refused before any work."""
    for g in gates:
        if g.percent:
            raise UsageError(f"--fail-if {g.text!r}: a percentage needs two captures (census diff)")


def check_summary(gates: list[Gate], c: Census) -> list[str]:
    """One line per failed gate on one capture's value (per-step mean with steps, else the whole
    capture's); a gate it cannot test is a UsageError: a percentage, an unknown phase, a value it
    lacks."""
    check_summary_gates(gates)
    failed = []
    values = {**(c.per_step() or c.totals.as_dict()), **(c.per_step_timing() or {})}
    basis = "per step" if c.steps else "in the capture"
    for g in gates:
        if g.phase is None:
            value = values.get(g.key)
        else:
            phases = c.per_phase()
            if g.phase not in phases:
                known = ", ".join(phases) or "none"
                raise UsageError(f"--fail-if {g.text!r}: no phase {g.phase!r} (phases: {known})")
            value = phases[g.phase][g.key]
        if value is None:
            raise UsageError(
                f"--fail-if {g.text!r}: {g.label} is not available (it needs step ranges; the "
                "idle split needs --idle)"
            )
        if OPS[g.op](value, g.value):
            failed.append(f"gate failed: {g.text}: {g.label} is {fmt_metric(g.key, value)} {basis}")
    return failed


# An amount on an A/B experiment: a percentage of A's step, or a time with its unit.
_UNITS = {"ns": 1.0, "us": 1e3, "µs": 1e3, "μs": 1e3, "ms": 1e6, "s": 1e9}
AMOUNT = r"(?P<value>\+?[0-9]+(?:\.[0-9]+)?)\s*(?P<unit>%|ns|us|µs|μs|ms|s)"


@dataclass(frozen=True)
class Amount:
    """An amount of a `census ab` gate or --equivalence: a percentage of A's step or nanoseconds."""

    value: float  # a percentage, or nanoseconds
    percent: bool

    def ns(self, a_ns: float) -> float:
        """In nanoseconds, a percentage taken of `a_ns` (A's median of arm medians)."""
        return self.value / 100 * a_ns if self.percent else self.value


def parse_amount(text: str, option: str = "--equivalence") -> Amount:
    """'2%' (of A's step) or a time ('0.5ms', '500us', '2 s'), above 0 and finite."""
    m = re.fullmatch(rf"\s*{AMOUNT}\s*", text)
    if not m or not 0 < float(m["value"]) < math.inf:
        raise UsageError(
            f"{option} {text!r}: give a share of A's step above 0 ('2%') or a time with its unit "
            "('0.5ms', '500us')"
        )
    return amount_of(m)


def amount_of(m: re.Match) -> Amount:
    """The Amount of a match of AMOUNT (its `value` and `unit` groups)."""
    value, unit = float(m["value"]), m["unit"]
    return Amount(value, True) if unit == "%" else Amount(value * _UNITS[unit], False)

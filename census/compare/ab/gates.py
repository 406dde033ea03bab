"""`census ab --fail-if`: gates on what an experiment's arms show, with 95% confidence (under
`--arms auto`, the stopping look's interval). `slower>2%` fails when the whole interval of B − A
lies above +2% of A's median of arm medians (the verdict "slower" and its lower bound beyond the
value), `faster>1ms` when B is faster by more than 1 ms at the interval's near end. A difference
the arms have not settled never fails a gate. The amounts are census.compare.gates.Amount's: a
percentage of A or a time with its unit.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from census.compare.ab.stats import UNSTABLE, ABStats
from census.compare.gates import AMOUNT, OPS, Amount, amount_of
from census.errors import UsageError
from census.units import fmt_ci, fmt_ns, fmt_pct

_AB_GATE = re.compile(rf"^\s*(?P<key>slower|faster)\s*(?P<op>>=|>)\s*{AMOUNT}\s*$")
AB_GATE_FORMS = "slower>V, slower>=V, faster>V or faster>=V, V a percentage (2%) or a time (0.5ms)"


@dataclass(frozen=True)
class ABGate:
    """A `census ab` gate (module docstring): B `slower` or `faster` than A, > or >=, by an
    Amount."""

    text: str
    key: str  # "slower" or "faster": B relative to A
    op: str  # ">" or ">="
    amount: Amount


def parse_ab_gate(text: str) -> ABGate:
    """The ABGate `text` writes; a UsageError otherwise (an upper bound told to use
    --equivalence)."""
    m = _AB_GATE.match(text)
    if not m and re.match(r"^\s*(slower|faster)\s*<", text):
        raise UsageError(
            f"--fail-if {text!r}: an upper bound is not a gate on arms (an unsettled difference "
            f"never fails one): write {AB_GATE_FORMS}; to require a difference within a margin, "
            "use --equivalence"
        )
    if not m:
        raise UsageError(
            f"--fail-if {text!r}: census ab gates on its arms' 95% CI: write {AB_GATE_FORMS}, "
            "e.g. 'slower>2%'"
        )
    return ABGate(text.strip(), m["key"], m["op"], amount_of(m))


def check_ab(gates: list[ABGate], st: ABStats, labels: tuple[str, str]) -> list[str]:
    """One line per failed gate: the experiment shows, with 95% confidence (under `--arms auto`
    the stopping look's interval), B slower (faster) than A by more than the gate's amount:
    the verdict is in the gate's direction and the interval's bound nearest 0 is beyond the
    amount. An unsettled difference never fails; an unstable experiment (disturbed arms decide
    its verdict) fails every gate as not judged."""
    if st.verdict == UNSTABLE:
        return [f"gate not judged: {g.text}: the verdict is unstable (disturbed arms decide it); "
                "rerun on a quiet machine" for g in gates]  # fmt: skip
    failed = []
    lo, hi = st.ci_ns
    a_ns = st.a.median_of_arm_medians_ns
    for g in gates:
        near = lo if g.key == "slower" else -hi  # the least slowdown (gain) the interval allows
        if st.verdict != g.key or (g.amount.percent and a_ns <= 0):
            continue
        shown = 100 * near / a_ns if g.amount.percent else near
        if OPS[g.op](shown, g.amount.value):
            pct = f" ({fmt_pct(st.delta_pct)})" if st.delta_pct is not None else ""
            failed.append(
                f"gate failed: {g.text}: {labels[1]} is {g.key} than {labels[0]} by "
                f"{fmt_ns(abs(st.delta_median_ns))}/step{pct}, "
                f"{fmt_ci(st.ci_ns, st.ci_coverage)}{_pcts(lo, hi, a_ns)}"
            )
    return failed


def _pcts(lo: float, hi: float, a_ns: float) -> str:
    return f" ({fmt_pct(100 * lo / a_ns)} to {fmt_pct(100 * hi / a_ns)})" if a_ns > 0 else ""

"""The diff document's `ops` (#56, docs/json.md): the Operations table over the compared steps
and per phase, each row's operations on either side, per-step means as Deltas and the integer
sums they are made of, or why there is no table."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from census.metrics import KERNEL_COUNT, KERNEL_TIME_NS

if TYPE_CHECKING:
    from census.compare.diff import CensusDiff
    from census.compare.op_match import OpMatch
    from census.findings.ops import OpKey

FIELDS = {KERNEL_COUNT: "count", "launch_count": "launches", KERNEL_TIME_NS: "time_ns"}


def ops_json(d: CensusDiff) -> dict[str, Any] | None:
    """`{"missing", "steps": {"a", "b"}, "rows": [...], "phases": {name: [...]}}`; null when
    the diff was made without its operations."""
    ops = d.ops
    if ops is None:
        return None
    first = ops.rows[0] if ops.rows else None
    return {
        "missing": ops.missing,
        "steps": None if first is None else {"a": first.a_steps, "b": first.b_steps},
        "rows": [_row(m) for m in ops.rows],
        "phases": {name: [_row(m) for m in rows] for name, rows in ops.phases.items()},
    }


def _key(k: OpKey | None) -> dict[str, Any]:
    """A row's operation: `op` the `aten::` name (a fused group's name for an Inductor group,
    null for the unattributed), `fused`, `backward` (launched inside a backward node)."""
    if k is None:
        return {"op": None, "fused": False, "backward": False}
    return {"op": k.name if k.fused else f"aten::{k.name}", "fused": k.fused,
            "backward": k.backward}  # fmt: skip


def _row(m: OpMatch) -> dict[str, Any]:
    out: dict[str, Any] = {
        "a_ops": [_key(k) for k in m.a_keys],
        "b_ops": [_key(k) for k in m.b_keys],
        "only": "a" if not m.b_keys else "b" if not m.a_keys else None,
        "stayed": m.stayed,
    }
    for name, f in FIELDS.items():
        a, b, delta = m.per_step(f)
        out[name] = {"a": a, "b": b, "delta": delta, "pct": 100.0 * delta / a if a else None}
    out["sums"] = {side: {name: getattr(m, f"{side}_{f}") for name, f in FIELDS.items()}
                   for side in "ab"}  # fmt: skip
    return out

"""Which operations compile changed (#56): two captures' OpTables matched operation by
operation, eager ops to the Inductor groups that list them, with the Operations table's rows and
the sentences that name the top changes.

A match joins the rows of A and B that belong together: the same op on both sides (extern GEMMs
and attention called from compiled code stay `aten::` ops), and an op to every fused group whose
name lists it. Views, which move no data, and copies, which autocast puts in most groups, join a
group to nothing unless it lists nothing else; `copy_` and `_to_copy` are one copy; a backward
row also answers to its forward ops' `<op>_backward`. Joins are transitive, so ops fused
together in one kernel share a match. Forward and backward work never join each other. Rows
that join nothing are only in A or only in B. Sums stay integer ns over each side's steps;
per-step figures divide at the end.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from census.findings.ops import COPY_OPS, LAYOUT_OPS, OpKey, OpTable
from census.units import fmt_count, fmt_ns

TOP_SENTENCES = 3


@dataclass(frozen=True)
class OpMatch:
    """One row of the Operations table: the keys of each side (None: unattributed), and per side
    the kernels, distinct launch calls and kernel time summed over its steps, and its steps."""

    a_keys: tuple[OpKey | None, ...]
    b_keys: tuple[OpKey | None, ...]
    a_count: int
    b_count: int
    a_launches: int
    b_launches: int
    a_time_ns: int
    b_time_ns: int
    a_steps: int
    b_steps: int

    def per_step(self, field: str) -> tuple[float, float, float]:
        """(a, b, b - a) of `count`, `launches` or `time_ns`, per step."""
        a = getattr(self, f"a_{field}") / max(self.a_steps, 1)
        b = getattr(self, f"b_{field}") / max(self.b_steps, 1)
        return a, b, b - a

    @property
    def stayed(self) -> bool:
        """The same ops and the same kernel count per step on both sides."""
        return set(self.a_keys) == set(self.b_keys) and self.per_step("count")[2] == 0


# ops one name of which eager runs inside the other: `stack` is `cat` of unsqueezed views (the
# innermost range eager shows is `cat`, a fused kernel names `stack`)
SAME_OPS = {"stack": "cat"}


def canon(name: str) -> str:
    """An op's name for matching: the copy family as `copy`, in-place ops as their op, `stack`
    as `cat` (SAME_OPS)."""
    if name in COPY_OPS:
        return "copy"
    bare = name.rstrip("_") or name
    return SAME_OPS.get(bare, bare)


def _names(key: OpKey | None, lists: frozenset[str], forward: tuple[str, ...]) -> set[str]:
    """The names a row answers to."""
    if key is None:
        return set()
    if key.fused:
        computing = lists - LAYOUT_OPS - COPY_OPS
        moving = computing or (lists - LAYOUT_OPS) or lists
        return {canon(n) for n in moving}
    out = {canon(n) for n in lists}
    if key.backward:
        out.update(canon(f) + "_backward" for f in forward)
    return out


def match_ops(a: OpTable, b: OpTable) -> list[OpMatch]:
    """The Operations table of A against B, largest |Δ kernel time per step| first."""
    nodes = [("a", i) for i in range(len(a.keys))] + [("b", i) for i in range(len(b.keys))]
    parent = list(range(len(nodes)))

    def find(i: int) -> int:
        while parent[i] != i:
            parent[i] = parent[parent[i]]
            i = parent[i]
        return i

    names_a = [_names(k, lst, f) for k, lst, f in zip(a.keys, a.lists, a.forward, strict=True)]
    names_b = [_names(k, lst, f) for k, lst, f in zip(b.keys, b.lists, b.forward, strict=True)]
    off = len(a.keys)
    for i, ka in enumerate(a.keys):
        for j, kb in enumerate(b.keys):
            same_side = (ka is None) == (kb is None) and (
                ka is None or (kb is not None and ka.backward == kb.backward)
            )
            if same_side and (ka == kb or names_a[i] & names_b[j]):
                parent[find(i)] = find(off + j)
    return _sums(a, b, [find(i) for i in range(len(nodes))], off)


def _sums(a: OpTable, b: OpTable, root: list[int], off: int) -> list[OpMatch]:
    """One OpMatch per joined set of rows, with each side's sums over its steps."""
    groups: dict[int, tuple[list[int], list[int]]] = {}
    for i, r in enumerate(root):
        side = groups.setdefault(r, ([], []))
        (side[0] if i < off else side[1]).append(i if i < off else i - off)
    out = []
    for rows_a, rows_b in groups.values():
        ca, cb = _side(a, rows_a), _side(b, rows_b)
        if not (ca[0] or cb[0] or (rows_a and a.keys[rows_a[0]] is None)):
            continue
        out.append(OpMatch(
            a_keys=tuple(a.keys[i] for i in rows_a), b_keys=tuple(b.keys[i] for i in rows_b),
            a_count=ca[0], b_count=cb[0], a_launches=ca[1], b_launches=cb[1],
            a_time_ns=ca[2], b_time_ns=cb[2],
            a_steps=a.kernel_count.shape[1], b_steps=b.kernel_count.shape[1],
        ))  # fmt: skip
    out.sort(key=lambda m: (-abs(m.per_step("time_ns")[2]), side_label(m.a_keys or m.b_keys)))
    return out


def _side(t: OpTable, rows: list[int]) -> tuple[int, int, int]:
    """(kernels, launches, kernel time) of `rows`, summed over the steps."""
    if not rows:
        return 0, 0, 0
    pick = np.asarray(rows)
    return tuple(  # type: ignore[return-value]
        int(col[pick].sum()) for col in (t.kernel_count, t.launch_count, t.kernel_time_ns)
    )


def side_label(keys: tuple[OpKey | None, ...], most: int = 3) -> str:
    """A side's keys in a few words (`(backward)` said once when all are backward work)."""
    if not keys:
        return "-"
    back = all(k is not None and k.backward for k in keys)
    names = sorted(("unattributed" if k is None else k.name if back else k.label) for k in keys)
    more = f" +{len(names) - most} more" if len(names) > most else ""
    return ", ".join(names[:most]) + more + (" (backward)" if back else "")


def group_label(keys: tuple[OpKey | None, ...]) -> str:
    """Several keys in fewer words: how many, and the operations they list, views left out
    (`3 groups: _to_copy + clone`; a match never joins forward to backward work, so the other
    side's label says which); one key as side_label says it."""
    if len(keys) < 2 or None in keys:
        return side_label(keys)
    ops = {n for k in keys if k is not None for n in k.name.split(" + ")} - LAYOUT_OPS
    return f"{len(keys)} groups: " + " + ".join(sorted(ops))


def operations_rows(matches: list[OpMatch]) -> list[dict[str, object]]:
    """The Operations table's rows, renderer-independent: A's ops, B's ops, kernels, launches
    and kernel time per step on each side and the changes (floats: means over the steps)."""
    rows = []
    for m in matches:
        count, launches, time_ns = (m.per_step(f) for f in ("count", "launches", "time_ns"))
        rows.append({
            "a_ops": side_label(m.a_keys), "b_ops": side_label(m.b_keys),
            "kernels": count, "launches_saved": -launches[2], "time_ns": time_ns,
            "only": "a" if not m.b_keys else "b" if not m.a_keys else None,
        })  # fmt: skip
    return rows


def change_sentence(m: OpMatch, unit: str = "/step") -> str:
    """One changed row in a sentence: A's kernels and time, what they became in B, the change."""
    (ca, cb, _), (ta, tb, dt) = m.per_step("count"), m.per_step("time_ns")
    fused = sum(1 for k in m.b_keys if k is not None and k.fused)
    kind = "Triton kernels" if fused and fused == len(m.b_keys) else "kernels"
    return (
        f"{side_label(m.a_keys)}: {fmt_count(ca)} kernels ({fmt_ns(ta)}{unit}) became "
        f"{fmt_count(cb)} {kind} ({fmt_ns(tb)}{unit}), {fmt_ns(dt, signed=True)}{unit}"
        + (f" ({side_label(m.b_keys)})" if m.b_keys != m.a_keys else "")
    )


def changed(matches: list[OpMatch]) -> list[OpMatch]:
    """The rows whose kernel time per step changed and that did not stay the same, in order."""
    return [m for m in matches if not m.stayed and m.per_step("time_ns")[2]]


def stayed_sentence(matches: list[OpMatch], unit: str = "/step") -> str | None:
    """What stayed the same (same operations and kernels on both sides) in one line."""
    stayed = [m for m in matches if m.stayed and m.a_keys != (None,)]
    if not stayed:
        return None
    return f"stayed the same ({len(stayed)} operations, same kernels{unit}): " + side_label(
        tuple(k for m in stayed for k in m.a_keys), most=6
    )


def ops_sentences(
    matches: list[OpMatch], unit: str = "/step", top: int = TOP_SENTENCES
) -> list[str]:
    """The top changes, one sentence each, then one line for what stayed the same; `unit` as
    explain.py's ("" when the sides have no steps and a window is the whole capture)."""
    said = [change_sentence(m, unit) for m in changed(matches)[:top]]
    stayed = stayed_sentence(matches, unit)
    return said + ([stayed] if stayed else [])

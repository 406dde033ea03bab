"""Every JSON contract census prints, in one module: `census summary --json` (summary_json, and
spread_json for rank folders), `census diff --format json` (diff_json), `census ab --json`
(experiment_json); `census capture --json` adds a capture's facts (census.render.json_capture)."""

from __future__ import annotations

import json
from dataclasses import asdict
from typing import TYPE_CHECKING, Any

from census import CENSUS_VERSION
from census.definitions import (
    GRAPH_TRACE_RULE,
    GRAPH_TRACE_UNKNOWN,
    HOST_AHEAD_RULE,
    IDLE_BY_RANGE_RULE,
    LIMITER_RULE,
)
from census.metrics import (
    DEFINITIONS,
    GPU_BUSY_NS,
    GPU_IDLE_NS,
    GPU_SPAN_NS,
    GPU_START_NS,
    HOST_LEAD_NS,
    METRIC_KEYS,
    PHASE_METRICS,
    PHASE_SPAN_METRIC,
    STEP_TIME_NS,
)
from census.model.ab import Arm
from census.model.census import Census, Source
from census.model.ops import OpRows
from census.model.step import METRIC_VALUES, Phase, Step, idle_values
from census.model.step_table import int_sum
from census.render import json_ops, json_rows
from census.render.json_ranks import folder_ranks_json, report_ranks_json
from census.render.json_rows import Raw
from census.render.views import DiffView, ExperimentView, RanksView, SummaryView

if TYPE_CHECKING:  # (the compare stage's modules load only where a diff or arms need them)
    from census.compare.ab.arm_findings import ArmTail
    from census.compare.ab.rank_table import RankRow
    from census.compare.ab.stats import Equivalence, PhaseStats
    from census.compare.diff import KernelDelta
    from census.findings.tails import Tail

# Each key's rule, carried by every document: `gpu_busy_ns` (clipped to the step's window) and
# `non_nccl_union_ns` (the work launched in the step, unclipped) are not a subset pair.
KEY_DEFINITIONS = {
    **DEFINITIONS,
    **{f"phase.{m.name}": m.definition for m in (*PHASE_METRICS, PHASE_SPAN_METRIC)},
    "limiter": LIMITER_RULE,
    "idle_by_range": IDLE_BY_RANGE_RULE,
    "host_ran_ahead": HOST_AHEAD_RULE,
    "graph_trace": GRAPH_TRACE_RULE,
}


def summary_json(view: SummaryView, top: int = 20, rows_as_text: bool = False,
                 ranks: bool = True) -> dict[str, Any]:  # fmt: skip
    """The `census summary --json` contract (without its "capture", render_summary_json adds
    it: a diff's sides have none); `rows_as_text`: the per-step lists as their JSON text
    (census.render.json_rows, for json_rows.dumps); `ranks`: a report's ranks after it, where
    it holds several (census.render.json_ranks; a rank folder's are its own)."""
    census, tail, limiter = view.census, view.tail, view.limiter
    return {
        "census_version": CENSUS_VERSION,
        "definitions": KEY_DEFINITIONS,
        "source": _source(census.source),
        "totals": census.totals.as_dict(),
        "steps": json_rows.steps_text(census.steps, census.ops)
        if rows_as_text
        else [_step(s, census.ops, i, census.steps.bounds[i]) for i, s in enumerate(census.steps)],
        "per_step": census.per_step(),
        "per_phase": census.per_phase(),
        "tail": None if tail is None else _tail(tail),
        "limiter": None if limiter is None else limiter.kind,
        "idle_by_range": census.idle_ranges(),
        "host_ran_ahead": census.host_ran_ahead(),
        "timing": {
            "steps": json_rows.timing_text(census.steps)
            if rows_as_text
            else [_step_timing(s) for s in census.steps],
            "per_step": census.per_step_timing(),
        },
        **_tables(census, top),
        **({} if census.ops is None else {"ops": census.ops.entries()}),
        "graph_trace": _graph_trace(census),
        "warnings": list(census.warnings),
        **(report_ranks_json(view) if ranks else {}),
    }


def _graph_trace(census: Census) -> dict[str, Any] | None:
    """Null, or for a capture traced as whole CUDA graphs (GRAPH_TRACE_RULE) the keys its
    whole-graph rows count in and those that cannot know the graphs' kernels."""
    if not census.graph_trace_mode:
        return None
    counted = [GPU_BUSY_NS, GPU_IDLE_NS, "idle_split", GPU_SPAN_NS, "limiter"]
    return {"mode": "graph", "counted_in": counted, "unknown": list(GRAPH_TRACE_UNKNOWN)}


def _source(source: Source) -> dict[str, Any]:
    """The export read: its path, tracer (`nsys 2025.3.2`, `torch.profiler (Kineto)`), versions
    and GPUs; and, only where there are any, the tables read with SQL rather than from the
    file's pages, each with why (slower)."""
    out: dict[str, Any] = {
        "path": source.path,
        "tracer": source.traced_by,
        "nsys_version": source.nsys_version,
        "schema_version": source.schema_version,
        "gpus": [{"id": g.id, "name": g.name} for g in source.gpus],
    }
    if source.read_with_sql:
        out["read_with_sql"] = dict(source.read_with_sql)
    return out


def _step(s: Step, ops: OpRows | None = None, at: int = 0, first: int = 0) -> dict[str, Any]:
    return {
        "name": s.name,
        "start_ns": s.start_ns,
        "end_ns": s.end_ns,
        **dict(zip(METRIC_KEYS, METRIC_VALUES(s.metrics), strict=True)),
        "phases": [_phase(p, ops, first + i) for i, p in enumerate(s.phases)],
        **({} if ops is None else {"ops": ops.entries(at)}),
    }


def _step_timing(s: Step) -> dict[str, Any]:
    return {
        "name": s.name,
        STEP_TIME_NS: s.duration_ns,
        GPU_BUSY_NS: s.gpu_busy_ns,
        GPU_IDLE_NS: s.gpu_idle_ns,
        GPU_START_NS: s.gpu_start_ns,
        GPU_SPAN_NS: s.gpu_span_ns,
        HOST_LEAD_NS: s.host_lead_ns,
        **idle_values(s.idle),
    }


def _tables(census: Census, top: int) -> dict[str, Any]:
    """Kernel classes, the top kernels, memory operations, launch APIs and NCCL collectives:
    each row with its per-step means (None without steps)."""
    n = census.step_count

    def mean(x: int) -> float | None:
        return x / n if n else None

    def kernels(k: Any) -> dict[str, Any]:
        return {"name": k.name, "class": k.cls, "count": k.count, "time_ns": k.time_ns,
                "per_step_count": mean(k.step_count), "per_step_time_ns": mean(k.step_time_ns)}  # fmt: skip

    return {
        "classes": [{"class": c.cls, "count": c.count, "time_ns": c.time_ns,
                     "per_step_count": mean(c.step_count),
                     "per_step_time_ns": mean(c.step_time_ns)} for c in census.classes],
        "top_kernels": [kernels(k) for k in census.kernels[:top]],
        "memory": [{"kind": m.kind, "count": m.count, "bytes": m.bytes, "time_ns": m.time_ns,
                    "per_step_count": mean(m.step_count), "per_step_bytes": mean(m.step_bytes)}
                   for m in census.memory],
        "launch_apis": [{"api": a.api, "count": a.count, "time_ns": a.time_ns,
                         "per_step_count": mean(a.step_count),
                         "per_step_time_ns": mean(a.step_time_ns)} for a in census.launch_apis],
        "nccl": {
            "collectives": [{"collective": c.collective, "count": c.count, "time_ns": c.time_ns,
                             "per_step_count": mean(c.step_count),
                             "per_step_time_ns": mean(c.step_time_ns)}
                            for c in census.collectives],
            "overlap_ns": census.nccl_overlap_ns,
            "per_step_overlap_ns": mean(int_sum(census.steps.column("nccl_overlap_ns"))),
        },
    }  # fmt: skip


def _phase(p: Phase, ops: OpRows | None = None, at: int = 0) -> dict[str, Any]:  # at: its phase row
    return {"name": p.name, **p.as_dict(), GPU_START_NS: p.gpu_start_ns, GPU_SPAN_NS: p.gpu_span_ns,
            **({} if ops is None else {"ops": ops.entries(phase=at)})}  # fmt: skip


def _tail(tail: Tail) -> dict[str, Any]:
    # "clock": "gpu span" when the host ran ahead (the statistics are of the GPU spans), else
    # "host range" (of the NVTX ranges)
    return {"clock": tail.clock,
            **{k: v for k, v in vars(tail).items() if k not in ("outliers", "clock")},
            "outliers": [vars(o) for o in tail.outliers]}  # fmt: skip


def _hosts(view: RanksView) -> list[str | None]:
    return view.hosts or [None] * len(view.labels)


def spread_json(view: RanksView) -> dict:
    """A rank folder's `ranks` (each one's label, host and summary) and `spread` (per key: min,
    median, max over ranks)."""
    return {
        "ranks": [
            {"rank": label, "host": host, "summary": summary_json(rank)}
            for label, host, rank in zip(view.labels, _hosts(view), view.ranks, strict=True)
        ],
        "spread": {k: vars(v) for k, v in view.spread.items()},
    }


def _kernel(k: KernelDelta) -> dict[str, Any]:
    return {"name": k.name, "class": k.cls, "count": k.count.as_dict(),
            "time_ns": k.time_ns.as_dict()}  # fmt: skip


def diff_json(view: DiffView, top: int = 20, rows_as_text: bool = False) -> dict[str, Any]:
    """The `census diff --format json` contract (`rows_as_text`: as summary_json's)."""
    from census.compare.diff import BUCKETS

    d = view.diff
    return {
        "labels": {"a": d.labels[0], "b": d.labels[1]},
        "basis": "per_step" if d.per_step else "capture",
        "clock": d.clock,
        "comparability": d.comparability.as_dict(),
        "definitions": KEY_DEFINITIONS,
        "a": summary_json(view.a, top, rows_as_text),
        "b": summary_json(view.b, top, rows_as_text),
        "metrics": {k: v.as_dict() for k, v in d.metrics.items()},
        "phases": {
            name: {k: v.as_dict() for k, v in keys.items()} for name, keys in d.phases.items()
        },
        "idle_by_range": {name: v.as_dict() for name, v in d.idle_by_range.items()},
        "classes": [
            {"class": c.cls, "count": c.count.as_dict(), "time_ns": c.time_ns.as_dict()}
            for c in d.classes
        ],
        "kernels": {b: [_kernel(k) for k in d.bucket(b)] for b in BUCKETS if b != "unchanged"},
        "spread": {
            "a": None if d.spread[0] is None else vars(d.spread[0]),
            "b": None if d.spread[1] is None else vars(d.spread[1]),
            "noise_ns": d.noise_ns,
            "within_noise": d.within_noise,
        },
        "uncaptured": {"a": d.uncaptured_ns[0], "b": d.uncaptured_ns[1]},
        "ops": json_ops.ops_json(d),
        "explanation": view.explanation,
        "warnings": list(d.warnings),
    }


AB_METHOD = (
    "arms are fresh processes run without nsys, one warm arm (A) discarded, then ABBA BAAB "
    "blocks; each arm is reduced to its median step time; delta = least-squares estimate of B − A "
    "with one intercept per block of four; 95% CI = delta ± t(0.975, arms − blocks − 1) · SE "
    "(under --arms auto, delta ± the stopping look's boundary · SE: ci_ns, ci_coverage); "
    "each phase every measured arm recorded is fitted the same way on its arm medians"
)


def _undisturbed(st: Any) -> dict[str, Any] | None:
    """The fit without the disturbed arms, with its interval at the step's coverage."""
    fit = st.undisturbed
    if fit is None:
        return None
    return {"delta_ns": fit.delta_ns, "ci95_ns": list(fit.ci95_ns),
            "ci_ns": list(st.undisturbed_ci_ns), "ci_coverage": st.ci_coverage, "df": fit.df,
            "verdict": fit.verdict}  # fmt: skip


def _arm(arm: Arm, disturbed: str | None) -> dict[str, Any]:
    return {
        "side": arm.side,
        "index": arm.index,
        "discarded": arm.discarded,
        "disturbed": disturbed is not None,
        "disturbed_reason": disturbed,
        STEP_TIME_NS: list(arm.step_time_ns),
        "median_ns": arm.median_ns,
        "p95_ns": arm.p95_ns,
        "steps": len(arm.step_time_ns),  # the values p95_ns rests on (under 20: the two largest)
        "peak_allocated_bytes": arm.peak_allocated_bytes,
        "peak_reserved_bytes": arm.peak_reserved_bytes,
        "recompiles": arm.recompiles,
        "graph_breaks": arm.graph_breaks,
        "clock": arm.clock,
        "phase_time_ns": {name: list(times) for name, times in arm.phase_time_ns.items()},
        "values": {name: list(v) for name, v in arm.values.items()},
        "counts": {name: list(c) for name, c in arm.counts.items()},
        "env": None if arm.env is None else asdict(arm.env),
        "cpu_share": None if arm.env is None else arm.env.cpu_share,
        "ranks": [asdict(r) for r in arm.ranks],
        "wall_ns": arm.wall_ns,
        "census_ns": arm.census_ns,
    }


def _rank_row(row: RankRow) -> dict[str, Any]:
    """One rank over the measured arms (census.compare.ab.rank_table), each side's figures."""
    return {"rank": row.rank, "host": row.host, "local_rank": row.local_rank, "node": row.node,
            "gpu_index": row.gpu_index, "gpu_uuid": row.gpu_uuid,
            **{side: None if figures is None else {**asdict(figures), "counts": {
                name: list(low_high) for name, low_high in figures.counts.items()}}
               for side, figures in (("a", row.a), ("b", row.b))}}  # fmt: skip


def _arm_tail(t: ArmTail) -> dict[str, Any]:
    return {"arm": t.arm_index, "side": t.side, "step": t.step, STEP_TIME_NS: t.step_time_ns,
            "median_ns": t.median_ns, "threshold_ns": t.threshold_ns, "excess_ns": t.excess_ns,
            "phase": t.phase, "phase_delta_ns": t.phase_delta_ns,
            "phase_deltas_ns": dict(t.phase_deltas_ns)}  # fmt: skip


def _phase_stats(p: PhaseStats) -> dict[str, Any]:
    return {
        "a_median_ns": p.a_median_ns,
        "b_median_ns": p.b_median_ns,
        "delta_median_ns": p.delta_median_ns,
        "ci95_ns": list(p.ci95_ns),
        "ci_ns": list(p.ci_ns),
        "ci_coverage": p.ci_coverage,
        "pairs_agreeing": p.pairs_agreeing,
        "verdict": p.verdict,
        "residual_sd_ns": p.residual_sd_ns,
    }


def _equivalence(eq: Equivalence) -> dict[str, Any]:
    return {"margin_ns": eq.margin_ns, "margin_pct": eq.margin_pct, "ci90_ns": list(eq.ci90_ns),
            "coverage": eq.coverage, "equivalent": eq.equivalent}  # fmt: skip


def _sequential(exp: Any) -> dict[str, Any] | None:
    """`--arms auto`: what was asked, where it stopped and why, and every look; None for a
    fixed number of arms."""
    looks = exp.stats.looks
    if not looks or exp.sequential is None:
        return None
    stop = looks[-1]
    return {"max_arms": exp.sequential.max_arms, "min_effect_ns": stop.min_effect_ns,
            "min_effect": exp.sequential.min_effect, "budget_s": exp.sequential.budget_s,
            "stopped_at_look": stop.number, "stopped_at_arms": stop.arms, "reason": stop.reason,
            "looks": [{"look": lk.number, "arms": lk.arms, "decision": lk.decision,
                       "reason": lk.reason, "verdict": lk.verdict, "delta_ns": lk.delta_ns,
                       "ci_ns": list(lk.ci_ns), "ci_coverage": 1 - lk.level,
                       "critical_t": lk.critical, "se_ns": lk.se_ns, "df": lk.df}
                      for lk in looks]}  # fmt: skip


def experiment_json(view: ExperimentView, top: int = 20) -> dict[str, Any]:
    """The `census ab --json` contract."""
    exp, parts = view.experiment, view.explanation
    st = exp.stats
    return {
        "census_version": CENSUS_VERSION,
        "labels": {"a": exp.labels[0], "b": exp.labels[1]},
        "commands": exp.commands,
        "order": exp.order,
        "arms": [_arm(a, st.disturbed.get(a.index)) for a in exp.arms],
        "e2e": {"a": vars(st.a), "b": vars(st.b)},
        "delta_median_ns": st.delta_median_ns,
        "delta_pct": st.delta_pct,
        "ci95_ns": list(st.ci95_ns),
        "ci_ns": list(st.ci_ns),
        "ci_coverage": st.ci_coverage,
        "se_ns": st.se_ns,
        "df": st.df,
        "residual_sd_ns": st.residual_sd_ns,
        "pairs": [vars(p) for p in st.pairs],
        "pairs_agreeing": st.pairs_agreeing,
        "verdict": st.verdict,
        "verdict_all": st.verdict_all,
        "verdict_undisturbed": st.verdict_undisturbed,
        "undisturbed": _undisturbed(st),
        "arms_needed": st.arms_needed,
        "sequential": _sequential(exp),
        "equivalence": None if exp.equivalence is None else _equivalence(exp.equivalence),
        "phases": {name: _phase_stats(p) for name, p in st.phases.items()},
        "tails": [_arm_tail(t) for t in exp.tails],
        "record_parity": {name: vars(p) for name, p in exp.parity.items()},
        "ranks": [_rank_row(row) for row in exp.ranks],
        "method": AB_METHOD,
        "explanation": parts.lines,
        "warnings": parts.warnings,
        "capture": exp.capture_note,
        "wall_s": exp.wall_s,
        "census": None if view.diff is None else diff_json(view.diff, top),
    }


def render_summary_json(view: SummaryView, top: int = 20, indent: int | None = None) -> str | Raw:
    """`census summary --json`: the summary and its capture overhead (`capture`: the view's,
    null without a calibration run); compact (`indent` None) in pieces made as they are
    iterated (census.render.render_pieces)."""
    return document({**summary_json(view, top, indent is None), "capture": view.overhead}, indent)


def document(doc: dict[str, Any], indent: int | None) -> str | Raw:
    """A document built with its per-step lists as text (census.render.json_rows) when compact
    (`indent` None), as pieces; else indented text."""
    return json_rows.document(doc) if indent is None else json.dumps(doc, indent=indent)


def render_ranks_json(view: RanksView, top: int = 20, indent: int | None = None) -> str:
    """`census summary --json` of a rank folder: ranks_json as text."""
    return json.dumps(ranks_json(view, top), indent=indent)


def ranks_json(view: RanksView, top: int = 20) -> dict[str, Any]:
    """A rank folder's document: the merged summary, each rank's, the spread."""
    spread = spread_json(view)
    extra = folder_ranks_json(view.merged, view.labels, spread["ranks"])
    return {**summary_json(view.merged, top, ranks=False), **spread, **extra}


def render_diff_json(view: DiffView, top: int = 20, indent: int | None = None) -> str | Raw:
    """`census diff --json`: diff_json (`top`: each side's top kernels), compact in pieces as
    render_summary_json's."""
    return document(diff_json(view, top, indent is None), indent)


def render_experiment_json(view: ExperimentView, top: int = 20, indent: int | None = None) -> str:
    """`census ab --json`: experiment_json as text."""
    return json.dumps(experiment_json(view, top), indent=indent)

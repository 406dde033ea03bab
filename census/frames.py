"""pandas DataFrames of a Census or CensusDiff, for notebooks.

Columns are the JSON documents' names: integer `*_ns`, `*_bytes` and counts for what was
measured; `per_step_*` are means over the selected steps (floats, <NA> without steps); a diff's
frames have `a`, `b`, `delta`, `pct`, with the user's labels in `DataFrame.attrs["labels"]`.
A capture's frames take a Census or what census.summarize takes, an experiment's an Experiment or
its folder; anything else is a CensusError (UsageError) naming the frame.

    c = census.summarize("eager.sqlite")
    census.frames.kernels(c).nlargest(10, "time_ns")   # or kernels("eager.sqlite")
    d = census.diff("eager.sqlite", "compiled.sqlite")
    census.frames.kernel_changes(d).query("measure == 'time_ns'").sort_values("delta")
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any

from census.errors import UsageError
from census.metrics import (
    DEFINITIONS,
    GPU_BUSY_NS,
    GPU_IDLE_NS,
    GPU_SPAN_NS,
    GPU_START_NS,
    HOST_LEAD_NS,
    IDLE_KEYS,
    KERNEL_COUNT,
    KERNEL_TIME_NS,
    METRIC_KEYS,
    PHASE_KEYS,
    STEP_TIME_NS,
    TIMING_KEYS,
)
from census.model.ops import STEP_ARRAYS
from census.model.step import idle_values
from census.units import clip

__all__ = ["arm_phases", "arms", "classes", "idle_by_range", "kernel_changes", "kernels",
           "memory", "metrics", "ops", "phases", "steps"]  # fmt: skip

# census.frames.steps and census.frames.phases share these columns: the step's position among
# the selected steps and its name
_STEP_KEY = ["step", "step_name"]

if TYPE_CHECKING:
    import pandas as pd

    from census.compare.ab.experiment import Experiment
    from census.compare.diff import CensusDiff
    from census.model.census import Census
    from census.options import PathLike


def _census(c: Any, frame: str) -> Census:
    """A Census as given, or the census of what census.summarize takes (a path, sample:NAME)."""
    from census.api import summarize
    from census.model.census import Census

    return _taken(c, frame, Census, summarize,
                  "a Census or what census.summarize takes (a path, sample:NAME)")  # fmt: skip


def _diff(d: Any, frame: str) -> CensusDiff:
    from census.compare.diff import CensusDiff

    return _taken(d, frame, CensusDiff, None, "a CensusDiff (census.diff(a, b))")


def _experiment(exp: Any, frame: str) -> Experiment:
    """An Experiment as given, or the `census ab` folder at a path read back."""
    from census.api import load_experiment
    from census.compare.ab.experiment import Experiment

    return _taken(exp, frame, Experiment, load_experiment,
                  "an Experiment or a `census ab` folder (census.load_experiment)")  # fmt: skip


def _taken(value: Any, frame: str, kind: type, read: Any, wants: str) -> Any:
    """`value` if it is a `kind`, else what `read` makes of a path (None: no path is taken);
    anything else a UsageError: what census.frames.<frame> takes, and what it was given."""
    if isinstance(value, kind):
        return value
    if read is not None and isinstance(value, str | os.PathLike):
        return read(value)
    given = f"{type(value).__name__} {clip(repr(value), 40)}"
    raise UsageError(f"census.frames.{frame} takes {wants}, not {given}")


def _frame(rows: list[dict[str, Any]], columns: list[str]) -> pd.DataFrame:
    import pandas as pd

    frame = pd.DataFrame(rows, columns=columns)
    for col in columns:
        if col.startswith("per_step_") or col in ("a", "b", "delta", "pct"):
            frame[col] = frame[col].astype("Float64")
        elif col.endswith(("_ns", "_bytes", "count")) or col in ("count", "bytes"):
            # nullable where a figure was not computed (the idle split without --idle)
            frame[col] = frame[col].astype("Int64" if frame[col].isna().any() else "int64")
    return frame


def _mean(c: Census, total: int) -> float | None:
    return total / c.step_count if c.step_count else None


def kernels(c: Census | PathLike) -> pd.DataFrame:
    """One row per kernel name: name, class, count, time_ns, per_step_count, per_step_time_ns."""
    c = _census(c, "kernels")
    rows = [
        {"name": k.name, "class": k.cls, "count": k.count, "time_ns": k.time_ns,
         "per_step_count": _mean(c, k.step_count), "per_step_time_ns": _mean(c, k.step_time_ns)}
        for k in c.kernels
    ]  # fmt: skip
    cols = ["name", "class", "count", "time_ns", "per_step_count", "per_step_time_ns"]
    return _frame(rows, cols)


def classes(c: Census | PathLike) -> pd.DataFrame:
    """One row per kernel class: class, count, time_ns, per_step_count, per_step_time_ns."""
    c = _census(c, "classes")
    rows = [
        {"class": x.cls, "count": x.count, "time_ns": x.time_ns,
         "per_step_count": _mean(c, x.step_count), "per_step_time_ns": _mean(c, x.step_time_ns)}
        for x in c.classes
    ]  # fmt: skip
    return _frame(rows, ["class", "count", "time_ns", "per_step_count", "per_step_time_ns"])


def memory(c: Census | PathLike) -> pd.DataFrame:
    """One row per copy kind and memsets: kind, count, bytes, time_ns, per_step_count,
    per_step_bytes."""
    c = _census(c, "memory")
    rows = [
        {"kind": m.kind, "count": m.count, "bytes": m.bytes, "time_ns": m.time_ns,
         "per_step_count": _mean(c, m.step_count), "per_step_bytes": _mean(c, m.step_bytes)}
        for m in c.memory
    ]  # fmt: skip
    return _frame(rows, ["kind", "count", "bytes", "time_ns", "per_step_count", "per_step_bytes"])


def steps(c: Census | PathLike) -> pd.DataFrame:
    """One row per selected step: step (its position among the selected steps), step_name (the
    JSON's step `name`; step and step_name join census.frames.phases), start_ns, end_ns, the
    census keys, step_time_ns, gpu_busy_ns, gpu_idle_ns, gpu_span_ns, host_lead_ns, gpu_start_ns
    (<NA> for a step without GPU work), the idle split (sync_count ... idle_other_ns),
    nccl_overlap_ns; `attrs["definitions"]` holds each key's rule."""
    c = _census(c, "steps")
    rows = [
        {"step": i, "step_name": s.name, "start_ns": s.start_ns, "end_ns": s.end_ns, **s.metrics.as_dict(),
         STEP_TIME_NS: s.duration_ns, GPU_BUSY_NS: s.gpu_busy_ns,
         GPU_IDLE_NS: s.gpu_idle_ns, GPU_SPAN_NS: s.gpu_span_ns,
         HOST_LEAD_NS: s.host_lead_ns, GPU_START_NS: s.gpu_start_ns, **idle_values(s.idle),
         "nccl_overlap_ns": s.nccl_overlap_ns}
        for i, s in enumerate(c.steps)
    ]  # fmt: skip
    cols = [*_STEP_KEY, "start_ns", "end_ns", *METRIC_KEYS, *TIMING_KEYS, GPU_START_NS, *IDLE_KEYS,
            "nccl_overlap_ns"]  # fmt: skip
    frame = _frame(rows, cols)
    # gpu_busy_ns is clipped to the step's window, non_nccl_union_ns is not: each column's rule.
    frame.attrs["definitions"] = DEFINITIONS
    return frame


def phases(c: Census | PathLike) -> pd.DataFrame:
    """One row per (step, phase) the step holds, the `(outside phases)` remainder included:
    step (its position among the selected steps), step_name, phase, then the phase keys
    (the census keys, duration_ns, gpu_busy_ns, the idle split), gpu_start_ns and gpu_span_ns
    (the GPU work the phase launched: earliest start, latest end − that; <NA> without any).
    Summed over a step's rows, every phase key but non_nccl_union_ns gives the step's own value
    (the spans do not add up); the mean over steps of a phase's rows, a phase absent from a step
    counting 0, is `per_phase`. Joins census.frames.steps on step and step_name:
    `steps(c).merge(phases(c), on=["step", "step_name"], suffixes=("", "_phase"))`."""
    c = _census(c, "phases")
    rows = [
        {"step": i, "step_name": s.name, "phase": ph.name, **ph.as_dict(),
         GPU_START_NS: ph.gpu_start_ns, GPU_SPAN_NS: ph.gpu_span_ns}
        for i, s in enumerate(c.steps)
        for ph in s.phases
    ]  # fmt: skip
    return _frame(rows, [*_STEP_KEY, "phase", *PHASE_KEYS, GPU_START_NS, GPU_SPAN_NS])


def idle_by_range(c: Census | PathLike) -> pd.DataFrame:
    """One row per host NVTX range holding GPU idle time, by time: range, idle_ns_per_step,
    share (of the steps' GPU idle time); the summary JSON's `idle_by_range`. Empty without the
    idle split (--no-idle) or without steps."""
    c = _census(c, "idle_by_range")
    return _frame(c.idle_ranges() or [], ["range", "idle_ns_per_step", "share"])


def ops(c: Census | PathLike) -> pd.DataFrame:
    """One row per operation (docs/definitions.md, Operations), by whole-capture kernel time,
    the unattributed last: op (the summary JSON's `op`: `aten::mm`, a fused group's name,
    <NA> for the unattributed), label (`mm (backward)`), fused, backward, forward (the forward
    ops of a backward row, joined by ", "), kernel_count, kernel_time_ns, launch_count (over
    the whole capture), per_step_kernel_count, per_step_kernel_time_ns, per_step_launch_count
    (means over the selected steps). Empty where the profile has no op ranges."""
    c = _census(c, "ops")
    cols = ["op", "label", "fused", "backward", "forward", KERNEL_COUNT, KERNEL_TIME_NS,
            "launch_count", "per_step_kernel_count", "per_step_kernel_time_ns",
            "per_step_launch_count"]  # fmt: skip
    rows = []
    table = c.ops
    for r in table.order() if table is not None else []:
        sums = [int(getattr(table, k)[r].sum()) for k in STEP_ARRAYS]
        rows.append({"op": table.op[r], "label": table.label(r), "fused": table.fused[r],
                     "backward": table.backward[r], "forward": ", ".join(table.forward[r]),
                     KERNEL_COUNT: int(table.total_kernel_count[r]),
                     KERNEL_TIME_NS: int(table.total_kernel_time_ns[r]),
                     "launch_count": int(table.total_launch_count[r]),
                     **{f"per_step_{k}": _mean(c, v) for k, v in zip(STEP_ARRAYS, sums, strict=True)}})  # fmt: skip
    frame = _frame(rows, cols)
    frame["op"] = frame["op"].astype("string")  # <NA>: the unattributed
    return frame


def arms(exp: Experiment | PathLike) -> pd.DataFrame:
    """One row per measured step of every arm of a `census ab` experiment, in run order: arm
    (its index, the discarded warm arm 0), side (a or b), label, discarded, step (its position
    in the arm), step_time_ns, clock (gpu: CUDA events; host: the host's clock), recompiles."""
    exp = _experiment(exp, "arms")
    rows = [
        {"arm": a.index, "side": a.side, "label": exp.labels[a.side == "b"],
         "discarded": a.discarded, "step": i, STEP_TIME_NS: t, "clock": a.clock,
         "recompiles": a.recompiles}
        for a in exp.arms
        for i, t in enumerate(a.step_time_ns)
    ]  # fmt: skip
    cols = ["arm", "side", "label", "discarded", "step", STEP_TIME_NS, "clock", "recompiles"]
    frame = _frame(rows, cols)
    frame["recompiles"] = frame["recompiles"].astype("Int64")
    frame.attrs["labels"] = {"a": exp.labels[0], "b": exp.labels[1]}
    return frame


def arm_phases(exp: Experiment | PathLike) -> pd.DataFrame:
    """One row per (measured step, census.phase) of every arm of a `census ab` experiment, in
    run order: arm, side, label, discarded, step (its position in the arm), phase, time_ns (on
    the arm's clock, 0 in a step the phase did not run in). Empty when no arm recorded phases
    (an experiment from before they were kept)."""
    exp = _experiment(exp, "arm_phases")
    rows = [
        {"arm": a.index, "side": a.side, "label": exp.labels[a.side == "b"],
         "discarded": a.discarded, "step": i, "phase": name, "time_ns": t}
        for a in exp.arms
        for name, times in a.phase_time_ns.items()
        for i, t in enumerate(times)
    ]  # fmt: skip
    frame = _frame(rows, ["arm", "side", "label", "discarded", "step", "phase", "time_ns"])
    frame.attrs["labels"] = {"a": exp.labels[0], "b": exp.labels[1]}
    return frame


def metrics(d: CensusDiff) -> pd.DataFrame:
    """One row per census key and step-timing key: metric, a, b, delta, pct (per-step means
    when both sides have steps, see `attrs["basis"]`)."""
    d = _diff(d, "metrics")
    rows = [{"metric": k, **v.as_dict()} for k, v in d.metrics.items()]
    return _labelled(_frame(rows, ["metric", "a", "b", "delta", "pct"]), d)


def kernel_changes(d: CensusDiff) -> pd.DataFrame:
    """Two rows per kernel name of either side (measure `count` and `time_ns`): name, class,
    bucket (added, removed, increased, decreased, unchanged), measure, a, b, delta, pct."""
    d = _diff(d, "kernel_changes")
    rows = [
        {"name": k.name, "class": k.cls, "bucket": k.bucket, "measure": measure,
         **getattr(k, measure).as_dict()}
        for k in d.kernels
        for measure in ("count", "time_ns")
    ]  # fmt: skip
    cols = ["name", "class", "bucket", "measure", "a", "b", "delta", "pct"]
    return _labelled(_frame(rows, cols), d)


def _labelled(frame: pd.DataFrame, d: CensusDiff) -> pd.DataFrame:
    frame.attrs["labels"] = {"a": d.labels[0], "b": d.labels[1]}
    frame.attrs["basis"] = "per_step" if d.per_step else "capture"
    return frame


def __dir__() -> list[str]:
    """The frames only (what `dir(census.frames)` and tab completion show)."""
    return sorted(__all__)

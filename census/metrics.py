"""The census keys and every key's meaning, named once: each key's name, unit, definition and label
(Metric), the views that show it, and the copy kinds counted per step (COUNTED_COPIES). The
Metrics dataclass (census.model.step), the accumulators of the copies and memsets
(census.load.accumulators: CopySums, MemsetSums), every renderer's tables and
docs/definitions.md's table are made from these.

A leaf: it imports nothing from census, so every stage may use it.
"""

from __future__ import annotations

from typing import NamedTuple

# Every census key, timing, phase and idle key by name: code names a key by these (`row[STEP_TIME_NS]`),
# never by a string literal (tests/test_metric_keys.py checks), so a mistyped key fails at import.
KERNEL_COUNT = "kernel_count"
KERNEL_TIME_NS = "kernel_time_ns"
NCCL_KERNEL_COUNT = "nccl_kernel_count"
NCCL_KERNEL_TIME_NS = "nccl_kernel_time_ns"
NON_NCCL_KERNEL_COUNT = "non_nccl_kernel_count"
NON_NCCL_KERNEL_TIME_NS = "non_nccl_kernel_time_ns"
NON_NCCL_UNION_NS = "non_nccl_union_ns"
LAUNCH_API_COUNT = "launch_api_count"
LAUNCH_API_TIME_NS = "launch_api_time_ns"
GRAPH_LAUNCH_COUNT = "graph_launch_count"
D2D_COUNT = "d2d_count"
D2D_BYTES = "d2d_bytes"
H2D_COUNT = "h2d_count"
H2D_BYTES = "h2d_bytes"
D2H_COUNT = "d2h_count"
D2H_BYTES = "d2h_bytes"
MEMSET_COUNT = "memset_count"
MEMSET_BYTES = "memset_bytes"
GPU_SPAN_NS = "gpu_span_ns"
HOST_LEAD_NS = "host_lead_ns"
GPU_START_NS = "gpu_start_ns"
STEP_TIME_NS = "step_time_ns"
GPU_BUSY_NS = "gpu_busy_ns"
GPU_IDLE_NS = "gpu_idle_ns"
DURATION_NS = "duration_ns"
SYNC_COUNT = "sync_count"
SYNC_TIME_NS = "sync_time_ns"
IDLE_AFTER_SYNC_NS = "idle_after_sync_ns"
IDLE_LAUNCH_NS = "idle_launch_ns"
IDLE_OTHER_NS = "idle_other_ns"


class Metric(NamedTuple):
    """One census key: its name (its unit as suffix), unit, definition, label (its one name in
    every table's row or heading, card and chart), the views that show it, whether a view hides
    it at 0, and its source in a Kineto trace."""

    name: str
    unit: str  # "count", "ns" or "bytes"
    definition: str
    label: str  # how every table (a row or a column), card and chart names it, in every format
    # the views that show it beside the lists of every key (VIEWS); a tuple of their names
    shown: tuple[str, ...] = ()
    hidden_when_zero: bool = False  # left out of a view where it is 0 on every side
    kineto: str = ""  # what it is read from in a torch.profiler (Kineto) trace (KINETO_SOURCES)


# The views a census key can be shown in beside the full lists (JSON, frames, the summary's totals
# table, gates), where every key is: the diff's table of launched work (and the notebook card's),
# the phase tables (terminal, markdown, dashboard), the dashboard's cards.
VIEW_DIFF, VIEW_PHASES, VIEW_CARDS = "diff", "phases", "cards"
VIEWS = (VIEW_DIFF, VIEW_PHASES, VIEW_CARDS)


class CopyKind(NamedTuple):
    """A kind of memcpy counted in every step as the kernels are (its launching call's step):
    `{key}_count` and `{key}_bytes` are census keys."""

    kind: int  # copyKind of CUPTI_ACTIVITY_KIND_MEMCPY (ENUM_CUDA_MEMCPY_OPER)
    key: str  # the keys' prefix: d2d
    short: str  # D2D
    shown: tuple[str, ...]  # the views (VIEWS) of its keys
    hidden_when_zero: bool = False


# ENUM_CUDA_MEMCPY_OPER, for exports that lack the enum table.
MEMCPY_KINDS: dict[int, str] = {
    0: "Unknown",
    1: "Host-to-Device",
    2: "Device-to-Host",
    3: "Host-to-Array",
    4: "Array-to-Host",
    5: "Array-to-Array",
    6: "Array-to-Device",
    7: "Device-to-Array",
    8: "Device-to-Device",
    9: "Host-to-Host",
    10: "Peer-to-Peer",
    11: "Unified Host-to-Device",
    12: "Unified Device-to-Host",
    13: "Unified Device-to-Device",
}
COPY_KIND_D2D, COPY_KIND_H2D, COPY_KIND_D2H = 8, 1, 2
COUNTED_COPIES: tuple[CopyKind, ...] = (
    CopyKind(COPY_KIND_D2D, "d2d", "D2D", (VIEW_DIFF, VIEW_PHASES, VIEW_CARDS)),
    # a data loader's batches and a `.item()`, `.cpu()` or `.tolist()` read back
    CopyKind(COPY_KIND_H2D, "h2d", "H2D", (VIEW_DIFF, VIEW_PHASES), hidden_when_zero=True),
    CopyKind(COPY_KIND_D2H, "d2h", "D2H", (VIEW_DIFF, VIEW_PHASES), hidden_when_zero=True),
)


def copy_metrics(copy: CopyKind, name: str) -> tuple[Metric, Metric]:
    """The two census keys of a counted copy kind (`name`: its ENUM_CUDA_MEMCPY_OPER name)."""
    return (
        Metric(f"{copy.key}_count", "count",
               f"CUPTI_ACTIVITY_KIND_MEMCPY rows with copyKind {copy.kind} ({name})",
               f"{copy.short} copies", copy.shown[:1], hidden_when_zero=copy.hidden_when_zero),
        Metric(f"{copy.key}_bytes", "bytes", "Σ bytes over those copies", f"{copy.short} bytes",
               copy.shown, copy.hidden_when_zero),
    )  # fmt: skip


# Each key's source in a torch.profiler (Kineto) trace (census/sources/kineto/, docs/kineto.md):
# `ts` and `dur` in exact integer ns from their decimal µs text; a GPU event's launching call is
# the `cuda_runtime`/`cuda_driver` event of the same process with its `args.correlation`.
_GPU_EVENTS = "the trace's `kernel`, `gpu_memcpy` and `gpu_memset` events"
_STEP_RANGE = "the `ProfilerStep#N` or `step N` `user_annotation` range"
# A copy kind's Kineto name from its short one: D2D -> `Memcpy DtoD (Device -> Device)`.
KINETO_SOURCES: dict[str, str] = {
    KERNEL_COUNT: "`X` events of category `kernel` (in a step: those whose launching call "
    "starts in the step's range, on any thread of the process)",
    KERNEL_TIME_NS: "Σ `dur` over those kernels",
    NCCL_KERNEL_COUNT: "kernels whose event name contains `nccl` (any case)",
    NCCL_KERNEL_TIME_NS: "Σ `dur` over NCCL kernels",
    NON_NCCL_KERNEL_COUNT: "kernels that are not NCCL kernels",
    NON_NCCL_KERNEL_TIME_NS: "Σ `dur` over non-NCCL kernels",
    NON_NCCL_UNION_NS: "as for nsys, per `args.device`, over [ts, ts + dur)",
    LAUNCH_API_COUNT: "`cuda_runtime`/`cuda_driver` events whose name is in the launch list, "
    "one per `args.correlation`",
    LAUNCH_API_TIME_NS: "Σ `dur` over those launch API events",
    GRAPH_LAUNCH_COUNT: "launch API events named cudaGraphLaunch/cuGraphLaunch/hipGraphLaunch",
    **{f"{c.key}_count": f"`gpu_memcpy` events named `Memcpy {c.short[0]}to{c.short[2]} ...` "
       f"(the kind from the name)" for c in COUNTED_COPIES},
    **{f"{c.key}_bytes": "Σ `args.bytes` over those copies" for c in COUNTED_COPIES},
    MEMSET_COUNT: "`gpu_memset` events (in a step: as a copy's)",
    MEMSET_BYTES: "Σ `args.bytes` over those memsets",
    STEP_TIME_NS: f"`dur` of {_STEP_RANGE}",
    GPU_BUSY_NS: f"as for nsys, over {_GPU_EVENTS}, clipped to {_STEP_RANGE}",
    GPU_IDLE_NS: "step_time_ns − gpu_busy_ns",
    GPU_SPAN_NS: f"as for nsys, over {_GPU_EVENTS} launched in the step",
    HOST_LEAD_NS: f"as for nsys, against the end of {_STEP_RANGE}",
}  # fmt: skip


def _with_kineto(metrics: tuple[Metric, ...]) -> tuple[Metric, ...]:
    """`metrics`, each with its KINETO_SOURCES entry."""
    return tuple(m._replace(kineto=KINETO_SOURCES[m.name]) for m in metrics)


# The census keys of `totals`, every step and `per_step`, in the order every output lists them.
METRICS: tuple[Metric, ...] = _with_kineto((
    Metric(
        KERNEL_COUNT,
        "count",
        "rows of CUPTI_ACTIVITY_KIND_KERNEL (in a step: those whose launching API call starts in "
        "the step's range, on any thread of the step's process)",
        "GPU kernels",
        (VIEW_DIFF, VIEW_PHASES, VIEW_CARDS),
    ),
    Metric(KERNEL_TIME_NS, "ns", "Σ (end − start) over those kernels", "kernel time"),
    Metric(
        NCCL_KERNEL_COUNT,
        "count",
        "kernels whose name contains `nccl` (any case)",
        "NCCL kernels",
        (VIEW_DIFF,),
    ),
    Metric(
        NCCL_KERNEL_TIME_NS,
        "ns",
        "Σ (end − start) over NCCL kernels",
        "NCCL kernel time",
        (VIEW_DIFF, VIEW_CARDS),
    ),
    Metric(
        NON_NCCL_KERNEL_COUNT, "count", "kernels that are not NCCL kernels", "non-NCCL kernels"
    ),
    Metric(
        NON_NCCL_KERNEL_TIME_NS,
        "ns",
        "Σ (end − start) over non-NCCL kernels",
        "non-NCCL kernel time",
        (VIEW_DIFF,),
    ),
    Metric(
        NON_NCCL_UNION_NS,
        "ns",
        "per deviceId, the length of the union of the [start, end) intervals of the non-NCCL "
        "kernels counted, summed over devices; not clipped to the step's range (unlike "
        "gpu_busy_ns), so a step's can exceed its gpu_busy_ns",
        "non-NCCL union (unclipped)",
        (VIEW_DIFF, VIEW_CARDS),
    ),
    Metric(
        LAUNCH_API_COUNT,
        "count",
        "launch API calls (see launch API), one per correlationId",
        "launch API calls",
        (VIEW_DIFF, VIEW_PHASES),
    ),
    Metric(
        LAUNCH_API_TIME_NS,
        "ns",
        "Σ (end − start) over those launch API calls",
        "launch API time",
        (VIEW_DIFF, VIEW_PHASES, VIEW_CARDS),
    ),
    Metric(
        GRAPH_LAUNCH_COUNT,
        "count",
        "launch API calls that are cudaGraphLaunch/cuGraphLaunch (hipGraphLaunch)",
        "graph launches",
        (VIEW_DIFF,),
    ),
    *(m for copy in COUNTED_COPIES for m in copy_metrics(copy, MEMCPY_KINDS[copy.kind])),
    Metric(MEMSET_COUNT, "count", "rows of CUPTI_ACTIVITY_KIND_MEMSET (in a step: those whose "
           "launching API call starts in the step's range, as a copy's)", "memsets", (VIEW_DIFF,),
           hidden_when_zero=True),
    Metric(MEMSET_BYTES, "bytes", "Σ bytes over those memsets", "memset bytes", (VIEW_DIFF,),
           hidden_when_zero=True),
))  # fmt: skip
# The two groups every output keeps apart, so that no table sets a clipped number beside an
# unclipped one: the census keys count the work *launched* in a step, wherever it runs; the timing
# keys measure the step's *window*, its NVTX range, whatever work falls into it.
LAUNCHED_TITLE = "Work launched in the step (GPU time not clipped to the step)"
WINDOW_TITLE = "Step window (the step's NVTX range; GPU time clipped to it)"
# Without step ranges (on either side of a diff) the census keys are the whole capture's totals:
# no table then calls them the step's.
WHOLE_CAPTURE_TITLE = "The whole capture (no step ranges: every kernel, launch and copy in it)"


def launched_title(per_step: bool) -> str:
    """The census keys' title: the work launched in the step, or the whole capture's."""
    return LAUNCHED_TITLE if per_step else WHOLE_CAPTURE_TITLE


# The GPU's own timing of a step, unclipped: the work launched in it, as the GPU ran it (when the
# host runs ahead of the GPU, the step's range times the enqueueing). Timing keys but for
# gpu_start_ns, a timestamp.
_LAUNCHED = "the kernels, memcpys, memsets and whole CUDA graphs launched in the step"
GPU_SPAN_METRICS: tuple[Metric, ...] = (
    Metric(GPU_SPAN_NS, "ns", f"latest end − earliest start of {_LAUNCHED} (their API call "
           "starts in its range, on any thread of its process), not clipped to the range; null "
           "when it launched none; per_step: the mean over the steps that launched some",
           "GPU span (first to last GPU op)"),
    Metric(HOST_LEAD_NS, "ns", "gpu_start_ns + gpu_span_ns − the end of the step's NVTX range: "
           "how long after the host left the step its GPU work ended (negative: before); null "
           "when it launched none; per_step: the mean over the steps that launched some",
           "GPU end after the step's range"),
)  # fmt: skip
GPU_START_METRIC = Metric(GPU_START_NS, "ns", f"the earliest start of {_LAUNCHED}; null when "
                          "it launched none", "GPU start of the work launched in the step")  # fmt: skip
# Step timing: per step, and their means.
TIMING_METRICS: tuple[Metric, ...] = _with_kineto(
    (
        Metric(STEP_TIME_NS, "ns", "end − start of the step's NVTX range", "step time"),
        Metric(
            GPU_BUSY_NS,
            "ns",
            "the union of all kernels, memcpys, memsets and whole CUDA graphs (an export traced "
            "with --cuda-graph-trace=graph) of the step's process, clipped to the step's range (its "
            "window), whichever step launched them; not a superset of "
            "non_nccl_union_ns, which counts the kernels launched in the step, unclipped",
            "GPU busy in the step window",
        ),
        Metric(GPU_IDLE_NS, "ns", "step_time_ns − gpu_busy_ns", "GPU idle in the step window"),
        *GPU_SPAN_METRICS,
    )
)
# Per phase of a step: the census keys, plus these.
PHASE_METRICS: tuple[Metric, ...] = (
    Metric(
        DURATION_NS,
        "ns",
        "the time of the step the phase owns: its NVTX range, less what a later-started "
        "overlapping phase took; the remainder's is the rest of the step",
        "phase time",
    ),
    Metric(
        GPU_BUSY_NS,
        "ns",
        "the union of all GPU work of the step's process, clipped to the time the phase owns",
        "GPU busy in the phase window",
    ),
)
# Per phase, beside PHASE_METRICS but not one of them: spans do not add up over phases.
PHASE_SPAN_METRIC = Metric(GPU_SPAN_NS, "ns", "latest end − earliest start of the kernels, "
    "memcpys, memsets and whole CUDA graphs launched in the time the phase owns in the step (all its segments), not "
    "clipped to it; null when it launched none; per_phase: the mean over the steps where it is "
    "not null", "phase GPU span (unclipped)")  # fmt: skip
# Where the GPU idle time of a step (or phase) goes (census/load/idle.py); they add up to
# gpu_idle_ns (a phase's: duration_ns − gpu_busy_ns).
IDLE_METRICS: tuple[Metric, ...] = (
    Metric(
        SYNC_COUNT, "count", "synchronising API calls (SYNC_APIS) that start in it", "host syncs"
    ),
    Metric(
        SYNC_TIME_NS,
        "ns",
        "Σ (end − start) of those calls: the host blocked",
        "host blocked in syncs",
    ),
    Metric(
        IDLE_AFTER_SYNC_NS,
        "ns",
        "GPU idle time from the end of a synchronising call that returned while the GPU was idle "
        "to the start of the next GPU work of the process",
        "  idle after a sync",
    ),
    Metric(
        IDLE_LAUNCH_NS,
        "ns",
        "the rest of the GPU idle time during which a launch API call of the process ran",
        "  idle while launching",
    ),
    Metric(
        IDLE_OTHER_NS,
        "ns",
        "the rest of the GPU idle time: other host work",
        "  idle in other host work",
    ),
)
METRIC_KEYS: tuple[str, ...] = tuple(m.name for m in METRICS)
COPY_KEYS: dict[int, tuple[str, str]] = {
    c.kind: (f"{c.key}_count", f"{c.key}_bytes") for c in COUNTED_COPIES
}  # copyKind -> its two keys
COPY_COLUMNS: tuple[str, ...] = tuple(key for pair in COPY_KEYS.values() for key in pair)
MEMSET_KEYS: tuple[str, str] = (MEMSET_COUNT, MEMSET_BYTES)


HIDDEN_WHEN_ZERO = frozenset(m.name for m in METRICS if m.hidden_when_zero)


def shown_in(view: str) -> tuple[Metric, ...]:
    """The census keys a view (VIEWS) shows, in METRICS' order."""
    return tuple(m for m in METRICS if view in m.shown)


_NAMED = (*METRICS, *TIMING_METRICS, GPU_START_METRIC, *IDLE_METRICS)
# Every key's one name (the label) in every table, card and chart of every format: the renderers
# (census/render/) name a key by these alone (tests/test_one_label.py); a phase's own keys (its
# time, the GPU busy in its window, the GPU span of its work) by PHASE_LABELS.
LABELS: dict[str, str] = {m.name: m.label for m in _NAMED}
PHASE_LABELS: dict[str, str] = {
    **LABELS,
    **{m.name: m.label for m in (*PHASE_METRICS, PHASE_SPAN_METRIC)},
}


def short_label(key: str, labels: dict[str, str] = LABELS) -> str:
    """A key's label as a sentence names it: the label (`labels`: LABELS or PHASE_LABELS) less
    a closing parenthetical (`GPU span (first to last GPU op)`: `GPU span`); the one short form
    of a label, so that a sentence and a table name a key alike."""
    label = labels[key].strip()
    return label.split(" (", 1)[0] if label.endswith(")") else label


DEFINITIONS: dict[str, str] = {m.name: m.definition for m in _NAMED}
TIMING_KEYS: tuple[str, ...] = tuple(m.name for m in TIMING_METRICS)
IDLE_KEYS: tuple[str, ...] = tuple(m.name for m in IDLE_METRICS)
PHASE_KEYS: tuple[str, ...] = (*METRIC_KEYS, *(m.name for m in PHASE_METRICS), *IDLE_KEYS)

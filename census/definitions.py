"""Every definition census's numbers follow, named once: the metrics (name, unit, meaning), the
kernel classes and the NCCL pattern, the launch APIs, the copy kinds, Inductor kernel names.

A leaf: it imports nothing from census, so every stage may use it. The metric table of docs/definitions.md is
generated from METRICS (census.render.markdown.render_metric_table) and a test keeps the two
equal.
"""

from __future__ import annotations

import re
from functools import lru_cache
from typing import NamedTuple


class Metric(NamedTuple):
    name: str
    unit: str  # "count", "ns" or "bytes"
    definition: str
    label: str  # how every table, card and chart names it


# The census keys of `totals`, every step and `per_step`, in the order every output lists them.
METRICS: tuple[Metric, ...] = (
    Metric(
        "kernel_count",
        "count",
        "rows of CUPTI_ACTIVITY_KIND_KERNEL (in a step: those whose launching API call starts in "
        "the step's range, on any thread of the step's process)",
        "GPU kernels",
    ),
    Metric("kernel_time_ns", "ns", "Σ (end − start) over those kernels", "kernel time"),
    Metric(
        "nccl_kernel_count",
        "count",
        "kernels whose name contains `nccl` (any case)",
        "NCCL kernels",
    ),
    Metric("nccl_kernel_time_ns", "ns", "Σ (end − start) over NCCL kernels", "NCCL kernel time"),
    Metric(
        "non_nccl_kernel_count", "count", "kernels that are not NCCL kernels", "non-NCCL kernels"
    ),
    Metric(
        "non_nccl_kernel_time_ns",
        "ns",
        "Σ (end − start) over non-NCCL kernels",
        "non-NCCL kernel time",
    ),
    Metric(
        "non_nccl_union_ns",
        "ns",
        "per deviceId, the length of the union of the [start, end) intervals of the non-NCCL "
        "kernels counted, summed over devices; not clipped to the step's range (unlike "
        "gpu_busy_ns), so a step's can exceed its gpu_busy_ns",
        "non-NCCL union (unclipped)",
    ),
    Metric(
        "launch_api_count",
        "count",
        "launch API calls (see launch API), one per correlationId",
        "launch API calls",
    ),
    Metric(
        "launch_api_time_ns", "ns", "Σ (end − start) over those launch API calls", "launch API time"
    ),
    Metric(
        "graph_launch_count",
        "count",
        "launch API calls that are cudaGraphLaunch/cuGraphLaunch",
        "graph launches",
    ),
    Metric(
        "d2d_count",
        "count",
        "CUPTI_ACTIVITY_KIND_MEMCPY rows with copyKind 8 (Device-to-Device)",
        "D2D copies",
    ),
    Metric("d2d_bytes", "bytes", "Σ bytes over those copies", "D2D bytes"),
)
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
_LAUNCHED = "the kernels, memcpys and memsets launched in the step"
GPU_SPAN_METRICS: tuple[Metric, ...] = (
    Metric("gpu_span_ns", "ns", f"latest end − earliest start of {_LAUNCHED} (their API call "
           "starts in its range, on any thread of its process), not clipped to the range; null "
           "when it launched none; per_step: the mean over the steps that launched some",
           "GPU span (first to last GPU op)"),
    Metric("host_lead_ns", "ns", "gpu_start_ns + gpu_span_ns − the end of the step's NVTX range: "
           "how long after the host left the step its GPU work ended (negative: before); null "
           "when it launched none; per_step: the mean over the steps that launched some",
           "GPU end after the step's range"),
)  # fmt: skip
GPU_START_METRIC = Metric("gpu_start_ns", "ns", f"the earliest start of {_LAUNCHED}; null when "
                          "it launched none", "GPU start of the work launched in the step")  # fmt: skip
# Step timing: per step, and their means.
TIMING_METRICS: tuple[Metric, ...] = (
    Metric("step_time_ns", "ns", "end − start of the step's NVTX range", "step time"),
    Metric(
        "gpu_busy_ns",
        "ns",
        "the union of all kernels, memcpys and memsets of the step's process, clipped to the "
        "step's range (its window), whichever step launched them; not a superset of "
        "non_nccl_union_ns, which counts the kernels launched in the step, unclipped",
        "GPU busy in the step window",
    ),
    Metric("gpu_idle_ns", "ns", "step_time_ns − gpu_busy_ns", "GPU idle in the step window"),
    *GPU_SPAN_METRICS,
)
# Per phase of a step: the census keys, plus these.
PHASE_METRICS: tuple[Metric, ...] = (
    Metric(
        "duration_ns",
        "ns",
        "the time of the step the phase owns: its NVTX range, less what a later-started "
        "overlapping phase took; the remainder's is the rest of the step",
        "phase time",
    ),
    Metric(
        "gpu_busy_ns",
        "ns",
        "the union of all GPU work of the step's process, clipped to the time the phase owns",
        "GPU busy in the phase window",
    ),
)
# Per phase, beside PHASE_METRICS but not one of them: spans do not add up over phases.
PHASE_SPAN_METRIC = Metric("gpu_span_ns", "ns", "latest end − earliest start of the kernels, "
    "memcpys and memsets launched in the time the phase owns in the step (all its segments), not "
    "clipped to it; null when it launched none; per_phase: the mean over the steps where it is "
    "not null", "GPU span of the work launched in the phase (unclipped)")  # fmt: skip
# Census.host_ran_ahead: the steps' ranges time the host's enqueueing, gpu_span_ns the GPU's work.
HOST_AHEAD_SHARE = 0.1
HOST_AHEAD_RULE = (
    "true when the median host_lead_ns over the steps that launched GPU work is more than "
    f"{HOST_AHEAD_SHARE:.0%} of the median step_time_ns: the GPU ran the steps' work well after "
    "their NVTX ranges ended, so the ranges time the host's enqueueing and gpu_span_ns the GPU's "
    "work; null without steps or when no step launched GPU work"
)
# Where the GPU idle time of a step (or phase) goes (census/load/idle.py); they add up to
# gpu_idle_ns (a phase's: duration_ns − gpu_busy_ns).
IDLE_METRICS: tuple[Metric, ...] = (
    Metric(
        "sync_count", "count", "synchronising API calls (SYNC_APIS) that start in it", "host syncs"
    ),
    Metric(
        "sync_time_ns",
        "ns",
        "Σ (end − start) of those calls: the host blocked",
        "host blocked in syncs",
    ),
    Metric(
        "idle_after_sync_ns",
        "ns",
        "GPU idle time from the end of a synchronising call that returned while the GPU was idle "
        "to the start of the next GPU work of the process",
        "  idle after a sync",
    ),
    Metric(
        "idle_launch_ns",
        "ns",
        "the rest of the GPU idle time during which a launch API call of the process ran",
        "  idle while launching",
    ),
    Metric(
        "idle_other_ns",
        "ns",
        "the rest of the GPU idle time: other host work",
        "  idle in other host work",
    ),
)
METRIC_KEYS: tuple[str, ...] = tuple(m.name for m in METRICS)
_NAMED = (*METRICS, *TIMING_METRICS, GPU_START_METRIC, *IDLE_METRICS)
LABELS: dict[str, str] = {m.name: m.label for m in _NAMED}
DEFINITIONS: dict[str, str] = {m.name: m.definition for m in _NAMED}
TIMING_KEYS: tuple[str, ...] = tuple(m.name for m in TIMING_METRICS)
IDLE_KEYS: tuple[str, ...] = tuple(m.name for m in IDLE_METRICS)
PHASE_KEYS: tuple[str, ...] = (*METRIC_KEYS, *(m.name for m in PHASE_METRICS), *IDLE_KEYS)

# What limits a capture's step (census.limiter): from the per-step means of the step
# windows. "gpu" when the GPU is busy at least GPU_BOUND_SHARE of the step; else the largest
# class of GPU idle time: "sync" (after host syncs), "host (launch)" (inside launch calls),
# "host (other)" (other host time); "host" when the idle split was not computed.
GPU_BOUND_SHARE = 0.8
LIMITER_RULE = (
    "per-step means of the step windows: 'gpu' when gpu_busy_ns >= 80% of step_time_ns; else the "
    "largest of idle_after_sync_ns ('sync'), idle_launch_ns ('host (launch)') and idle_other_ns "
    "('host (other)'); 'host' when the idle split was not computed; null without steps"
)
# GPU idle time by host range (census.load.idle_ranges): what the training loop's thread was
# inside while the GPU idled.
IDLE_BY_RANGE_RULE = (
    "per range text: the GPU idle instants of the steps (no kernel, memcpy or memset of the "
    "step's process running) at which that range is the innermost NVTX range open on the step "
    "range's thread (push/pop or start/end, any domain; innermost = the latest-started of those "
    "open, at equal starts the one that ends first; the step ranges excluded); "
    "idle_ns_per_step = their sum / steps, share = their sum / the steps' gpu_idle_ns; idle "
    "with no range open goes to none, so the shares add up to at most 1"
)
# A diff whose GPU work fell while its step did not (census.compare.explain): the freed GPU time
# became idle, so the step is limited by the host.
NON_GAIN_MIN_SHARE = 0.05
NON_GAIN_RULE = (
    "per step: GPU busy fell by at least 5% of A's GPU busy, and the step time fell by less "
    "than half of that (Δ step time > Δ GPU busy / 2), the step times being the captures' "
    "calibration runs' (without nsys) when both sides have one, else the captured ones (in census "
    "ab: the uncaptured arms' medians of arm medians, and a verdict other than faster counts as not "
    "falling): the GPU "
    "work removed did not shorten the step"
)
LIMITER_IDLE_CLASSES = (
    ("idle_after_sync_ns", "sync", "after host syncs"),
    ("idle_launch_ns", "host (launch)", "inside launch calls"),
    ("idle_other_ns", "host (other)", "in other host work"),
)

# A p95 (linear interpolation, census.model.percentile) of n values lies between the two largest
# when n < P95_MIN_VALUES: every format then says so beside it, as pyperf warns of too few values.
P95_MIN_VALUES = 20
FEW_VALUES_MARK = "†"


def few_values_note(counts: list[int]) -> str:
    """The note a table's marked p95s take (FEW_VALUES_MARK), of the value counts under
    P95_MIN_VALUES; "" when none is."""
    few = sorted({n for n in counts if n < P95_MIN_VALUES})
    if not few:
        return ""
    shown = " or ".join(str(n) for n in few[:3])
    return (f"{FEW_VALUES_MARK} p95 of {shown} values, fewer than {P95_MIN_VALUES}: it lies "
            "between the two largest, so read it as the maximum, not a tail estimate")  # fmt: skip


def p95_text(p95: str, count: int) -> str:
    """A formatted p95 as a table shows it: marked (FEW_VALUES_MARK) when it rests on fewer
    than P95_MIN_VALUES values."""
    return f"{p95}{FEW_VALUES_MARK}" if count < P95_MIN_VALUES else p95


# Steps: NVTX ranges whose text matches this (census.steps() names them `step N`; PyTorch's
# profiler schedule names them `ProfilerStep#N`).
DEFAULT_STEPS_REGEX = r"^(step\b|ProfilerStep#)"
# Phases: NVTX ranges inside a step whose text matches this (census.phase names them); the work
# of a step in none of them is its OUTSIDE_PHASES remainder.
DEFAULT_PHASES_REGEX = r"^(forward|backward|optimizer)\b"
OUTSIDE_PHASES = "(outside phases)"

NCCL = "NCCL"
OTHER = "other"
# A kernel is an NCCL kernel when its name contains this, in any case. SQLite's LIKE is
# case-insensitive for ASCII, so NCCL_SQL_LIKE is the same rule inside a query.
NCCL_SUBSTRING = "nccl"
NCCL_SQL_LIKE = f"%{NCCL_SUBSTRING}%"

# Checked in order; the first match wins. Attention precedes GEMM because flash-attention kernels
# carry cutlass types in their names; copy precedes elementwise because PyTorch copies are
# elementwise kernels.
KERNEL_CLASSES: tuple[tuple[str, re.Pattern[str]], ...] = (
    (NCCL, re.compile(re.escape(NCCL_SUBSTRING), re.IGNORECASE)),
    ("Triton", re.compile(r"triton_", re.IGNORECASE)),
    ("attention", re.compile(r"flash|fmha|sdpa", re.IGNORECASE)),
    ("GEMM", re.compile(r"cublas|nvjet|cutlass|xmma|gemm", re.IGNORECASE)),
    ("optimizer", re.compile(r"multi_tensor_apply", re.IGNORECASE)),
    ("copy/memset", re.compile(r"copy_kernel|CatArray|memcpy|memset|FillFunctor|fill_kernel")),
    ("reduction", re.compile(r"reduce_kernel|reduction|layer_norm|GammaBeta|softmax", re.I)),
    ("elementwise", re.compile(r"elementwise|pointwise", re.IGNORECASE)),
)
CLASS_ORDER: tuple[str, ...] = (*(name for name, _ in KERNEL_CLASSES), OTHER)


@lru_cache(maxsize=65536)
def classify_kernel(name: str) -> str:
    for cls, pattern in KERNEL_CLASSES:
        if pattern.search(name):
            return cls
    return OTHER


def kernel_name(names: dict[int, str], demangled: int | None, short: int | None) -> str:
    """demangledName through StringIds, falling back to shortName, then to a placeholder."""
    for sid in (demangled, short):
        if sid is not None and sid in names:
            return names[sid]
    return f"<unknown kernel name id {demangled}>"


def is_nccl(name: str) -> bool:
    return classify_kernel(name) == NCCL


# Launch APIs, after a trailing `_v<digits>` and then `_ptsz`/`_ptds` are removed.
LAUNCH_APIS = frozenset(
    {
        "cudaLaunchKernel",
        "cudaLaunchKernelExC",
        "cudaLaunchKernelEx",
        "cudaLaunchCooperativeKernel",
        "cudaLaunchCooperativeKernelMultiDevice",
        "cuLaunchKernel",
        "cuLaunchKernelEx",
        "cuLaunchCooperativeKernel",
        "cuLaunchCooperativeKernelMultiDevice",
        "cuLaunchGrid",
        "cuLaunchGridAsync",
        "cudaGraphLaunch",
        "cuGraphLaunch",
    }
)
# The launch APIs that launch a whole CUDA graph (graph_launch_count counts them).
GRAPH_LAUNCH_APIS = frozenset({"cudaGraphLaunch", "cuGraphLaunch"})
# Calls that block the host until the GPU (or a stream, or an event) has caught up, after the same
# suffix removal: the synchronous copies (cudaMemcpy without Async: a `.item()` or `.cpu()`) too.
SYNC_APIS = frozenset(
    {
        "cudaDeviceSynchronize",
        "cudaStreamSynchronize",
        "cudaEventSynchronize",
        "cudaMemcpy",
        "cudaMemcpy2D",
        "cudaMemcpy3D",
        "cudaMemcpyFromSymbol",
        "cuCtxSynchronize",
        "cuStreamSynchronize",
        "cuEventSynchronize",
        "cuMemcpyDtoH",
        "cuMemcpy",
    }
)
_VERSION_SUFFIX = re.compile(r"_v\d+$")
_STREAM_SUFFIX = re.compile(r"_(ptsz|ptds)$")


def normalise_api_name(name: str) -> str:
    return _STREAM_SUFFIX.sub("", _VERSION_SUFFIX.sub("", name))


def launch_api_kind(name: str) -> str | None:
    """The launch API a runtime-row name denotes, or None when it is not a launch."""
    base = normalise_api_name(name)
    return base if base in LAUNCH_APIS else None


# NCCL collectives, from both `ncclKernel_AllReduce_...` and `ncclDevKernel_AllReduce_...` names.
_COLLECTIVES = (
    ("AllReduce", "allreduce"),
    ("AllGather", "allgather"),
    ("ReduceScatter", "reducescatter"),
    ("AllToAll", "alltoall"),
    ("SendRecv", "sendrecv"),
    ("Broadcast", "broadcast"),
    ("Reduce", "reduce"),
    ("Send", "send"),
    ("Recv", "recv"),
)


def nccl_collective(name: str) -> str | None:
    if not is_nccl(name):
        return None
    flat = name.lower().replace("_", "")
    for label, key in _COLLECTIVES:
        if key in flat:
            return label
    return "other NCCL"


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
COPY_KIND_D2D = 8
MEMSET_KIND = -1  # memsets are aggregated beside the copy kinds under this key


def memory_kind_name(kind: int) -> str:
    """`Device-to-Device`, ..., or `memset`."""
    if kind == MEMSET_KIND:
        return "memset"
    return MEMCPY_KINDS.get(kind, f"copy kind {kind}")


D2D_KIND_NAME = memory_kind_name(COPY_KIND_D2D)

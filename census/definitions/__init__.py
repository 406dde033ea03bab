"""Every definition census's numbers follow, named once: the kernel classes and the NCCL pattern,
the launch APIs, the copy kinds, Inductor kernel names, the rules of the limiter, the run-ahead
and the idle split (the census keys themselves: census.metrics).

A leaf beside census.metrics (the one module it imports), so every stage may use it.
"""

from __future__ import annotations

import re
from functools import lru_cache

from census.metrics import (
    IDLE_AFTER_SYNC_NS,
    IDLE_LAUNCH_NS,
    IDLE_OTHER_NS,
    KERNEL_COUNT,
    KERNEL_TIME_NS,
    MEMCPY_KINDS,
    NCCL_KERNEL_COUNT,
    NCCL_KERNEL_TIME_NS,
    NON_NCCL_KERNEL_COUNT,
    NON_NCCL_KERNEL_TIME_NS,
    NON_NCCL_UNION_NS,
)

# Census.host_ran_ahead: the steps' ranges time the host's enqueueing, gpu_span_ns the GPU's work.
HOST_AHEAD_SHARE = 0.1
HOST_AHEAD_RULE = (
    "true when the median host_lead_ns over the steps that launched GPU work is more than "
    f"{HOST_AHEAD_SHARE:.0%} of the median step_time_ns: the GPU ran the steps' work well after "
    "their NVTX ranges ended, so the ranges time the host's enqueueing and gpu_span_ns the GPU's "
    "work; null without steps or when no step launched GPU work"
)

# What limits a capture's step (census.findings.limiter): from the per-step means of the step
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
    "per range text: the GPU idle instants of the steps (no kernel, memcpy, memset or whole "
    "CUDA graph of the step's process running) at which that range is the innermost NVTX range "
    "open on the step range's thread (push/pop or start/end, any domain; innermost = the latest-started of those "
    "open, at equal starts the one that ends first; the step ranges excluded; an op range, "
    "decorated with `, seq = N` or `, op_id = N`, counts under its text cut at the first "
    "comma); "
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
# An export traced with --cuda-graph-trace=graph holds a row per graph execution
# (CUPTI_ACTIVITY_KIND_GRAPH_TRACE) and none of the graph's kernels: what is said of it.
GRAPH_TRACE_RULE = (
    "whole-graph rows (one per execution: start, end, device, stream, correlationId of its "
    "cudaGraphLaunch) are GPU work: they count in gpu_busy_ns, gpu_idle_ns, the idle split, "
    "gpu_span_ns and the limiter; the graphs' kernels are not in the export, so kernel counts, "
    "kernel time, unions, classes and the top kernels leave them out (unknown, not zero)"
)
GRAPH_TRACE_UNKNOWN = (KERNEL_COUNT, KERNEL_TIME_NS, NCCL_KERNEL_COUNT,
                       NCCL_KERNEL_TIME_NS, NON_NCCL_KERNEL_COUNT, NON_NCCL_KERNEL_TIME_NS,
                       NON_NCCL_UNION_NS, "classes", "top_kernels")  # fmt: skip
LIMITER_IDLE_CLASSES = (
    (IDLE_AFTER_SYNC_NS, "sync", "after host syncs"),
    (IDLE_LAUNCH_NS, "host (launch)", "inside launch calls"),
    (IDLE_OTHER_NS, "host (other)", "in other host work"),
)

# A p95 (linear interpolation, census.model.step.percentile) of n values lies between the two largest
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
    """The kernel class of a kernel name: the first of KERNEL_CLASSES whose pattern it matches, else
    OTHER."""
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
    """Whether a kernel name is an NCCL kernel (its class is NCCL)."""
    return classify_kernel(name) == NCCL


# Launch APIs, after a trailing `_v<digits>` and then `_ptsz`/`_ptds` (HIP's `_spt`) are removed.
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
        # HIP's (ROCm traces of torch.profiler: `cuda_runtime` events of these names)
        "hipLaunchKernel",
        "hipExtLaunchKernel",
        "hipModuleLaunchKernel",
        "hipExtModuleLaunchKernel",
        "hipHccModuleLaunchKernel",
        "hipLaunchCooperativeKernel",
        "hipLaunchCooperativeKernelMultiDevice",
        "hipModuleLaunchCooperativeKernel",
        "hipModuleLaunchCooperativeKernelMultiDevice",
        "hipExtLaunchMultiKernelMultiDevice",
        "hipGraphLaunch",
    }
)
# The launch APIs that launch a whole CUDA (or HIP) graph (graph_launch_count counts them).
GRAPH_LAUNCH_APIS = frozenset({"cudaGraphLaunch", "cuGraphLaunch", "hipGraphLaunch"})
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
_STREAM_SUFFIX = re.compile(r"_(ptsz|ptds|spt)$")  # per-thread default stream variants


def normalise_api_name(name: str) -> str:
    """A runtime API name without its `_v<digits>` and then its `_ptsz`/`_ptds`/`_spt` suffix
    (`cudaLaunchKernel_v7000` -> `cudaLaunchKernel`, `hipLaunchKernel_spt` -> `hipLaunchKernel`)."""
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
    """The collective of an NCCL kernel name (`AllReduce`, ... by _COLLECTIVES' order, else 'other
    NCCL'); None for a kernel not NCCL."""
    if not is_nccl(name):
        return None
    flat = name.lower().replace("_", "")
    for label, key in _COLLECTIVES:
        if key in flat:
            return label
    return "other NCCL"


MEMSET_KIND = -1  # memsets are aggregated beside the copy kinds under this key


def memory_kind_name(kind: int) -> str:
    """`Device-to-Device`, ..., or `memset`."""
    if kind == MEMSET_KIND:
        return "memset"
    return MEMCPY_KINDS.get(kind, f"copy kind {kind}")

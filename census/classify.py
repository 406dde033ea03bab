"""Names -> classes. Every kernel and API name pattern census uses is named once, here."""

from __future__ import annotations

import re
from functools import lru_cache

NCCL = "NCCL"
OTHER = "other"

# Checked in order; the first match wins. Attention precedes GEMM because flash-attention kernels
# carry cutlass types in their names; copy precedes elementwise because PyTorch copies are
# elementwise kernels.
KERNEL_CLASSES: tuple[tuple[str, re.Pattern[str]], ...] = (
    (NCCL, re.compile(r"nccl", re.IGNORECASE)),
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
GRAPH_LAUNCH_APIS = frozenset({"cudaGraphLaunch", "cuGraphLaunch"})
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


# Inductor kernel names: triton_<kind>_fused_<op>_<op>..._<n>.
_TRITON_KINDS = {
    "poi": "pointwise",
    "red": "reduction",
    "per": "persistent reduction",
    "tem": "template",
    "for": "foreach",
}
_TRITON_NAME = re.compile(r"^triton_(?P<kind>[a-z]+)_(?:fused_)?(?P<ops>.*?)(?:_\d+)*$")
# aten ops whose names hold underscores; everything else is one token.
_MULTI_TOKEN_OPS = tuple(
    sorted(
        (
            "native_layer_norm_backward",
            "native_layer_norm",
            "native_dropout_backward",
            "native_dropout",
            "native_batch_norm_backward",
            "native_batch_norm",
            "native_group_norm_backward",
            "native_group_norm",
            "gelu_backward",
            "silu_backward",
            "threshold_backward",
            "select_backward",
            "slice_backward",
            "embedding_dense_backward",
            "scaled_dot_product",
            "_log_softmax_backward_data",
            "_softmax_backward_data",
            "_log_softmax",
            "_softmax",
            "_to_copy",
            "_unsafe_view",
            "_scaled_mm",
            "nll_loss_backward",
            "nll_loss_forward",
            "nll_loss",
            "mse_loss_backward",
            "mse_loss",
            "index_put",
            "scatter_add",
            "new_zeros",
            "new_empty",
            "full_like",
            "zeros_like",
            "ones_like",
            "empty_like",
            "masked_fill",
            "add_",
            "copy_",
        ),
        key=len,
        reverse=True,
    )
)


def decode_triton(name: str) -> tuple[str, tuple[str, ...]] | None:
    """('pointwise', ('_to_copy', 'add', 'mul')) for `triton_poi_fused__to_copy_add_mul_3`."""
    match = _TRITON_NAME.match(name)
    if not match:
        return None
    kind = _TRITON_KINDS.get(match["kind"], match["kind"])
    return kind, _split_ops(match["ops"])


def _split_ops(text: str) -> tuple[str, ...]:
    ops: list[str] = []
    rest = text
    while rest:
        op = next(
            (m for m in _MULTI_TOKEN_OPS if rest == m or rest.startswith(m + "_")),
            None,
        )
        if op is None:
            lead = "_" if rest.startswith("_") else ""
            body = rest[len(lead) :]
            op = lead + body.split("_", 1)[0]
        if op and op not in ops:
            ops.append(op)
        rest = rest[len(op) + 1 :] if len(op) < len(rest) else ""
        if not op:
            rest = rest.lstrip("_")
    return tuple(o for o in ops if o)

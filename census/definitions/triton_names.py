"""Inductor's kernel names read back: `triton_poi_fused__to_copy_add_mul_3` is a pointwise kernel
fusing _to_copy, add and mul (the explanation's "fuse eager operations" sentence)."""

from __future__ import annotations

import re

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
_MULTI_TOKEN_OPS = tuple(sorted((
    "native_layer_norm_backward", "native_layer_norm", "native_dropout_backward", "native_dropout",
    "native_batch_norm_backward", "native_batch_norm", "native_group_norm_backward",
    "native_group_norm", "gelu_backward", "silu_backward", "threshold_backward", "select_backward",
    "slice_backward", "embedding_dense_backward", "scaled_dot_product",
    "_log_softmax_backward_data", "_softmax_backward_data", "_log_softmax", "_softmax", "_to_copy",
    "_unsafe_view", "_scaled_mm", "nll_loss_backward", "nll_loss_forward", "nll_loss",
    "mse_loss_backward", "mse_loss", "index_put", "scatter_add", "new_zeros", "new_empty",
    "full_like", "zeros_like", "ones_like", "empty_like", "masked_fill", "add_", "copy_",
), key=len, reverse=True))  # fmt: skip


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

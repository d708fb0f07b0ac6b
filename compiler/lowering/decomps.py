"""The pinned decomposition table mend lowers against.

Start from PyTorch's core-ATen table and add the decompositions that turn the composite ops of real models
(layer_norm, softmax, gelu, silu, their backwards) into pointwise ops and reductions that the lowering fuses.
Ops that are better as library calls (``addmm``: bias fused into the GEMM) are removed from the table so
they reach the lowering intact and become extern calls. The table does not import ``torch._inductor``
(whose import alone costs seconds).
"""

from __future__ import annotations

import functools

import torch

from .. import compat

aten = torch.ops.aten

# Composite ops decomposed on top of core ATen.
EXTRA_DECOMPOSE = [
    "native_layer_norm",
    "native_layer_norm_backward",
    "gelu",
    "gelu_backward",
    "_softmax",
    "_log_softmax",
    "_softmax_backward_data",
    "_log_softmax_backward_data",
    "silu",
    "silu_backward",
    "addcmul",
    "addcdiv",
    "lerp",
    "hardswish",
    "hardsigmoid",
    "mish",
    "softplus",
    "sigmoid_backward",
    "tanh_backward",
    "threshold_backward",
    "leaky_relu",
    "elu",
    "rsub",
    "mse_loss",
    "clamp_min",
    "clamp_max",
]

# Ops that stay whole (extern library calls or lowered directly) even if core ATen would decompose them.
KEEP = [
    "addmm",
    "baddbmm",
    # SDPA stays one ATen call (fused kernels); torch 2.13's core decomposition of the CPU flash forward
    # also pairs wrongly with its backward under autograd (gradients off by O(1)).
    "_scaled_dot_product_flash_attention_for_cpu",
    "embedding_dense_backward",
]


def _overloads(names):
    out = []
    for name in names:
        packet = getattr(aten, name, None)
        if packet is None:  # op absent from this torch version
            continue
        out.append(packet)
    return out


@functools.lru_cache(maxsize=1)
def decomposition_table() -> dict:
    table = compat.core_aten_decompositions()
    table.update(compat.get_decompositions(_overloads(EXTRA_DECOMPOSE)))
    for packet in _overloads(KEEP):
        for ov in packet.overloads():
            table.pop(getattr(packet, ov), None)
    return table

"""The values of a lowering and the facts about them every part uses: :class:`Realized` and :class:`Lazy`,
dtypes, eager's strides, the graph's device, the arguments that need aligned layouts, and small expression
helpers (:func:`cast`, :func:`padded`)."""

from __future__ import annotations

import logging
import operator
from dataclasses import dataclass

import torch
import torch.fx
import torch.utils._pytree

from .. import ir
from ..ir import Const, IndexValue, Layout, Load, Op, TensorRef
from ..ir.symbolic import clamp, contiguous_strides, variables

log = logging.getLogger("mend.compiler")
aten = torch.ops.aten
prims = torch.ops.prims

HALF = (torch.float16, torch.bfloat16)
SUPPORTED_DTYPES = frozenset([torch.float16, torch.bfloat16, torch.float32, torch.float64, torch.int8, torch.uint8,
                              torch.int16, torch.int32, torch.int64, torch.bool])
_LOGGED: set = set()


def log_once(msg: str) -> None:
    if msg not in _LOGGED:
        _LOGGED.add(msg)
        log.info(msg)


class LoweringError(RuntimeError):
    pass


@dataclass(frozen=True)
class Realized:
    ref: TensorRef

    @property
    def size(self):
        return self.ref.layout.size

    @property
    def dtype(self):
        return self.ref.layout.dtype


@dataclass(frozen=True)
class Lazy:
    size: tuple
    dtype: torch.dtype
    expr: ir.Expr
    stride: tuple | None = None  # eager's strides for the value when it is stored (None: contiguous)


Value = Realized | Lazy


def ranges(size) -> dict:
    return {v: s for v, s in zip(variables(len(size)), size)}


def cast(e: ir.Expr, dtype) -> ir.Expr:
    if e.dtype == dtype:
        return e
    if isinstance(e, Const):
        return Const(py_value(e.value, dtype), dtype)
    return Op("cast", (e,), dtype)


def py_value(v, dtype):
    if dtype == torch.bool:
        return bool(v)
    if dtype.is_floating_point:
        return float(v)
    return int(v)


def compute_dtype(dtype):
    """The dtype arithmetic on ``dtype`` values is performed in (by the generators: halves in float32)."""
    return dtype


def meta_of(node):
    v = node.meta.get("val") if isinstance(node, torch.fx.Node) else None
    return v


def eager_strides(size, meta) -> tuple | None:
    """The strides eager PyTorch gives a value of ``size`` (``meta``: its FX metadata) when they are dense
    (contiguous, transposed, permuted, channels-last: no gaps, no overlaps, offset 0), else None. ``meta``
    may differ from ``size`` by dims of size 1 (a reduction kept with ``keepdim``); those take the strides
    of a contiguous layout unless the shapes are equal."""
    if not isinstance(meta, torch.Tensor) or meta.layout != torch.strided:
        return None
    try:
        mshape, mstride, moff = tuple(int(s) for s in meta.shape), tuple(int(s) for s in meta.stride()), \
            int(meta.storage_offset())
    except (TypeError, RuntimeError):  # symbolic sizes: the graph is specialized before it is lowered
        return None
    size = tuple(size)
    if mshape == size:
        stride = mstride
    else:
        dims = [i for i, s in enumerate(size) if s != 1]
        mdims = [j for j, s in enumerate(mshape) if s != 1]
        if [size[i] for i in dims] != [mshape[j] for j in mdims]:
            return None
        stride = list(contiguous_strides(size))
        for i, j in zip(dims, mdims):
            stride[i] = mstride[j]
        stride = tuple(stride)
    return stride if moff == 0 and Layout(size, stride, 0, meta.dtype).is_dense() else None


def _view_targets() -> frozenset:
    return frozenset(t for t in (
        aten.view.default, aten._unsafe_view.default, aten.reshape.default, aten.permute.default,
        aten.transpose.int, aten.t.default, aten.expand.default, aten.unsqueeze.default, aten.squeeze.dim,
        aten.squeeze.dims, aten.squeeze.default, aten.select.int, aten.slice.Tensor, aten.alias.default,
        aten.detach.default, aten.as_strided.default, aten.diagonal.default, aten.unfold.default,
        aten.split.Tensor, aten.split_with_sizes.default, aten.unbind.int, operator.getitem))


def views_of_outputs(gm: torch.fx.GraphModule) -> set:
    """The view nodes whose result reaches a graph output through views only (``getitem`` of a split
    included). Eager returns those as views of a buffer, with its strides and offset; so does mend."""
    views = _view_targets()
    out = set()
    stack = [n for n in gm.graph.nodes if n.op == "output"]
    stack = [a for n in stack for a in torch.utils._pytree.tree_leaves(n.args) if isinstance(a, torch.fx.Node)]
    while stack:
        n = stack.pop()
        if n.op == "call_function" and n.target in views and n not in out:
            out.add(n)
            if n.args and isinstance(n.args[0], torch.fx.Node):
                stack.append(n.args[0])
    return out


def graph_device(gm: torch.fx.GraphModule, example_inputs) -> torch.device:
    """The device the graph's kernels and buffers live on: the first device other than the CPU among the
    inputs and the values the graph computes, else the CPU. A graph on a GPU may still hold CPU tensors
    (0-dim scalars passed in or made by ``torch.tensor``, CPU-side index arithmetic): they are not its
    device, so they are never looked at first."""
    for t in example_inputs:
        if isinstance(t, torch.Tensor) and t.device.type != "cpu":
            return t.device
    for n in gm.graph.nodes:
        for v in torch.utils._pytree.tree_leaves(n.meta.get("val")):
            if isinstance(v, torch.Tensor) and v.device.type != "cpu":
                return v.device
    return torch.device("cpu")


# ATen calls that read an argument with vector loads. SDPA's attention bias, in the memory-efficient and cuDNN
# kernels (forward and backward), must start at and have every stride but the last at a multiple of 16
# bytes, and a last stride of 1: a dense [.., 49, 49] bias fails ("attn_bias is not correctly aligned"). ATen's
# own sdpa pads the bias's last dim to 8 elements and slices it (preprocess_mask); Inductor lays the buffer
# out the same way. The flash kernels take no bias.
ALIGNMENT = 8  # elements: 16 bytes or more for every dtype these kernels take
ALIGNED_ARGUMENTS = {
    "_scaled_dot_product_efficient_attention": "attn_bias",
    "_scaled_dot_product_efficient_attention_backward": "attn_bias",
    "_efficient_attention_forward": "bias",
    "_efficient_attention_backward": "bias",
    "_scaled_dot_product_cudnn_attention": "attn_bias",
    "_scaled_dot_product_cudnn_attention_backward": "attn_bias",
    "_scaled_dot_product_fused_attention_overrideable": "attn_bias",
    "_scaled_dot_product_fused_attention_overrideable_backward": "attn_bias",
}


def aligned_positions(target) -> dict:
    """{argument name: position} of ``target``'s arguments that need an aligned layout."""
    name = ALIGNED_ARGUMENTS.get(getattr(target, "__name__", "").split(".")[0])
    if name is None:
        return {}
    return {a.name: i for i, a in enumerate(target._schema.arguments) if a.name == name}


def is_aligned(lay: Layout, alignment: int = ALIGNMENT) -> bool:
    """Start and every stride but the last at multiples of ``alignment`` elements, the last stride 1."""
    return (lay.offset % alignment == 0 and all(st % alignment == 0 for st in lay.stride[:-1])
            and (not lay.size or lay.stride[-1] == 1 or lay.size[-1] <= 1))


def broadcast_dims(v) -> set:
    """Dims (but the last) along which ``v`` does not change: stride 0 in a buffer, an index variable that a
    lazy expression does not use."""
    size = tuple(v.size)
    if isinstance(v, Realized):
        return {d for d in range(len(size) - 1) if size[d] > 1 and v.ref.layout.stride[d] == 0}
    used = set()
    for e in ir.walk(v.expr):
        if isinstance(e, (Load, IndexValue)):
            used |= e.index.free_symbols
    xs = variables(len(size))
    return {d for d in range(len(size) - 1) if size[d] > 1 and xs[d] not in used}


class Unsupported(Exception):
    """Raised by a lowering that declines (the op then becomes an extern call)."""


def padded(L, a: Value, out_size: tuple, pad, value, dtype) -> ir.Expr:
    """``a`` padded with ``value`` to ``out_size`` (``pad``: constant_pad_nd's (before, after) pairs from the
    last dim on, none negative), as clamped loads under a condition."""
    xs = variables(len(out_size))
    rng = ranges(out_size)
    idx = list(xs)
    cond = None
    for i in range(len(pad) // 2):
        d = len(out_size) - 1 - i
        lo = pad[2 * i]
        n = a.size[d]
        if pad[2 * i] == 0 and pad[2 * i + 1] == 0:
            continue
        idx[d] = clamp(xs[d] - lo, 0, max(n - 1, 0))
        xv = IndexValue(xs[d], torch.int64)
        c = Op("logical_and", (Op("ge", (xv, Const(lo, torch.int64)), torch.bool),
                               Op("lt", (xv, Const(lo + n, torch.int64)), torch.bool)), torch.bool)
        cond = c if cond is None else Op("logical_and", (cond, c), torch.bool)
    inner = cast(L.load(a, idx, rng), dtype)
    if cond is None:
        return inner
    return Op("where", (cond, inner, Const(py_value(value, dtype), dtype)), dtype)

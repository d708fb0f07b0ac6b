"""Matrix products with their epilogues (GPU): ATen's ``mm``/``addmm``/``bmm`` as IR contractions.

In half precision on a GPU, a matrix product followed by pointwise work on its result (a bias, an
activation, a residual add, a dtype cast) costs a second pass over the product: cuBLAS writes it, a
pointwise kernel reads it back. Here such a call becomes two IR nodes before fusion:

* ``<name>_acc``: the product as a ``sum`` over ``k`` of ``a[m, k] * b[k, n]`` in float32 (a contraction,
  ``ir/contraction.py``);
* ``<name>``: the value ATen returns, ``cast(acc (+ bias), dtype)`` (``addmm`` adds its bias before the one
  rounding, as cuBLAS does), under the call's own output name so that every reader is unchanged.

Fusion then puts the second node and the pointwise readers of the product into the product's kernel as
per-row (``outer``) stages, and the Triton generator renders it with its ``matmul`` template: ``tl.dot``
over tiles, the epilogue applied to the tile in registers.

Only float16 and bfloat16 operands (float32 products stay with cuBLAS: eager runs them in full float32
precision unless TF32 is allowed; a float32 ``addmm`` read by a pointwise node becomes ``mm`` and its bias
moves into that node, see :func:`_bias_to_epilogue`), ``beta = alpha = 1``, and only a product some
pointwise node reads element for element (nothing to fuse otherwise). ``MEND_MATMUL_EPILOGUE=0`` keeps
every product an ATen call, ``MEND_MATMUL_EPILOGUE=mm`` those with a bias (``addmm``, whose bias cuBLASLt
adds in its own epilogue: on an H200 in bf16 that ran BERT, RoBERTa, GPT-2 and the Whisper encoder 2-7%
faster and ViT 3% slower than the default, ``benchmarks/results/h200-2026-11-27e``).
"""

from __future__ import annotations

import math
from dataclasses import replace

import sympy
import torch

from mend import settings

from .. import ir
from ..ir import ComputedBuffer, ExternKernel, Layout, Load, Op, TensorRef
from ..ir.symbolic import FloorDiv, IMod, unravel, variables

aten = torch.ops.aten
OPS = {aten.mm.default: "mm", aten.addmm.default: "addmm", aten.bmm.default: "bmm"}
HALF = (torch.float16, torch.bfloat16)


def enabled() -> bool:
    return settings.MATMUL_EPILOGUE.get() != "0"


def with_bias() -> bool:
    """Whether a product with a bias (``addmm``) becomes a kernel too; ``MEND_MATMUL_EPILOGUE=mm`` keeps
    those ATen calls (cuBLASLt adds the bias in its own epilogue)."""
    return settings.MATMUL_EPILOGUE.get() != "mm"


def matmul_epilogues(g: ir.GraphIR, device: str) -> tuple[ir.GraphIR, list[str]]:
    """``g`` with every product that has a pointwise epilogue rewritten as a contraction (GPU only)."""
    if device != "cuda" or not enabled():
        return g, []
    readers = _pointwise_readers(g)
    folded = _bias_folds(g)
    nodes, notes = [], []
    for node in g.nodes:
        parts, what = None, ""
        if isinstance(node, ComputedBuffer) and any(ld.buf in folded for ld in ir.loads(node.body.expr)):
            node = _fold_bias(node, folded)
        elif isinstance(node, ExternKernel) and node.name in folded:
            parts, what = [folded[node.name][0]], "without its bias, added where each reader loads it"
        elif isinstance(node, ExternKernel) and node.name in readers:
            parts, what = _as_contraction(node), "as a matrix-product kernel"
            if parts is None:
                parts, what = _bias_to_epilogue(node), "as mm, its bias added by the epilogue"
        if parts is None:
            nodes.append(node)
            continue
        nodes += parts
        notes.append(f"{node.name}: {OPS.get(node.op, 'convolution')} {what} (epilogue reads it: "
                     f"{', '.join(sorted(readers.get(node.name, ())))})")
    if not notes:
        return g, []
    return ir.GraphIR(g.inputs, tuple(nodes), g.outputs, g.constants), notes


def _pointwise_readers(g: ir.GraphIR) -> dict:
    """Buffer name -> the pointwise nodes that read it over a space of as many elements."""
    out: dict = {}
    sizes = {n.name: n.layout.numel for n in g.nodes if isinstance(n, ComputedBuffer)}
    for n in g.nodes:
        if isinstance(n, ExternKernel):
            for name, lay in zip(n.output_names(), n.out_layouts):
                sizes[name] = lay.numel
            continue
        if not isinstance(n.body, ir.Pointwise):
            continue
        for ld in ir.loads(n.body.expr):
            if sizes.get(ld.buf) == math.prod(n.body.size):
                out.setdefault(ld.buf, set()).add(n.name)
    return out


def _args(node: ExternKernel):
    """(bias or None, a, b) TensorRefs of a product with beta = alpha = 1, or None."""
    kw = dict(node.kwargs)
    if kw.get("beta", 1) != 1 or kw.get("alpha", 1) != 1:
        return None
    args = node.args
    if OPS[node.op] == "addmm":
        if len(args) != 3:
            return None
        bias, a, b = args
    else:
        if len(args) != 2:
            return None
        bias, (a, b) = None, args
    refs = [r for r in (bias, a, b) if r is not None]
    if not all(isinstance(r, TensorRef) for r in refs):
        return None
    return bias, a, b


def _as_contraction(node: ExternKernel):
    """[acc, out] computed buffers for the product ``node``, or None when it stays an ATen call."""
    if node.op not in OPS or len(node.out_layouts) != 1:
        return None
    args = _args(node)
    if args is None:
        return None
    bias, a, b = args
    if bias is not None and not with_bias():
        return None
    out = node.out_layouts[0]
    dt = out.dtype
    if dt not in HALF or a.layout.dtype != dt or b.layout.dtype != dt or not out.is_contiguous():
        return None
    if bias is not None and bias.layout.dtype != dt:
        return None
    *batch, m, n = out.size
    k = a.layout.size[-1]
    nb = len(batch)
    xs = variables(nb + 3)
    bv, xm, xn, xk = list(xs[:nb]), xs[nb], xs[nb + 1], xs[nb + 2]
    f32 = torch.float32
    prod = Op("mul", (Op("cast", (Load(a.buf, a.layout.index(bv + [xm, xk]), dt),), f32),
                      Op("cast", (Load(b.buf, b.layout.index(bv + [xk, xn]), dt),), f32)), f32)
    size = (*batch, m, n, k)
    acc_name = f"{node.name}_acc"
    acc = ComputedBuffer(acc_name, Layout.contiguous((*batch, m, n), f32),
                         ir.Reduction(size, (nb + 2,), "sum", prod), node.origin)
    ov = variables(nb + 2)
    value = Load(acc_name, Layout.contiguous((*batch, m, n), f32).index(list(ov)), f32)
    if bias is not None:
        value = Op("add", (value, Op("cast", (Load(bias.buf, _broadcast_index(bias.layout, ov), dt),), f32)), f32)
    body = ir.Pointwise((*batch, m, n), Op("cast", (value,), dt))
    return [acc, ComputedBuffer(node.name, out, body, node.origin)]


def _bias_to_epilogue(node: ExternKernel):
    """[mm, out] for a float32 ``addmm`` that stays with cuBLAS: the product by ``mm`` and the bias added by
    a pointwise node, which fusion puts into the reader's kernel (as Inductor does). ``addmm`` sends cuBLAS
    down its bias-epilogue path, which chose 64 x 64 tiles for the zoo's [3152, 768] x [768, 768] products
    on an H100 where ``mm`` got 128 x 128 (GPU zoo profiles, fp32: ViT's GEMMs 5.67 ms against Inductor's
    5.02 ms). The same float32 arithmetic: the product rounded once, then one float32 add."""
    if OPS.get(node.op) != "addmm" or len(node.out_layouts) != 1:
        return None
    args = _args(node)
    if args is None:
        return None
    bias, a, b = args
    out = node.out_layouts[0]
    if out.dtype != torch.float32 or not out.is_contiguous() or {a.layout.dtype, b.layout.dtype,
                                                                   bias.layout.dtype} != {torch.float32}:
        return None
    name = f"{node.name}_mm"
    mm = ExternKernel(name, aten.mm.default, (a, b), (), name, (out,), node.origin)
    xs = variables(len(out.size))
    body = Op("add", (Load(name, out.index(list(xs)), out.dtype),
                      Load(bias.buf, _broadcast_index(bias.layout, xs), out.dtype)), out.dtype)
    return [mm, ComputedBuffer(node.name, out, ir.Pointwise(tuple(out.size), body), node.origin)]


def _bias_folds(g: ir.GraphIR) -> dict:
    """Product name -> (its ``mm``, bias ref, layout) for each float32 ``addmm`` (and each convolution with a
    bias, :func:`_conv_without_bias`) whose every reader is a
    computed buffer (pointwise or reduction) of the graph, not an output: the bias add moves into the loads
    of each reader, whatever the index it reads at (a transposed read for attention heads, a layer norm
    over a reshape), so no kernel adds the bias alone (``_bias_to_epilogue`` leaves a bias kernel where the
    reader cannot fuse with it). The same float32 arithmetic: the product rounded once, then one add."""
    users: dict = {}
    for n in g.nodes:
        names = n.input_names() if isinstance(n, ExternKernel) else {ld.buf for ld in ir.loads(n.body.expr)}
        for name in names:
            users.setdefault(name, []).append(n)
    outputs = {o.buf for o in g.outputs if isinstance(o, TensorRef)}
    folds: dict = {}
    for node in g.nodes:
        if not isinstance(node, ExternKernel) or node.name in outputs or not users.get(node.name):
            continue
        if not all(isinstance(u, ComputedBuffer) for u in users[node.name]):
            continue
        parts = _bias_to_epilogue(node)
        if parts is not None:
            mm, out = parts
            folds[node.name] = (mm, _args(node)[0], out.layout)
            continue
        split = _conv_without_bias(node)
        if split is not None:
            folds[node.name] = split
    return folds


def _conv_without_bias(node: ExternKernel):
    """(the convolution without its bias, the bias as a view over the output's trailing dimensions, the
    output's layout) for a convolution with a bias and a dense output (contiguous, or channels-last as cuDNN
    gives depthwise convolutions on the GPU: its readers find their coordinates through :func:`_coords`), else None. On the GPU ATen adds a
    convolution's bias in a kernel of its own after cuDNN's (GPU zoo, ConvNeXt: 8 such kernels a call, 3% of
    its time); folded, each reader adds it where it loads the output, as Inductor's lowering does. The same
    arithmetic in float32 (the convolution rounded once, then one add); in half precision the sum is no
    longer rounded to the storage type before the reader's own work (within the tolerance Inductor meets)."""
    if node.op is not aten.convolution.default or len(node.out_layouts) != 1 or len(node.args) != 9:
        return None
    x, w, bias, *rest = node.args
    out = node.out_layouts[0]
    if not (isinstance(bias, TensorRef) and out.is_dense() and len(out.size) >= 3):
        return None
    lay = bias.layout
    if len(lay.size) != 1 or lay.size[0] != out.size[1] or lay.dtype != out.dtype:
        return None
    trailing = len(out.size) - 2
    view = TensorRef(bias.buf, Layout((lay.size[0],) + (1,) * trailing, (lay.stride[0],) + (0,) * trailing,
                                      lay.offset, lay.dtype))
    name = f"{node.name}_conv"
    return ExternKernel(name, node.op, (x, w, None, *rest), node.kwargs, name, (out,), node.origin), view, out


def _fold_bias(node: ComputedBuffer, folds: dict) -> ComputedBuffer:
    """``node`` with each load of a folded product ``p[i]`` written as ``p_mm[i] + bias[...]``."""

    def fn(e):
        if not (isinstance(e, Load) and e.buf in folds):
            return None
        mm, bias, lay = folds[e.buf]
        coords = _coords(e.index, lay)
        return Op("add", (Load(mm.name, e.index, e.dtype), Load(bias.buf, _broadcast_index(bias.layout, coords),
                                                                  e.dtype)), e.dtype)

    return replace(node, body=replace(node.body, expr=ir.map_expr(node.body.expr, fn)))


def _coords(index, lay: Layout) -> tuple:
    """The coordinates of a flat ``index`` into the dense layout ``lay`` (row-major, or any order of its dims:
    a channels-last convolution output): coordinate ``d`` is ``index // stride[d] % size[d]``."""
    if lay.is_contiguous():
        return unravel(index, lay.size)
    return tuple(sympy.Integer(0) if s == 1 else IMod(FloorDiv(index, sympy.Integer(st)), sympy.Integer(s))
                 for s, st in zip(lay.size, lay.stride))


def _broadcast_index(lay: Layout, xs) -> sympy.Expr:
    """Index of the view ``lay`` broadcast (right-aligned) to the space of variables ``xs``."""
    xs = list(xs)[len(xs) - len(lay.size):]
    return lay.index([x if s != 1 else sympy.Integer(0) for x, s in zip(xs, lay.size)])

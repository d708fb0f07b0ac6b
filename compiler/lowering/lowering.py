"""ATen FX graph (after ``decomps.decomposition_table()``) -> :class:`mend.compiler.ir.GraphIR`.

An ``fx.Interpreter``-style walk. Every tensor value is either

* :class:`Realized`: a strided view (:class:`ir.TensorRef`) of a buffer (graph input, computed buffer,
  extern output). View ops on it only change the layout: views never copy.
* :class:`Lazy`: a pointwise expression over the canonical variables of its size, not yet stored. Consumers
  inline it (vertical fusion for free); view ops on it remap its index variables.

A lazy value is *realized* (becomes a :class:`ir.ComputedBuffer`) when it is a graph output, an input of an
extern call, read by a reduction while costly, used by several consumers while costly (``ops.REALIZE_COST``),
or when its expression grows too large. Reductions are always realized.

Ops without a lowering become :class:`ir.ExternKernel` (ATen call at run time): the op-level fallback.
Each such op is logged once.
"""

from __future__ import annotations

import logging
import math
import operator
from dataclasses import dataclass

import sympy
import torch
import torch.fx
import torch.utils._pytree

from .. import compat, ir
from ..ir import Const, IndexValue, Layout, Load, Op, TensorRef
from ..ir.ops import MAX_INLINE_COST, REALIZE_COST
from ..ir.symbolic import FloorDiv, IMod, clamp, contiguous_strides, simplify_index, unravel, variables
from .views import Strided, ViewError

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


def _ranges(size) -> dict:
    return {v: s for v, s in zip(variables(len(size)), size)}


def cast(e: ir.Expr, dtype) -> ir.Expr:
    if e.dtype == dtype:
        return e
    if isinstance(e, Const):
        return Const(_py_value(e.value, dtype), dtype)
    return Op("cast", (e,), dtype)


def _py_value(v, dtype):
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


class Lowering:
    def __init__(self, gm: torch.fx.GraphModule, example_inputs, device: torch.device | None = None):
        self.gm = gm
        self.example_inputs = list(example_inputs)
        self.device = torch.device(device) if device is not None else graph_device(gm, self.example_inputs)
        self.nodes: list = []
        self.inputs: list = []
        self.constants: list = []
        self.env: dict = {}
        self.counter = 0
        self.extern_ops: list[str] = []
        self.current = None
        self.views_of_outputs = views_of_outputs(gm)

    # ------------------------------------------------------------------------------ helpers
    def new_name(self, prefix="buf") -> str:
        self.counter += 1
        return f"{prefix}{self.counter}"

    def load(self, v: Value, idx, ranges) -> ir.Expr:
        if isinstance(v, Realized):
            return Load(v.ref.buf, simplify_index(v.ref.layout.index(idx), ranges), v.dtype)
        mapping = dict(zip(variables(len(v.size)), idx))
        return ir.substitute(v.expr, mapping, lambda e: simplify_index(e, ranges))

    def load_broadcast(self, v: Value, out_size) -> ir.Expr:
        """Load ``v`` broadcast (right-aligned) to ``out_size`` at the canonical variables."""
        xs = variables(len(out_size))
        nd = len(v.size)
        lead = len(out_size) - nd
        idx = []
        for i, s in enumerate(v.size):
            o = out_size[lead + i]
            idx.append(sympy.Integer(0) if s == 1 and o != 1 else xs[lead + i])
        return self.load(v, idx, _ranges(out_size))

    def realize(self, v: Value) -> Realized:
        """``v`` stored in a buffer: eager's layout when the value carries it, else contiguous."""
        if isinstance(v, Realized):
            return v
        name = self.new_name()
        layout = Layout(tuple(v.size), v.stride, 0, v.dtype) if v.stride else Layout.contiguous(v.size, v.dtype)
        self.nodes.append(ir.ComputedBuffer(name, layout, ir.Pointwise(tuple(v.size), v.expr), self._origin()))
        return Realized(TensorRef(name, layout))

    def _origin(self) -> str:
        return self.current.name if self.current is not None else ""

    def realize_shared(self, src_node, v: Value) -> Value:
        """A lazy value that is viewed and also used elsewhere is stored once, so the view is free. A value
        whose view is a graph output is stored too (with eager's layout), so the output is a view of a
        buffer with eager's strides and offset."""
        if not isinstance(v, Lazy) or not isinstance(src_node, torch.fx.Node):
            return v
        shared = len(src_node.users) > 1 and ir.op_count(v.expr) > 0
        if shared or self.current in self.views_of_outputs:
            v = self.realize(v)
            self.env[src_node] = v
        return v

    def with_eager_layout(self, v, node):
        """A lazy value remembers the strides eager gives ``node``'s result, for when it is stored."""
        if isinstance(v, Lazy) and v.stride is None:
            st = eager_strides(v.size, meta_of(node))
            if st is not None and st != contiguous_strides(v.size):
                v = Lazy(v.size, v.dtype, v.expr, st)
        return v

    def maybe_realize(self, v: Value, node) -> Value:
        if isinstance(v, Lazy):
            cost = ir.op_count(v.expr)
            nusers = len(node.users) if node is not None else 1
            if cost > MAX_INLINE_COST or (nusers > 1 and cost > REALIZE_COST):
                return self.realize(v)
            if len(ir.loads(v.expr)) > 12:
                return self.realize(v)
        return v

    # ---------------------------------------------------------------------------------- run
    def run(self) -> ir.GraphIR:
        placeholder_i = 0
        out = None
        for node in self.gm.graph.nodes:
            self.current = node
            if node.op == "placeholder":
                ex = self.example_inputs[placeholder_i]
                if not isinstance(ex, torch.Tensor):
                    raise LoweringError(f"non-tensor graph input {node.name} ({type(ex).__name__})")
                layout = Layout(tuple(ex.shape), tuple(ex.stride()), 0, ex.dtype)
                name = f"arg{placeholder_i}"
                self.inputs.append(ir.InputBuffer(name, layout, placeholder_i))
                self.env[node] = Realized(TensorRef(name, layout))
                placeholder_i += 1
            elif node.op == "get_attr":
                t = getattr(self.gm, node.target)
                if not isinstance(t, torch.Tensor):
                    self.env[node] = t
                    continue
                name = f"const{len(self.constants)}"
                layout = Layout(tuple(t.shape), tuple(t.stride()), 0, t.dtype)
                self.constants.append(ir.ConstantBuffer(name, layout, node.target))
                self.env[node] = Realized(TensorRef(name, layout))
            elif node.op == "call_function":
                self.env[node] = self.call_function(node)
            elif node.op == "output":
                out = node.args[0]
            else:
                raise LoweringError(f"unsupported FX node kind {node.op}")
        self.current = None
        outputs = []
        for o in torch.utils._pytree.tree_leaves(out):  # aot graphs return a flat tuple already
            if isinstance(o, torch.fx.Node):
                v = self.env[o]
                if isinstance(v, (Realized, Lazy)):
                    v = self.env[o] = self.output(o, v)
                    outputs.append(v.ref)
                else:
                    outputs.append(v)
            else:
                outputs.append(o)
        return ir.GraphIR(tuple(self.inputs), tuple(self.nodes), tuple(outputs), tuple(self.constants))

    def output(self, node, v: Value) -> Realized:
        """A graph output, stored with eager's strides: a lazy value in eager's layout; a buffer (a view of
        one) that mend laid out otherwise, copied into eager's layout where that is dense."""
        v = self.realize(self.with_eager_layout(v, node))
        lay = v.ref.layout
        st = eager_strides(lay.size, meta_of(node))
        if st is None or all(a == b for a, b, n in zip(lay.stride, st, lay.size) if n != 1):
            return v
        self.current = node
        copy = Lazy(tuple(lay.size), lay.dtype, self.load(v, variables(len(lay.size)), _ranges(lay.size)), st)
        v = self.realize(copy)
        self.current = None
        return v

    def call_function(self, node):
        target = node.target
        if target is operator.getitem:
            seq, i = node.args
            return self.with_eager_layout(self.env[seq][i], node)
        if compat.is_with_effects(target):
            return self.with_effects(node)
        fn = LOWERINGS.get(target)
        if fn is None and isinstance(target, torch._ops.OpOverload):
            fn = LOWERINGS.get(target.overloadpacket)
        if fn is not None and not self._dtypes_supported(node):
            log_once(f"mend: {target} on unsupported dtypes lowered as an ATen call")
            fn = None
        if fn is not None and not self._on_graph_device(node):
            # the kernels and buffers of the graph live on self.device; a value made or read elsewhere (a CPU
            # index built by torch.arange without device=, a CPU scalar tensor) stays with ATen, which keeps
            # eager's device semantics
            log_once(f"mend: {target} off the graph's device ({self.device}) lowered as an ATen call")
            fn = None
        if fn is not None:
            args = tuple(self._arg(a) for a in node.args)
            kwargs = {k: self._arg(v) for k, v in node.kwargs.items()}
            try:
                res = fn(self, node, *args, **kwargs)
            except Unsupported as exc:
                log_once(f"mend: {target} lowered as an ATen call ({exc})")
                res = None
            if res is not None:
                if isinstance(res, Lazy):
                    res = self.maybe_realize(self.with_eager_layout(res, node), node)
                return res
        return self.extern(node)

    def _device_of_node(self, n):
        if n.op == "get_attr":
            t = getattr(self.gm, n.target, None)
            return t.device if isinstance(t, torch.Tensor) else None
        if n.op == "placeholder":
            v = meta_of(n)
            if v is None:
                i = [p for p in self.gm.graph.nodes if p.op == "placeholder"].index(n)
                v = self.example_inputs[i] if i < len(self.example_inputs) else None
            return v.device if isinstance(v, torch.Tensor) else None
        return None

    def _on_graph_device(self, node) -> bool:
        vals = [v for v in torch.utils._pytree.tree_leaves(meta_of(node)) if isinstance(v, torch.Tensor)]
        devices = [v.device for v in vals]
        for a in torch.utils._pytree.tree_leaves((node.args, node.kwargs)):
            if isinstance(a, torch.fx.Node):
                v = meta_of(a)
                d = v.device if isinstance(v, torch.Tensor) else self._device_of_node(a)
                if d is not None:
                    devices.append(d)
        return all(d == self.device for d in devices)

    def _dtypes_supported(self, node) -> bool:
        vals = torch.utils._pytree.tree_leaves(meta_of(node))
        for a in torch.utils._pytree.tree_leaves((node.args, node.kwargs)):
            if isinstance(a, torch.fx.Node):
                vals.append(meta_of(a))
        return all(v.dtype in SUPPORTED_DTYPES for v in vals if isinstance(v, torch.Tensor))

    def _arg(self, a):
        if isinstance(a, torch.fx.Node):
            return self.env[a]
        if isinstance(a, (list, tuple)):
            return type(a)(self._arg(x) for x in a)
        return a

    # ------------------------------------------------------------------------------- extern
    def with_effects(self, node) -> tuple:
        """``with_effects(token, op, *args)``, an operator with an ordered side effect (``print``, a message
        kept by ``mend fix``): an ATen call of ``op`` in program order (never folded or dropped: see
        ``schedule/fold.py``), the token handed on unchanged."""
        token, op, *args = node.args
        meta = meta_of(node)
        result = self.extern(node, op, tuple(args), meta[1] if isinstance(meta, (tuple, list)) else None)
        return (self.env[token] if isinstance(token, torch.fx.Node) else token, result)

    def extern(self, node, target=None, node_args=None, val=None) -> object:
        """``node`` as an ATen call at run time (``target``, ``node_args``, ``val``: another op, its arguments
        and its value's metadata, for a call wrapped in a higher-order op)."""
        if target is None:
            target, node_args, val = node.target, node.args, meta_of(node)
        if not isinstance(target, torch._ops.OpOverload):
            raise LoweringError(f"cannot lower call to {target!r} (not an ATen op)")
        log_once(f"mend: no lowering for {target}; calling ATen")
        self.extern_ops.append(str(target))

        def conv(a):
            if isinstance(a, torch.fx.Node):
                v = self.env[a]
                if isinstance(v, (Realized, Lazy)):
                    return self.realize(v).ref
                return v
            if isinstance(a, (list, tuple)):
                return tuple(conv(x) for x in a) if isinstance(a, tuple) else [conv(x) for x in a]
            return a

        aligned = aligned_positions(target)

        def arg(a, key):
            v = self.env.get(a) if isinstance(a, torch.fx.Node) else None
            if key in aligned and isinstance(v, (Realized, Lazy)) and v.size:
                return self.aligned(v)
            return conv(a)

        names = {i: k for k, i in aligned.items()}
        args = tuple(arg(a, names.get(i)) for i, a in enumerate(node_args))
        kwargs = tuple(sorted((k, arg(v, k)) for k, v in node.kwargs.items()))
        layouts = []

        def bind(v):
            if isinstance(v, torch.Tensor):
                name = self.new_name("ext")
                layouts.append(Layout(tuple(v.shape), tuple(v.stride()), 0, v.dtype))
                return name
            if isinstance(v, (list, tuple)):
                return tuple(bind(x) for x in v)
            return None

        outs = bind(val)
        names = [n for n in ir._flatten(outs) if n is not None]
        self.nodes.append(ir.ExternKernel(names[0] if names else self.new_name("ext"), target, args, kwargs,
                                          outs, tuple(layouts), node.name))

        def value(o, lay_iter):
            if isinstance(o, tuple):
                return [value(x, lay_iter) for x in o]
            if o is None:
                return None
            return Realized(TensorRef(o, next(lay_iter)))

        return value(outs, iter(layouts))

    def aligned(self, v: Value) -> TensorRef:
        """``v`` as a view that meets :func:`is_aligned`: as it is when it does; else stored once with its
        last dim padded to a multiple of :data:`ALIGNMENT` (the pad is never read) and its broadcast dims
        computed once (stride 0), the view leaving the pad out."""
        if isinstance(v, Realized) and is_aligned(v.ref.layout):
            return v.ref
        size = tuple(v.size)
        bcast = broadcast_dims(v)
        core = tuple(1 if d in bcast else s for d, s in enumerate(size))
        idx = [sympy.Integer(0) if d in bcast else x for d, x in enumerate(variables(len(size)))]
        value = Lazy(core, v.dtype, self.load(v, idx, _ranges(core)))
        pad = -size[-1] % ALIGNMENT
        if pad:
            wide = core[:-1] + (size[-1] + pad,)
            value = Lazy(wide, v.dtype, padded(self, value, wide, (0, pad), 0, v.dtype))
        buf = self.realize(value).ref
        stride = tuple(0 if d in bcast else st for d, st in enumerate(buf.layout.stride))
        return TensorRef(buf.buf, Layout(size, stride, 0, v.dtype))

    # --------------------------------------------------------------------------- pointwise
    def pointwise(self, node, fn, inputs, out_dtype=None, in_dtype=None):
        """Build a Lazy value: ``fn(*loaded)`` over the broadcast of ``inputs`` (Values or numbers)."""
        val = meta_of(node)
        out_size = tuple(val.shape)
        out_dtype = out_dtype or val.dtype
        cdt = in_dtype or out_dtype
        loaded = []
        for a in inputs:
            if isinstance(a, (Realized, Lazy)):
                loaded.append(cast(self.load_broadcast(a, out_size), cdt))
            elif isinstance(a, (bool, int, float)):
                loaded.append(Const(_py_value(a, cdt), cdt))
            else:
                raise Unsupported(f"argument of type {type(a).__name__}")
        return Lazy(out_size, out_dtype, fn(*loaded))

    # ------------------------------------------------------------------------------- views
    def view(self, v: Value, fn) -> Value:
        """Apply view function ``fn`` (on a meta tensor) to ``v``: a layout change or an index remap."""
        if isinstance(v, Realized):
            lay = v.ref.layout
            try:
                r = fn(Strided(lay.size, lay.stride, lay.offset))
            except ViewError:
                r = None
            if r is not None:
                return Realized(TensorRef(v.ref.buf, Layout(tuple(r.shape), tuple(r.stride()),
                                                            int(r.storage_offset()), lay.dtype)))
            v = Lazy(tuple(lay.size), lay.dtype, self.load(v, variables(len(lay.size)), _ranges(lay.size)))
        r = fn(Strided(v.size, contiguous_strides(v.size), 0))
        size, stride, off = tuple(r.shape), tuple(r.stride()), int(r.storage_offset())
        xs = variables(len(size))
        flat = sympy.Integer(off) + sum((st * x for st, x, s in zip(stride, xs, size) if s != 1), sympy.Integer(0))
        rng = _ranges(size)
        old = [simplify_index(e, rng) for e in unravel(flat, v.size)]
        expr = ir.substitute(v.expr, dict(zip(variables(len(v.size)), old)), lambda e: simplify_index(e, rng))
        return Lazy(size, v.dtype, expr)

    # ---------------------------------------------------------------------------- reductions
    def reduction(self, v: Value, dims, kind, acc_dtype, body_dtype=None) -> Realized:
        size = tuple(v.size)
        nd = len(size)
        if dims is None or (isinstance(dims, (list, tuple)) and len(dims) == 0):
            dims = list(range(nd))
        rdims = tuple(sorted({d % nd for d in dims})) if nd else ()
        if nd == 0:
            size = (1,)
            rdims = (0,)
            v = self.view(v, lambda t: t.view((1,)))
        expr = self.load(v, variables(len(size)), _ranges(size))
        expr = cast(expr, body_dtype or acc_dtype)
        red = ir.Reduction(size, rdims, kind, expr)
        out_dtype = torch.int64 if kind in ("argmax", "argmin") else acc_dtype
        if kind in ("any", "all"):
            out_dtype = torch.bool
        name = self.new_name()
        layout = Layout(red.out_size, self._reduction_strides(red.out_size), 0, out_dtype)
        self.nodes.append(ir.ComputedBuffer(name, layout, red, self._origin()))
        return Realized(TensorRef(name, layout))

    def _reduction_strides(self, out_size) -> tuple:
        """Eager's strides for the current node's reduced result (the first of its tensors that fits)."""
        for t in torch.utils._pytree.tree_leaves(meta_of(self.current)):
            st = eager_strides(out_size, t)
            if st is not None:
                return st
        return contiguous_strides(out_size)

    def keepdim(self, r: Value, in_size, rdims) -> Value:
        shape = [1 if i in rdims else s for i, s in enumerate(in_size)]
        return self.view(r, lambda t: t.view(shape))


class Unsupported(Exception):
    """Raised by a lowering that declines (the op then becomes an extern call)."""


# ===================================================================================== the table

LOWERINGS: dict = {}


def register(*ops):
    def deco(fn):
        for op in ops:
            if op is None:
                continue
            LOWERINGS[op] = fn
        return fn

    return deco


def _packet(name, ns=aten):
    return getattr(ns, name, None)


def _is_value(a):
    return isinstance(a, (Realized, Lazy))


def _check_device(node):
    val = meta_of(node)
    if isinstance(val, torch.Tensor) and val.device.type != "cpu" and val.device.type != "cuda":
        raise Unsupported(f"device {val.device}")


# ---- binary arithmetic


def _binary(opname):
    def fn(L, node, a, b, *, alpha=None, **kw):
        if kw:
            raise Unsupported(f"kwargs {sorted(kw)}")

        def f(x, y):
            if alpha is not None and alpha != 1:
                y = Op("mul", (y, Const(_py_value(alpha, y.dtype), y.dtype)), y.dtype)
            return Op(opname, (x, y), x.dtype)

        return L.pointwise(node, f, [a, b])

    return fn


register(aten.add.Tensor, aten.add.Scalar)(_binary("add"))
register(aten.sub.Tensor, aten.sub.Scalar)(_binary("sub"))
register(aten.mul.Tensor, aten.mul.Scalar)(_binary("mul"))
register(aten.maximum.default)(_binary("maximum"))
register(aten.minimum.default)(_binary("minimum"))
register(aten.atan2.default)(_binary("atan2"))
register(aten.fmod.Tensor, aten.fmod.Scalar)(_binary("fmod"))
register(aten.remainder.Tensor, aten.remainder.Scalar)(_binary("remainder"))
register(aten.floor_divide.default)(_binary("floordiv"))
register(aten.bitwise_and.Tensor, aten.bitwise_and.Scalar)(_binary("bitwise_and"))
register(aten.bitwise_or.Tensor, aten.bitwise_or.Scalar)(_binary("bitwise_or"))
register(aten.bitwise_xor.Tensor, aten.bitwise_xor.Scalar)(_binary("bitwise_xor"))


@register(aten.div.Tensor, aten.div.Scalar)
def _div(L, node, a, b):
    return L.pointwise(node, lambda x, y: Op("truediv", (x, y), x.dtype), [a, b])


@register(aten.div.Tensor_mode, aten.div.Scalar_mode)
def _div_mode(L, node, a, b, *, rounding_mode=None):
    val = meta_of(node)
    if rounding_mode is None:
        return L.pointwise(node, lambda x, y: Op("truediv", (x, y), x.dtype), [a, b])
    name = "floordiv" if rounding_mode == "floor" else "truncdiv"
    return L.pointwise(node, lambda x, y: Op(name, (x, y), val.dtype), [a, b])


@register(aten.pow.Tensor_Scalar, aten.pow.Tensor_Tensor, aten.pow.Scalar)
def _pow(L, node, a, b):
    val = meta_of(node)
    if isinstance(b, (int, float)) and not isinstance(b, bool) and val.dtype.is_floating_point:
        if b == 2:
            return L.pointwise(node, lambda x: Op("mul", (x, x), x.dtype), [a])
        if b == 1:
            return L.pointwise(node, lambda x: x, [a])
        if b == 0.5:
            return L.pointwise(node, lambda x: Op("sqrt", (x,), x.dtype), [a])
        if b == -0.5:
            return L.pointwise(node, lambda x: Op("rsqrt", (x,), x.dtype), [a])
        if b == -1:
            return L.pointwise(node, lambda x: Op("reciprocal", (x,), x.dtype), [a])
        # as ATen's pow kernels (CPU and CUDA) do: products, not the libdevice/libm pow (GELU-tanh's x ** 3
        # cost a pointwise kernel 3x its memory time on an H100)
        if b == 3:
            return L.pointwise(node, lambda x: Op("mul", (Op("mul", (x, x), x.dtype), x), x.dtype), [a])
        if b == -2:
            return L.pointwise(node, lambda x: Op("reciprocal", (Op("mul", (x, x), x.dtype),), x.dtype), [a])
    return L.pointwise(node, lambda x, y: Op("pow", (x, y), x.dtype), [a, b])


# ---- unary


def _unary(opname):
    def fn(L, node, a):
        return L.pointwise(node, lambda x: Op(opname, (x,), x.dtype), [a])

    return fn


for _n in ["neg", "abs", "exp", "exp2", "expm1", "log", "log2", "log10", "log1p", "sqrt", "rsqrt",
           "reciprocal", "sin", "cos", "tan", "asin", "acos", "atan", "sinh", "cosh", "tanh", "asinh",
           "acosh", "atanh", "sigmoid", "erf", "erfc", "floor", "ceil", "trunc", "sign", "bitwise_not"]:
    _p = _packet(_n)
    if _p is not None:
        register(_p.default)(_unary(_n))
register(aten.round.default)(_unary("round"))


@register(aten.relu.default)
def _relu(L, node, a):
    return L.pointwise(node, lambda x: Op("maximum", (x, Const(_py_value(0, x.dtype), x.dtype)), x.dtype), [a])


@register(aten.logical_not.default)
def _lnot(L, node, a):
    return L.pointwise(node, lambda x: Op("logical_not", (x,), torch.bool), [a], in_dtype=torch.bool)


def _logical(opname):
    def fn(L, node, a, b):
        return L.pointwise(node, lambda x, y: Op(opname, (x, y), torch.bool), [a, b], in_dtype=torch.bool)

    return fn


register(aten.logical_and.default)(_logical("logical_and"))
register(aten.logical_or.default)(_logical("logical_or"))
register(aten.logical_xor.default)(_logical("logical_xor"))


def _promote(a, b):
    def meta(x):
        if _is_value(x):
            return torch.empty((1,) * min(len(x.size), 1), dtype=x.dtype, device="meta")
        return x

    if _is_value(a) or not _is_value(b):
        return torch.result_type(meta(a), meta(b))
    return torch.result_type(meta(b), meta(a))


def _compare(opname):
    def fn(L, node, a, b):
        cdt = _promote(a, b)
        return L.pointwise(node, lambda x, y: Op(opname, (x, y), torch.bool), [a, b], in_dtype=cdt)

    return fn


for _n in ["eq", "ne", "lt", "le", "gt", "ge"]:
    _p = _packet(_n)
    register(_p.Tensor, _p.Scalar)(_compare(_n))


@register(aten.isnan.default)
def _isnan(L, node, a):
    return L.pointwise(node, lambda x: Op("isnan", (x,), torch.bool), [a], in_dtype=a.dtype)


@register(aten.isinf.default)
def _isinf(L, node, a):
    return L.pointwise(node, lambda x: Op("isinf", (x,), torch.bool), [a], in_dtype=a.dtype)


@register(aten.where.self, aten.where.ScalarSelf, aten.where.ScalarOther, aten.where.Scalar)
def _where(L, node, c, a, b):
    val = meta_of(node)
    out_size = tuple(val.shape)

    def ld(v, dt):
        if _is_value(v):
            return cast(L.load_broadcast(v, out_size), dt)
        return Const(_py_value(v, dt), dt)

    return Lazy(out_size, val.dtype, Op("where", (ld(c, torch.bool), ld(a, val.dtype), ld(b, val.dtype)), val.dtype))


@register(aten.clamp.default, aten.clamp.Tensor)
def _clamp(L, node, a, min=None, max=None):
    args = [a] + [m for m in (min, max) if m is not None]

    def f(x, *bounds):
        i = 0
        if min is not None:
            x = Op("maximum", (x, bounds[i]), x.dtype)
            i += 1
        if max is not None:
            x = Op("minimum", (x, bounds[i]), x.dtype)
        return x

    return L.pointwise(node, f, args)


@register(_packet("fma", prims).default if _packet("fma", prims) else None)
def _fma(L, node, a, b, c):
    return L.pointwise(node, lambda x, y, z: Op("fma", (x, y, z), x.dtype), [a, b, c])


# ---- casts and copies


@register(aten._to_copy.default)
def _to_copy(L, node, a, *, dtype=None, layout=None, device=None, pin_memory=None, non_blocking=False,
             memory_format=None):
    val = meta_of(node)
    if device is not None and torch.device(device) != val.device:
        raise Unsupported("device transfer")
    if not _is_value(a):
        raise Unsupported("non-tensor input")
    src = L.env[node.args[0]]
    if src is not None and hasattr(src, "size") and meta_of(node.args[0]).device != val.device:
        raise Unsupported("device transfer")
    return Lazy(tuple(val.shape), val.dtype, cast(L.load_broadcast(a, tuple(val.shape)), val.dtype))


@register(prims.convert_element_type.default)
def _convert(L, node, a, dtype):
    return Lazy(tuple(a.size), dtype, cast(L.load_broadcast(a, tuple(a.size)), dtype))


@register(aten.clone.default, aten.lift_fresh_copy.default)
def _clone(L, node, a, *, memory_format=None):
    # the layout (channels-last, ...) is the node's eager strides, given to the value when it is stored
    return Lazy(tuple(a.size), a.dtype, L.load_broadcast(a, tuple(a.size)))


# ---- constructors


@register(aten.full.default)
def _full(L, node, size, value, *, dtype=None, layout=None, device=None, pin_memory=None):
    val = meta_of(node)
    return Lazy(tuple(val.shape), val.dtype, Const(_py_value(value, val.dtype), val.dtype))


@register(aten.full_like.default)
def _full_like(L, node, a, value, *, dtype=None, layout=None, device=None, pin_memory=None, memory_format=None):
    val = meta_of(node)
    return Lazy(tuple(val.shape), val.dtype, Const(_py_value(value, val.dtype), val.dtype))


@register(aten.scalar_tensor.default)
def _scalar_tensor(L, node, value, *, dtype=None, layout=None, device=None, pin_memory=None):
    val = meta_of(node)
    return Lazy((), val.dtype, Const(_py_value(value, val.dtype), val.dtype))


@register(aten.arange.start_step, aten.arange.start, aten.arange.default)
def _arange(L, node, *args, dtype=None, layout=None, device=None, pin_memory=None):
    val = meta_of(node)
    if len(args) == 1:
        start, end, step = 0, args[0], 1
    elif len(args) == 2:
        start, end, step = args[0], args[1], 1
    else:
        start, end, step = args
    x = variables(1)[0]
    if all(isinstance(v, int) for v in (start, step)):
        return Lazy(tuple(val.shape), val.dtype, cast(IndexValue(start + step * x, torch.int64), val.dtype))
    e = Op("add", (Const(float(start), torch.float64),
                   Op("mul", (Const(float(step), torch.float64), IndexValue(x, torch.float64)), torch.float64)),
           torch.float64)
    return Lazy(tuple(val.shape), val.dtype, cast(e, val.dtype))


@register(_packet("iota", prims).default if _packet("iota", prims) else None)
def _iota(L, node, length, *, start, step, dtype, device, requires_grad):
    x = variables(1)[0]
    return Lazy((length,), dtype, cast(IndexValue(start + step * x, torch.int64), dtype))


# ---- views


def _view_lowering(fn):
    def low(L, node, a, *args, **kwargs):
        if not _is_value(a):
            raise Unsupported("view of non-tensor")
        a = L.realize_shared(node.args[0], a)
        return L.view(a, lambda t: fn(t, *args, **kwargs))

    return low


register(aten.view.default, aten._unsafe_view.default, aten.reshape.default)(
    _view_lowering(lambda t, shape: t.view(shape)))
register(aten.permute.default)(_view_lowering(lambda t, dims: t.permute(dims)))
register(aten.transpose.int)(_view_lowering(lambda t, a, b: t.transpose(a, b)))
register(aten.t.default)(_view_lowering(lambda t: t.t()))
register(aten.expand.default)(_view_lowering(lambda t, size, *, implicit=False: t.expand(size)))
register(aten.unsqueeze.default)(_view_lowering(lambda t, d: t.unsqueeze(d)))
register(aten.squeeze.dim, aten.squeeze.dims, aten.squeeze.default)(_view_lowering(lambda t, *d: t.squeeze(*d)))
register(aten.select.int)(_view_lowering(lambda t, d, i: t.select(d, i)))
register(aten.slice.Tensor)(_view_lowering(
    lambda t, dim=0, start=None, end=None, step=1: t.slice(dim, start, end, step)))
register(aten.alias.default, aten.detach.default)(_view_lowering(lambda t: t))


@register(aten.as_strided.default)
def _as_strided(L, node, a, size, stride, storage_offset=None):
    """``as_strided`` is defined on the *storage* of its input as eager PyTorch lays it out, not on the
    input's logical elements. When mend holds the input in a buffer with exactly eager's strides and
    offset, it is a view of that buffer. Otherwise (a value mend computes lazily, or a buffer mend laid
    out differently) each storage position the result reads is mapped back to the input element eager
    keeps there, through the input's eager strides; that needs an input without gaps or overlaps (every
    position in its span is one of its elements), or the graph runs eagerly."""
    if not _is_value(a):
        raise Unsupported("view of non-tensor")
    a = L.realize_shared(node.args[0], a)
    meta = node.args[0].meta.get("val") if isinstance(node.args[0], torch.fx.Node) else None
    if not isinstance(meta, torch.Tensor):
        raise LoweringError("as_strided of a value without eager metadata")
    off_e, st_e, sz_e = int(meta.storage_offset()), tuple(meta.stride()), tuple(meta.shape)
    if isinstance(a, Realized):
        lay = a.ref.layout
        if tuple(lay.stride) == st_e and int(lay.offset) == off_e and tuple(lay.size) == sz_e:
            return L.view(a, lambda t: t.as_strided(size, stride, storage_offset)
                          if storage_offset is not None else t.as_strided(size, stride))
    dims = sorted((k for k in range(len(sz_e)) if sz_e[k] != 1), key=lambda k: st_e[k])
    expected = 1
    for k in dims:
        if st_e[k] != expected:
            raise LoweringError(f"as_strided over a view with gaps or overlaps (strides {st_e}, sizes {sz_e})")
        expected *= sz_e[k]
    off = off_e if storage_offset is None else int(storage_offset)
    size = tuple(int(s) for s in size)
    xs = variables(len(size))
    rng = _ranges(size)
    rel = sympy.Integer(off - off_e) + sum((sympy.Integer(int(st)) * x for st, x, n in zip(stride, xs, size) if n != 1),
                                            sympy.Integer(0))
    idx = [sympy.Integer(0)] * len(sz_e)
    for k in dims:
        idx[k] = simplify_index(IMod(FloorDiv(rel, sympy.Integer(st_e[k])), sympy.Integer(sz_e[k])), rng)
    return Lazy(size, a.dtype, L.load(a, idx, rng))

register(aten.diagonal.default)(_view_lowering(lambda t, offset=0, dim1=0, dim2=1: t.diagonal(offset, dim1, dim2)))
register(aten.unfold.default)(_view_lowering(lambda t, d, s, st: t.unfold(d, s, st)))


@register(aten.flip.default)
def _flip(L, node, a, dims):
    size = tuple(a.size)
    xs = variables(len(size))
    ds = {d % len(size) for d in dims} if size else set()
    idx = [size[i] - 1 - xs[i] if i in ds else xs[i] for i in range(len(size))]
    return Lazy(size, a.dtype, L.load(a, idx, _ranges(size)))


@register(aten.split.Tensor, aten.split_with_sizes.default)
def _split(L, node, a, sizes, dim=0):
    val = meta_of(node)
    a = L.realize_shared(node.args[0], a)
    outs = []
    start = 0
    for piece in val:
        n = piece.shape[dim]
        s0 = start
        outs.append(L.view(a, lambda t, s0=s0, n=n: t.slice(dim, s0, s0 + n)))
        start += n
    return outs


@register(aten.unbind.int)
def _unbind(L, node, a, dim=0):
    a = L.realize_shared(node.args[0], a)
    return [L.view(a, lambda t, i=i: t.select(dim, i)) for i in range(a.size[dim])]


# ---- cat / pad as pointwise with clamped loads


@register(aten.cat.default)
def _cat(L, node, tensors, dim=0):
    val = meta_of(node)
    out_size = tuple(val.shape)
    tensors = [t for t in tensors if _is_value(t) and not (len(t.size) == 1 and t.size[0] == 0)]
    if len(tensors) > 4 or not tensors:
        raise Unsupported(f"cat of {len(tensors)} tensors")
    dim = dim % len(out_size)
    xs = variables(len(out_size))
    rng = _ranges(out_size)
    expr = None
    offs = []
    o = 0
    for t in tensors:
        offs.append(o)
        o += t.size[dim]
    for t, off in reversed(list(zip(tensors, offs))):
        n = t.size[dim]
        if n == 0:
            continue
        idx = list(xs)
        idx[dim] = clamp(xs[dim] - off, 0, n - 1) if len(tensors) > 1 else xs[dim]
        part = cast(L.load(t, idx, rng), val.dtype)
        if expr is None:
            expr = part
        else:
            cond = Op("lt", (IndexValue(xs[dim], torch.int64), Const(off + n, torch.int64)), torch.bool)
            expr = Op("where", (cond, part, expr), val.dtype)
    return Lazy(out_size, val.dtype, expr)


@register(aten.constant_pad_nd.default)
def _pad(L, node, a, pad, value=0):
    if any(p < 0 for p in pad):
        raise Unsupported("negative padding")
    val = meta_of(node)
    return Lazy(tuple(val.shape), val.dtype, padded(L, a, tuple(val.shape), pad, value, val.dtype))


def padded(L, a: Value, out_size: tuple, pad, value, dtype) -> ir.Expr:
    """``a`` padded with ``value`` to ``out_size`` (``pad``: constant_pad_nd's (before, after) pairs from the
    last dim on, none negative), as clamped loads under a condition."""
    xs = variables(len(out_size))
    rng = _ranges(out_size)
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
    return Op("where", (cond, inner, Const(_py_value(value, dtype), dtype)), dtype)


# ---- reductions


def _acc(dtype):
    if dtype in HALF:
        return torch.float32
    return dtype


def _dims(a, dim):
    nd = len(a.size)
    if dim is None or (isinstance(dim, (list, tuple)) and len(dim) == 0):
        return tuple(range(nd))
    if isinstance(dim, int):
        dim = [dim]
    return tuple(sorted({d % max(nd, 1) for d in dim}))


def _finish(L, node, r: Value, a, rdims, keepdim, out_dtype) -> Value:
    if r.dtype != out_dtype:
        r = Lazy(tuple(r.size), out_dtype, cast(L.load_broadcast(r, tuple(r.size)), out_dtype))
    if keepdim and len(a.size):
        r = L.keepdim(r, a.size, rdims)
    return r


def _plain_reduction(kind: str):
    """A reduction that accumulates in its accumulator dtype and casts to the output's (sum, prod)."""
    def lower(L, node, a, dim=None, keepdim=False, *, dtype=None):
        val = meta_of(node)
        rdims = _dims(a, dim)
        r = L.reduction(a, rdims, kind, _acc(val.dtype))
        return _finish(L, node, r, a, rdims, keepdim, val.dtype)
    lower.__name__ = f"_{kind}"
    return lower


register(aten.sum.dim_IntList, aten.sum.default)(_plain_reduction("sum"))
register(aten.prod.dim_int, aten.prod.default)(_plain_reduction("prod"))


@register(aten.mean.dim, aten.mean.default)
def _mean(L, node, a, dim=None, keepdim=False, *, dtype=None):
    val = meta_of(node)
    rdims = _dims(a, dim)
    n = math.prod(a.size[d] for d in rdims) if a.size else 1
    acc = _acc(val.dtype)
    r = L.reduction(a, rdims, "sum", acc)
    m = Lazy(tuple(r.size), acc, Op("truediv", (L.load_broadcast(r, tuple(r.size)), Const(float(n), acc)), acc))
    return _finish(L, node, m, a, rdims, keepdim, val.dtype)


def _minmax(kind):
    def fn(L, node, a, dim=None, keepdim=False):
        val = meta_of(node)
        rdims = _dims(a, dim)
        if any(a.size[d] == 0 for d in rdims):
            raise Unsupported("empty reduction")
        r = L.reduction(a, rdims, kind, a.dtype)
        return _finish(L, node, r, a, rdims, keepdim, val.dtype)

    return fn


register(aten.amax.default)(_minmax("max"))
register(aten.amin.default)(_minmax("min"))
register(aten.max.default)(lambda L, node, a: _minmax("max")(L, node, a))
register(aten.min.default)(lambda L, node, a: _minmax("min")(L, node, a))


def _arg(kind):
    def fn(L, node, a, dim=None, keepdim=False):
        rdims = _dims(a, dim)
        if any(a.size[d] == 0 for d in rdims):
            raise Unsupported("empty reduction")
        r = L.reduction(a, rdims, kind, a.dtype)
        return _finish(L, node, r, a, rdims, keepdim and dim is not None, torch.int64)

    return fn


register(aten.argmax.default)(_arg("argmax"))
register(aten.argmin.default)(_arg("argmin"))


def _max_dim(kind):
    def fn(L, node, a, dim, keepdim=False):
        rdims = _dims(a, dim)
        if any(a.size[d] == 0 for d in rdims):
            raise Unsupported("empty reduction")
        v = L.reduction(a, rdims, kind, a.dtype)
        i = L.reduction(a, rdims, "arg" + kind, a.dtype)
        return [_finish(L, node, v, a, rdims, keepdim, a.dtype), _finish(L, node, i, a, rdims, keepdim, torch.int64)]

    return fn


register(aten.max.dim)(_max_dim("max"))
register(aten.min.dim)(_max_dim("min"))


@register(aten.any.dim, aten.any.dims, aten.any.default)
def _any(L, node, a, dim=None, keepdim=False):
    rdims = _dims(a, dim)
    r = L.reduction(a, rdims, "any", torch.bool, body_dtype=torch.bool)
    return _finish(L, node, r, a, rdims, keepdim, torch.bool)


@register(aten.all.dim, aten.all.dims, aten.all.default)
def _all(L, node, a, dim=None, keepdim=False):
    rdims = _dims(a, dim)
    r = L.reduction(a, rdims, "all", torch.bool, body_dtype=torch.bool)
    return _finish(L, node, r, a, rdims, keepdim, torch.bool)


def _var_mean_impl(L, node, a, dim, correction, keepdim, want_mean):
    val = meta_of(node)
    out_dtype = (val[0] if isinstance(val, (list, tuple)) else val).dtype
    rdims = _dims(a, dim)
    n = math.prod(a.size[d] for d in rdims) if a.size else 1
    acc = _acc(out_dtype)
    s = L.reduction(a, rdims, "sum", acc)
    mean = Lazy(tuple(s.size), acc, Op("truediv", (L.load_broadcast(s, tuple(s.size)), Const(float(n), acc)), acc))
    mean_b = L.keepdim(mean, a.size, rdims) if a.size else mean
    size = tuple(a.size)
    xs = L.load_broadcast(a, size)
    d = Op("sub", (cast(xs, acc), L.load_broadcast(mean_b, size)), acc)
    sq = Lazy(size, acc, Op("mul", (d, d), acc))
    ss = L.reduction(sq, rdims, "sum", acc)
    corr = 1 if correction is None else correction
    denom = max(n - corr, 0)
    var = Lazy(tuple(ss.size), acc,
               Op("truediv", (L.load_broadcast(ss, tuple(ss.size)), Const(float(denom), acc)), acc))
    var = _finish(L, node, var, a, rdims, keepdim, out_dtype)
    if not want_mean:
        return var
    mean = L.maybe_realize(_finish(L, node, mean, a, rdims, keepdim, out_dtype), None)
    return [var, mean]


@register(aten.var_mean.correction)
def _var_mean(L, node, a, dim=None, *, correction=None, keepdim=False):
    return _var_mean_impl(L, node, a, dim, correction, keepdim, True)


@register(aten.var.correction)
def _var(L, node, a, dim=None, *, correction=None, keepdim=False):
    return _var_mean_impl(L, node, a, dim, correction, keepdim, False)


# Ops that always stay ATen calls (documented; they fall through to `extern` because they have no lowering):
ALWAYS_EXTERN = (
    "mm", "addmm", "bmm", "baddbmm", "convolution", "_scaled_dot_product_flash_attention_for_cpu",
    "_scaled_dot_product_efficient_attention", "embedding", "embedding_dense_backward", "index", "index_put",
    "scatter", "scatter_add", "gather", "sort", "topk", "rand", "randn", "native_dropout", "bernoulli",
    "copy_", "empty",
)

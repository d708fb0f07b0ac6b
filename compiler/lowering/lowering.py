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

import operator

import sympy
import torch
import torch.fx
import torch.utils._pytree

from .. import compat, ir
from ..ir import Const, Layout, Load, TensorRef
from ..ir.ops import MAX_INLINE_COST, REALIZE_COST
from ..ir.symbolic import contiguous_strides, simplify_index, unravel, variables
from .registry import LOWERINGS
from .values import (
    ALIGNMENT,
    SUPPORTED_DTYPES,
    Lazy,
    LoweringError,
    Realized,
    Unsupported,
    Value,
    aligned_positions,
    broadcast_dims,
    cast,
    eager_strides,
    graph_device,
    is_aligned,
    log_once,
    meta_of,
    padded,
    py_value,
    ranges,
    views_of_outputs,
)
from .views import Strided, ViewError

__all__ = ["Lowering", "LoweringError", "graph_device", "log_once"]


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
        return self.load(v, idx, ranges(out_size))

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
        copy = Lazy(tuple(lay.size), lay.dtype, self.load(v, variables(len(lay.size)), ranges(lay.size)), st)
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
        value = Lazy(core, v.dtype, self.load(v, idx, ranges(core)))
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
                loaded.append(Const(py_value(a, cdt), cdt))
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
            v = Lazy(tuple(lay.size), lay.dtype, self.load(v, variables(len(lay.size)), ranges(lay.size)))
        r = fn(Strided(v.size, contiguous_strides(v.size), 0))
        size, stride, off = tuple(r.shape), tuple(r.stride()), int(r.storage_offset())
        xs = variables(len(size))
        flat = sympy.Integer(off) + sum((st * x for st, x, s in zip(stride, xs, size) if s != 1), sympy.Integer(0))
        rng = ranges(size)
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
        expr = self.load(v, variables(len(size)), ranges(size))
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

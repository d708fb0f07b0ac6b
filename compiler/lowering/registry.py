"""The op registry: one lowering per ATen op (``@register(aten.op...)``), each a function
``(L, node, *args, **kwargs) -> Value | None`` that builds the op's value with :class:`~.lowering.Lowering`'s
helpers (``L.pointwise``, ``L.view``, ``L.reduction``...) or raises :class:`~.values.Unsupported` (the op then
stays an ATen call). :data:`LOWERINGS` maps an op overload (or its packet) to its lowering."""

from __future__ import annotations

import logging
import math

import sympy
import torch
import torch.fx
import torch.utils._pytree

from ..ir import Const, IndexValue, Op
from ..ir.symbolic import FloorDiv, IMod, clamp, simplify_index, variables
from .values import (
    HALF,
    Lazy,
    LoweringError,
    Realized,
    Unsupported,
    Value,
    cast,
    meta_of,
    padded,
    py_value,
    ranges,
)

log = logging.getLogger("mend.compiler")
aten = torch.ops.aten
prims = torch.ops.prims

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
                y = Op("mul", (y, Const(py_value(alpha, y.dtype), y.dtype)), y.dtype)
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
    return L.pointwise(node, lambda x: Op("maximum", (x, Const(py_value(0, x.dtype), x.dtype)), x.dtype), [a])


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
        return Const(py_value(v, dt), dt)

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
    return Lazy(tuple(val.shape), val.dtype, Const(py_value(value, val.dtype), val.dtype))


@register(aten.full_like.default)
def _full_like(L, node, a, value, *, dtype=None, layout=None, device=None, pin_memory=None, memory_format=None):
    val = meta_of(node)
    return Lazy(tuple(val.shape), val.dtype, Const(py_value(value, val.dtype), val.dtype))


@register(aten.scalar_tensor.default)
def _scalar_tensor(L, node, value, *, dtype=None, layout=None, device=None, pin_memory=None):
    val = meta_of(node)
    return Lazy((), val.dtype, Const(py_value(value, val.dtype), val.dtype))


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
    rng = ranges(size)
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
    return Lazy(size, a.dtype, L.load(a, idx, ranges(size)))


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
    rng = ranges(out_size)
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

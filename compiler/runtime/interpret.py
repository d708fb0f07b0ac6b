"""Reference interpreter of IR kernels with torch ops (no code generation).

It evaluates a :class:`ir.Kernel` over its whole iteration grid with vectorized torch operations. It is the
kernel-level fallback (a kernel that fails to build, or one disabled with ``MEND_DISABLE_KERNELS``) and an
oracle for tests of the code generators. It is slow (index tensors for every load) but exact in semantics.
"""

from __future__ import annotations

import torch

from .. import ir
from ..ir.contraction import of_stage
from ..ir.symbolic import FloorDiv, IMax, IMin, IMod, variables

_HALF = (torch.float16, torch.bfloat16)


def _cdt(dt):
    return torch.float32 if dt in _HALF else dt


def _eval_index(e, grid: dict, shape, device):
    if e.is_Integer:
        return torch.full(shape, int(e), dtype=torch.int64, device=device)
    if e.is_Symbol:
        return grid[e].expand(shape)
    args = [_eval_index(a, grid, shape, device) for a in e.args]
    if e.is_Add:
        out = args[0]
        for a in args[1:]:
            out = out + a
        return out
    if e.is_Mul:
        out = args[0]
        for a in args[1:]:
            out = out * a
        return out
    if isinstance(e, FloorDiv):
        return torch.div(args[0], args[1], rounding_mode="floor")
    if isinstance(e, IMod):
        return torch.remainder(args[0], args[1])
    if isinstance(e, IMin):
        out = args[0]
        for a in args[1:]:
            out = torch.minimum(out, a)
        return out
    if isinstance(e, IMax):
        out = args[0]
        for a in args[1:]:
            out = torch.maximum(out, a)
        return out
    raise NotImplementedError(f"index {e}")


def _unary(name):
    return {
        "neg": torch.neg, "abs": torch.abs, "exp": torch.exp, "exp2": torch.exp2, "expm1": torch.expm1,
        "log": torch.log, "log2": torch.log2, "log10": torch.log10, "log1p": torch.log1p, "sqrt": torch.sqrt,
        "rsqrt": torch.rsqrt, "reciprocal": torch.reciprocal, "sin": torch.sin, "cos": torch.cos,
        "tan": torch.tan, "asin": torch.asin, "acos": torch.acos, "atan": torch.atan, "sinh": torch.sinh,
        "cosh": torch.cosh, "tanh": torch.tanh, "asinh": torch.asinh, "acosh": torch.acosh,
        "atanh": torch.atanh, "sigmoid": torch.sigmoid, "erf": torch.erf, "erfc": torch.erfc,
        "floor": torch.floor, "ceil": torch.ceil, "round": torch.round, "trunc": torch.trunc,
        "sign": torch.sign, "isnan": torch.isnan, "isinf": torch.isinf, "logical_not": torch.logical_not,
        "bitwise_not": torch.bitwise_not,
    }[name]


_BINARY = {
    "add": torch.add, "sub": torch.sub, "mul": torch.mul, "maximum": torch.maximum, "minimum": torch.minimum,
    "pow": torch.pow, "atan2": torch.atan2, "fmod": torch.fmod, "remainder": torch.remainder,
    "eq": torch.eq, "ne": torch.ne, "lt": torch.lt, "le": torch.le, "gt": torch.gt, "ge": torch.ge,
    "logical_and": torch.logical_and, "logical_or": torch.logical_or, "logical_xor": torch.logical_xor,
    "bitwise_and": torch.bitwise_and, "bitwise_or": torch.bitwise_or, "bitwise_xor": torch.bitwise_xor,
}


def _flat(t: torch.Tensor) -> torch.Tensor:
    n = t.untyped_storage().nbytes() // t.element_size() - t.storage_offset()
    return t.as_strided((max(n, 0),), (1,), t.storage_offset())


def _product(mm, flat: dict) -> torch.Tensor:
    """The contraction ``mm`` in float32, shaped like a reduction kept over ``k``: ``[*batch, m, n, 1]``."""
    nb = len(mm.batch)

    def view(op, rows: int, cols: int, shape):
        t = flat[op.buf]
        st = op.strides[:nb] + (op.strides[rows], op.strides[cols])
        return t.as_strided((*mm.batch, *shape), st, t.storage_offset() + op.offset).float()

    a = view(mm.a, nb, nb + 2, (mm.m, mm.k))
    b = view(mm.b, nb + 2, nb + 1, (mm.k, mm.n))
    return torch.matmul(a, b).unsqueeze(-1)


def run_kernel(kernel: ir.Kernel, *tensors: torch.Tensor) -> None:
    """Execute ``kernel``; ``tensors`` are its inputs then outputs (base tensors of the buffers)."""
    names = list(kernel.inputs) + list(kernel.outputs)
    flat = {n: _flat(t) for n, t in zip(names, tensors)}
    # the outputs are the wrapper's buffers, on the graph's device (an input may be a CPU scalar)
    device = tensors[-1].device if tensors else torch.device("cpu")
    size = tuple(kernel.size)
    xs = variables(len(size))
    grid = {}
    for i, (v, s) in enumerate(zip(xs, size)):
        shape = [1] * len(size)
        shape[i] = s
        grid[v] = torch.arange(s, device=device).view(shape)
    rdims = tuple(kernel.rdims)
    locals_: dict = {}

    def ev(expr):
        memo = {}
        for e in ir.walk(expr):
            if isinstance(e, ir.Const):
                memo[e] = torch.tensor(e.value, dtype=_cdt(e.dtype), device=device)
            elif isinstance(e, ir.Local):
                memo[e] = locals_[e.name]
            elif isinstance(e, ir.Load):
                idx = _eval_index(e.index, grid, size, device)
                memo[e] = flat[e.buf][idx].to(_cdt(e.dtype))
            elif isinstance(e, ir.IndexValue):
                memo[e] = _eval_index(e.index, grid, size, device).to(_cdt(e.dtype))
            else:
                a = [memo[x] for x in e.args]
                dt = _cdt(e.dtype)
                if e.op == "cast":
                    r = a[0].to(e.dtype).to(dt)
                elif e.op == "where":
                    r = torch.where(a[0].bool(), a[1], a[2])
                elif e.op == "truediv":
                    r = a[0] / a[1]
                elif e.op == "floordiv":
                    r = torch.div(a[0], a[1], rounding_mode="floor")
                elif e.op == "truncdiv":
                    r = torch.div(a[0], a[1], rounding_mode="trunc")
                elif e.op == "fma":
                    r = a[0] * a[1] + a[2]
                elif e.op in _BINARY:
                    r = _BINARY[e.op](a[0], a[1])
                else:
                    r = _unary(e.op)(a[0])
                memo[e] = r.to(dt) if r.dtype != dt else r
        return memo[expr]

    for st in kernel.stages:
        mm = of_stage(kernel, st)
        if mm is not None:  # a matrix product: torch.matmul, not a [.., m, n, k] product tensor
            locals_[st.name] = _product(mm, flat).to(_cdt(st.dtype))
            if st.store is not None:
                raise NotImplementedError("a stored matrix product")  # the scheduler never stores one
            continue
        v = ev(st.expr)
        v = torch.broadcast_to(v, size) if st.kind != "outer" else v
        if st.kind == "reduction":
            dims = list(rdims)
            kind = st.reduction
            if kind == "sum":
                r = v.sum(dim=dims, keepdim=True) if dims else v
            elif kind == "prod":
                r = v
                for d in dims:
                    r = r.prod(dim=d, keepdim=True)
            elif kind in ("max", "min"):
                r = v.amax(dim=dims, keepdim=True) if kind == "max" else v.amin(dim=dims, keepdim=True)
            elif kind in ("any", "all"):
                r = v.bool()
                for d in dims:
                    r = r.any(dim=d, keepdim=True) if kind == "any" else r.all(dim=d, keepdim=True)
            else:  # argmax / argmin over the flattened rdims
                outer = [i for i in range(len(size)) if i not in rdims]
                p = v.permute(outer + list(rdims)).reshape([size[i] for i in outer] + [-1])
                r = p.argmax(-1) if kind == "argmax" else p.argmin(-1)
                r = r.reshape([size[i] if i not in rdims else 1 for i in range(len(size))])
            v = r.to(_cdt(st.dtype))
        elif st.kind == "outer":
            v = torch.broadcast_to(v, size)
            v = v[tuple(slice(0, 1) if i in rdims else slice(None) for i in range(len(size)))]
        locals_[st.name] = v
        if st.store is not None:
            sl = tuple(slice(0, 1) if (i in rdims and st.kind != "pointwise") else slice(None)
                       for i in range(len(size)))
            g2 = {x: grid[x][sl] for x in xs}
            shape = tuple(v.shape)
            idx = _eval_index(st.store_index, g2, shape, device)
            flat[st.name][idx.reshape(-1)] = v.reshape(-1).to(st.dtype)

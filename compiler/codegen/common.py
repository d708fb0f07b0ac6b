"""Helpers shared by code generators: loop-dimension coalescing for pointwise kernels."""

from __future__ import annotations

import sympy

from .. import ir
from ..ir.symbolic import FloorDiv, IMax, IMin, IMod, variables


def _index_exprs(kernel: ir.Kernel) -> list[sympy.Expr]:
    out = []
    for st in kernel.stages:
        for e in ir.walk(st.expr):
            if isinstance(e, (ir.Load, ir.IndexValue)):
                out.append(e.index)
        if st.store is not None:
            out.append(st.store_index)
    return out


def _linear_coeff(e: sympy.Expr, v) -> int | None:
    """Integer coefficient of ``v`` in ``e`` if ``e`` is linear in ``v`` (v not inside a function)."""
    for f in e.atoms(FloorDiv, IMod, IMin, IMax):
        if v in f.free_symbols:
            return None
    d = sympy.expand(e).coeff(v)
    if d.free_symbols or not d.is_Integer:
        return None
    return int(d)


def _memory_order(kernel: ir.Kernel, dims: list[int], xs) -> list[int]:
    """``dims`` in the order the kernel's first store walks memory, outermost first (a transposed or
    channels-last output is written in its own order: contiguous stores, the loads following where the
    inputs share that layout). Ties and non-linear stores keep the logical order."""
    st = next((s for s in kernel.stages if s.store is not None), None)
    if st is None:
        return list(dims)
    coef = {d: _linear_coeff(st.store_index, xs[d]) for d in dims}
    if any(c is None for c in coef.values()):
        return list(dims)
    return sorted(dims, key=lambda d: -abs(coef[d]))


def coalesce(kernel: ir.Kernel) -> tuple[tuple[int, ...], dict]:
    """For a pointwise kernel (no rdims), merge adjacent dims that every index walks contiguously.

    Returns (new sizes, mapping old var -> expr over the new vars ``x0..``). With the mapping applied to
    every index expression, the kernel iterates the new sizes instead; e.g. a contiguous [B, T, C] kernel
    becomes one flat loop of B*T*C. The dims are first ordered the way the first store walks memory, so a
    transposed or channels-last output is also one flat loop of contiguous stores.
    """
    assert not kernel.rdims
    size = list(kernel.size)
    xs = list(variables(len(size)))
    exprs = _index_exprs(kernel)
    # dims of size 1 vanish
    mapping = {}
    keep = []
    for i, s in enumerate(size):
        if s == 1:
            mapping[xs[i]] = sympy.Integer(0)
        else:
            keep.append(i)
    exprs = [e.xreplace(mapping) for e in exprs]
    groups = [[i] for i in _memory_order(kernel, keep, xs)]
    j = len(groups) - 1
    while j > 0:
        a = groups[j - 1][-1]  # groups left of j are still single dims
        r = groups[j][-1]  # the right group's variable stands for the whole group
        n_right = 1
        for d in groups[j]:
            n_right *= size[d]
        ok = True
        for e in exprs:
            ca, cr = _linear_coeff(e, xs[a]), _linear_coeff(e, xs[r])
            if ca is None or cr is None or ca != cr * n_right:
                ok = False
                break
        if ok:
            # ca*x_a + cr*x_r == cr*(x_a*n_right + x_r): one variable over the merged extent
            groups[j - 1] = groups[j - 1] + groups[j]
            del groups[j]
            exprs = [e.xreplace({xs[a]: 0}) for e in exprs]
        j -= 1
    new_sizes = []
    new_vars = variables(len(groups))
    for gi, grp in enumerate(groups):
        n = 1
        for d in grp:
            n *= size[d]
        new_sizes.append(n)
        for d in grp[:-1]:
            mapping[xs[d]] = sympy.Integer(0)
        mapping[xs[grp[-1]]] = new_vars[gi]
    return tuple(new_sizes), mapping

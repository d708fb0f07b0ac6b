"""Matrix products in the IR: a ``sum`` reduction that is a (batched) contraction.

A reduction over the last dim ``k`` of an iteration space ``(*batch, m, n, k)`` whose expression is the
product of two loads, one that does not move with ``n`` (the left operand, ``a[*batch, m, k]``) and one
that does not move with ``m`` (the right operand, ``b[*batch, k, n]``), each a strided view (its index is
linear in the variables) of a floating-point buffer, maybe cast to the accumulation dtype, is a matrix
product. Nothing in the IR marks it: :func:`contraction` recognizes it, so every stage that needs to know
(fusion: a product is its kernel's only reduction; code generators: a matrix-multiply template; the
reference interpreter: ``torch.matmul``) asks the same question. ``schedule/matmul.py`` builds them from
ATen's ``mm``/``addmm``/``bmm`` on a GPU, so that pointwise epilogues fuse into the product.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

import sympy
import torch

from . import Load, Op
from .symbolic import variables

FLOAT = (torch.float16, torch.bfloat16, torch.float32)


@dataclass(frozen=True)
class Operand:
    """A strided view of buffer ``buf``: element offset and one stride per variable of the space."""

    buf: str
    dtype: torch.dtype
    offset: int
    strides: tuple[int, ...]


@dataclass(frozen=True)
class Contraction:
    batch: tuple[int, ...]
    m: int
    n: int
    k: int
    a: Operand  # strides over (*batch, m, n, k); its n stride is 0
    b: Operand  # its m stride is 0
    acc_dtype: torch.dtype


def _operand(e, nvars: int) -> Operand | None:
    if isinstance(e, Op) and e.op == "cast" and len(e.args) == 1:
        e = e.args[0]
    if not isinstance(e, Load) or e.dtype not in FLOAT:
        return None
    xs = variables(nvars)
    zero = {x: sympy.Integer(0) for x in xs}
    index = sympy.sympify(e.index)
    offset = sympy.sympify(index.xreplace(zero))
    if not offset.is_Integer:
        return None
    strides = []
    for x in xs:
        s = sympy.sympify(index.xreplace({**zero, x: sympy.Integer(1)})) - offset
        if not s.is_Integer:
            return None
        strides.append(int(s))
    linear = sympy.Integer(offset) + sum((s * x for s, x in zip(strides, xs)), sympy.Integer(0))
    if sympy.expand(index - linear) != 0:  # floor divisions, clamps: not one strided view
        return None
    return Operand(e.buf, e.dtype, int(offset), tuple(strides))


@functools.lru_cache(maxsize=4096)
def contraction(kind: str, size, rdims, expr) -> Contraction | None:
    """The matrix product a reduction ``kind`` over ``rdims`` of ``expr`` in the space ``size`` computes,
    or None when it is not one."""
    size = tuple(size)
    nv = len(size)
    if kind != "sum" or nv < 3 or tuple(rdims) != (nv - 1,):
        return None
    if not (isinstance(expr, Op) and expr.op == "mul" and expr.dtype in FLOAT):
        return None
    ops = [_operand(e, nv) for e in expr.args]
    if any(o is None for o in ops):
        return None
    im, in_, ik = nv - 3, nv - 2, nv - 1
    for a, b in (ops, ops[::-1]):
        if a.strides[in_] == 0 and b.strides[im] == 0 and a.dtype == b.dtype and (
                size[ik] == 1 or (a.strides[ik] != 0 and b.strides[ik] != 0)):
            return Contraction(size[:im], size[im], size[in_], size[ik], a, b, expr.dtype)
    return None


def of_stage(k, st) -> Contraction | None:
    """The contraction a kernel's reduction stage computes (its loads read other buffers, not stages)."""
    if st.kind != "reduction":
        return None
    return contraction(st.reduction, tuple(k.size), tuple(k.rdims), st.expr)

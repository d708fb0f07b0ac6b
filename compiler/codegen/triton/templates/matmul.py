"""Triton template ``matmul``: a matrix product (``ir/contraction.py``) and its epilogue.

One program per ``BLOCK_M x BLOCK_N`` tile of the product (grouped by ``GROUP_M`` rows of tiles so that
neighbouring programs share operand tiles in L2), a second grid axis over the batch. The product
accumulates in float32 over ``BLOCK_K`` steps of ``tl.dot``; then the kernel's ``outer`` stages (the value
ATen returns, bias, activation, residual, casts) run on the tile in registers, the product's value being
the accumulator, and store where they leave the kernel.

Variables: the tile's rows ``rm`` (``[BLOCK_M, 1]``), columns ``rn`` (``[1, BLOCK_N]``) and batch index
``rb``; loads and stores of the epilogue are masked by ``mmask``/``nmask``. Operand rows and columns
wrap modulo ``M``/``N`` (rows past the end are computed and never stored), so the loop loads without
masks unless ``K`` is not a multiple of ``BLOCK_K``.

A second function holds the epilogue alone (:func:`epilogue_kernel`, the ``pointwise`` template): the
launcher times the fused kernel against cuBLAS's product followed by that epilogue and keeps the faster.
"""

from __future__ import annotations

import sympy
import torch

from .... import ir
from ....ir.symbolic import FloorDiv, IMod, contiguous_strides, variables
from ..emit import TritonEmitter

RM = sympy.Symbol("rm", integer=True, nonnegative=True)
RN = sympy.Symbol("rn", integer=True, nonnegative=True)
RB = sympy.Symbol("rb", integer=True, nonnegative=True)
GROUP_M = 8


def symbols(k: ir.Kernel, mm):
    """(kernel variable -> tile expression, ranges of the tile symbols, their masks)."""
    xs = variables(len(k.size))
    nb = len(mm.batch)
    mapping = {xs[nb]: RM, xs[nb + 1]: RN}
    acc = 1
    for d in reversed(range(nb)):
        e = FloorDiv(RB, sympy.Integer(acc)) if acc != 1 else RB
        mapping[xs[d]] = IMod(e, sympy.Integer(mm.batch[d])) if d else e
        acc *= mm.batch[d]
    ranges = {RM: mm.m, RN: mm.n, RB: max(acc, 1)}
    return mapping, ranges, {RM: "mmask", RN: "nmask", RB: None}


def epilogue_kernel(k: ir.Kernel, mm) -> ir.Kernel:
    """The kernel's epilogue alone, over ``(*batch, m, n)``, reading the product from an input buffer
    ``<name>_product`` (in the operands' dtype, as cuBLAS returns it): what runs after a cuBLAS product
    when that is faster than the fused kernel (the launcher times both)."""
    dot = next(st for st in k.stages if st.kind == "reduction")
    size = k.size[:-1]
    tmp = f"{k.name}_product"
    index = sum((st * x for st, x, n in zip(contiguous_strides(size), variables(len(size)), size) if n != 1),
                sympy.Integer(0))
    value = ir.Op("cast", (ir.Load(tmp, index, mm.a.dtype),), dot.dtype)
    stages = []
    for st in k.stages:
        if st is dot:
            continue
        expr = ir.map_expr(st.expr, lambda e: value if isinstance(e, ir.Local) and e.name == dot.name else None)
        stages.append(ir.Stage(st.name, "pointwise", expr, st.dtype, st.store, None, st.local_users,
                               st.store_index))
    read = {ld.buf for st in stages for ld in ir.loads(st.expr)}
    inputs = (tmp,) + tuple(b for b in k.inputs if b in read)
    dtypes = ((tmp, mm.a.dtype),) + tuple((b, dt) for b, dt in k.dtypes if b in read or b in k.outputs)
    return ir.Kernel(f"{k.name}_epilogue", size, (), tuple(stages), inputs, tuple(k.outputs), dtypes)


def _offset(op, batch: str | None, rows: str, cols: str, row_dim: int, col_dim: int) -> str:
    """Pointer offsets of an operand tile: its offset, the batch term, ``rows`` and ``cols`` strides."""
    terms = [str(op.offset)] if op.offset else []
    if batch:
        terms.append(batch)
    for v, d in ((rows, row_dim), (cols, col_dim)):
        st = op.strides[d]
        if st:
            terms.append(f"{v} * {st}" if st != 1 else v)
    return " + ".join(terms) or "0"


def _batch_offset(op, nb: int, batch) -> str:
    terms = []
    acc = 1
    for d in reversed(range(nb)):
        if op.strides[d]:
            idx = f"(rb // {acc})" if acc != 1 else "rb"
            if d:
                idx = f"({idx} % {batch[d]})"
            terms.append(f"{idx} * {op.strides[d]}")
        acc *= batch[d]
    return " + ".join(terms) or "0"


def render(src) -> str:
    k, p = src.k, src.plan
    mm = p.mm
    nb = len(mm.batch)
    dot_stage = next(st for st in k.stages if st.kind == "reduction")
    it = p.index_dtype
    a_ptr, b_ptr = src.ptr[mm.a.buf], src.ptr[mm.b.buf]
    even_k = mm.k % max(c.RBLOCK for c in p.configs) == 0
    lines = src.head(0, ["BLOCK_M", "BLOCK_N", "BLOCK_K"], rows=False)
    lines += [
        f"    M = {mm.m}",
        f"    N = {mm.n}",
        f"    K = {mm.k}",
        f"    pid = {src.program_id(0)}",
        "    grid_m = (M + BLOCK_M - 1) // BLOCK_M",
        "    grid_n = (N + BLOCK_N - 1) // BLOCK_N",
        f"    width = {GROUP_M} * grid_n",
        f"    first_m = (pid // width) * {GROUP_M}",
        f"    group_m = tl.minimum(grid_m - first_m, {GROUP_M})",
        "    pid_m = first_m + (pid % width) % group_m",
        "    pid_n = (pid % width) // group_m",
        f"    rm1 = pid_m * BLOCK_M + {src.arange('BLOCK_M')}",
        f"    rn1 = pid_n * BLOCK_N + {src.arange('BLOCK_N')}",
        "    rm = rm1[:, None]",
        "    rn = rn1[None, :]",
        "    mmask = rm < M",
        "    nmask = rn < N",
        _wrapped("ram", "rm1", "M", "BLOCK_M", mm.m, p, mm.a.strides[nb] == 1),
        _wrapped("rbn", "rn1", "N", "BLOCK_N", mm.n, p, mm.b.strides[nb + 1] == 1),
        f"    rk = {src.arange('BLOCK_K')}",
    ]
    if nb:
        lines += [f"    rb = {src.program_id(1)}",
                  f"    boff_a = {_batch_offset(mm.a, nb, mm.batch)}",
                  f"    boff_b = {_batch_offset(mm.b, nb, mm.batch)}"]
    ka, kb = mm.a.strides[nb + 2], mm.b.strides[nb + 2]
    lines += [
        f"    a_ptrs = {a_ptr} + {_offset(mm.a, nb and 'boff_a', 'ram[:, None]', 'rk[None, :]', nb, nb + 2)}",
        f"    b_ptrs = {b_ptr} + {_offset(mm.b, nb and 'boff_b', 'rk[:, None]', 'rbn[None, :]', nb + 2, nb + 1)}",
        "    acc = tl.zeros([BLOCK_M, BLOCK_N], dtype=tl.float32)",
        "    for k0 in range(0, K, BLOCK_K):",
    ]
    if even_k:
        lines += ["        a = tl.load(a_ptrs)", "        b = tl.load(b_ptrs)"]
    else:
        lines += ["        a = tl.load(a_ptrs, mask=rk[None, :] < K - k0, other=0.0)",
                  "        b = tl.load(b_ptrs, mask=rk[:, None] < K - k0, other=0.0)"]
    if not src.native_dot and mm.a.dtype != torch.float32:
        lines += ["        a = a.to(tl.float32)", "        b = b.to(tl.float32)"]  # the interpreter's bf16 dot
    precision = ', input_precision="ieee"' if mm.a.dtype == torch.float32 else ""
    lines += [
        f"        acc = tl.dot(a, b, acc{precision})",
        f"        a_ptrs += BLOCK_K * {ka}",
        f"        b_ptrs += BLOCK_K * {kb}",
    ]
    src.row_values[dot_stage.name] = "acc"
    src.need_zero = False
    em = TritonEmitter(src, "    ")
    for st in k.stages:
        if st.kind == "outer":
            src.outer(em, st)
        elif st.store is not None:  # the product itself leaves the kernel (float32)
            src.store(em, st, "acc", row=True)
    zero = [f"    mnzero = tl.zeros([BLOCK_M, BLOCK_N], {it})"] if src.need_zero else []
    return "\n".join(lines + zero + em.lines) + "\n"


def _wrapped(name: str, r: str, size: str, block: str, n: int, p, unit: bool) -> str:
    """Operand rows (or columns) of the tile, modulo the size: every load stays in bounds without a mask.
    When the dim is the operand's contiguous one and every block is full, tell the compiler so (vector
    loads)."""
    full = all(n % (c.XBLOCK if block == "BLOCK_M" else c.YBLOCK) == 0 for c in p.configs)
    if unit and full:
        return f"    {name} = tl.max_contiguous(tl.multiple_of({r} % {size}, {block}), {block})"
    return f"    {name} = {r} % {size}"


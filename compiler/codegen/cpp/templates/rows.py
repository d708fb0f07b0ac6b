"""C++ template ``rows``: a kernel with reduced dims, one row (a point of the outer dims) at a time.

A parallel loop over rows; inside a row each stage is one pass over the row: reductions are ``simd`` loops
with ``reduction`` clauses (NaN-propagating max/min through a flag), pointwise stages write row-local
scratch when a later stage reads them, ``outer`` stages run once per row. A row-invariant float divisor is
inverted once per row. A kernel without outer dims spreads its single row over the threads.
"""

from __future__ import annotations

import math

from .... import ir
from ....ir.symbolic import print_c
from ..emit import CppEmitter, compute_type, reduction_init, store
from . import PARALLEL_THRESHOLD


def render(k: ir.Kernel, ptrs: dict) -> list[str]:
    outer = k.outer_dims
    rdims = k.rdims
    rsizes = [k.size[d] for d in rdims]
    rnumel = math.prod(rsizes)
    rstrides = []
    acc = 1
    for s in reversed(rsizes):
        rstrides.append(acc)
        acc *= s
    rstrides = list(reversed(rstrides))
    ridx = " + ".join(f"x{d}*{st}L" for d, st in zip(rdims, rstrides)) or "0"
    scratch = {st.name: f"s_{st.name}" for st in k.stages if st.kind == "pointwise" and st.local_users}
    scalars = {st.name: f"v_{st.name}" for st in k.stages if st.kind != "pointwise"}

    def local_ref(e):
        if e.name in scalars:
            return scalars[e.name]
        return f"{scratch[e.name]}[ridx]"

    recip = {st.name: f"r_{st.name}" for st in k.stages
             if st.kind != "pointwise" and compute_type(st.dtype) == "float" and st.reduction not in ("argmax", "argmin")}
    row_lines = []
    one_row_parallel = not outer and k.numel >= PARALLEL_THRESHOLD
    for si, st in enumerate(k.stages):
        b = CppEmitter(ptrs, local_ref, prefix=f"t{si}_", recip=recip if st.kind == "pointwise" else None)
        if st.kind == "outer":
            v = b.emit(st.expr)
            row_lines += b.lines
            row_lines.append(f"{compute_type(st.dtype)} {scalars[st.name]} = {v};")
            if st.name in recip:
                row_lines.append(f"float {recip[st.name]} = 1.0f / {scalars[st.name]};")
            if st.store is not None:
                row_lines.append(store(ptrs[st.name], print_c(st.store_index), v,
                                        st.dtype))
            continue
        loop = _rloops(k, rdims, parallel=one_row_parallel)
        if st.kind == "reduction":
            lines, pragma = _reduction(st, b, scalars[st.name])
            row_lines += lines[:-1]
            row_lines += [ln if "#pragma" not in ln else ln + pragma for ln in loop[0]
                          if pragma is not None or "#pragma" not in ln]
            row_lines += ["  int64_t ridx = " + ridx + ";"] + ["  " + ln for ln in b.lines + lines[-1]]
            row_lines += loop[1]
            row_lines += _reduction_finish(st, scalars[st.name])
            if st.reduction in ("argmax", "argmin"):
                row_lines.append(f"int64_t {scalars[st.name]}_r = {scalars[st.name]}_i;")
                scalars[st.name] = f"{scalars[st.name]}_r"
            if st.store is not None:
                row_lines.append(store(ptrs[st.name], print_c(st.store_index),
                                        scalars[st.name], st.dtype))
            if st.name in recip:
                row_lines.append(f"float {recip[st.name]} = 1.0f / {scalars[st.name]};")
        else:
            v = b.emit(st.expr)
            inner = list(b.lines)
            if st.name in scratch:
                inner.append(f"{scratch[st.name]}[ridx] = {v};")
            if st.store is not None:
                inner.append(store(ptrs[st.name], print_c(st.store_index), v, st.dtype))
            row_lines += loop[0] + ["  int64_t ridx = " + ridx + ";"] + ["  " + ln for ln in inner] + loop[1]
    numel = k.numel
    par = numel >= PARALLEL_THRESHOLD and outer and math.prod(k.size[d] for d in outer) > 1
    out = []
    alloc = [f"{compute_type(k.stages[[s.name for s in k.stages].index(n)].dtype)}* {s} = "
             f"new {compute_type(k.stages[[s.name for s in k.stages].index(n)].dtype)}[{max(rnumel, 1)}];"
             for n, s in scratch.items()]
    free = [f"delete[] {s};" for s in scratch.values()]
    if par:
        out.append("  #pragma omp parallel")
    out.append("  {")
    out += ["    " + a for a in alloc]
    if outer:
        if par:
            coll = f" collapse({len(outer)})" if len(outer) > 1 else ""
            out.append(f"    #pragma omp for schedule(static){coll}")
        for d in outer:
            out.append(f"    for (int64_t x{d} = 0; x{d} < {k.size[d]}L; ++x{d})")
        out.append("    {")
        out += ["      " + ln for ln in row_lines]
        out.append("    }")
    else:
        out.append("    {")
        out += ["      " + ln for ln in row_lines]
        out.append("    }")
    out += ["    " + f for f in free]
    out.append("  }")
    return out


def _rloops(k: ir.Kernel, rdims, parallel=False):
    """Loops over the reduced dims; ``parallel`` (a kernel without outer dims: one row only) spreads the
    whole nest over threads, with the reduction clause on that one pragma."""
    opens = []
    closes = []
    if parallel:
        coll = f" collapse({len(rdims)})" if len(rdims) > 1 else ""
        opens.append(f"#pragma omp parallel for simd schedule(static){coll}")
    for j, d in enumerate(rdims):
        if j == len(rdims) - 1 and not parallel:
            opens.append("#pragma omp simd")
        opens.append(f"for (int64_t x{d} = 0; x{d} < {k.size[d]}L; ++x{d}) {{")
        closes.append("}")
    return opens, closes


def _reduction(st, b: CppEmitter, acc):
    """(lines: [init..., [loop-body lines]], pragma suffix for the innermost loop)."""
    v = b.emit(st.expr)
    kind = st.reduction
    dt = st.expr.dtype if kind in ("argmax", "argmin") else st.dtype
    ct = compute_type(dt)
    init = [f"{ct} {acc} = {reduction_init(kind, dt)};"]
    fp = dt.is_floating_point
    if kind == "sum":
        return init + [[f"{acc} += {v};"]], f" reduction(+:{acc})"
    if kind == "prod":
        return init + [[f"{acc} *= {v};"]], f" reduction(*:{acc})"
    if kind == "any":
        return init + [[f"{acc} |= {v};"]], f" reduction(|:{acc})"
    if kind == "all":
        return init + [[f"{acc} &= {v};"]], f" reduction(&:{acc})"
    if kind in ("max", "min"):
        op = ">" if kind == "max" else "<"
        body = [f"{acc} = ({v} {op} {acc}) ? {v} : {acc};"]
        pragma = f" reduction({kind}:{acc})"
        if fp:
            init.append(f"int {acc}_nan = 0;")
            body.append(f"{acc}_nan |= ({v} != {v});")
            pragma += f" reduction(|:{acc}_nan)"
        return init + [body], pragma
    if kind in ("argmax", "argmin"):
        op = ">" if kind == "argmax" else "<"
        init += [f"int64_t {acc}_i = 0;"]
        cond = f"({v} {op} {acc})"
        if fp:
            cond = f"(({v} {op} {acc}) || ({v} != {v} && {acc} == {acc}))"
        body = [f"if ({cond}) {{ {acc} = {v}; {acc}_i = ridx; }}"]
        return init + [body], None
    raise NotImplementedError(kind)


def _reduction_finish(st, acc):
    if st.reduction in ("max", "min") and st.dtype.is_floating_point:
        return [f"if ({acc}_nan) {acc} = ({compute_type(st.dtype)})MEND_NAN_F;"]
    return []

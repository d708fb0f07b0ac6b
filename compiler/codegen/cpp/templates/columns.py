"""C++ template ``columns``: reductions over leading dims (a bias gradient, a sum over rows).

Vectorized across the innermost, non-reduced dim in chunks of up to 256 lanes instead of walking each column
with a strided inner loop; per-lane accumulators (float sums accumulate in double), per-lane scratch for
pointwise stages read later.
"""

from __future__ import annotations

import math

from .... import ir
from ....ir.symbolic import print_c
from ..emit import CppEmitter, compute_type, reduction_init, store
from . import PARALLEL_THRESHOLD


def applies(k: ir.Kernel) -> bool:
    """Reductions over leading dims (e.g. a bias gradient, sum over rows): vectorize across the innermost
    (non-reduced) dimension instead of walking each column with a strided inner loop."""
    last = len(k.size) - 1
    if last in k.rdims or k.size[last] < 8:
        return False
    return not any(st.reduction in ("argmax", "argmin") for st in k.stages)


def render(k: ir.Kernel, ptrs: dict) -> list[str]:
    last = len(k.size) - 1
    V = k.size[last]
    CH = min(V, 256)
    nch = (V + CH - 1) // CH
    others = [d for d in k.outer_dims if d != last]
    rdims = k.rdims
    rsizes = [k.size[d] for d in rdims]
    rnumel = math.prod(rsizes)
    rstrides, acc = [], 1
    for sz in reversed(rsizes):
        rstrides.append(acc)
        acc *= sz
    rstrides = list(reversed(rstrides))
    ridx = " + ".join(f"x{d}*{st}L" for d, st in zip(rdims, rstrides)) or "0"
    lane = f"(x{last} - c0)"
    scratch = {st.name: f"s_{st.name}" for st in k.stages if st.kind == "pointwise" and st.local_users}
    arrays = {st.name: f"v_{st.name}" for st in k.stages if st.kind != "pointwise"}

    def local_ref(e):
        if e.name in arrays:
            return f"{arrays[e.name]}[{lane}]"
        return f"{scratch[e.name]}[ridx*{CH}L + {lane}]"

    vloop = ["#pragma omp simd", f"for (int64_t x{last} = c0; x{last} < c1; ++x{last}) {{"]
    lines = []
    for si, st in enumerate(k.stages):
        b = CppEmitter(ptrs, local_ref, prefix=f"t{si}_")
        ct = compute_type(st.dtype)
        if st.kind == "outer":
            v = b.emit(st.expr)
            body = list(b.lines) + [f"{arrays[st.name]}[{lane}] = {v};"]
            if st.store is not None:
                body.append(store(ptrs[st.name], print_c(st.store_index), v, st.dtype))
            lines += [f"{ct} {arrays[st.name]}[{CH}];"] + vloop + ["  " + ln for ln in body] + ["}"]
            continue
        ropen = [f"for (int64_t x{d} = 0; x{d} < {k.size[d]}L; ++x{d}) {{" for d in rdims]
        rclose = ["}"] * len(rdims)
        if st.kind == "reduction":
            a = arrays[st.name]
            kind = st.reduction
            v = b.emit(st.expr)
            fp = st.dtype.is_floating_point
            if kind == "sum":
                comb = f"{a}[{lane}] += {v};"
            elif kind == "prod":
                comb = f"{a}[{lane}] *= {v};"
            elif kind == "any":
                comb = f"{a}[{lane}] = {a}[{lane}] || {v};"
            elif kind == "all":
                comb = f"{a}[{lane}] = {a}[{lane}] && {v};"
            else:
                op = ">" if kind == "max" else "<"
                nan = f" || {v} != {v}" if fp else ""
                comb = f"{a}[{lane}] = ({v} {op} {a}[{lane}]{nan}) ? {v} : {a}[{lane}];"
            wide = kind == "sum" and ct == "float"  # accumulate float sums in double (long columns)
            at = "double" if wide else ct
            acc_name = f"{a}_d" if wide else a
            comb = comb.replace(f"{a}[", f"{acc_name}[")
            lines += [f"{at} {acc_name}[{CH}];",
                      f"for (int64_t j = 0; j < {CH}; ++j) {acc_name}[j] = {reduction_init(kind, st.dtype)};"]
            lines += ropen + [f"int64_t ridx = {ridx};"] + vloop + ["  " + ln for ln in b.lines + [comb]] + ["}"]
            lines += rclose
            if wide:
                lines += [f"float {a}[{CH}];", f"for (int64_t j = 0; j < {CH}; ++j) {a}[j] = (float){acc_name}[j];"]
            if st.store is not None:
                lines += vloop + ["  " + store(ptrs[st.name], print_c(st.store_index), f"{a}[{lane}]", st.dtype),
                                  "}"]
            continue
        v = b.emit(st.expr)
        body = list(b.lines)
        if st.name in scratch:
            body.append(f"{scratch[st.name]}[ridx*{CH}L + {lane}] = {v};")
        if st.store is not None:
            body.append(store(ptrs[st.name], print_c(st.store_index), v, st.dtype))
        lines += ropen + [f"int64_t ridx = {ridx};"] + vloop + ["  " + ln for ln in body] + ["}"] + rclose
    n_par = math.prod(k.size[d] for d in others) * nch
    par = k.numel >= PARALLEL_THRESHOLD and n_par > 1
    alloc = [f"{compute_type(st.dtype)}* {scratch[st.name]} = new {compute_type(st.dtype)}[{max(rnumel, 1) * CH}];"
             for st in k.stages if st.name in scratch]
    free = [f"delete[] {sname};" for sname in scratch.values()]
    out = ["  #pragma omp parallel" if par else "", "  {"] + ["    " + a for a in alloc]
    if par:
        out.append(f"    #pragma omp for schedule(static) collapse({len(others) + 1})")
    for d in others:
        out.append(f"    for (int64_t x{d} = 0; x{d} < {k.size[d]}L; ++x{d})")
    out.append(f"    for (int64_t ci = 0; ci < {nch}L; ++ci) {{")
    out.append(f"      int64_t c0 = ci * {CH}L;")
    out.append(f"      int64_t c1 = c0 + {CH}L < {V}L ? c0 + {CH}L : {V}L;")
    out += ["      " + ln for ln in lines]
    out.append("    }")
    out += ["    " + f for f in free]
    out.append("  }")
    return [ln for ln in out if ln]

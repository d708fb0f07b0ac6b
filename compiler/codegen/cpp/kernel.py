"""C++ code generator for CPU kernels: one translation unit per graph, OpenMP + simd loops.

Pointwise kernels become one flat ``parallel for simd`` loop after dimension coalescing (or a collapsed
nest with an inner ``simd`` loop over the innermost dimension). Kernels with reduced dims become a parallel
loop over rows; inside a row each stage is one pass over the row (``simd`` reductions, pointwise passes
writing row-local scratch), so a row stays in L1/L2 across the passes (the "row group"). float16 and
bfloat16 are computed in float32. Small kernels (< ``PARALLEL_THRESHOLD`` elements) run single-threaded.
"""

from __future__ import annotations

import math
from pathlib import Path

import torch

from ... import ir
from ...ir.symbolic import print_c, simplify_index, variables
from ..common import coalesce

PARALLEL_THRESHOLD = 32768
PRELUDE = (Path(__file__).with_name("prelude.h")).read_text()

STORAGE = {
    torch.float32: "float",
    torch.float64: "double",
    torch.float16: "mend_half",
    torch.bfloat16: "uint16_t",
    torch.int8: "int8_t",
    torch.uint8: "uint8_t",
    torch.int16: "int16_t",
    torch.int32: "int32_t",
    torch.int64: "int64_t",
    torch.bool: "uint8_t",  # torch stores bool as one byte 0/1; a byte load keeps loops vectorizable
}


def compute_type(dt) -> str:
    if dt in (torch.float16, torch.bfloat16, torch.float32):
        return "float"
    if dt == torch.bool:
        return "bool"
    if dt not in STORAGE:
        raise NotImplementedError(f"dtype {dt} has no C++ mapping")
    return STORAGE[dt]


def supports(dtype) -> bool:
    return dtype in STORAGE


def _const(value, dt) -> str:
    ct = compute_type(dt)
    if dt == torch.bool:
        return "true" if value else "false"
    if dt.is_floating_point:
        v = float(value)
        if math.isnan(v):
            return f"(({ct})MEND_NAN_F)"
        if math.isinf(v):
            return f"({'-' if v < 0 else ''}({ct})MEND_INF_F)"
        return f"(({ct}){v!r})"
    v = int(value)
    if v == -(2**63):
        return "INT64_MIN"
    return f"(({ct}){v}L)"


_FLOAT_FN = {
    "exp": "mend_exp({0})",
    "log": "mend_log({0})",
    "sigmoid": "mend_sigmoid({0})",
    "tanh": "mend_tanh({0})",
    "erf": "mend_erf({0})",
    "exp2": "mend_exp2({0})",
    "expm1": "mend_expm1({0})",
    "log2": "mend_log2({0})",
    "log10": "mend_log10({0})",
    "log1p": "mend_log1p({0})",
    "sqrt": "mend_sqrt({0})",
    "rsqrt": "(({t})1 / mend_sqrt({0}))",
    "sin": "mend_sin({0})",
    "cos": "mend_cos({0})",
    "tan": "mend_tan({0})",
    "asin": "mend_asin({0})",
    "acos": "mend_acos({0})",
    "atan": "mend_atan({0})",
    "sinh": "mend_sinh({0})",
    "cosh": "mend_cosh({0})",
    "asinh": "mend_asinh({0})",
    "acosh": "mend_acosh({0})",
    "atanh": "mend_atanh({0})",
    "erfc": "mend_erfc({0})",
    "floor": "mend_floor({0})",
    "ceil": "mend_ceil({0})",
    "trunc": "mend_trunc({0})",
    "round": "mend_nearbyint({0})",
    "atan2": "mend_atan2({0}, {1})",
    "fmod": "mend_fmod({0}, {1})",
    "remainder": "mend_remainder_fp({0}, {1})",
    "floordiv": "mend_floor({0} / {1})",
    "truncdiv": "mend_trunc({0} / {1})",
    "pow": "mend_pow({0}, {1})",
    "fma": "mend_fma({0}, {1}, {2})",
    "isinf": "(mend_fabs({0}) == ({t0})MEND_INF_F)",
}
_INT_FN = {
    "fmod": "mend_imod({0}, {1})",
    "remainder": "mend_remainder_int({0}, {1})",
    "floordiv": "mend_floordiv_int({0}, {1})",
    "truncdiv": "mend_idiv({0}, {1})",
    "pow": "mend_ipow({0}, {1})",
    "fma": "({0} * {1} + {2})",
    "isinf": "false",
    "floor": "{0}",
    "ceil": "{0}",
    "trunc": "{0}",
    "round": "{0}",
}
_ANY_FN = {
    "add": "({0} + {1})",
    "sub": "({0} - {1})",
    "mul": "({0} * {1})",
    "truediv": "({0} / {1})",
    "neg": "(-{0})",
    "abs": "mend_abs({0})",
    "maximum": "mend_max<{t}>({0}, {1})",
    "minimum": "mend_min<{t}>({0}, {1})",
    "reciprocal": "(({t})1 / {0})",
    "sign": "mend_sign<{t}>({0})",
    "eq": "({0} == {1})",
    "ne": "({0} != {1})",
    "lt": "({0} < {1})",
    "le": "({0} <= {1})",
    "gt": "({0} > {1})",
    "ge": "({0} >= {1})",
    "isnan": "({0} != {0})",
    "logical_and": "({0} && {1})",
    "logical_or": "({0} || {1})",
    "logical_xor": "({0} != {1})",
    "logical_not": "(!{0})",
    "bitwise_and": "({0} & {1})",
    "bitwise_or": "({0} | {1})",
    "bitwise_xor": "({0} ^ {1})",
    "bitwise_not": "(~{0})",
    "where": "({0} ? {1} : {2})",
}


def _cast(src: str, sdt, ddt) -> str:
    ct = compute_type(ddt)
    if ddt == torch.bool:
        return f"({src} != 0)"
    if ddt == torch.float16:
        return f"mend_round_half((float){src})"
    if ddt == torch.bfloat16:
        return f"mend_round_bf16((float){src})"
    if sdt == torch.bool and ddt.is_floating_point:
        return f"(({ct})({src} ? 1 : 0))"
    return f"static_cast<{ct}>({src})"


class _Body:
    """Emits CSE'd statements for expressions at one iteration point."""

    def __init__(self, kernel_vars: dict, local_ref, mapping=None, ranges=None, prefix="t", recip=None):
        self.lines: list[str] = []
        self.memo: dict = {}
        self.ptr = kernel_vars  # buffer name -> C pointer name
        self.local_ref = local_ref  # Local -> C expression
        self.mapping = mapping or {}
        self.ranges = ranges or {}
        self.n = 0
        self.prefix = prefix
        self.recip = recip or {}  # Local name -> C name of its reciprocal (row-invariant divisors)

    def index(self, e) -> str:
        if self.mapping:
            e = simplify_index(e.xreplace(self.mapping), self.ranges)
        return print_c(e)

    def emit(self, expr: ir.Expr) -> str:
        for e in ir.walk(expr):
            if e in self.memo:
                continue
            self.memo[e] = self._one(e)
        return self.memo[expr]

    def _tmp(self, dt, text) -> str:
        name = f"{self.prefix}{self.n}"
        self.n += 1
        self.lines.append(f"{compute_type(dt)} {name} = {text};")
        return name

    def _one(self, e) -> str:
        if isinstance(e, ir.Const):
            return _const(e.value, e.dtype)
        if isinstance(e, ir.Local):
            return self.local_ref(e)
        if isinstance(e, ir.Load):
            p = f"{self.ptr[e.buf]}[{self.index(e.index)}]"
            if e.dtype == torch.bfloat16:
                p = f"mend_bf16_to_f32({p})"
            elif e.dtype == torch.float16:
                p = f"(float)({p})"
            elif e.dtype == torch.bool:
                p = f"({p} != 0)"
            return self._tmp(e.dtype, p)
        if isinstance(e, ir.IndexValue):
            return self._tmp(e.dtype, f"static_cast<{compute_type(e.dtype)}>({self.index(e.index)})")
        assert isinstance(e, ir.Op)
        args = [self.memo[a] for a in e.args]
        if e.op == "cast":
            return self._tmp(e.dtype, _cast(args[0], e.args[0].dtype, e.dtype))
        if e.op == "truediv" and isinstance(e.args[1], ir.Local) and e.args[1].name in self.recip:
            # x / s with s fixed for the whole row: one division per row, a multiply per element (as ATen's
            # softmax does); differs from a correctly rounded division by at most one ulp
            return self._tmp(e.dtype, f"({args[0]} * {self.recip[e.args[1].name]})")
        # the type operations are performed in
        adt = e.args[-1].dtype if e.op == "where" else e.args[0].dtype
        t = compute_type(adt)
        fmt = None
        if adt == torch.bool and e.op == "bitwise_not":
            fmt = "(!{0})"
        elif adt.is_floating_point:
            fmt = _FLOAT_FN.get(e.op)
        elif e.op in _INT_FN:
            fmt = _INT_FN[e.op]
        if fmt is None:
            fmt = _ANY_FN.get(e.op)
        if fmt is None:
            if not adt.is_floating_point and e.op in _FLOAT_FN:
                # float functions of integer operands compute in float (the lowering casts normally)
                fmt = _FLOAT_FN[e.op]
                args = [f"(float){a}" for a in args]
            else:
                raise NotImplementedError(f"op {e.op} on {adt}")
        text = fmt.format(*args, t=t, t0=t)
        return self._tmp(e.dtype, text)


def _store(ptr: str, idx: str, value: str, dt) -> str:
    if dt == torch.bfloat16:
        return f"{ptr}[{idx}] = mend_f32_to_bf16({value});"
    if dt == torch.float16:
        return f"{ptr}[{idx}] = (mend_half)({value});"
    return f"{ptr}[{idx}] = static_cast<{STORAGE[dt]}>({value});"


_INIT = {
    "sum": "0",
    "prod": "1",
    "any": "0",
    "all": "1",
}


_INT_LIMITS = {
    "int8_t": ("INT8_MIN", "INT8_MAX"),
    "uint8_t": ("0", "UINT8_MAX"),
    "int16_t": ("INT16_MIN", "INT16_MAX"),
    "int32_t": ("INT32_MIN", "INT32_MAX"),
    "int64_t": ("INT64_MIN", "INT64_MAX"),
    "bool": ("false", "true"),
}


def _red_init(kind, dt) -> str:
    ct = compute_type(dt)
    if kind in _INIT:
        return f"(({ct}){_INIT[kind]})"
    big = f"(({ct})MEND_INF_F)" if dt.is_floating_point else _INT_LIMITS[ct][1]
    low = f"(-({ct})MEND_INF_F)" if dt.is_floating_point else _INT_LIMITS[ct][0]
    if kind in ("max", "argmax"):
        return low
    return big


class CppKernelSource:
    def __init__(self, kernel: ir.Kernel):
        self.k = kernel

    def signature_args(self) -> list[str]:
        return list(self.k.inputs) + list(self.k.outputs)

    def render(self) -> str:
        k = self.k
        ptrs = {}
        lines = []
        params = []
        for i, b in enumerate(self.signature_args()):
            ptrs[b] = f"p{i}"
            dt = k.dtype_of(b)
            const = "const " if b in k.inputs else ""
            params.append(f"void* v{i}")
            lines.append(f"  {const}{STORAGE[dt]}* __restrict__ p{i} = ({const}{STORAGE[dt]}*)v{i};")
        if not k.rdims:
            body = self._pointwise(ptrs)
        elif self._column_mode():
            body = self._columns(ptrs)
        else:
            body = self._rows(ptrs)
        return "\n".join([f'extern "C" void {k.name}({", ".join(params)}) {{'] + lines + body + ["}"])

    # --------------------------------------------------------------------- pointwise kernels
    def _pointwise(self, ptrs) -> list[str]:
        k = self.k
        sizes, mapping = coalesce(k)
        nv = variables(len(sizes))
        ranges = dict(zip(nv, sizes))
        values = {}
        body = _Body(ptrs, lambda e: values[e.name], mapping, ranges)
        stores = []
        for st in k.stages:
            v = body.emit(st.expr)
            values[st.name] = v
            if st.store is not None:
                idx = body.index(st.store_index)
                stores.append(_store(ptrs[st.name], idx, v, st.dtype))
        inner = ["    " + ln for ln in body.lines + stores]
        numel = math.prod(sizes) if sizes else 1
        par = numel >= PARALLEL_THRESHOLD
        out = []
        if not sizes:
            return ["  {"] + inner + ["  }"]
        if len(sizes) == 1:
            out.append("  #pragma omp parallel for simd schedule(static)" if par else "  #pragma omp simd")
            out.append(f"  for (int64_t x0 = 0; x0 < {sizes[0]}L; ++x0) {{")
            return out + inner + ["  }"]
        nouter = len(sizes) - 1
        if par:
            coll = f" collapse({nouter})" if nouter > 1 else ""
            out.append(f"  #pragma omp parallel for schedule(static){coll}")
        for i in range(nouter):
            out.append(f"  for (int64_t x{i} = 0; x{i} < {sizes[i]}L; ++x{i})")
        out.append("  #pragma omp simd")
        out.append(f"  for (int64_t x{nouter} = 0; x{nouter} < {sizes[nouter]}L; ++x{nouter}) {{")
        return out + inner + ["  }"]

    # ------------------------------------------------------------------------- row kernels
    def _rows(self, ptrs) -> list[str]:
        k = self.k
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
            b = _Body(ptrs, local_ref, prefix=f"t{si}_", recip=recip if st.kind == "pointwise" else None)
            if st.kind == "outer":
                v = b.emit(st.expr)
                row_lines += b.lines
                row_lines.append(f"{compute_type(st.dtype)} {scalars[st.name]} = {v};")
                if st.name in recip:
                    row_lines.append(f"float {recip[st.name]} = 1.0f / {scalars[st.name]};")
                if st.store is not None:
                    row_lines.append(_store(ptrs[st.name], print_c(st.store_index), v,
                                            st.dtype))
                continue
            loop = self._rloops(rdims, parallel=one_row_parallel)
            if st.kind == "reduction":
                lines, pragma = self._reduction(st, b, scalars[st.name])
                row_lines += lines[:-1]
                row_lines += [ln if "#pragma" not in ln else ln + pragma for ln in loop[0]
                              if pragma is not None or "#pragma" not in ln]
                row_lines += ["  int64_t ridx = " + ridx + ";"] + ["  " + ln for ln in b.lines + lines[-1]]
                row_lines += loop[1]
                row_lines += self._reduction_finish(st, scalars[st.name])
                if st.reduction in ("argmax", "argmin"):
                    row_lines.append(f"int64_t {scalars[st.name]}_r = {scalars[st.name]}_i;")
                    scalars[st.name] = f"{scalars[st.name]}_r"
                if st.store is not None:
                    row_lines.append(_store(ptrs[st.name], print_c(st.store_index),
                                            scalars[st.name], st.dtype))
                if st.name in recip:
                    row_lines.append(f"float {recip[st.name]} = 1.0f / {scalars[st.name]};")
            else:
                v = b.emit(st.expr)
                inner = list(b.lines)
                if st.name in scratch:
                    inner.append(f"{scratch[st.name]}[ridx] = {v};")
                if st.store is not None:
                    inner.append(_store(ptrs[st.name], print_c(st.store_index), v, st.dtype))
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

    # ------------------------------------------------------------- column kernels (interchanged)
    def _column_mode(self) -> bool:
        """Reductions over leading dims (e.g. a bias gradient, sum over rows): vectorize across the innermost
        (non-reduced) dimension instead of walking each column with a strided inner loop."""
        k = self.k
        last = len(k.size) - 1
        if last in k.rdims or k.size[last] < 8:
            return False
        return not any(st.reduction in ("argmax", "argmin") for st in k.stages)

    def _columns(self, ptrs) -> list[str]:
        k = self.k
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
            b = _Body(ptrs, local_ref, prefix=f"t{si}_")
            ct = compute_type(st.dtype)
            if st.kind == "outer":
                v = b.emit(st.expr)
                body = list(b.lines) + [f"{arrays[st.name]}[{lane}] = {v};"]
                if st.store is not None:
                    body.append(_store(ptrs[st.name], print_c(st.store_index), v, st.dtype))
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
                          f"for (int64_t j = 0; j < {CH}; ++j) {acc_name}[j] = {_red_init(kind, st.dtype)};"]
                lines += ropen + [f"int64_t ridx = {ridx};"] + vloop + ["  " + ln for ln in b.lines + [comb]] + ["}"]
                lines += rclose
                if wide:
                    lines += [f"float {a}[{CH}];", f"for (int64_t j = 0; j < {CH}; ++j) {a}[j] = (float){acc_name}[j];"]
                if st.store is not None:
                    lines += vloop + ["  " + _store(ptrs[st.name], print_c(st.store_index), f"{a}[{lane}]", st.dtype),
                                      "}"]
                continue
            v = b.emit(st.expr)
            body = list(b.lines)
            if st.name in scratch:
                body.append(f"{scratch[st.name]}[ridx*{CH}L + {lane}] = {v};")
            if st.store is not None:
                body.append(_store(ptrs[st.name], print_c(st.store_index), v, st.dtype))
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

    def _rloops(self, rdims, parallel=False):
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
            opens.append(f"for (int64_t x{d} = 0; x{d} < {self.k.size[d]}L; ++x{d}) {{")
            closes.append("}")
        return opens, closes

    def _reduction(self, st, b: _Body, acc):
        """(lines: [init..., [loop-body lines]], pragma suffix for the innermost loop)."""
        v = b.emit(st.expr)
        kind = st.reduction
        dt = st.expr.dtype if kind in ("argmax", "argmin") else st.dtype
        ct = compute_type(dt)
        init = [f"{ct} {acc} = {_red_init(kind, dt)};"]
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

    def _reduction_finish(self, st, acc):
        if st.reduction in ("max", "min") and st.dtype.is_floating_point:
            return [f"if ({acc}_nan) {acc} = ({compute_type(st.dtype)})MEND_NAN_F;"]
        return []


def render_kernel(kernel: ir.Kernel) -> str:
    return CppKernelSource(kernel).render()


def render_graph(kernels: list[ir.Kernel]) -> str:
    parts = [PRELUDE]
    for k in kernels:
        parts.append(render_kernel(k))
    return "\n\n".join(parts) + "\n"

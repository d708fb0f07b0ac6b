"""Render one :class:`mend.compiler.ir.Kernel` as a ``@triton.jit`` function.

Three templates (chosen by :func:`plan`):

* ``pointwise``: a kernel without reduced dims. Its iteration space is coalesced (``codegen.common``) and
  walked as one flat index ``xindex`` in blocks of ``XBLOCK`` (1-D, masked by ``xindex < xnumel``).
* ``persistent``: a row kernel (``rdims`` non-empty) whose row fits in registers
  (``RBLOCK = next_pow2(rnumel) <= PERSISTENT_RMAX``). A program handles ``XBLOCK`` rows as an
  ``[XBLOCK, RBLOCK]`` tile; every stage of the row group is computed once: pointwise stages stay in
  registers, reductions use the builtin ``tl.sum``/``tl.max``/``tl.min``/``tl.argmax``/``tl.argmin``.
* ``looped``: long rows (or reductions over non-contiguous dims). The row is walked in chunks of ``RBLOCK``
  with vector accumulators, one loop per dependency level of the reductions (softmax: one loop for the max,
  one for the sum, one for the stores); pointwise stages are recomputed in every loop that needs them
  instead of being kept in registers.

Index expressions are rewritten from the kernel's ``x0..xn`` over the flat ``xindex`` (row number or
element number) and ``rindex`` (position in the row, row-major over ``rdims``), then simplified with the
core's index rules so that contiguous accesses print as ``C*xindex + rindex``. Indices are int32 unless an
index can reach ``2**31`` (then int64). float16/bfloat16 values are computed in float32 and rounded on casts
and stores; bool is ``tl.int1``. Math without a ``tl`` builtin goes through ``tm`` (see ``triton_math``).

Anything the templates do not handle raises ``NotImplementedError``; the generator turns that into a
``KernelCompileError`` so the kernel runs in the reference interpreter instead.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import sympy
import torch

from ... import ir
from ...ir.symbolic import FloorDiv, IMax, IMin, IMod, bounds, simplify_index, variables
from ..common import coalesce
from .shim import NAMES as SHIM_NAMES
from .shim import import_line

PERSISTENT_RMAX = 4096  # longest row kept in registers
TILE_MAX = 8192  # XBLOCK * RBLOCK of a persistent reduction
INT32_LIMIT = 2**31 - 1

X = sympy.Symbol("xindex", integer=True, nonnegative=True)
R = sympy.Symbol("rindex", integer=True, nonnegative=True)

TL_TYPE = {
    torch.float32: "tl.float32",
    torch.float64: "tl.float64",
    torch.float16: "tl.float16",
    torch.bfloat16: "tl.bfloat16",
    torch.int8: "tl.int8",
    torch.uint8: "tl.uint8",
    torch.int16: "tl.int16",
    torch.int32: "tl.int32",
    torch.int64: "tl.int64",
    torch.bool: "tl.int1",
}
# pointer element types for triton's signature strings (ahead-of-time compiles)
SIG_TYPE = {
    torch.float32: "fp32",
    torch.float64: "fp64",
    torch.float16: "fp16",
    torch.bfloat16: "bf16",
    torch.int8: "i8",
    torch.uint8: "u8",
    torch.int16: "i16",
    torch.int32: "i32",
    torch.int64: "i64",
    torch.bool: "i1",
}
_HALF = (torch.float16, torch.bfloat16)


def next_pow2(n: int) -> int:
    return 1 if n <= 1 else 1 << (int(n) - 1).bit_length()


def compute_dtype(dt: torch.dtype) -> torch.dtype:
    if dt not in TL_TYPE:
        raise NotImplementedError(f"dtype {dt} has no Triton mapping")
    return torch.float32 if dt in _HALF else dt


def tl_compute(dt: torch.dtype) -> str:
    return TL_TYPE[compute_dtype(dt)]


# ------------------------------------------------------------------------------------ index printing


def print_index(e) -> str:
    """An integer index expression as Triton code (operands are never negative: ``//`` and ``%`` are
    the same under C and Python semantics)."""
    if e.is_Integer:
        return str(int(e))
    if e.is_Symbol:
        return e.name
    if e.is_Add:
        terms = [print_index(t) for t in e.args]
        s = terms[0]
        for t in terms[1:]:
            s = f"{s} - {t[1:]}" if t.startswith("-") else f"{s} + {t}"
        return f"({s})"
    if e.is_Mul:
        c, rest = e.as_coeff_Mul()
        if c == -1:
            return f"-{print_index(rest)}"
        return "*".join(print_index(a) for a in e.args)
    if isinstance(e, FloorDiv):
        return f"({print_index(e.args[0])} // {print_index(e.args[1])})"
    if isinstance(e, IMod):
        return f"({print_index(e.args[0])} % {print_index(e.args[1])})"
    if isinstance(e, (IMin, IMax)):
        fn = "tl.minimum" if isinstance(e, IMin) else "tl.maximum"
        s = print_index(e.args[0])
        for a in e.args[1:]:
            s = f"{fn}({s}, {print_index(a)})"
        return s
    raise NotImplementedError(f"cannot print index expression {e!r} for Triton")


# ----------------------------------------------------------------------------------------- planning


@dataclass(frozen=True)
class Config:
    XBLOCK: int
    RBLOCK: int = 1
    num_warps: int = 4

    def constexprs(self, template: str) -> dict:
        if template == "pointwise":
            return {"XBLOCK": self.XBLOCK}
        return {"XBLOCK": self.XBLOCK, "RBLOCK": self.RBLOCK}


@dataclass(frozen=True)
class Plan:
    template: str  # pointwise | persistent | looped
    xnumel: int
    rnumel: int
    index_dtype: str  # tl.int32 | tl.int64
    configs: tuple  # Config, best guess first
    outer_reduction: bool = False  # the reduced dims are not the contiguous ones
    nsplit: int = 1  # split template: programs per row (partial reductions), then a combine kernel
    rchunk: int = 0  # split template: reduction elements per partial
    done_config: "Config | None" = None  # split template: the combine kernel (XBLOCK rows, RBLOCK=SBLOCK)


def _warps(elements: int, lo: int = 1, hi: int = 8) -> int:
    w = max(lo, min(hi, elements // 256))
    return 1 << (w.bit_length() - 1)


def _pointwise_configs(n: int) -> tuple:
    if n <= 1024:
        xb = max(16, next_pow2(n))
        return (Config(xb, 1, _warps(xb, 1, 4)),)
    if n < 2**18:
        return (Config(1024, 1, 4), Config(512, 1, 4))
    return (Config(1024, 1, 4), Config(2048, 1, 8), Config(512, 1, 4))


def _persistent_configs(xnumel: int, rnumel: int) -> tuple:
    rb = next_pow2(rnumel)
    cap = max(1, TILE_MAX // rb)
    # enough programs to fill a GPU (~2 waves of 132 SMs), few enough rows for registers
    want = next_pow2(max(1, xnumel // 264))
    xb = max(1, min(cap, want, 64, next_pow2(xnumel)))
    out = [Config(xb, rb, _warps(xb * rb, 1, 8))]
    for alt in (xb * 2, xb // 2):
        if 1 <= alt <= min(cap, 64, next_pow2(xnumel)):
            out.append(Config(alt, rb, _warps(alt * rb, 1, 8)))
    return tuple(out)


def _looped_configs(xnumel: int, rnumel: int, outer: bool) -> tuple:
    if outer:
        # rows are contiguous: wide XBLOCK for coalescing, narrower when there are few rows (more programs)
        if xnumel >= 64 * 132:
            cands = [(64, 32, 4), (128, 16, 4), (32, 64, 4)]
        else:
            cands = [(32, 64, 4), (64, 32, 4), (16, 128, 4)]
        xcap = next_pow2(xnumel)
        out = []
        for xb, rb, w in cands:
            xb = min(xb, max(1, xcap))
            rb = min(rb, next_pow2(rnumel))
            c = Config(xb, rb, w)
            if c not in out:
                out.append(c)
        return tuple(out)
    out = []
    for xb, rb, w in ((1, 2048, 8), (1, 1024, 4), (2, 1024, 8)):
        rb = min(rb, next_pow2(rnumel))
        c = Config(min(xb, next_pow2(xnumel)), rb, _warps(xb * rb, 1, w))
        if c not in out:
            out.append(c)
    return tuple(out)


def _index_exprs(k: ir.Kernel):
    for st in k.stages:
        for e in ir.walk(st.expr):
            if isinstance(e, (ir.Load, ir.IndexValue)):
                yield e.index
        if st.store is not None and st.store_index is not None:
            yield st.store_index


def _is_outer_reduction(k: ir.Kernel, mapping, ranges) -> bool:
    """True when the loads walk memory contiguously along the rows (``xindex``) but not along the
    reduction (e.g. a sum over dim 0): such kernels want wide ``XBLOCK`` tiles."""
    r_unit = x_unit = 0
    for st in k.stages:
        idxs = [ld.index for ld in ir.loads(st.expr)]
        if st.kind == "pointwise" and st.store is not None:
            idxs.append(st.store_index)
        for ix in idxs:
            e = simplify_index(ix.xreplace(mapping), ranges)
            if not e.free_symbols:
                continue
            # the address step of one row and of one reduction element, at the start of the tile
            at = {X: 0, R: 0}
            base = int(e.xreplace(at))
            cr = int(e.xreplace({X: 0, R: 1})) - base if ranges.get(R, 1) > 1 else None
            cx = int(e.xreplace({X: 1, R: 0})) - base if ranges.get(X, 1) > 1 else None
            if cr == 1:
                r_unit += 1
            elif cx == 1:
                x_unit += 1
    return x_unit > r_unit


def _flat_mapping(size, dims, sym):
    """Map the kernel variables of ``dims`` (row-major over their sizes) to a flat symbol."""
    xs = variables(len(size))
    mapping = {}
    acc = 1
    for d in reversed(dims):
        s = size[d]
        if s == 1:
            mapping[xs[d]] = sympy.Integer(0)
            continue
        e = FloorDiv(sym, sympy.Integer(acc)) if acc != 1 else sym
        # the outermost dim needs no modulo (the flat index stays below the total)
        mapping[xs[d]] = (e, s, acc)
        acc *= s
    total = acc
    out = {}
    for v, m in mapping.items():
        if isinstance(m, tuple):
            e, s, a = m
            out[v] = e if a * s == total else IMod(e, sympy.Integer(s))
        else:
            out[v] = m
    return out, total


SPLIT_MIN_RNUMEL = 16384  # a row at least this long is split across programs when there are few rows
SPLIT_MAX_ROWS = 32
SPLIT_KINDS = ("sum", "prod", "max", "min", "any", "all", "argmax", "argmin")


def levels(k: ir.Kernel) -> dict:
    """avail[stage]: number of completed passes over the row before the stage's value exists."""
    avail: dict[str, int] = {}
    for st in k.stages:
        deps = [avail[e.name] for e in ir.walk(st.expr) if isinstance(e, ir.Local)]
        need = max(deps, default=0)
        avail[st.name] = need + 1 if st.kind == "reduction" else need
    return avail


def _splittable(k: ir.Kernel) -> bool:
    """One pass of independent reductions (plus pointwise stores that need no reduction and per-row
    epilogues): the row can be cut into chunks reduced by separate programs and combined afterwards."""
    avail = levels(k)
    for st in k.stages:
        if st.kind == "reduction" and (avail[st.name] != 1 or st.reduction not in SPLIT_KINDS):
            return False
        if st.kind == "pointwise" and avail[st.name] != 0:
            return False
    return any(st.kind == "reduction" for st in k.stages)


def plan(k: ir.Kernel, persistent_rmax: int = PERSISTENT_RMAX, split_min_rnumel: int = SPLIT_MIN_RNUMEL):
    """(Plan, var mapping old -> flat expr, ranges of the flat symbols)."""
    for _, dt in k.dtypes:
        compute_dtype(dt)
    for st in k.stages:
        compute_dtype(st.dtype)
    if not k.rdims:
        sizes, cmap = coalesce(k)
        fmap, total = _flat_mapping(sizes, list(range(len(sizes))), X)
        mapping = {old: sympy.sympify(e).xreplace(fmap) for old, e in cmap.items()}
        ranges = {X: max(total, 1)}
        xnumel = math.prod(sizes) if sizes else 1
        rnumel = 1
        template = "pointwise"
        outer = False
    else:
        rdims = sorted(k.rdims)
        odims = [d for d in range(len(k.size)) if d not in rdims]
        omap, xnumel = _flat_mapping(k.size, odims, X)
        rmap, rnumel = _flat_mapping(k.size, rdims, R)
        mapping = {**omap, **rmap}
        ranges = {X: max(xnumel, 1), R: max(rnumel, 1)}
        outer = _is_outer_reduction(k, mapping, ranges)
        if outer and rnumel > 128:
            template = "looped"
        elif next_pow2(rnumel) <= persistent_rmax:
            template = "persistent"
        else:
            template = "looped"
    # index width: int64 when any index (or the iteration count) can reach 2**31
    wide = xnumel * max(rnumel, 1) > INT32_LIMIT
    if not wide:
        for e in _index_exprs(k):
            e = simplify_index(e.xreplace(mapping), ranges)
            b = bounds(e, ranges)
            if b is None or b[1] > INT32_LIMIT or b[0] < -INT32_LIMIT:
                wide = True
                break
    if template == "pointwise":
        configs = _pointwise_configs(xnumel)
    elif template == "persistent":
        if outer:
            rb = next_pow2(rnumel)
            xb = max(1, min(next_pow2(xnumel), max(1, TILE_MAX // rb), 64))
            configs = (Config(xb, rb, _warps(xb * rb, 1, 8)),)
        else:
            configs = _persistent_configs(xnumel, rnumel)
    else:
        configs = _looped_configs(xnumel, rnumel, outer)
    nsplit, rchunk, done = 1, 0, None
    if (template != "pointwise" and 0 < xnumel <= SPLIT_MAX_ROWS and rnumel >= split_min_rnumel
            and _splittable(k)):
        # few long rows: one program per row would leave most of the GPU idle
        configs = _looped_configs(xnumel, rnumel, outer)
        unit = max(c.RBLOCK for c in configs)
        want = next_pow2(max(2, -(-264 // xnumel)))
        want = min(want, 256, max(1, rnumel // (2 * unit)))
        if want >= 2:
            per_split = -(-rnumel // want)
            rchunk = -(-per_split // unit) * unit
            nsplit = -(-rnumel // rchunk)
        if nsplit >= 2:
            template = "split"
            sb = next_pow2(nsplit)
            xb2 = max(1, min(next_pow2(xnumel), max(1, 4096 // sb)))
            done = Config(xb2, sb, _warps(xb2 * sb, 1, 4))
        else:
            nsplit, rchunk = 1, 0
    p = Plan(template, xnumel, rnumel, "tl.int64" if wide else "tl.int32", configs, outer, nsplit, rchunk,
             done)
    return p, mapping, ranges


# ------------------------------------------------------------------------------------------ emitting


def _const(value, dt, ndim: int) -> str:
    ct = compute_dtype(dt)
    shape = "[1]" if ndim == 1 else "[1, 1]"
    if dt == torch.bool:
        v = "1" if value else "0"
    elif ct.is_floating_point:
        f = float(value)
        if math.isnan(f):
            v = 'float("nan")'
        elif math.isinf(f):
            v = 'float("inf")' if f > 0 else 'float("-inf")'
        else:
            v = repr(f)
    else:
        v = str(int(value))
    return f"tl.full({shape}, {v}, {TL_TYPE[ct]})"


def _lowest(ct: torch.dtype) -> str:
    if ct.is_floating_point:
        return 'float("-inf")'
    if ct == torch.bool:
        return "0"
    return str(torch.iinfo(ct).min)


def _highest(ct: torch.dtype) -> str:
    if ct.is_floating_point:
        return 'float("inf")'
    if ct == torch.bool:
        return "1"
    return str(torch.iinfo(ct).max)


_TL_FLOAT = {
    "exp": "tl.exp({0})",
    "exp2": "tl.exp2({0})",
    "log": "tl.log({0})",
    "log2": "tl.log2({0})",
    "sqrt": "tl.sqrt({0})",
    "rsqrt": "tl.rsqrt({0})",
    "sigmoid": "tl.sigmoid({0})",
    "erf": "tl.math.erf({0})",
    "sin": "tl.sin({0})",
    "cos": "tl.cos({0})",
    "floor": "tl.floor({0})",
    "ceil": "tl.ceil({0})",
    "abs": "tl.abs({0})",
    "fma": "tl.fma({0}, {1}, {2})",
    "truediv": "({0} / {1})",
    "reciprocal": "(1.0 / {0})",
    "fmod": "({0} % {1})",
    "isinf": "(tl.abs({0}) == float(\"inf\"))",
    "round": "tm.nearbyint({0})",
}
_SHIM = {name: f"tm.{name}" for name in SHIM_NAMES}
_ANY = {
    "add": "({0} + {1})",
    "sub": "({0} - {1})",
    "mul": "({0} * {1})",
    "neg": "(-{0})",
    "eq": "({0} == {1})",
    "ne": "({0} != {1})",
    "lt": "({0} < {1})",
    "le": "({0} <= {1})",
    "gt": "({0} > {1})",
    "ge": "({0} >= {1})",
    "isnan": "({0} != {0})",
    "where": "tl.where({0}, {1}, {2})",
}
_INT = {
    "abs": "tl.abs({0})",
    "maximum": "tl.maximum({0}, {1})",
    "minimum": "tl.minimum({0}, {1})",
    "bitwise_and": "({0} & {1})",
    "bitwise_or": "({0} | {1})",
    "bitwise_xor": "({0} ^ {1})",
    "bitwise_not": "(~{0})",
    "fma": "({0} * {1} + {2})",
    "isinf": "({0} != {0})",  # never true for integers (kept as a typed false)
    "floor": "{0}",
    "ceil": "{0}",
    "trunc": "{0}",
    "round": "{0}",
}
_BOOL = {
    "logical_and": "({0} & {1})",
    "logical_or": "({0} | {1})",
    "logical_xor": "({0} ^ {1})",
    "logical_not": "({0} == 0)",
    "bitwise_and": "({0} & {1})",
    "bitwise_or": "({0} | {1})",
    "bitwise_xor": "({0} ^ {1})",
    "bitwise_not": "({0} == 0)",
    "maximum": "({0} | {1})",
    "minimum": "({0} & {1})",
    "abs": "{0}",
}


def _acc_dtype(st: ir.Stage) -> torch.dtype:
    """The accumulator dtype of a reduction stage (bool and any/all accumulate in int32)."""
    vdt = compute_dtype(st.expr.dtype)
    if vdt == torch.bool or st.reduction in ("any", "all"):
        return torch.int32
    return vdt


class _Emitter:
    """CSE'd straight-line Triton code for expressions at the current tile."""

    def __init__(self, src: "KernelSource", indent: str, parent: "_Emitter | None" = None):
        self.src = src
        self.lines: list[str] = []
        self.indent = indent
        self.memo: dict = {}
        self.parent = parent

    def line(self, text: str) -> None:
        self.lines.append(self.indent + text)

    def lookup(self, e):
        em = self
        while em is not None:
            if e in em.memo:
                return em.memo[e]
            em = em.parent
        return None

    def tmp(self, text: str) -> str:
        name = self.src.fresh()
        self.line(f"{name} = {text}")
        return name

    def emit(self, expr: ir.Expr) -> str:
        for e in ir.walk(expr):
            if self.lookup(e) is not None:
                continue
            self.memo[e] = self._one(e)
        return self.lookup(expr)

    def _one(self, e) -> str:
        src = self.src
        if isinstance(e, ir.Const):
            return self.tmp(_const(e.value, e.dtype, src.ndim))
        if isinstance(e, ir.Local):
            return src.local_value(e, self)
        if isinstance(e, ir.Load):
            idx = src.index(e.index)
            ptr = src.ptr[e.buf]
            mask = src.mask_for(idx)
            m = f", {mask}, other=0" if mask else ""
            text = f"tl.load({ptr} + {idx.text}{m})"
            if e.dtype in _HALF:
                text += ".to(tl.float32)"
            return self.tmp(text)
        if isinstance(e, ir.IndexValue):
            idx = src.index(e.index)
            ct = tl_compute(e.dtype)
            if not idx.syms:
                return self.tmp(_const(int(e.index), e.dtype, src.ndim))
            return self.tmp(f"({idx.text}).to({ct})")
        assert isinstance(e, ir.Op)
        args = [self.lookup(a) for a in e.args]
        if e.op == "cast":
            return self.tmp(_cast(args[0], e.args[0].dtype, e.dtype))
        adt = e.args[-1].dtype if e.op == "where" else e.args[0].dtype
        cadt = compute_dtype(adt)
        fmt = None
        if cadt == torch.bool:
            fmt = _BOOL.get(e.op)
        elif cadt.is_floating_point:
            if e.op in _TL_FLOAT:
                fmt = _TL_FLOAT[e.op]
            elif e.op in _SHIM:
                fmt = _SHIM[e.op] + "(" + ", ".join("{%d}" % i for i in range(len(args))) + ")"
            elif e.op in ("maximum", "minimum"):
                return self._fminmax(e.op, args)
            elif e.op in ("floordiv", "truncdiv", "remainder", "sign"):
                return self._float_special(e.op, args, cadt)
        else:
            fmt = _INT.get(e.op)
            if fmt is None and e.op in ("floordiv", "truncdiv", "remainder", "fmod", "sign", "pow"):
                return self._int_special(e.op, args, cadt)
            if fmt is None and e.op in ("truediv", "reciprocal") or (
                    fmt is None and (e.op in _TL_FLOAT or e.op in _SHIM)):
                # float functions of integer operands compute in float32 (lowering casts normally)
                fargs = [self.tmp(f"{a}.to(tl.float32)") for a in args]
                fe = ir.Op(e.op, tuple(ir.Local(f"_f{i}", torch.float32) for i in range(len(args))),
                           torch.float32)
                sub = _Emitter(src, self.indent, self)
                for i, a in enumerate(fargs):
                    sub.memo[fe.args[i]] = a
                v = sub.emit(fe)
                self.lines += sub.lines
                return self.tmp(_cast(v, torch.float32, e.dtype))
        if fmt is None:
            fmt = _ANY.get(e.op)
        if fmt is None:
            raise NotImplementedError(f"op {e.op} on {adt} has no Triton lowering")
        return self.tmp(fmt.format(*args))

    def _fminmax(self, op, args):
        a, b = args
        fn = "tl.maximum" if op == "maximum" else "tl.minimum"
        # NaN-propagating (tl.maximum alone returns the non-NaN operand on GPUs)
        return self.tmp(f"tl.where({a} != {a}, {a}, tl.where({b} != {b}, {b}, {fn}({a}, {b})))")

    def _float_special(self, op, args, ct):
        if op == "sign":
            a = args[0]
            t = TL_TYPE[ct]
            return self.tmp(f"tl.where({a} != {a}, {a}, ({a} > 0).to({t}) - ({a} < 0).to({t}))")
        a, b = args
        if op == "floordiv":
            return self.tmp(f"tl.floor({a} / {b})")
        if op == "truncdiv":
            return self.tmp(f"tm.trunc({a} / {b})")
        # remainder: fmod, moved to the sign of the divisor
        m = self.tmp(f"{a} % {b}")
        return self.tmp(f"tl.where(({m} != 0) & (({m} < 0) != ({b} < 0)), {m} + {b}, {m})")

    def _int_special(self, op, args, ct):
        t = TL_TYPE[ct]
        if op == "sign":
            a = args[0]
            return self.tmp(f"({a} > 0).to({t}) - ({a} < 0).to({t})")
        a, b = args
        if op == "pow":
            # exact integer power by squaring over the exponent's bits (negative exponents: torch raises)
            bits = torch.iinfo(ct).bits - 1
            r, base, ex = self.src.fresh(), self.src.fresh(), self.src.fresh()
            self.line(f"{r} = tl.full([1], 1, {t}) + {a} * 0")
            self.line(f"{base} = {a} + {b} * 0")
            self.line(f"{ex} = {b} + {a} * 0")
            self.line(f"for _bit in tl.static_range({bits}):")
            self.line(f"    {r} = tl.where(({ex} & 1) != 0, {r} * {base}, {r})")
            self.line(f"    {base} = {base} * {base}")
            self.line(f"    {ex} = {ex} >> 1")
            return r
        # truncating quotient from magnitudes (the same under C and Python division rules)
        q = self.tmp(f"tl.abs({a}) // tl.abs({b})")
        neg = self.tmp(f"({a} < 0) != ({b} < 0)")
        tq = self.tmp(f"tl.where({neg}, -{q}, {q})")
        if op == "truncdiv":
            return tq
        r = self.tmp(f"{a} - {tq} * {b}")
        if op == "fmod":
            return r
        if op == "floordiv":
            return self.tmp(f"tl.where(({r} != 0) & {neg}, {tq} - 1, {tq})")
        return self.tmp(f"tl.where(({r} != 0) & {neg}, {r} + {b}, {r})")


def _cast(src: str, sdt, ddt) -> str:
    if ddt == torch.bool:
        return f"({src} != 0)"
    if ddt in _HALF:
        return f"{src}.to({TL_TYPE[ddt]}).to(tl.float32)"
    return f"{src}.to({tl_compute(ddt)})"


@dataclass(frozen=True)
class _Index:
    text: str
    syms: frozenset  # subset of {X, R}


class KernelSource:
    """Triton source of one kernel; ``render()`` returns the text of the ``@triton.jit`` function."""

    def __init__(self, kernel: ir.Kernel, persistent_rmax: int = PERSISTENT_RMAX,
                 split_min_rnumel: int = SPLIT_MIN_RNUMEL, nan_combine: bool = True):
        self.k = kernel
        # NaN-propagating max/min: one tl.reduce with a NaN-aware combine (as fast as tl.max on a GPU);
        # False: tl.max plus a NaN-flag reduction (builtin reductions only: 47x faster in the interpreter)
        self.nan_combine = nan_combine
        self.plan, self.mapping, self.ranges = plan(kernel, persistent_rmax, split_min_rnumel)
        self.ndim = 1 if self.plan.template == "pointwise" else 2
        self.fn_name = f"mend_{self.plan.template[:3]}_{kernel.name}"
        # split template: a partial-reduction kernel and a combine kernel, with workspace buffers
        self.fn_names = [self.fn_name] if self.plan.template != "split" else [
            f"{self.fn_name}_part", f"{self.fn_name}_done"]
        self.workspaces: list[tuple[str, torch.dtype]] = []  # (param name, dtype), split template only
        self.ptr = {}
        self.params = []
        for i, b in enumerate(kernel.inputs):
            self.ptr[b] = f"in_ptr{i}"
        for i, b in enumerate(kernel.outputs):
            self.ptr[b] = f"out_ptr{i}"
        self.params = [self.ptr[b] for b in list(kernel.inputs) + list(kernel.outputs)]
        if self.plan.template == "split":
            for j, st in enumerate(s for s in kernel.stages if s.kind == "reduction"):
                self.workspaces.append((f"ws{j}", _acc_dtype(st)))
                if st.reduction in ("argmax", "argmin"):
                    self.workspaces.append((f"wsi{j}", torch.int64))
        self.stage = {s.name: s for s in kernel.stages}
        self.row_values: dict[str, str] = {}  # reduction/outer stage -> [XBLOCK, 1] value
        self.pw_values: dict[str, str] = {}  # persistent: pointwise stage -> tile value
        self.n = 0
        self._text = None

    # ------------------------------------------------------------------ helpers used by _Emitter
    def fresh(self) -> str:
        self.n += 1
        return f"tmp{self.n}"

    def index(self, e) -> _Index:
        ex = simplify_index(e.xreplace(self.mapping), self.ranges)
        syms = frozenset(ex.free_symbols)
        if syms - {X, R}:
            raise NotImplementedError(f"index {e} has unknown symbols")
        return _Index(print_index(ex), syms)

    def mask_for(self, idx: _Index) -> str:
        if self.ndim == 1:
            return "xmask" if X in idx.syms else ""
        parts = []
        if X in idx.syms:
            parts.append("xmask")
        if R in idx.syms:
            parts.append("rmask")
        return " & ".join(parts)

    def local_value(self, e: ir.Local, em: _Emitter) -> str:
        st = self.stage.get(e.name)
        if st is None:
            raise NotImplementedError(f"local {e.name} has no producer stage")
        if st.kind != "pointwise":
            return self.row_values[st.name]
        if self.plan.template == "looped":
            # recompute the row stage at this chunk
            return em.emit(st.expr)
        return self.pw_values[st.name]

    # ------------------------------------------------------------------------------- rendering
    def compile_units(self) -> list:
        """[(function name, signature, [(constexprs, num_warps) per launch configuration])]: everything
        needed to compile the kernel's functions ahead of time."""
        p = self.plan
        base = self.signature()
        if p.template != "split":
            return [(self.fn_name, base, [(c.constexprs(p.template), c.num_warps) for c in p.configs])]
        sig = {k: v for k, v in base.items() if v != "constexpr"}
        for name, dt in self.workspaces:
            sig[name] = "*" + SIG_TYPE[dt]
        part = dict(sig, XBLOCK="constexpr", RBLOCK="constexpr")
        done = dict(sig, XBLOCK="constexpr", SBLOCK="constexpr")
        d = p.done_config
        return [(self.fn_names[0], part, [(c.constexprs("looped"), c.num_warps) for c in p.configs]),
                (self.fn_names[1], done, [({"XBLOCK": d.XBLOCK, "SBLOCK": d.RBLOCK}, d.num_warps)])]

    def signature(self) -> dict:
        sig = {p: "*" + SIG_TYPE[self.k.dtype_of(b)]
               for p, b in zip(self.params, list(self.k.inputs) + list(self.k.outputs))}
        sig["XBLOCK"] = "constexpr"
        if self.plan.template != "pointwise":
            sig["RBLOCK"] = "constexpr"
        return sig

    def render(self) -> str:
        if self._text is None:
            self.row_values, self.pw_values, self.n = {}, {}, 0
            self._text = self._render()
        return self._text

    def _render(self) -> str:
        if self.plan.template == "split":
            return self._render_split()
        p = self.plan
        cexpr = ["XBLOCK: tl.constexpr"] + ([] if p.template == "pointwise" else ["RBLOCK: tl.constexpr"])
        head = [
            "@triton.jit",
            f"def {self.fn_name}({', '.join(self.params + cexpr)}):",
        ]
        it = p.index_dtype
        body = [f"    xnumel = {p.xnumel}"]
        pid = "tl.program_id(0)" if it == "tl.int32" else "tl.program_id(0).to(tl.int64)"
        body.append(f"    xoffset = {pid} * XBLOCK")
        ar = "tl.arange(0, XBLOCK)" + ("" if it == "tl.int32" else ".to(tl.int64)")
        if p.template == "pointwise":
            body.append(f"    xindex = xoffset + {ar}")
            body.append("    xmask = xindex < xnumel")
            body += self._pointwise()
        else:
            body.append(f"    xindex = xoffset + {ar}[:, None]")
            body.append("    xmask = xindex < xnumel")
            body.append(f"    rnumel = {p.rnumel}")
            rar = "tl.arange(0, RBLOCK)" + ("" if it == "tl.int32" else ".to(tl.int64)")
            if p.template == "persistent":
                body.append(f"    rindex = {rar}[None, :]")
                body.append("    rmask = rindex < rnumel")
                body += self._persistent()
            else:
                body.append(f"    rbase = {rar}[None, :]")
                body += self._looped()
        return "\n".join(head + body) + "\n"

    def _store(self, em: _Emitter, st: ir.Stage, value: str, row: bool) -> None:
        idx = self.index(st.store_index)
        text = idx.text
        # a store index must have the tile's shape even where it is constant along an axis
        if X not in idx.syms:
            text = f"{text} + xzero" if self.ndim == 1 else f"{text} + xzero2"
            self._need_zero = True
        if self.ndim == 2 and not row and R not in idx.syms:
            text = f"{text} + rzero"
            self._need_zero = True
        mask = "xmask" if (self.ndim == 1 or row) else "xmask & rmask"
        v = value
        if st.dtype != torch.bool:
            v = f"{value}.to({TL_TYPE[st.dtype]})"
        em.line(f"tl.store({self.ptr[st.name]} + {text}, {v}, {mask})")

    def _zeros(self, rblock: str = "RBLOCK") -> list[str]:
        it = self.plan.index_dtype
        if self.ndim == 1:
            return [f"    xzero = tl.zeros([XBLOCK], {it})"]
        return [f"    xzero2 = tl.zeros([XBLOCK, 1], {it})", f"    rzero = tl.zeros([1, {rblock}], {it})"]

    def _pointwise(self) -> list[str]:
        self._need_zero = False
        em = _Emitter(self, "    ")
        for st in self.k.stages:
            if st.kind != "pointwise":
                raise NotImplementedError(f"stage kind {st.kind} in a pointwise kernel")
            v = em.emit(st.expr)
            self.pw_values[st.name] = v
            if st.store is not None:
                self._store(em, st, v, row=False)
        return (self._zeros() if self._need_zero else []) + em.lines

    # ----------------------------------------------------------------------- reductions
    def _reduce_tile(self, em: _Emitter, st: ir.Stage, v: str, mask: str, index: str) -> str:
        """Reduce an (at most) [XBLOCK, RBLOCK] value along axis 1 -> [XBLOCK, 1] (persistent)."""
        kind = st.reduction
        vdt = compute_dtype(st.expr.dtype)
        out_ct = tl_compute(st.dtype)
        if kind == "sum":
            zero = "0" if not vdt.is_floating_point else "0.0"
            vv = v if vdt != torch.bool else em.tmp(f"{v}.to(tl.int32)")
            r = em.tmp(f"tl.sum(tl.where({mask}, {vv}, {zero}), 1)[:, None]")
            return em.tmp(f"{r}.to({out_ct})")
        if kind == "prod":
            one = "1.0" if vdt.is_floating_point else "1"
            vv = v if vdt != torch.bool else em.tmp(f"{v}.to(tl.int32)")
            r = em.tmp(f"tl.reduce(tl.where({mask}, {vv}, {one}), 1, _mul_combine)[:, None]")
            return em.tmp(f"{r}.to({out_ct})")
        if kind in ("any", "all"):
            b = em.tmp(f"({v} != 0).to(tl.int32)")
            if kind == "any":
                r = em.tmp(f"tl.max(tl.where({mask}, {b}, 0), 1)[:, None]")
            else:
                r = em.tmp(f"tl.min(tl.where({mask}, {b}, 1), 1)[:, None]")
            return em.tmp(f"({r} != 0)" if st.dtype == torch.bool else f"{r}.to({out_ct})")
        if kind in ("max", "min"):
            vv = v if vdt != torch.bool else em.tmp(f"{v}.to(tl.int32)")
            ident = _lowest(vdt) if kind == "max" else _highest(vdt)
            fn = "tl.max" if kind == "max" else "tl.min"
            if vdt.is_floating_point and self.nan_combine:
                comb = "_max_nan" if kind == "max" else "_min_nan"
                r = em.tmp(f"tl.reduce(tl.where({mask}, {vv}, {ident}), 1, {comb})[:, None]")
                return em.tmp(f"{r}.to({out_ct})")
            r = em.tmp(f"{fn}(tl.where({mask}, {vv}, {ident}), 1)[:, None]")
            if vdt.is_floating_point:
                nan = em.tmp(f"tl.max((({v} != {v}) & {mask}).to(tl.int32), 1)[:, None]")
                r = em.tmp(f"tl.where({nan} > 0, float(\"nan\"), {r})")
            return em.tmp(f"({r} != 0)" if st.dtype == torch.bool else f"{r}.to({out_ct})")
        if kind in ("argmax", "argmin"):
            vv = v if vdt != torch.bool else em.tmp(f"{v}.to(tl.int32)")
            ident = _lowest(vdt) if kind == "argmax" else _highest(vdt)
            fn = "tl.argmax" if kind == "argmax" else "tl.argmin"
            masked = em.tmp(f"tl.where({mask}, {vv}, {ident})")
            zt = TL_TYPE[vdt if vdt != torch.bool else torch.int32]
            masked = em.tmp(f"{masked} + tl.zeros([XBLOCK, RBLOCK], {zt})")
            r = em.tmp(f"{fn}({masked}, 1)[:, None].to(tl.int64)")
            if vdt.is_floating_point:
                # the first NaN wins (torch treats NaN as the extreme value)
                nidx = em.tmp(f"tl.min(tl.where(({v} != {v}) & {mask}, {index}, rnumel), 1)[:, None].to(tl.int64)")
                r = em.tmp(f"tl.where({nidx} < rnumel, {nidx}, {r})")
            return em.tmp(f"{r}.to({out_ct})")
        raise NotImplementedError(f"reduction {kind}")

    def _persistent(self) -> list[str]:
        self._need_zero = False
        em = _Emitter(self, "    ")
        mask = "rmask"
        for st in self.k.stages:
            v = em.emit(st.expr)
            if st.kind == "pointwise":
                self.pw_values[st.name] = v
                if st.store is not None:
                    self._store(em, st, v, row=False)
            elif st.kind == "reduction":
                r = self._reduce_tile(em, st, v, mask, "rindex")
                self.row_values[st.name] = r
                if st.store is not None:
                    self._store(em, st, r, row=True)
            elif st.kind == "outer":
                self.row_values[st.name] = v
                if st.store is not None:
                    self._store(em, st, v, row=True)
            else:
                raise NotImplementedError(f"stage kind {st.kind}")
        return (self._zeros() if self._need_zero else []) + em.lines

    # --------------------------------------------------------------------------- looped
    def _levels(self) -> dict:
        return levels(self.k)

    # ------------------------------------------------------------------------------ split
    def _head(self, name, extra_params, cexpr, pid_axis0=True) -> list[str]:
        it = self.plan.index_dtype
        params = self.params + [w for w, _ in self.workspaces] + [f"{c}: tl.constexpr" for c in cexpr]
        pid = "tl.program_id(0)" if it == "tl.int32" else "tl.program_id(0).to(tl.int64)"
        ar = "tl.arange(0, XBLOCK)" + ("" if it == "tl.int32" else ".to(tl.int64)")
        return [
            "@triton.jit",
            f"def {name}({', '.join(params)}):",
            f"    xnumel = {self.plan.xnumel}",
            f"    xoffset = {pid} * XBLOCK",
            f"    xindex = xoffset + {ar}[:, None]",
            "    xmask = xindex < xnumel",
            f"    rnumel = {self.plan.rnumel}",
        ]

    def _render_split(self) -> str:
        """Two functions. ``_part`` (grid: row blocks x nsplit) reduces chunk ``program_id(1)`` of each
        row into workspace slot ``[split, row]`` (and does the row's pointwise stores); ``_done`` (grid: row
        blocks) combines the ``nsplit`` partials of each row with the builtin reductions, then computes and
        stores the per-row epilogue stages."""
        p = self.plan
        it = p.index_dtype
        reds = [st for st in self.k.stages if st.kind == "reduction"]
        ws = {}
        j = 0
        for st in reds:
            ws[st.name] = (f"ws{j}", f"wsi{j}" if st.reduction in ("argmax", "argmin") else None)
            j += 1
        # ---- part
        self._need_zero = False
        top = _Emitter(self, "    ")
        accs = {st.name: self._acc_init(top, st) for st in reds}
        rar = "tl.arange(0, RBLOCK)" + ("" if it == "tl.int32" else ".to(tl.int64)")
        sid = "tl.program_id(1)" if it == "tl.int32" else "tl.program_id(1).to(tl.int64)"
        top.line(f"rbase = {rar}[None, :]")
        top.line(f"rstart = {sid} * {p.rchunk}")
        top.line(f"for roffset in range(rstart, rstart + {p.rchunk}, RBLOCK):")
        em = _Emitter(self, "        ", parent=top)
        em.line("rindex = roffset + rbase")
        em.line("rmask = rindex < rnumel")
        for st in reds:
            self._acc_update(em, st, em.emit(st.expr), accs[st.name])
        for st in self.k.stages:
            if st.kind == "pointwise" and st.store is not None:
                self._store(em, st, em.emit(st.expr), row=False)
        top.lines += em.lines
        for st in reds:
            val, idx = self._partial_finish(top, st, accs[st.name])
            wv, wi = ws[st.name]
            top.line(f"tl.store({wv} + {sid} * xnumel + xindex, {val}, xmask)")
            if wi is not None:
                top.line(f"tl.store({wi} + {sid} * xnumel + xindex, {idx}, xmask)")
        part = self._head(self.fn_names[0], [], ["XBLOCK", "RBLOCK"])
        part += (self._zeros() if self._need_zero else []) + top.lines
        # ---- done
        self._need_zero = False
        self.row_values = {}
        top = _Emitter(self, "    ")
        sar = "tl.arange(0, SBLOCK)" + ("" if it == "tl.int32" else ".to(tl.int64)")
        top.line(f"sindex = {sar}[None, :]")
        top.line(f"smask = sindex < {p.nsplit}")
        for st in reds:
            wv, wi = ws[st.name]
            vdt = _acc_dtype(st)
            ident = {"sum": "0", "prod": "1", "any": "0", "all": "1"}.get(st.reduction)
            if ident is None:
                ident = _lowest(vdt) if st.reduction in ("max", "argmax") else _highest(vdt)
            a = {"acc": self.fresh(), "dtype": vdt}
            top.line(f"{a['acc']} = tl.load({wv} + sindex * xnumel + xindex, xmask & smask, other={ident})")
            if wi is not None:
                a["idx"] = self.fresh()
                top.line(f"{a['idx']} = tl.load({wi} + sindex * xnumel + xindex, xmask & smask, other=rnumel)")
            if st.reduction in ("max", "min") and vdt.is_floating_point and not self.nan_combine:
                a["nan"] = self.fresh()
                top.line(f"{a['nan']} = ({a['acc']} != {a['acc']}).to(tl.int32)")
            r = self._acc_finish(top, st, a)
            self.row_values[st.name] = r
            if st.store is not None:
                self._store(top, st, r, row=True)
        for st in self.k.stages:
            if st.kind == "outer":
                self._outer(top, st)
        done = self._head(self.fn_names[1], [], ["XBLOCK", "SBLOCK"])
        done += (self._zeros("SBLOCK") if self._need_zero else []) + top.lines
        return "\n".join(part) + "\n\n\n" + "\n".join(done) + "\n"

    def _lane_reduce(self, em: _Emitter, kind: str, a: dict) -> tuple[str, str | None]:
        """Reduce an ``[XBLOCK, RBLOCK]`` accumulator over its lanes to ``[XBLOCK, 1]``.

        Returns ``(value, index)``: for argmax/argmin the extreme value (NaN when a lane holds NaN) and the
        smallest index holding it; for the other reductions the value (NaN-propagated through the
        accumulator's NaN flag, when it has one) and None.
        """
        acc, vdt = a["acc"], a["dtype"]
        if kind in ("argmax", "argmin"):
            ident = _lowest(vdt) if kind == "argmax" else _highest(vdt)
            fn = "tl.max" if kind == "argmax" else "tl.min"
            idx = a["idx"]
            if vdt.is_floating_point:
                isn = em.tmp(f"{acc} != {acc}")
                hasn = em.tmp(f"tl.max({isn}.to(tl.int32), 1)[:, None] > 0")
                m = em.tmp(f"{fn}(tl.where({isn}, {ident}, {acc}), 1)[:, None]")
                target = em.tmp(f"tl.where({hasn}, {isn}, {acc} == {m})")
                m = em.tmp(f"tl.where({hasn}, float(\"nan\"), {m})")
            else:
                m = em.tmp(f"{fn}({acc}, 1)[:, None]")
                target = em.tmp(f"{acc} == {m}")
            i = em.tmp(f"tl.min(tl.where({target}, {idx}, rnumel), 1)[:, None].to(tl.int64)")
            return m, i
        if kind == "sum":
            r = em.tmp(f"tl.sum({acc}, 1)[:, None]")
        elif kind == "prod":
            r = em.tmp(f"tl.reduce({acc}, 1, _mul_combine)[:, None]")
        elif kind in ("max", "min") and vdt.is_floating_point and self.nan_combine:
            r = em.tmp(f"tl.reduce({acc}, 1, {'_max_nan' if kind == 'max' else '_min_nan'})[:, None]")
        elif kind in ("any", "max"):
            r = em.tmp(f"tl.max({acc}, 1)[:, None]")
        elif kind in ("all", "min"):
            r = em.tmp(f"tl.min({acc}, 1)[:, None]")
        else:
            raise NotImplementedError(f"reduction {kind}")
        if "nan" in a:
            hasn = em.tmp(f"tl.max({a['nan']}, 1)[:, None]")
            r = em.tmp(f"tl.where({hasn} > 0, float(\"nan\"), {r})")
        return r, None

    def _partial_finish(self, em: _Emitter, st: ir.Stage, a: dict):
        """A chunk's partial result per row ([XBLOCK, 1] value, and index for argmax/argmin)."""
        r, i = self._lane_reduce(em, st.reduction, a)
        if i is not None:
            return r, i
        return em.tmp(f"{r}.to({TL_TYPE[a['dtype']]})"), None

    def _looped(self) -> list[str]:
        self._need_zero = False
        avail = self._levels()
        stages = self.k.stages
        n_loops = 0
        for st in stages:
            if st.kind == "reduction":
                n_loops = max(n_loops, avail[st.name])
            elif st.kind == "pointwise" and st.store is not None:
                n_loops = max(n_loops, avail[st.name] + 1)
        top = _Emitter(self, "    ")
        for level in range(n_loops):
            # row values that are ready before this loop
            for st in stages:
                if st.kind == "outer" and avail[st.name] == level:
                    self._outer(top, st)
            reds = [st for st in stages if st.kind == "reduction" and avail[st.name] == level + 1]
            stores = [st for st in stages if st.kind == "pointwise" and st.store is not None
                      and avail[st.name] == level]
            if not reds and not stores:
                continue
            accs = {}
            for st in reds:
                accs[st.name] = self._acc_init(top, st)
            top.line("for roffset in range(0, rnumel, RBLOCK):")
            em = _Emitter(self, "        ", parent=top)
            em.line("rindex = roffset + rbase")
            em.line("rmask = rindex < rnumel")
            for st in reds:
                v = em.emit(st.expr)
                self._acc_update(em, st, v, accs[st.name])
            for st in stores:
                v = em.emit(st.expr)
                self._store(em, st, v, row=False)
            top.lines += em.lines
            for st in reds:
                r = self._acc_finish(top, st, accs[st.name])
                self.row_values[st.name] = r
                if st.store is not None:
                    self._store(top, st, r, row=True)
        for st in stages:
            if st.kind == "outer" and avail[st.name] >= n_loops and st.name not in self.row_values:
                self._outer(top, st)
        return (self._zeros() if self._need_zero else []) + top.lines

    def _outer(self, em: _Emitter, st: ir.Stage) -> None:
        v = em.emit(st.expr)
        self.row_values[st.name] = v
        if st.store is not None:
            self._store(em, st, v, row=True)

    def _acc_init(self, em: _Emitter, st: ir.Stage) -> dict:
        kind = st.reduction
        vdt = compute_dtype(st.expr.dtype)
        if vdt == torch.bool or kind in ("any", "all"):
            vdt = torch.int32
        t = TL_TYPE[vdt]
        acc = self.fresh()
        shape = "[XBLOCK, RBLOCK]"
        init = {"sum": "0", "prod": "1", "any": "0", "all": "1"}.get(kind)
        if init is None:
            init = _lowest(vdt) if kind in ("max", "argmax") else _highest(vdt)
        em.line(f"{acc} = tl.full({shape}, {init}, {t})")
        out = {"acc": acc, "dtype": vdt}
        if kind in ("argmax", "argmin"):
            idx = self.fresh()
            em.line(f"{idx} = tl.full({shape}, rnumel, {self.plan.index_dtype})")
            out["idx"] = idx
        if kind in ("max", "min") and vdt.is_floating_point and not self.nan_combine:
            nan = self.fresh()
            em.line(f"{nan} = tl.zeros({shape}, tl.int32)")
            out["nan"] = nan
        return out

    def _acc_update(self, em: _Emitter, st: ir.Stage, v: str, a: dict) -> None:
        kind = st.reduction
        acc = a["acc"]
        vdt = a["dtype"]
        t = TL_TYPE[vdt]
        mask = "rmask"
        if kind in ("any", "all"):
            v = em.tmp(f"({v} != 0).to(tl.int32)")
        elif compute_dtype(st.expr.dtype) == torch.bool:
            v = em.tmp(f"{v}.to(tl.int32)")
        if kind == "sum":
            em.line(f"{acc} = {acc} + tl.where({mask}, {v}, 0).to({t})")
        elif kind == "prod":
            em.line(f"{acc} = {acc} * tl.where({mask}, {v}, 1).to({t})")
        elif kind == "any":
            em.line(f"{acc} = tl.maximum({acc}, tl.where({mask}, {v}, 0))")
        elif kind == "all":
            em.line(f"{acc} = tl.minimum({acc}, tl.where({mask}, {v}, 1))")
        elif kind in ("max", "min"):
            ident = _lowest(vdt) if kind == "max" else _highest(vdt)
            fn = "tl.maximum" if kind == "max" else "tl.minimum"
            nanarg = ", propagate_nan=tl.PropagateNan.ALL" if vdt.is_floating_point and self.nan_combine else ""
            em.line(f"{acc} = {fn}({acc}, tl.where({mask}, {v}, {ident}).to({t}){nanarg})")
            if "nan" in a:
                em.line(f"{a['nan']} = {a['nan']} | ((({v} != {v}) & {mask}).to(tl.int32))")
        elif kind in ("argmax", "argmin"):
            ident = _lowest(vdt) if kind == "argmax" else _highest(vdt)
            cmp = ">" if kind == "argmax" else "<"
            vm = em.tmp(f"tl.where({mask}, {v}, {ident}).to({t})")
            take = f"({vm} {cmp} {acc})"
            if vdt.is_floating_point:
                take = f"({take} | (({vm} != {vm}) & ({acc} == {acc})))"
            idx = a["idx"]
            tk = em.tmp(f"{mask} & ({take} | ({idx} == rnumel))")
            em.line(f"{acc} = tl.where({tk}, {vm}, {acc})")
            em.line(f"{idx} = tl.where({tk}, rindex + tl.zeros([XBLOCK, RBLOCK], {self.plan.index_dtype}), {idx})")
        else:
            raise NotImplementedError(f"reduction {kind}")

    def _acc_finish(self, em: _Emitter, st: ir.Stage, a: dict) -> str:
        out_ct = tl_compute(st.dtype)
        r, i = self._lane_reduce(em, st.reduction, a)
        if i is not None:
            return em.tmp(f"{i}.to({out_ct})")
        if st.dtype == torch.bool:
            return em.tmp(f"({r} != 0)")
        return em.tmp(f"{r}.to({out_ct})")


MODULE_HEADER = '''"""Triton kernels generated by mend for one graph."""
import triton
import triton.language as tl
{math_import}


@triton.jit
def _mul_combine(a, b):
    return a * b


@triton.jit
def _max_nan(a, b):
    return tl.maximum(a, b, propagate_nan=tl.PropagateNan.ALL)


@triton.jit
def _min_nan(a, b):
    return tl.minimum(a, b, propagate_nan=tl.PropagateNan.ALL)

'''


def render_module(sources: list[KernelSource], interpret: bool) -> str:
    parts = [MODULE_HEADER.format(math_import=import_line(interpret))]
    for s in sources:
        parts.append("\n" + s.render())
    return "\n".join(parts)

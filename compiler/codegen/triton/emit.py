"""Triton for element expressions: types, literals, index printing, casts, and the Triton table of the
shared emitter (``codegen/emitter.py``).

float16/bfloat16 values are computed in float32 and rounded on casts and stores; bool is ``tl.int1``. Math
without a ``tl`` builtin goes through ``tm``: libdevice on a GPU, ``shim.py`` in the interpreter.
"""

from __future__ import annotations

import math

import torch

from ... import ir
from ...ir.ops import OPS
from ...ir.symbolic import IndexDialect, nested_minmax, print_index_expr
from ..emitter import Emitter
from .shim import NAMES as SHIM_NAMES

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
HALF = (torch.float16, torch.bfloat16)


def next_pow2(n: int) -> int:
    return 1 if n <= 1 else 1 << (int(n) - 1).bit_length()


def compute_dtype(dt: torch.dtype) -> torch.dtype:
    if dt not in TL_TYPE:
        raise NotImplementedError(f"dtype {dt} has no Triton mapping")
    return torch.float32 if dt in HALF else dt


def tl_compute(dt: torch.dtype) -> str:
    return TL_TYPE[compute_dtype(dt)]



TRITON_INDEX = IndexDialect(str, "//", nested_minmax({"min": "tl.minimum", "max": "tl.maximum"}))


def print_index(e) -> str:
    """An integer index expression as Triton code."""
    return print_index_expr(e, TRITON_INDEX)


def const(value, dt, ndim: int) -> str:
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


def lowest(ct: torch.dtype) -> str:
    if ct.is_floating_point:
        return 'float("-inf")'
    if ct == torch.bool:
        return "0"
    return str(torch.iinfo(ct).min)


def highest(ct: torch.dtype) -> str:
    if ct.is_floating_point:
        return 'float("inf")'
    if ct == torch.bool:
        return "1"
    return str(torch.iinfo(ct).max)



TL_FLOAT = {
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
# libdevice functions (``shim.py`` under the interpreter), called with the op's arguments
SHIM = {name: f"tm.{name}(" + ", ".join("{%d}" % i for i in range(OPS[name].arity)) + ")"
        for name in SHIM_NAMES if name in OPS}
ANY = {
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
INT = {
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
BOOL = {
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


def cast(src: str, sdt, ddt) -> str:
    if ddt == torch.bool:
        return f"({src} != 0)"
    if ddt in HALF:
        return f"{src}.to({TL_TYPE[ddt]}).to(tl.float32)"
    return f"{src}.to({tl_compute(ddt)})"



class TritonEmitter(Emitter):
    """Statements ``tmp<n> = <expr>`` at the current tile of kernel source ``src``
    (:class:`~mend.compiler.codegen.triton.kernel.KernelSource`: names, indices, masks and stage values),
    indented by ``indent``; ``parent``: the emitter of the enclosing block, whose values are in scope."""

    TABLES = {"bool": (BOOL, ANY), "float": (TL_FLOAT, SHIM, ANY), "int": (INT, ANY)}
    FLOAT_FUNCTIONS = frozenset(TL_FLOAT) | frozenset(SHIM)
    FLOAT_OF = ("int",)
    UNSUPPORTED = " has no Triton lowering"

    def __init__(self, src, indent: str, parent: "TritonEmitter | None" = None):
        super().__init__(parent)
        self.src = src
        self.indent = indent

    def line(self, text: str) -> None:
        self.lines.append(self.indent + text)

    def tmp(self, text: str) -> str:
        name = self.src.fresh()
        self.line(f"{name} = {text}")
        return name

    def bind(self, dtype, text: str) -> str:
        return self.tmp(text)

    def type_name(self, dtype) -> str:
        return tl_compute(dtype)

    def const(self, e: ir.Const) -> str:
        return self.tmp(const(e.value, e.dtype, self.src.ndim))

    def local(self, e: ir.Local) -> str:
        return self.src.local_value(e, self)

    def load(self, e: ir.Load) -> str:
        idx = self.src.index(e.index)
        mask = self.src.mask_for(idx)
        m = f", {mask}, other=0" if mask else ""
        text = f"tl.load({self.src.ptr[e.buf]} + {idx.text}{m})"
        if e.dtype in HALF:
            text += ".to(tl.float32)"
        return self.tmp(text)

    def index_value(self, e: ir.IndexValue) -> str:
        idx = self.src.index(e.index)
        ct = tl_compute(e.dtype)
        if not idx.syms:
            return self.tmp(const(int(e.index), e.dtype, self.src.ndim))
        return self.tmp(f"({idx.text}).to({ct})")

    def cast(self, src: str, sdt, ddt) -> str:
        return cast(src, sdt, ddt)

    def special(self, e: ir.Op, args, adt) -> str | None:
        cadt = compute_dtype(adt)
        if cadt.is_floating_point:
            if e.op in ("maximum", "minimum"):
                return self._fminmax(e.op, args)
            if e.op in ("floordiv", "truncdiv", "remainder", "sign"):
                return self._float_special(e.op, args, cadt)
        elif cadt != torch.bool and e.op in ("floordiv", "truncdiv", "remainder", "fmod", "sign", "pow"):
            return self._int_special(e.op, args, cadt)
        return None

    def float_of_ints(self, e: ir.Op, args, adt) -> str:
        # float functions of integer operands compute in float32 (lowering casts normally)
        fargs = [self.tmp(f"{a}.to(tl.float32)") for a in args]
        fe = ir.Op(e.op, tuple(ir.Local(f"_f{i}", torch.float32) for i in range(len(args))), torch.float32)
        sub = TritonEmitter(self.src, self.indent, self)
        for i, a in enumerate(fargs):
            sub.memo[fe.args[i]] = a
        v = sub.emit(fe)
        self.lines += sub.lines
        return self.tmp(cast(v, torch.float32, e.dtype))

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


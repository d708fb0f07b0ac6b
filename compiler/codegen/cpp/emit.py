"""C++ for element expressions: types, literals, casts, stores, reduction identities, and the C++ table of
the shared emitter (``codegen/emitter.py``).

float16 and bfloat16 are computed in float32 and rounded on casts and stores (bfloat16 round to nearest
even, ``prelude.h``); bool is stored as one byte 0/1 and computed as ``bool``. Math goes through the
prelude's ``mend_*`` functions (branch-free and vectorizable for float, compiler builtins otherwise).
"""

from __future__ import annotations

import math

import torch

from ... import ir
from ...ir.symbolic import print_c, simplify_index
from ..emitter import Emitter

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


def const(value, dt) -> str:
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


# format tables of the shared emitter, by operand class ({t}: the operand's compute type)
FLOAT_FN = {
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
    "isinf": "(mend_fabs({0}) == ({t})MEND_INF_F)",
}
INT_FN = {
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
BOOL_FN = {
    "bitwise_not": "(!{0})",
}
ANY_FN = {
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


def cast(src: str, sdt, ddt) -> str:
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


def store(ptr: str, idx: str, value: str, dt) -> str:
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


def reduction_init(kind, dt) -> str:
    """The identity a ``kind`` reduction over ``dt`` values starts from."""
    ct = compute_type(dt)
    if kind in _INIT:
        return f"(({ct}){_INIT[kind]})"
    big = f"(({ct})MEND_INF_F)" if dt.is_floating_point else _INT_LIMITS[ct][1]
    low = f"(-({ct})MEND_INF_F)" if dt.is_floating_point else _INT_LIMITS[ct][0]
    if kind in ("max", "argmax"):
        return low
    return big


class CppEmitter(Emitter):
    """Statements ``<type> t<n> = <expr>;`` at one iteration point. ``ptr``: buffer name -> C pointer name;
    ``local_ref``: Local -> C expression; ``mapping``/``ranges``: the kernel variables' substitution
    (coalesced loops) and the new variables' ranges; ``recip``: Local name -> C name of its reciprocal
    (divisors fixed for a whole row)."""

    TABLES = {"bool": (BOOL_FN, INT_FN, ANY_FN), "float": (FLOAT_FN, ANY_FN), "int": (INT_FN, ANY_FN)}
    FLOAT_FUNCTIONS = frozenset(FLOAT_FN)
    FLOAT_OF = ("bool", "int")

    def __init__(self, kernel_vars: dict, local_ref, mapping=None, ranges=None, prefix="t", recip=None):
        super().__init__()
        self.ptr = kernel_vars
        self.local_ref = local_ref
        self.mapping = mapping or {}
        self.ranges = ranges or {}
        self.n = 0
        self.prefix = prefix
        self.recip = recip or {}

    def index(self, e) -> str:
        if self.mapping:
            e = simplify_index(e.xreplace(self.mapping), self.ranges)
        return print_c(e)

    def bind(self, dt, text) -> str:
        name = f"{self.prefix}{self.n}"
        self.n += 1
        self.lines.append(f"{compute_type(dt)} {name} = {text};")
        return name

    def type_name(self, dt) -> str:
        return compute_type(dt)

    def const(self, e: ir.Const) -> str:
        return const(e.value, e.dtype)

    def local(self, e: ir.Local) -> str:
        return self.local_ref(e)

    def load(self, e: ir.Load) -> str:
        p = f"{self.ptr[e.buf]}[{self.index(e.index)}]"
        if e.dtype == torch.bfloat16:
            p = f"mend_bf16_to_f32({p})"
        elif e.dtype == torch.float16:
            p = f"(float)({p})"
        elif e.dtype == torch.bool:
            p = f"({p} != 0)"
        return self.bind(e.dtype, p)

    def index_value(self, e: ir.IndexValue) -> str:
        return self.bind(e.dtype, f"static_cast<{compute_type(e.dtype)}>({self.index(e.index)})")

    def cast(self, src, sdt, ddt) -> str:
        return cast(src, sdt, ddt)

    def special(self, e: ir.Op, args, adt) -> str | None:
        if e.op == "truediv" and isinstance(e.args[1], ir.Local) and e.args[1].name in self.recip:
            # x / s with s fixed for the whole row: one division per row, a multiply per element (as ATen's
            # softmax does); differs from a correctly rounded division by at most one ulp
            return self.bind(e.dtype, f"({args[0]} * {self.recip[e.args[1].name]})")
        return None

    def float_of_ints(self, e: ir.Op, args, adt) -> str:
        # float functions of integer operands compute in float (the lowering casts normally)
        text = FLOAT_FN[e.op].format(*[f"(float){a}" for a in args], t=compute_type(adt))
        return self.bind(e.dtype, text)

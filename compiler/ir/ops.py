"""The pointwise op table: every ``Op.op`` name the IR may contain, with arity and a relative cost.

The cost feeds the realization heuristic (a value with several users is computed once and stored when
re-computing it would cost more than ``REALIZE_COST``): transcendental functions count more than
arithmetic, so they are never duplicated across consumers.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class OpInfo:
    name: str
    arity: int
    cost: int
    doc: str


_TABLE = [
    # arithmetic (operands and result share the result dtype)
    ("add", 2, 1, "a + b"),
    ("sub", 2, 1, "a - b"),
    ("mul", 2, 1, "a * b"),
    ("truediv", 2, 2, "a / b (floating)"),
    ("floordiv", 2, 3, "floor(a / b), Python semantics for integers"),
    ("truncdiv", 2, 3, "trunc(a / b)"),
    ("remainder", 2, 3, "a - floor(a / b) * b (sign of b, like torch.remainder)"),
    ("fmod", 2, 3, "C fmod (sign of a)"),
    ("neg", 1, 1, "-a"),
    ("abs", 1, 1, "|a|"),
    ("maximum", 2, 1, "max(a, b), NaN-propagating"),
    ("minimum", 2, 1, "min(a, b), NaN-propagating"),
    ("pow", 2, 4, "a ** b"),
    ("reciprocal", 1, 2, "1 / a"),
    ("sign", 1, 1, "sign(a)"),
    ("fma", 3, 1, "a * b + c"),
    # transcendental and rounding (floating)
    ("exp", 1, 4, "e ** a"),
    ("exp2", 1, 4, "2 ** a"),
    ("expm1", 1, 4, "e ** a - 1"),
    ("log", 1, 4, "ln a"),
    ("log2", 1, 4, "log2 a"),
    ("log10", 1, 4, "log10 a"),
    ("log1p", 1, 4, "ln(1 + a)"),
    ("sqrt", 1, 2, "sqrt a"),
    ("rsqrt", 1, 2, "1 / sqrt a"),
    ("sin", 1, 4, ""),
    ("cos", 1, 4, ""),
    ("tan", 1, 4, ""),
    ("asin", 1, 4, ""),
    ("acos", 1, 4, ""),
    ("atan", 1, 4, ""),
    ("sinh", 1, 4, ""),
    ("cosh", 1, 4, ""),
    ("tanh", 1, 4, ""),
    ("asinh", 1, 4, ""),
    ("acosh", 1, 4, ""),
    ("atanh", 1, 4, ""),
    ("atan2", 2, 4, ""),
    ("sigmoid", 1, 4, "1 / (1 + e ** -a)"),
    ("erf", 1, 4, ""),
    ("erfc", 1, 4, ""),
    ("floor", 1, 1, ""),
    ("ceil", 1, 1, ""),
    ("round", 1, 1, "round half to even"),
    ("trunc", 1, 1, ""),
    # predicates (result bool; operands share a dtype)
    ("eq", 2, 1, ""),
    ("ne", 2, 1, ""),
    ("lt", 2, 1, ""),
    ("le", 2, 1, ""),
    ("gt", 2, 1, ""),
    ("ge", 2, 1, ""),
    ("isnan", 1, 1, ""),
    ("isinf", 1, 1, ""),
    ("logical_and", 2, 1, "operands bool"),
    ("logical_or", 2, 1, "operands bool"),
    ("logical_xor", 2, 1, "operands bool"),
    ("logical_not", 1, 1, "operand bool"),
    ("bitwise_and", 2, 1, "integers or bool"),
    ("bitwise_or", 2, 1, "integers or bool"),
    ("bitwise_xor", 2, 1, "integers or bool"),
    ("bitwise_not", 1, 1, "integers or bool"),
    # selection and conversion
    ("where", 3, 1, "a ? b : c (a bool)"),
    ("cast", 1, 0, "convert to the Op's dtype (rounds when the target is a half type)"),
]

OPS: dict[str, OpInfo] = {n: OpInfo(n, a, c, d) for n, a, c, d in _TABLE}

REALIZE_COST = 2  # a multi-user value whose op cost exceeds this is realized (stored) once
MAX_INLINE_COST = 48  # a value whose expression grows beyond this is realized regardless

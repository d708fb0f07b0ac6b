"""Index arithmetic for the loop IR: integer floor division and modulo as sympy functions, simplification
with known variable ranges, and a C printer.

All index expressions in mend's IR are integer-valued sympy expressions over non-negative loop variables
``x0, x1, ...`` (each ranging over ``[0, size)``). Index expressions are never negative at run time, so
``FloorDiv`` and ``IMod`` print as C's ``/`` and ``%``. ``sympy.simplify`` is never used (slow); instead
``simplify_index`` applies the two rules that matter for views and reshapes:

* ``(k*d*v + r) // d  ==  k*v + r // d`` and ``r // d == 0`` when ``0 <= r < d``;
* ``(k*m*v + r) mod m ==  r mod m``      and ``r mod m == r`` when ``0 <= r < m``.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable
from dataclasses import dataclass

import sympy


class FloorDiv(sympy.Function):
    """Integer floor division of non-negative integer expressions."""

    is_integer = True
    is_nonnegative = True

    @classmethod
    def eval(cls, a, d):
        if d == 1:
            return a
        if a.is_Integer and d.is_Integer:
            return sympy.Integer(int(a) // int(d))
        if a == 0:
            return sympy.Integer(0)
        return None


class IMod(sympy.Function):
    """Integer modulo of a non-negative integer expression."""

    is_integer = True
    is_nonnegative = True

    @classmethod
    def eval(cls, a, m):
        if m == 1:
            return sympy.Integer(0)
        if a.is_Integer and m.is_Integer:
            return sympy.Integer(int(a) % int(m))
        if a == 0:
            return sympy.Integer(0)
        return None


class IMin(sympy.Function):
    """Integer minimum (cheap: sympy.Min's constructor runs an expensive dominance search)."""

    is_integer = True

    @classmethod
    def eval(cls, a, b):
        if a.is_Integer and b.is_Integer:
            return sympy.Integer(min(int(a), int(b)))
        return None


class IMax(sympy.Function):
    """Integer maximum."""

    is_integer = True

    @classmethod
    def eval(cls, a, b):
        if a.is_Integer and b.is_Integer:
            return sympy.Integer(max(int(a), int(b)))
        return None


def clamp(e, lo: int, hi: int):
    """``min(max(e, lo), hi)`` as an index expression."""
    return IMin(IMax(e, sympy.Integer(lo)), sympy.Integer(hi))


@functools.lru_cache(maxsize=None)
def var(i: int, prefix: str = "x") -> sympy.Symbol:
    """The canonical iteration variable ``x{i}`` (integer, non-negative)."""
    return sympy.Symbol(f"{prefix}{i}", integer=True, nonnegative=True)


def variables(n: int, prefix: str = "x") -> tuple[sympy.Symbol, ...]:
    return tuple(var(i, prefix) for i in range(n))


def contiguous_strides(size) -> tuple[int, ...]:
    strides = []
    acc = 1
    for s in reversed(tuple(size)):
        strides.append(acc)
        acc *= max(int(s), 1)
    return tuple(reversed(strides))


def bounds(e, ranges) -> tuple[int, int] | None:
    """Inclusive (min, max) of an integer expression, or None when unknown."""
    if e.is_Integer:
        return int(e), int(e)
    if e.is_Symbol:
        n = ranges.get(e)
        if n is None:
            return None
        return 0, max(int(n) - 1, 0)
    if isinstance(e, FloorDiv):
        b = bounds(e.args[0], ranges)
        d = int(e.args[1])
        if b is None or b[0] < 0:
            return None
        return b[0] // d, b[1] // d
    if isinstance(e, IMod):
        b = bounds(e.args[0], ranges)
        m = int(e.args[1])
        if b is not None and b[0] >= 0 and b[1] < m:
            return b
        return 0, m - 1
    if e.is_Add:
        lo = hi = 0
        for t in e.args:
            b = bounds(t, ranges)
            if b is None:
                return None
            lo += b[0]
            hi += b[1]
        return lo, hi
    if e.is_Mul:
        c, rest = e.as_coeff_Mul()
        if c.is_Integer and rest is not e:
            b = bounds(rest, ranges)
            if b is None:
                return None
            c = int(c)
            return (c * b[0], c * b[1]) if c >= 0 else (c * b[1], c * b[0])
        return None
    if isinstance(e, (IMin, IMax)):
        bs = [bounds(a, ranges) for a in e.args]
        if any(b is None for b in bs):
            return None
        f = min if isinstance(e, IMin) else max
        return f(b[0] for b in bs), f(b[1] for b in bs)
    return None


def _split_terms(a, k: int):
    """Split ``a`` into (sum of terms whose integer coefficient is a multiple of k, the rest)."""
    mult = []
    rest = []
    for t in sympy.Add.make_args(a):
        c, _ = t.as_coeff_Mul()
        if c.is_Integer and int(c) % k == 0:
            mult.append(t)
        else:
            rest.append(t)
    return sympy.Add(*mult), sympy.Add(*rest)


def _floordiv(a, d: int, ranges):
    if d == 1:
        return a
    a = sympy.expand(a)
    mult, rest = _split_terms(a, d)
    b = bounds(rest, ranges)
    if b is not None and b[0] >= 0 and b[1] < d:
        return sympy.expand(mult / d)
    if rest == 0:
        return sympy.expand(mult / d)
    # (g*b + r) // d == b // (d/g) when g | d and 0 <= r < g
    cands = set()
    for t in sympy.Add.make_args(rest):
        c, _ = t.as_coeff_Mul()
        if c.is_Integer and int(c) > 0:
            g = math.gcd(int(c), d)
            if 1 < g < d:
                cands.add(g)
    for g in sorted(cands, reverse=True):
        m2, r2 = _split_terms(rest, g)
        b2 = bounds(r2, ranges)
        if b2 is not None and b2[0] >= 0 and b2[1] < g:
            inner = sympy.expand(m2 / g)
            return sympy.expand(mult / d) + _floordiv(inner, d // g, ranges)
    return sympy.expand(mult / d) + FloorDiv(rest, sympy.Integer(d))


def _recombine(e):
    """``c*m*(a // (d*m)) + c*((a // d) mod m)  ->  c*(a // d)``, repeated (undoes unravel of a flat index)."""
    changed = True
    while changed and e.is_Add:
        changed = False
        terms = {}
        for t in e.args:
            c, rest = t.as_coeff_Mul()
            terms[rest] = terms.get(rest, 0) + c
        for rest, c in list(terms.items()):
            if not isinstance(rest, IMod):
                continue
            inner, m = rest.args
            if isinstance(inner, FloorDiv):
                a, d = inner.args
            else:
                a, d = inner, sympy.Integer(1)
            partner = FloorDiv(a, d * m) if d * m != 1 else a
            pc = terms.get(partner)
            if pc is not None and pc == c * m:
                del terms[rest]
                del terms[partner]
                new = c * (FloorDiv(a, d) if d != 1 else a)
                e = sympy.expand(sympy.Add(*[cc * r for r, cc in terms.items()]) + new)
                changed = True
                break
    return e


def _mod(a, m: int, ranges):
    if m == 1:
        return sympy.Integer(0)
    _, rest = _split_terms(sympy.expand(a), m)
    b = bounds(rest, ranges)
    if b is not None and b[0] >= 0 and b[1] < m:
        return rest
    if rest == 0:
        return sympy.Integer(0)
    return IMod(rest, sympy.Integer(m))


def simplify_index(expr, ranges: dict) -> sympy.Expr:
    """Simplify an index expression given ``ranges`` (symbol -> size). Bottom-up, rules above.

    Memoized on the expression and the ranges of its own symbols: a graph's kernels ask for the same
    indices many times (planning, rendering, fusion checks), and the rules are pure."""
    expr = sympy.sympify(expr)
    if not expr.has(FloorDiv, IMod):
        return sympy.expand(expr)
    key = (expr, tuple(sorted(((s.name, ranges[s]) for s in expr.free_symbols if s in ranges),
                              key=lambda kv: kv[0])))
    out = _SIMPLIFIED.get(key)
    if out is None:
        if len(_SIMPLIFIED) > 65536:
            _SIMPLIFIED.clear()
        out = _SIMPLIFIED[key] = _simplify(expr, ranges)
    return out


_SIMPLIFIED: dict = {}  # (expression, ranges of its symbols) -> simplified


def _simplify(expr, ranges: dict) -> sympy.Expr:

    def rec(e):
        if e.is_Atom:
            return e
        args = [rec(a) for a in e.args]
        if isinstance(e, FloorDiv):
            return _floordiv(args[0], int(args[1]), ranges)
        if isinstance(e, IMod):
            return _mod(args[0], int(args[1]), ranges)
        if isinstance(e, (IMin, IMax)):
            b0, b1 = bounds(args[0], ranges), bounds(args[1], ranges)
            if b0 is not None and b1 is not None:
                if isinstance(e, IMin):
                    if b0[1] <= b1[0]:
                        return args[0]
                    if b1[1] <= b0[0]:
                        return args[1]
                else:
                    if b0[0] >= b1[1]:
                        return args[0]
                    if b1[0] >= b0[1]:
                        return args[1]
            return e.func(*args)
        r = e.func(*args)
        return _recombine(sympy.expand(r)) if r.is_Add else r

    return _recombine(sympy.expand(rec(expr)))


def unravel(flat, size) -> tuple[sympy.Expr, ...]:
    """Row-major indices of a flat index into ``size``."""
    strides = contiguous_strides(size)
    out = []
    for s, st in zip(size, strides):
        if s == 1:
            out.append(sympy.Integer(0))
        else:
            out.append(IMod(FloorDiv(flat, sympy.Integer(st)), sympy.Integer(s)))
    return tuple(out)


@dataclass(frozen=True)
class IndexDialect:
    """How one target language writes integer index arithmetic: the one printer below swaps this table.

    ``literal`` writes an integer, ``floordiv`` is the operator of :class:`FloorDiv` (operands are never
    negative, so C's ``/`` and Python's ``//`` agree), ``minmax(kind, args)`` writes ``IMin``/``IMax``
    (``kind`` is ``"min"`` or ``"max"``), and ``signed`` writes ``a + -1*b`` as ``a - b`` and ``-1*x`` as ``-x``.
    """

    literal: Callable[[int], str]
    floordiv: str
    minmax: Callable[[str, list[str]], str]
    signed: bool = True


def nested_minmax(names: dict[str, str]) -> Callable[[str, list[str]], str]:
    """``min(a, b, c)`` as nested two-argument calls of ``names[kind]`` (C helpers, ``tl.minimum``)."""
    def write(kind: str, args: list[str]) -> str:
        s = args[0]
        for a in args[1:]:
            s = f"{names[kind]}({s}, {a})"
        return s
    return write


def print_index_expr(e, d: IndexDialect) -> str:
    """An integer index expression as code of dialect ``d``."""
    if e.is_Integer:
        return d.literal(int(e))
    if e.is_Symbol:
        return e.name
    if e.is_Add:
        terms = [print_index_expr(t, d) for t in e.args]
        if not d.signed:
            return "(" + " + ".join(terms) + ")"
        s = terms[0]
        for t in terms[1:]:
            s = f"{s} - {t[1:]}" if t.startswith("-") else f"{s} + {t}"
        return f"({s})"
    if e.is_Mul:
        c, rest = e.as_coeff_Mul()
        if d.signed and c == -1:
            return f"-{print_index_expr(rest, d)}"
        return "*".join(print_index_expr(a, d) for a in e.args)
    if isinstance(e, FloorDiv):
        return f"({print_index_expr(e.args[0], d)} {d.floordiv} {print_index_expr(e.args[1], d)})"
    if isinstance(e, IMod):
        return f"({print_index_expr(e.args[0], d)} % {print_index_expr(e.args[1], d)})"
    if isinstance(e, (IMin, IMax)):
        return d.minmax("min" if isinstance(e, IMin) else "max", [print_index_expr(a, d) for a in e.args])
    raise NotImplementedError(f"cannot print index expression {e!r}")


C_INDEX = IndexDialect(lambda v: f"{v}L" if abs(v) > 2**31 - 1 else str(v), "/",
                       nested_minmax({"min": "mend_imin", "max": "mend_imax"}))
PY_INDEX = IndexDialect(str, "//", lambda kind, args: f"{kind}(" + ", ".join(args) + ")", signed=False)


def print_c(e) -> str:
    """Print an integer index expression as C (int64_t arithmetic)."""
    return print_index_expr(e, C_INDEX)


def print_py(e) -> str:
    """Print an index expression as Python integer arithmetic (``//``, ``%``)."""
    return print_index_expr(e, PY_INDEX)

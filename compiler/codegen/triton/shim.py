"""The libdevice shim of the Triton generator: math that ``triton.language`` has no builtin for.

Generated kernels call these functions as ``tm.<name>(x)``. What ``tm`` is depends on where the kernel runs
(:func:`import_line` writes the import into the generated module):

* on a GPU, ``tm`` is ``triton.language.extra.libdevice`` (the vendor math library, correctly rounded to
  a few ulp);
* under ``TRITON_INTERPRET=1`` (CPU-only test runs) libdevice does not exist (its functions are stubs that
  return None), so ``tm`` is this module: the same names, written with builtin ``tl`` operations (which
  the interpreter executes with numpy). A few inverse trigonometric functions have no short ``tl``
  formula; they run numpy's function on the interpreter's array directly.

Every function here takes and returns float32 (or float64) tensors. The formulas favour accuracy where it
is cheap (Kahan's tricks for ``expm1``/``log1p``), but they are a test substitute, not a replacement for
libdevice.
"""

from __future__ import annotations

import triton.language as tl

# Every name a generated kernel may call through ``tm``; each exists in libdevice with the same signature.
NAMES = (
    "tanh", "expm1", "log1p", "log10", "tan", "asin", "acos", "atan", "sinh", "cosh", "asinh", "acosh",
    "atanh", "atan2", "erfc", "trunc", "nearbyint", "pow",
)

_LOG10_E = 0.4342944819032518


def import_line(interpret: bool) -> str:
    """The import a generated module uses to bind ``tm``."""
    if interpret:
        return "from mend.compiler.codegen.triton import shim as tm"
    return "from triton.language.extra import libdevice as tm"


def tanh(x):
    # tanh(x) = sign(x) * (1 - e) / (1 + e), e = exp(-2|x|); expm1 keeps small |x| accurate
    a = tl.abs(x)
    e = expm1(-2.0 * a)
    t = -e / (e + 2.0)
    return tl.where(x < 0, -t, t)


def expm1(x):
    # Kahan: u = exp(x); (u - 1) * x / log(u), exact where u rounds to 1
    u = tl.exp(x)
    um1 = u - 1.0
    small = um1 == 0.0
    big = um1 == float("inf")
    safe_u = tl.where(small | big, 2.0, u)
    r = (safe_u - 1.0) * x / tl.log(safe_u)
    r = tl.where(u == 0.0, -1.0, r)
    return tl.where(small, x, tl.where(big, um1, r))


def log1p(x):
    # Kahan: u = 1 + x; log(u) * x / (u - 1), exact where u rounds to 1
    u = 1.0 + x
    d = u - 1.0
    exact = d == 0.0
    safe_d = tl.where(exact, 1.0, d)
    r = tl.log(u) * (x / safe_d)
    inf_or_edge = (u == float("inf")) | (u <= 0.0)
    return tl.where(exact, x, tl.where(inf_or_edge, tl.log(u), r))


def log10(x):
    return tl.log(x) * _LOG10_E


def tan(x):
    return tl.sin(x) / tl.cos(x)


def sinh(x):
    a = tl.abs(x)
    e = expm1(a)
    r = 0.5 * (e + e / (e + 1.0))
    return tl.where(x < 0, -r, r)


def cosh(x):
    e = tl.exp(tl.abs(x))
    return 0.5 * (e + 1.0 / e)


def asinh(x):
    a = tl.abs(x)
    r = log1p(a + a * a / (1.0 + tl.sqrt(1.0 + a * a)))
    big = a > 1e18
    r = tl.where(big, tl.log(a) + 0.6931471805599453, r)
    return tl.where(x < 0, -r, r)


def acosh(x):
    return tl.log(x + tl.sqrt(x * x - 1.0))


def atanh(x):
    return 0.5 * log1p(2.0 * x / (1.0 - x))


def erfc(x):
    return 1.0 - tl.math.erf(x)


def trunc(x):
    return tl.where(x < 0, tl.ceil(x), tl.floor(x))


def nearbyint(x):
    # round half to even
    r = tl.floor(x + 0.5)
    tie = (r - x) == 0.5
    odd = (r - 2.0 * tl.floor(r * 0.5)) == 1.0
    return tl.where(tie & odd, r - 1.0, r)


def pow(a, b):
    # a ** b = 2 ** (b * log2|a|), with the sign of an odd integer power and IEEE special cases
    mag = tl.exp2(b * tl.log2(tl.abs(a)))
    b_int = tl.floor(b) == b
    b_odd = b_int & ((b - 2.0 * tl.floor(b * 0.5)) == 1.0)
    neg = a < 0
    r = tl.where(neg & b_odd, -mag, mag)
    r = tl.where(neg & (b_int == 0), float("nan"), r)
    return tl.where((b == 0.0) | (a == 1.0), 1.0, r)


# ---------------------------------------------------------------- numpy escape (interpreter only)


def _np_apply(name, *xs):
    """Apply numpy's ufunc ``name`` to interpreter tensors (their handles hold numpy arrays)."""
    import numpy as np
    from triton.runtime.interpreter import TensorHandle

    first = xs[0]
    data = [x.handle.data for x in xs]
    out = getattr(np, name)(*data).astype(data[0].dtype)
    return tl.tensor(TensorHandle(out, first.handle.dtype), first.type)


def asin(x):
    return _np_apply("arcsin", x)


def acos(x):
    return _np_apply("arccos", x)


def atan(x):
    return _np_apply("arctan", x)


def atan2(a, b):
    return _np_apply("arctan2", a, b)

"""MND313 numpy on Python numbers read as a number: the same computation in ``math`` and builtins.

``np.ceil(np.log1p(n)).astype("int").item()`` (Informer) -> ``math.ceil(math.log1p(n))``; ``np.zeros((k,
np.sum(plan)))`` (BigBird's block plan) -> ``np.zeros((k, sum(plan)))``: the numbers come from Python, which
Dynamo folds. Unsafe: numpy wraps int64 where Python ints grow, ``math``'s log/exp may round an ulp off
numpy's, ``math`` raises where numpy returns inf or nan, and ``sum`` of a 2-d array adds rows. Random draws,
tensor arguments and other numpy functions are declined.
"""

from __future__ import annotations

import libcst as cst

from mend.analyzers.diagnostic import Diagnostic
from mend.analyzers.static.torch_facts import (
    NUMPY_BUILTINS,
    NUMPY_FLOAT_TYPES,
    NUMPY_INT_TYPES,
    NUMPY_MATH,
    NUMPY_ROUNDING,
    NUMPY_SHAPED,
)
from mend.rewriter.analysis import FunctionFacts, code, parse_expr, strip_parens
from mend.rewriter.context import FileContext
from mend.rewriter.plan import Decline, Example, Plan

EXAMPLES = (
    Example(
        rule="MND313",
        before='''
            import numpy as np
            import torch
            from torch import nn


            class ProbSparse(nn.Module):
                """Informer's top-k length: numpy on a Python number."""

                def forward(self, x):
                    top = np.ceil(np.log1p(x.size(1))).astype("int").item()
                    return x[:, :top].sum(1)
        ''',
        after='''
            import numpy as np
            import torch
            from torch import nn
            import math


            class ProbSparse(nn.Module):
                """Informer's top-k length: numpy on a Python number."""

                def forward(self, x):
                    top = math.ceil(math.log1p(x.size(1)))
                    return x[:, :top].sum(1)
        ''',
        run="compile(ProbSparse())(torch.ones(2, 6))",
        unsafe=True,
    ),
)


_UNSAFE = ("(unsafe: numpy wraps int64 where Python ints grow, `math`'s log/exp may round an ulp off numpy's, "
           "math raises where numpy returns inf or nan, and `sum` of a 2-d array adds rows)")


def repair(ctx: FileContext, diag: Diagnostic) -> Plan | Decline:
    """``np.ceil(np.log1p(n)).astype("int").item()`` -> ``math.ceil(math.log1p(n))``; ``np.zeros((k,
    np.sum(plan)))`` -> ``np.zeros((k, sum(plan)))``: the numbers come from Python, which Dynamo folds."""
    call = ctx.find(cst.Call, diag, lambda n: _reported(ctx, n))
    if call is None:
        sub = ctx.find(cst.Subscript, diag)
        if sub is not None:
            return Decline(diag, f"`{code(sub)}` slices with bounds read from a numpy array: numpy arrays are "
                                 "tensors to Dynamo; keep the bounds as Python numbers (a tuple) to trace it")
        return Decline(diag, "could not find the call at this position")
    qual = ctx.imports.qualify(call.func) or ""
    if qual.startswith("numpy.random."):
        return Decline(diag, "a random draw: numpy's generator state is the program's, so drawing elsewhere or "
                             "with torch changes the numbers every later draw gives")
    math = ctx.imports.local_name_for("math")
    if math is None and "math" in ctx.imports.names:
        return Decline(diag, "`math` names something else in this file")
    numbers = _PythonNumbers(ctx, ctx.facts(ctx.enclosing_function(call)), math or "math")
    try:
        if qual in NUMPY_SHAPED and call.args:
            shape = call.args[0].value
            parts = shape.elements if isinstance(shape, cst.Tuple) else None
            if parts is None:
                edits = [(shape, numbers.value(shape))]
            else:
                edits = [(p.value, numbers.value(p.value)) for p in parts if _numpy_valued(ctx, p.value)]
        elif isinstance(call.func, cst.Attribute) and call.func.attr.value == "item" and not call.args:
            new = numbers.value(call.func.value)
            if isinstance(new, (cst.BinaryOperation, cst.UnaryOperation)) and not new.lpar:  # was an atom
                new = new.with_changes(lpar=[cst.LeftParen()], rpar=[cst.RightParen()])
            edits = [(call, new)]
        else:
            return Decline(diag, "a numpy list (`.tolist()`) has no Python counterpart mend writes")
    except _NoPython as why:
        return Decline(diag, str(why))
    shown = " ".join(f"`{code(a)}` -> `{code(b)}`" for a, b in edits)
    return Plan(diag, f"numpy on Python numbers -> math and builtins: {shown} {_UNSAFE}", "unsafe", edits,
                imports=[] if math else [("math", None, None)])


def _reported(ctx: FileContext, call: cst.Call) -> bool:
    """``call`` is what MND313 reports: a numpy random draw or shaped constructor, ``.item()``/``.tolist()``."""
    qual = ctx.imports.qualify(call.func) or ""
    if qual.startswith("numpy.random.") or qual in NUMPY_SHAPED:
        return True
    return isinstance(call.func, cst.Attribute) and call.func.attr.value in ("item", "tolist")


class _NoPython(Exception):
    """The numpy expression has a part mend cannot write in Python (the message says which)."""


def _numpy_valued(ctx: FileContext, e: cst.BaseExpression) -> bool:
    """``e`` holds a numpy result: a numpy call, a method of one (``.astype``), arithmetic on one."""
    e = strip_parens(e)
    if isinstance(e, cst.BinaryOperation):
        return _numpy_valued(ctx, e.left) or _numpy_valued(ctx, e.right)
    if isinstance(e, cst.UnaryOperation):
        return _numpy_valued(ctx, e.expression)
    if isinstance(e, cst.Subscript):
        return _numpy_valued(ctx, e.value)
    if isinstance(e, cst.Call):
        if (ctx.imports.qualify(e.func) or "").startswith("numpy."):
            return True
        return isinstance(e.func, cst.Attribute) and _numpy_valued(ctx, e.func.value)
    return False


class _PythonNumbers:
    """Writes a numpy expression on Python numbers as the Python that computes the same number."""

    def __init__(self, ctx: FileContext, facts: FunctionFacts, math: str) -> None:
        self.ctx, self.facts, self.math = ctx, facts, math

    def value(self, e: cst.BaseExpression) -> cst.BaseExpression:
        """``e`` (numpy-valued or not) as Python numbers."""
        if not _numpy_valued(self.ctx, e):
            return self._leaf(e)
        bare = strip_parens(e)
        if isinstance(bare, cst.BinaryOperation):
            return e.with_changes(left=self.value(bare.left), right=self.value(bare.right))
        if isinstance(bare, cst.UnaryOperation):
            return e.with_changes(expression=self.value(bare.expression))
        if isinstance(bare, cst.Call):
            qual = self.ctx.imports.qualify(bare.func) or ""
            if qual.startswith("numpy."):
                return self._function(bare, qual)
            if isinstance(bare.func, cst.Attribute) and bare.func.attr.value == "astype":
                return self._astype(bare)
        raise _NoPython(f"`{code(e)}` has no Python counterpart mend writes")

    def _leaf(self, e: cst.BaseExpression) -> cst.BaseExpression:
        if self.facts.is_tensor(e):
            raise _NoPython(f"`{code(e)}` is a tensor: Python reading it as a number breaks the graph the same")
        return e

    def _args(self, call: cst.Call, arity: int) -> list[cst.BaseExpression]:
        if len(call.args) != arity or any(a.keyword or a.star for a in call.args):
            raise _NoPython(f"`{code(call)}`: only {arity} positional argument(s) have a Python counterpart")
        return [self.value(a.value) for a in call.args]

    def _function(self, call: cst.Call, qual: str) -> cst.BaseExpression:
        name = qual.removeprefix("numpy.")
        if qual in NUMPY_MATH:
            return self._call(f"{self.math}.{name}", self._args(call, 1))
        if qual in NUMPY_ROUNDING:  # numpy rounds to a float
            return self._call("float", [self._call(f"{self.math}.{name}", self._args(call, 1))])
        if qual in NUMPY_BUILTINS:
            target, arity = NUMPY_BUILTINS[qual]
            return self._call(target.replace("math.", f"{self.math}."), self._args(call, arity))
        raise _NoPython(f"`np.{name}` has no Python counterpart mend writes")

    def _astype(self, call: cst.Call) -> cst.BaseExpression:
        if len(call.args) != 1 or call.args[0].keyword:
            raise _NoPython(f"`{code(call)}`: only `.astype(dtype)` has a Python counterpart")
        target = code(call.args[0].value)
        receiver = strip_parens(call.func.value)
        if target in NUMPY_INT_TYPES:
            qual = self.ctx.imports.qualify(receiver.func) if isinstance(receiver, cst.Call) else None
            if qual in NUMPY_ROUNDING:  # math's rounding is an int already
                return self._call(f"{self.math}.{qual.removeprefix('numpy.')}", self._args(receiver, 1))
            return self._call("int", [self.value(call.func.value)])
        if target in NUMPY_FLOAT_TYPES:
            return self._call("float", [self.value(call.func.value)])
        raise _NoPython(f"`.astype({target})` has no Python counterpart mend writes")

    @staticmethod
    def _call(func: str, args: list[cst.BaseExpression]) -> cst.Call:
        return cst.Call(parse_expr(func), [cst.Arg(strip_parens(a) if len(args) == 1 else a) for a in args])

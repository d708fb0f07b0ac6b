"""MND304 ``t[torch.where(m)] = v`` (or ``m.nonzero(as_tuple=True)``) with a boolean ``m``: ``t[m] = v``.

The same elements get the same values, and a boolean-mask store has no data-dependent shape. Unsafe: where
``m``'s shape is not ``t``'s leading dimensions the repair raises ``IndexError``, the original only for an
index out of range.
"""

from __future__ import annotations

import libcst as cst

from mend.analyzers.diagnostic import Diagnostic
from mend.rewriter.analysis import code, strip_parens
from mend.rewriter.context import FileContext
from mend.rewriter.parts.sites import (
    any_call,
)
from mend.rewriter.plan import Decline, Example, Plan

EXAMPLES = (
    Example(
        rule="MND304",
        before="""
            import torch
            from torch import nn


            class M(nn.Module):
                def forward(self, a):
                    a = a.clone()
                    a[torch.where(a.sum(-1) == a.shape[-1])] = False  # rows that attend nowhere
                    return a.float()
        """,
        after="""
            import torch
            from torch import nn


            class M(nn.Module):
                def forward(self, a):
                    a = a.clone()
                    a[a.sum(-1) == a.shape[-1]] = False  # rows that attend nowhere
                    return a.float()
        """,
        run="compile(M())(torch.tensor([[True, True], [True, False]]))",
        unsafe=True,
    ),
)


def repair(ctx: FileContext, diag: Diagnostic) -> Plan | Decline | None:
    call = any_call(ctx, diag)
    return call if isinstance(call, Decline) else _mask_store_plan(ctx, diag, call)


def _mask_store_plan(ctx: FileContext, diag: Diagnostic, call: cst.Call) -> Plan | None:
    """``t[torch.where(m)] = v`` (or ``m.nonzero(as_tuple=True)``) with a boolean ``m`` -> ``t[m] = v``: the same
    elements get the same values, and a boolean-mask store has no data-dependent shape."""
    mask = _where_mask(ctx, call)
    index = ctx.parent(call)
    sub = ctx.parent(ctx.parent(index)) if isinstance(index, cst.Index) else None
    if mask is None or not isinstance(sub, cst.Subscript) or len(sub.slice) != 1:
        return None
    holder = ctx.parent(sub)
    if not (isinstance(holder, cst.AssignTarget) and holder.target is sub):
        return None
    facts = ctx.facts(ctx.enclosing_function(call))
    if not (facts.is_tensor(sub.value) and _is_bool_tensor(facts, mask)) and not _value_comparison(mask):
        return None
    return Plan(diag, "`t[torch.where(m)] = v` -> `t[m] = v`: a boolean-mask store (unsafe: where the mask's shape "
                      "is not the tensor's leading dimensions it raises IndexError)", "unsafe",
                [(call, strip_parens(mask).with_changes(lpar=call.lpar, rpar=call.rpar))])


def _where_mask(ctx: FileContext, call: cst.Call) -> cst.BaseExpression | None:
    if ctx.imports.qualify(call.func) == "torch.where" and len(call.args) == 1 and not call.args[0].keyword:
        return call.args[0].value
    if isinstance(call.func, cst.Attribute) and call.func.attr.value == "nonzero" and len(call.args) == 1:
        arg = call.args[0]
        if arg.keyword is not None and arg.keyword.value == "as_tuple" and code(arg.value) == "True":
            return call.func.value
    return None


def _value_comparison(expr: cst.BaseExpression) -> bool:
    """``a == b`` (``<``, ``!=``, ...) handed to ``torch.where(m)``: where the original runs, it is a tensor
    comparison (``torch.where`` takes nothing else), so a boolean mask, and the store target takes a tuple of
    index tensors, which only tensors and arrays do."""
    expr = strip_parens(expr)
    return isinstance(expr, cst.Comparison) and not any(
        isinstance(c.operator, (cst.Is, cst.IsNot, cst.In, cst.NotIn)) for c in expr.comparisons)


def _is_bool_tensor(facts, expr: cst.BaseExpression) -> bool:
    """A comparison of tensors, or ``~``/``&``/``|`` of such (a boolean tensor for certain)."""
    expr = strip_parens(expr)
    if isinstance(expr, cst.Comparison):
        return facts.is_tensor(expr) and _value_comparison(expr)
    if isinstance(expr, cst.UnaryOperation) and isinstance(expr.operator, cst.BitInvert):
        return _is_bool_tensor(facts, expr.expression)
    if isinstance(expr, cst.BinaryOperation) and isinstance(expr.operator, (cst.BitAnd, cst.BitOr)):
        return _is_bool_tensor(facts, expr.left) and _is_bool_tensor(facts, expr.right)
    return False

"""MND201 ``a if c else b`` on a tensor condition: ``torch.where`` under compile, eager keeps it.

``a if c else b`` becomes ``(a if c else b) if not torch.compiler.is_compiling() else _mend_where(c, a, b)``.
``_mend_where`` is ``torch.where`` when the sides agree in shape, dtype and device (decided while tracing) and
the original selection otherwise. **Safe** when neither side nor a later operand of the condition can raise
(``FunctionFacts.is_total``: both are computed under compile), else unsafe; declined when a side is not a
tensor, has calls mend cannot prove side-effect free, or can have an infinite gradient where it is not
selected (there is no place to keep the original for autograd).
"""

from __future__ import annotations

import libcst as cst

from mend.analyzers.diagnostic import Diagnostic
from mend.rewriter.analysis import code, is_container_or_none, parse_expr, strip_parens
from mend.rewriter.context import FileContext
from mend.rewriter.parts.branches import updated_in_place_after
from mend.rewriter.parts.lower import Declined, Lower, speculated_tests, with_helpers
from mend.rewriter.parts.sites import branch_node
from mend.rewriter.plan import Decline, Example, Plan

EXAMPLES = (
    Example(
        rule="MND201",
        before="""
            import torch
            from torch import nn


            class M(nn.Module):
                def forward(self, x: torch.Tensor):
                    return x * 2 if x.sum() > 0 else x - 1
        """,
        after="""
            import torch
            from torch import nn
            from _mend import where as _mend_where


            class M(nn.Module):
                def forward(self, x: torch.Tensor):
                    return ((x * 2 if x.sum() > 0 else x - 1) if not torch.compiler.is_compiling() else _mend_where(x.sum() > 0, x * 2, x - 1))
        """,
        run="compile(M())(torch.arange(4.0) - 1)",
    ),
)


def repair(ctx: FileContext, diag: Diagnostic) -> Plan | Decline | None:
    node = branch_node(ctx, diag)
    if not isinstance(node, cst.IfExp):
        return node if isinstance(node, Decline) else None
    facts = ctx.facts(ctx.enclosing_function(node))
    torch, imports = ctx.torch_name()
    lower = Lower(facts, torch)
    try:
        return with_helpers(_fix_ifexp(ctx, diag, node, facts, lower, imports), lower)
    except Declined as exc:
        return Decline(diag, str(exc))


def _fix_ifexp(ctx, diag, node: cst.IfExp, facts, lower, imports) -> Plan | Decline:
    """``a if c else b`` -> ``(a if c else b) if not is_compiling() else _mend_where(c, a, b)``."""
    if not (facts.is_pure(node.body) and facts.is_pure(node.orelse)):
        raise Declined("a side of the conditional expression has calls mend cannot prove pure")
    for side in (node.body, node.orelse):
        if is_container_or_none(side):
            raise Declined("a side of the conditional expression is not a tensor value")
    if not (facts.is_tensor(node.body) or facts.is_tensor(node.orelse)):
        raise Declined("cannot prove either side of the conditional expression is a tensor")
    assign = ctx.parent(node)
    if isinstance(assign, cst.Assign) and len(assign.targets) == 1 and isinstance(assign.targets[0].target, cst.Name):
        updated = updated_in_place_after(ctx, assign, {assign.targets[0].target.value})
        if updated:
            raise Declined(f"`{updated}` is updated in place after the assignment and may share storage with the "
                           "selected value: under compile the selection is a new tensor where the original "
                           "kept the old one, so the update would not reach it")
    cond = lower(node.test)
    t = lower.torch
    original = node.with_changes(lpar=[cst.LeftParen()], rpar=[cst.RightParen()])
    new = parse_expr(f"{code(original)} if not {t}.compiler.is_compiling() else _mend_where({cond}, "
                     f"{code(strip_parens(node.body))}, {code(strip_parens(node.orelse))})")
    new = new.with_changes(lpar=node.lpar or [cst.LeftParen()], rpar=node.rpar or [cst.RightParen()])
    speculated = [node.body, node.orelse, *speculated_tests(node.test)]
    safe = all(facts.is_total(e) for e in speculated)
    grad_safe = facts.is_grad_safe(node.body) and facts.is_grad_safe(node.orelse)
    if not grad_safe:
        raise Declined("a side's gradient can be infinite where it is not selected (NaN gradients "
                        "under torch.where); a conditional expression has no place to keep the original "
                        "for autograd")
    return Plan(diag, "conditional expression -> torch.where under compile (eager keeps it)",
                "safe" if safe else "unsafe", [(node, new)], imports=imports, helpers=["_mend_where"])

"""MND301/MND302 a number that only feeds tensor arithmetic: keep the 0-d tensor.

``.item()`` (MND301) whose value only feeds tensor arithmetic is dropped, and ``max(n, c)``/``min(n, c)`` around a
name holding it become ``torch.clamp``; ``float(t)`` (MND302) in arithmetic with a tensor becomes ``t``. The kept
tensor is ``.detach()``-ed: the Python number was a constant to autograd, and gradients must not flow through
it now (``x * float(x.sum())`` kept as ``x * x.sum()`` doubled ``x``'s gradient).
Unsafe: the 0-d tensor keeps its dtype, so arithmetic on it rounds there (``n / 3`` in float16) and type
promotion differs from a Python number's (a float number meeting an integer tensor, two 0-d tensors,
``max(n, 1.5)`` of an integer). ``bool(t)`` outside a branch test needs a Python bool and is declined.
"""

from __future__ import annotations

import libcst as cst

from mend.analyzers.diagnostic import Diagnostic
from mend.rewriter.analysis import code, is_number, paren, parse_expr
from mend.rewriter.context import FileContext
from mend.rewriter.parts.sites import (
    item_call,
    number_call,
    tensor_operand,
)
from mend.rewriter.plan import Decline, Example, Plan

EXAMPLES = (
    Example(
        rule="MND301",
        before="""
            import torch
            from torch import nn


            class M(nn.Module):
                def forward(self, x: torch.Tensor):
                    scale = x.abs().max().item()
                    return x / scale
        """,
        after="""
            import torch
            from torch import nn


            class M(nn.Module):
                def forward(self, x: torch.Tensor):
                    scale = x.abs().max().detach()
                    return x / scale
        """,
        run="compile(M())(torch.arange(4.0) - 1)",
        unsafe=True,
    ),
)


# Why keeping the 0-d tensor is unsafe: a tensor's dtype takes part in type promotion and rounding
# where the Python number's would not (docs/rules/MND301.md).
PROMOTES = (" (unsafe: the 0-d tensor keeps its dtype, so arithmetic on it rounds in that dtype and type "
            "promotion can change the result's dtype)")


def repair(ctx: FileContext, diag: Diagnostic) -> Plan | Decline | None:
    if diag.code == "MND301":
        call = item_call(ctx, diag)
        return call if isinstance(call, Decline) else _keep_item(ctx, diag, call)
    call = number_call(ctx, diag)
    if isinstance(call, Decline):
        return call
    if call.func.value == "bool":
        return Decline(diag, "`bool(t)` outside a branch test needs a Python bool; not rewritten")
    facts = ctx.facts(ctx.enclosing_function(call))
    if call.func.value == "float" and tensor_operand(ctx, facts, call):
        return Plan(diag, "keep the 0-d tensor (detached) instead of `float(t)` in tensor arithmetic", "unsafe",
                    [(call, detached(call.args[0].value))])
    return None


def detached(expr: cst.BaseExpression) -> cst.Call:
    """``expr.detach()``: the tensor kept for a Python number, which autograd saw as a constant."""
    return cst.Call(func=cst.Attribute(value=paren(expr), attr=cst.Name("detach")))


def _keep_item(ctx: FileContext, diag: Diagnostic, call: cst.Call) -> Plan | None:
    facts = ctx.facts(ctx.enclosing_function(call))
    receiver = call.func.value
    parent = ctx.parent(call)
    if tensor_operand(ctx, facts, call):
        kept = detached(receiver)
        return Plan(diag, f"keep the 0-d tensor (detached): drop `.item()` in tensor arithmetic{PROMOTES}", "unsafe",
                    [(call, kept.with_changes(lpar=call.lpar, rpar=call.rpar) if call.lpar else kept)])
    if isinstance(parent, cst.Assign) and len(parent.targets) == 1 and isinstance(parent.targets[0].target, cst.Name):
        name = parent.targets[0].target.value
        if len(facts.stores.get(name, [])) == 1:
            edits: list = [(call, detached(receiver))]
            torch, imports = ctx.torch_name()
            ok = bool(facts.loads.get(name))
            for use in facts.loads.get(name, []):
                up = ctx.parent(use)
                if isinstance(up, cst.Arg) and isinstance(ctx.parent(up), cst.Call):
                    mm = ctx.parent(up)
                    fname = code(mm.func)
                    others = [a.value for a in mm.args if a is not up]
                    if fname in {"max", "min"} and len(mm.args) == 2 and all(is_number(o) for o in others) \
                            and tensor_operand(ctx, facts, mm):
                        kw = "min" if fname == "max" else "max"
                        edits.append((mm, parse_expr(f"{torch}.clamp({name}, {kw}={code(others[0])})")))
                        continue
                    ok = False
                    break
                if not tensor_operand(ctx, facts, use):
                    ok = False
                    break
            if ok:
                return Plan(diag, f"keep `{name}` a 0-d tensor: it only feeds tensor arithmetic{PROMOTES}",
                            "unsafe", edits, imports=imports)
    return None

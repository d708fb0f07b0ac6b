"""MND105 ``random.random()``: ``torch.rand(())``, only on request (``--torch-rng``, unsafe).

Python's random stream cannot be traced; torch's RNG draws other numbers, so the repair changes what the
program computes and is declined unless asked for. ``random.random()`` is the only call with a torch
replacement. Declined where the number decides a branch (an ``if``, ``while`` or conditional expression
tests it, directly or through the name it is assigned to): a branch on torch's draw breaks the graph as the
branch on Python's did, so the repair would change the numbers and remove nothing.
"""

from __future__ import annotations

import libcst as cst

from mend.analyzers.diagnostic import Diagnostic
from mend.rewriter.analysis import code, names_in, parse_expr, walk
from mend.rewriter.context import FileContext
from mend.rewriter.parts.sites import in_branch_test, in_test
from mend.rewriter.plan import Decline, Example, Plan

EXAMPLES = (
    Example(
        rule="MND105",
        before="""
            import random

            import torch
            from torch import nn


            class M(nn.Module):
                def forward(self, x):
                    noise = random.random()
                    return x + noise * 0
        """,
        after="""
            import random

            import torch
            from torch import nn


            class M(nn.Module):
                def forward(self, x):
                    noise = torch.rand(())
                    return x + noise * 0
        """,
        run="compile(M())(torch.ones(3))",
        unsafe=True,
        torch_rng=True,
    ),
)


def repair(ctx: FileContext, diag: Diagnostic) -> Plan | Decline:
    call = ctx.find(cst.Call, diag)
    if call is None:
        return Decline(diag, "could not find the call at this position")
    qual = ctx.imports.qualify(call.func) or ""
    reason = ("Python's random stream cannot be traced; replacing it with torch's RNG changes the "
              "numbers drawn. Pass the value in as an argument, or opt in with --torch-rng --unsafe-fixes")
    if not ctx.options.torch_rng:
        return Decline(diag, reason)
    if qual not in {"random.random"} or call.args:
        return Decline(diag, f"only random.random() has a torch replacement (got {qual or code(call.func)})")
    branch = _branch_on(ctx, call)
    if branch:
        return Decline(diag, f"the draw decides {branch}: a branch on torch's draw breaks the graph as this one "
                             "does, so the repair would change the numbers and remove nothing")
    torch, imports = ctx.torch_name()
    return Plan(diag, f"draw from torch's RNG: `{torch}.rand(())` (a 0-d tensor, different stream)",
                "unsafe", [(call, parse_expr(f"{torch}.rand(())"))], imports=imports)


_TESTED = (cst.If, cst.While, cst.IfExp)


def _branch_on(ctx: FileContext, call: cst.Call) -> str | None:
    """What branch the draw decides (its value in a test, or assigned to a name a test reads), or None."""
    if in_branch_test(ctx, call):
        return f"the test `{code(next(a for a in ctx.ancestors(call) if in_test(ctx, call, a)).test)}`"
    assign = next((a for a in ctx.ancestors(call) if isinstance(a, (cst.BaseSmallStatement, cst.BaseCompoundStatement))),
                  None)
    if isinstance(assign, cst.Assign) and len(assign.targets) == 1 and isinstance(assign.targets[0].target, cst.Name):
        return _tested_name(ctx, assign, assign.targets[0].target.value)
    return None


def _tested_name(ctx: FileContext, assign: cst.Assign, name: str) -> str | None:
    func = ctx.enclosing_function(assign)
    for node in walk(func) if func is not None else ():
        if isinstance(node, _TESTED) and name in names_in(node.test):
            return f"the test `{code(node.test)}` through `{name}`"
    return None

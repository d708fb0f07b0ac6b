"""MND303 ``len(t.tolist())``: ``_mend_tolist_len(t)``, ``t.shape[0]`` (safe, exact).

The list of a 0-d tensor is a number, whose ``len()`` the original asks for: ``_mend_tolist_len`` runs the
original there (it raises TypeError as before).
"""

from __future__ import annotations

import libcst as cst

from mend.analyzers.diagnostic import Diagnostic
from mend.rewriter.analysis import code, parse_expr, strip_parens
from mend.rewriter.context import FileContext
from mend.rewriter.parts.sites import (
    tolist_call,
)
from mend.rewriter.plan import Decline, Example, Plan

EXAMPLES = (
    Example(
        rule="MND303",
        before="""
            import torch
            from torch import nn


            class M(nn.Module):
                def forward(self, x):
                    n = len(x.tolist())
                    return x * n
        """,
        after="""
            import torch
            from torch import nn
            from _mend import tolist_len as _mend_tolist_len


            class M(nn.Module):
                def forward(self, x):
                    n = _mend_tolist_len(x)
                    return x * n
        """,
        run="compile(M())(torch.ones(3, 2))",
    ),
)


def repair(ctx: FileContext, diag: Diagnostic) -> Plan | Decline | None:
    call = tolist_call(ctx, diag)
    if isinstance(call, Decline):
        return call
    parent = ctx.parent(call)
    outer = ctx.parent(parent) if isinstance(parent, cst.Arg) else None
    if not (isinstance(outer, cst.Call) and isinstance(outer.func, cst.Name) and outer.func.value == "len"
            and len(outer.args) == 1):
        return None
    new = parse_expr(f"_mend_tolist_len({code(strip_parens(call.func.value))})")
    return Plan(diag, "`len(t.tolist())` -> `_mend_tolist_len(t)` (`t.shape[0]`; a 0-d `t` raises as before)",
                "safe", [(outer, new)], helpers=["_mend_tolist_len"])

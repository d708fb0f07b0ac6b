"""MND305 ``t[mask].sum()`` / ``.mean()``: ``_mend_masked_sum(t, mask)`` / ``_mend_masked_mean(t, mask)``.

Elementwise methods may come between the index and the reduction (``t[mask].abs().sum()``). Eager runs the
original expression; under compile a static-shape ``torch.where`` sum. Safe (compiled: equal up to float
reduction order; a dtype ``mean()`` rejects runs the original, which raises as before).
"""

from __future__ import annotations

import libcst as cst

from mend.analyzers.diagnostic import Diagnostic
from mend.analyzers.static.torch_facts import ELEMENTWISE_METHODS
from mend.rewriter.analysis import code, parse_expr, strip_parens
from mend.rewriter.context import FileContext
from mend.rewriter.parts.sites import (
    mask_index,
)
from mend.rewriter.plan import Decline, Example, Plan

EXAMPLES = (
    Example(
        rule="MND305",
        before="""
            import torch
            from torch import nn


            class M(nn.Module):
                def forward(self, x):
                    return x[x > 0].sum()
        """,
        after="""
            import torch
            from torch import nn
            from _mend import masked_sum as _mend_masked_sum


            class M(nn.Module):
                def forward(self, x):
                    return _mend_masked_sum(x, x > 0)
        """,
        run="compile(M())(torch.arange(4.0) - 1)",
    ),
)


def repair(ctx: FileContext, diag: Diagnostic) -> Plan | Decline | None:
    sub = mask_index(ctx, diag)
    if isinstance(sub, Decline):
        return sub
    mask = sub.slice[0].slice.value
    facts = ctx.facts(ctx.enclosing_function(sub))
    chain = []
    cur: cst.CSTNode = sub
    while True:
        attr = ctx.parent(cur)
        call = ctx.parent(attr) if isinstance(attr, cst.Attribute) else None
        if not (isinstance(attr, cst.Attribute) and attr.value is cur and isinstance(call, cst.Call)
                and not call.args):
            return None
        meth = attr.attr.value
        if meth in {"sum", "mean"}:
            base = code(sub.value)
            for m in chain:
                base = f"{base}.{m}()"
            helper = f"_mend_masked_{meth}"
            torch, imports = ctx.torch_name()
            if not facts.is_pure(mask) or not facts.is_pure(sub.value):
                return Decline(diag, "the tensor or the mask has calls mend cannot prove side-effect free")
            new = parse_expr(f"{helper}({base}, {code(strip_parens(mask))})")
            return Plan(diag, f"masked reduction `t[mask].{meth}()` -> `{helper}(t, mask)` (static shape)",
                        "safe", [(call, new)], imports=imports, helpers=[helper])
        if meth not in ELEMENTWISE_METHODS:
            return None
        chain.append(meth)
        cur = call

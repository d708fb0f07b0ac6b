"""MND101-MND104 under the side-effect policy ``drop``: the call statement is removed.

Eager output is lost too, so this is an unsafe fix (``mend fix --side-effects drop --unsafe-fixes``). A
statement alone in its block becomes ``pass``.
"""

from __future__ import annotations

import libcst as cst

from mend.analyzers.diagnostic import Diagnostic
from mend.rewriter.context import FileContext
from mend.rewriter.parts.sites import call_statement, side_effect_policy
from mend.rewriter.plan import Decline, Example, Plan

EXAMPLES = (
    Example(
        rule="MND101",
        before="""
            import torch
            from torch import nn


            class M(nn.Module):
                def forward(self, x):
                    print("input", x.shape)
                    return x * 2
        """,
        after="""
            import torch
            from torch import nn


            class M(nn.Module):
                def forward(self, x):
                    return x * 2
        """,
        run="compile(M())(torch.ones(3))",
        unsafe=True,
        side_effects="drop",
    ),
)


def repair(ctx: FileContext, diag: Diagnostic) -> Plan | Decline | None:
    site = call_statement(ctx, diag)
    if not isinstance(site, tuple) or side_effect_policy(ctx, diag) != "drop":
        return site if isinstance(site, Decline) else None
    stmt = site[0]
    parent = ctx.parent(stmt)
    siblings = getattr(parent, "body", ())
    repl = (cst.SimpleStatementLine(body=[cst.Pass()], leading_lines=stmt.leading_lines)
            if isinstance(siblings, (list, tuple)) and len(siblings) == 1 else cst.RemovalSentinel.REMOVE)
    return Plan(diag, "remove the call (side-effects = drop)", "unsafe", [(stmt, repl)])

"""MND301/MND302 a number read in the test of an ``if``: repair the branch (MND201's strategies).

``if x.sum().item() > 0:`` / ``if float(t) > 0.5:`` / ``if bool(t):`` breaks the graph at the test; the
repair is the branch's, whatever it is (``torch.where`` of the assignments, the guard of a reporting
``if``, ...): this strategy hands the site to rule MND201's list (``repair_as``) and answers what it
answers. ``int(t)`` is no truth value and is left to the other strategies.
"""

from __future__ import annotations

from mend.analyzers.diagnostic import Diagnostic
from mend.rewriter.context import FileContext
from mend.rewriter.parts.sites import (
    in_branch_test,
    item_call,
    number_call,
)
from mend.rewriter.plan import Decline, Example, Plan
from mend.rewriter.strategy import repair_as

EXAMPLES = (
    Example(
        rule="MND301",
        before="""
            import torch
            from torch import nn


            class M(nn.Module):
                def forward(self, x: torch.Tensor):
                    y = x * 2
                    if x.max().item() > 2:
                        y = x.clamp(max=2.0) * 2
                    return y + 1
        """,
        after="""
            import torch
            from torch import nn
            from _mend import where as _mend_where


            class M(nn.Module):
                def forward(self, x: torch.Tensor):
                    y = x * 2
                    if not torch.compiler.is_compiling():
                        if x.max().item() > 2:
                            y = x.clamp(max=2.0) * 2
                    else:
                        y = _mend_where(x.max().double() > 2, x.clamp(max=2.0) * 2, y)
                    return y + 1
        """,
        run="compile(M())(torch.arange(4.0))",
    ),
)


def repair(ctx: FileContext, diag: Diagnostic) -> Plan | Decline | None:
    call = item_call(ctx, diag) if diag.code == "MND301" else number_call(ctx, diag)
    if isinstance(call, Decline):
        return call
    if diag.code != "MND301" and call.func.value not in {"float", "bool"}:
        return None
    return repair_as(ctx, "MND201", diag) if in_branch_test(ctx, call) else None

"""MND203 ``if <tensor cond>: raise E("message")``: ``torch._assert_async`` under compile, eager keeps the raise.

See :mod:`mend.rewriter.parts.validation` (the repair, shared with MND301's counted checks): every
``torch.compile`` boundary of the file re-raises ``E("message")``. Unsafe.
"""

from __future__ import annotations

import libcst as cst

from mend.analyzers.diagnostic import Diagnostic
from mend.rewriter.context import FileContext
from mend.rewriter.parts.validation import validation_plan
from mend.rewriter.plan import Decline, Example, Plan

EXAMPLES = (
    Example(
        rule="MND203",
        before="""
            import torch
            from torch import nn


            class M(nn.Module):
                def forward(self, ids: torch.Tensor):
                    if (ids < 0).any():
                        raise ValueError("ids must not be negative")
                    return ids * 2
        """,
        after="""
            import torch
            from torch import nn


            class M(nn.Module):
                def forward(self, ids: torch.Tensor):
                    if not torch.compiler.is_compiling():
                        if (ids < 0).any():
                            raise ValueError("ids must not be negative")
                    else:
                        torch._assert_async(torch.logical_not((ids < 0).any()), '[mend:ValueError] ids must not be negative')
                    return ids * 2
        """,
        run="compile(M())(torch.arange(4))",
        unsafe=True,
    ),
)


def repair(ctx: FileContext, diag: Diagnostic) -> Plan | Decline | None:
    node = ctx.find(cst.If, diag)
    if node is None:
        if ctx.find(cst.Assert, diag) is not None:
            return Decline(diag, "an assert on a tensor is traced without a break; nothing to repair")
        return Decline(diag, "could not find the `if ...: raise` at this position")
    return validation_plan(ctx, diag, node)

"""MND105 ``random.random()``: ``torch.rand(())``, only on request (``--torch-rng``, unsafe).

Python's random stream cannot be traced; torch's RNG draws other numbers, so the repair changes what the
program computes and is declined unless asked for. ``random.random()`` is the only call with a torch
replacement.
"""

from __future__ import annotations

import libcst as cst

from mend.analyzers.diagnostic import Diagnostic
from mend.rewriter.analysis import code, parse_expr
from mend.rewriter.context import FileContext
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
    torch, imports = ctx.torch_name()
    return Plan(diag, f"draw from torch's RNG: `{torch}.rand(())` (a 0-d tensor, different stream)",
                "unsafe", [(call, parse_expr(f"{torch}.rand(())"))], imports=imports)

"""MND108 ``copy.deepcopy(t)``: ``t.clone()`` where ``t`` is provably a tensor (safe).

Declined otherwise: ``.clone()`` exists only on tensors, and on anything else (a config, a dict, a module)
the rewrite would crash (measured: transformers' Whisper deep-copies ``self.config`` in forward).
"""

from __future__ import annotations

import libcst as cst

from mend.analyzers.diagnostic import Diagnostic
from mend.rewriter.analysis import code, parse_expr
from mend.rewriter.context import FileContext
from mend.rewriter.plan import Decline, Example, Plan

EXAMPLES = (
    Example(
        rule="MND108",
        before="""
            import copy

            import torch
            from torch import nn


            class M(nn.Module):
                def forward(self, x: torch.Tensor):
                    y = copy.deepcopy(x)
                    return y * 2
        """,
        after="""

            import torch
            from torch import nn


            class M(nn.Module):
                def forward(self, x: torch.Tensor):
                    y = x.clone()
                    return y * 2
        """,
        run="compile(M())(torch.ones(3))",
    ),
)


def repair(ctx: FileContext, diag: Diagnostic) -> Plan | Decline:
    call = ctx.find(cst.Call, diag, pred=lambda n: (ctx.imports.qualify(n.func) or "") == "copy.deepcopy")
    if call is None:
        return Decline(diag, "could not find `copy.deepcopy(...)` at this position")
    if len(call.args) != 1 or call.args[0].keyword is not None or call.args[0].star:
        return Decline(diag, "deepcopy with a memo argument is not rewritten")
    arg = call.args[0].value
    facts = ctx.facts(ctx.enclosing_function(call))
    text = code(arg)
    if not isinstance(arg, (cst.Name, cst.Attribute, cst.Call, cst.Subscript)):
        text = f"({text})"
    new = parse_expr(f"{text}.clone()")
    if facts.is_tensor(arg):
        return Plan(diag, "`copy.deepcopy(t)` -> `t.clone()`", "safe", [(call, new)], drop_imports=["copy"])
    # `.clone()` exists only on tensors: on anything else (a config, a dict, a module) the rewrite would
    # crash (measured: transformers' Whisper deep-copies `self.config` in forward).
    return Decline(diag, f"mend cannot prove `{text}` is a tensor, and `.clone()` exists only on tensors "
                         "(annotate it `torch.Tensor` if it is one)")

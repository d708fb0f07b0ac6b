"""MND108 ``copy.deepcopy(t)``: ``t.clone()`` where ``t`` is provably a tensor (safe); ``copy.copy(kwargs)`` of
the function's own ``**kwargs``: ``dict(kwargs)`` (safe).

Declined otherwise: ``.clone()`` exists only on tensors, and on anything else (a config, a dict, a module)
the rewrite would crash (measured: transformers' Whisper deep-copies ``self.config`` in forward). ``**kwargs``
is always a plain ``dict``, whose ``copy.copy`` is ``dict(kwargs)``: a new dict holding the same values
(torch_geometric's DeepGraphInfomax copies its forward's keyword arguments); a shallow copy of anything else
(a tensor: a new tensor sharing the storage) has no such traced form and is declined.
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
    Example(
        rule="MND108",
        before="""
            import copy

            import torch
            from torch import nn


            class M(nn.Module):
                def forward(self, x, **kwargs):
                    options = copy.copy(kwargs)
                    options.setdefault("scale", 2.0)
                    return x * options["scale"], kwargs
        """,
        after="""

            import torch
            from torch import nn


            class M(nn.Module):
                def forward(self, x, **kwargs):
                    options = dict(kwargs)
                    options.setdefault("scale", 2.0)
                    return x * options["scale"], kwargs
        """,
        run="compile(M())(torch.ones(3), bias=1)",
    ),
)


def repair(ctx: FileContext, diag: Diagnostic) -> Plan | Decline:
    call = ctx.find(cst.Call, diag, pred=lambda n: (ctx.imports.qualify(n.func) or "") in ("copy.deepcopy",
                                                                                            "copy.copy"))
    if call is None:
        return Decline(diag, "could not find `copy.deepcopy(...)` at this position")
    if ctx.imports.qualify(call.func) == "copy.copy":
        return _shallow(ctx, diag, call)
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


def _shallow(ctx: FileContext, diag: Diagnostic, call: cst.Call) -> Plan | Decline:
    """``copy.copy(kwargs)`` of the enclosing function's ``**kwargs``, never rebound: ``dict(kwargs)``."""
    func = ctx.enclosing_function(call)
    star = func.params.star_kwarg if func is not None else None
    arg = call.args[0].value if len(call.args) == 1 and call.args[0].keyword is None and not call.args[0].star \
        else None
    if star is None or not isinstance(arg, cst.Name) or arg.value != star.name.value \
            or ctx.facts(func).stores.get(arg.value):
        return Decline(diag, "`copy.copy` is rewritten only for the function's own `**kwargs` (a plain dict: "
                             "`dict(kwargs)`); a shallow copy of anything else has no traced form")
    return Plan(diag, f"`copy.copy({arg.value})` -> `dict({arg.value})` (`**{arg.value}` is a plain dict: the "
                      "same shallow copy)", "safe", [(call, parse_expr(f"dict({arg.value})"))], drop_imports=["copy"])


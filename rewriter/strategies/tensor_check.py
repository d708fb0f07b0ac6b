"""MND302 ``torch._check_tensor_all(cond[, message])``: capture for the call, kept as a runtime assert.

``_mend_tensor_check(lambda: torch._check_tensor_all(...))``: on torch 2.13 and later Dynamo captures the
check's value for the call and keeps the check in the graph (unsafe: the error of a failing check depends on
the backend); earlier torch runs the check as written. Declined where the message is a closure over names
(Dynamo takes only a message function whose closure holds constants).
"""

from __future__ import annotations

import libcst as cst

from mend.analyzers.diagnostic import Diagnostic
from mend.rewriter.analysis import names_in
from mend.rewriter.context import FileContext
from mend.rewriter.parts.capture import tensor_check_plan
from mend.rewriter.parts.sites import (
    tensor_check,
)
from mend.rewriter.plan import Decline, Example, Plan

EXAMPLES = (
    Example(
        rule="MND302",
        before="""
            import torch
            from torch import nn


            class M(nn.Module):
                def forward(self, x):
                    h = x.softmax(-1)
                    torch._check_tensor_all(h >= 0)
                    return h * 2
        """,
        after="""
            import torch
            from torch import nn
            from _mend import tensor_check as _mend_tensor_check


            class M(nn.Module):
                def forward(self, x):
                    h = x.softmax(-1)
                    _mend_tensor_check(lambda: torch._check_tensor_all(h >= 0))
                    return h * 2
        """,
        run="compile(M())(torch.ones(2, 3))",
        unsafe=True,
    ),
)


def repair(ctx: FileContext, diag: Diagnostic) -> Plan | Decline | None:
    check = tensor_check(ctx, diag)
    return _check_plan(ctx, diag, check) if check is not None else None


def _check_plan(ctx: FileContext, diag: Diagnostic, check: cst.Call) -> Plan | Decline:
    """``torch._check_tensor_all(cond[, message])``: scalar capture for the call, unless its message is a
    closure over names (Dynamo takes only a message function whose closure holds constants)."""
    message = next((a.value for a in check.args if a.keyword is not None and a.keyword.value == "message"), None)
    position = 3 if ctx.imports.qualify(check.func).endswith("_with") else 2
    if message is None and len(check.args) >= position and check.args[position - 1].keyword is None:
        message = check.args[position - 1].value
    if message is not None and not (isinstance(message, cst.Lambda) and not names_in(message.body)):
        return Decline(diag, "the check's message reads names (Dynamo takes only a message function whose closure "
                             "holds constants; capture would break there again)")
    return tensor_check_plan(ctx, diag, check)

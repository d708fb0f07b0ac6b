"""MND512 a recurrent submodule's call ``self.lstm(x)``: ``_mend_rnn(lambda: self.lstm(x))``.

Eager calls the module and nothing else; under compile Dynamo's ``allow_rnn`` is on while it traces that call
only. Unsafe (see the rule's fix safety). Declined where the call cannot move into a lambda (``yield``,
``await``, an assignment expression, ``super()``: :func:`~mend.rewriter.parts.capture.not_liftable`).
"""

from __future__ import annotations

import libcst as cst

from mend.analyzers.diagnostic import Diagnostic
from mend.analyzers.static.torch_facts import RNN_HELPER
from mend.rewriter.context import FileContext
from mend.rewriter.parts.capture import lambda_plan, not_liftable
from mend.rewriter.plan import Decline, Example, Plan

EXAMPLES = (
    Example(
        rule="MND512",
        before="""
            import torch
            from torch import nn


            class Encoder(nn.Module):
                def __init__(self):
                    super().__init__()
                    self.lstm = nn.LSTM(4, 4)

                def forward(self, x):
                    return self.lstm(x)[0] + x
        """,
        after="""
            import torch
            from torch import nn
            from _mend import rnn as _mend_rnn


            class Encoder(nn.Module):
                def __init__(self):
                    super().__init__()
                    self.lstm = nn.LSTM(4, 4)

                def forward(self, x):
                    return _mend_rnn(lambda: self.lstm(x))[0] + x
        """,
        run="compile(Encoder())(torch.ones(3, 1, 4))",
        unsafe=True,
    ),
)


def repair(ctx: FileContext, diag: Diagnostic) -> Plan | Decline:
    call = ctx.find(cst.Call, diag)
    if call is None:
        return Decline(diag, "could not find the call at this position")
    parent = ctx.parent(call)
    if isinstance(parent, cst.Lambda) and isinstance(ctx.parent(parent), cst.Arg):
        return Decline(diag, "already inside a lambda")
    reason = not_liftable(ctx, call)
    if reason is not None:
        return Decline(diag, reason)
    return lambda_plan(ctx, diag, call, RNN_HELPER,
                       f"trace the recurrent module for this call only: `{RNN_HELPER}(lambda: ...)`")

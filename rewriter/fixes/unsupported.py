"""MND5xx: calls Dynamo refuses by default.

MND512: a recurrent submodule's call ``self.lstm(x)`` becomes ``_mend_rnn(lambda: self.lstm(x))`` (a helper
added to the file, rewriter/helpers.py): eager calls the module and nothing else; under compile Dynamo's
``allow_rnn`` is on while it traces that call only. Unsafe (see the rule's fix safety). Declined where the
call cannot move into a lambda (``_not_liftable``: yield, await, walrus, ``super()``).
"""

from __future__ import annotations

import libcst as cst

from mend.analyzers.diagnostic import Diagnostic
from mend.analyzers.static.torch_facts import RNN_HELPER
from mend.rewriter.engine import Decline, FileContext, Plan
from mend.rewriter.fixes.base import fixer
from mend.rewriter.fixes.capture import _not_liftable, lambda_plan


@fixer("MND512")
def fix_recurrent_call(ctx: FileContext, diag: Diagnostic) -> Plan | Decline:
    call = ctx.find(cst.Call, diag)
    if call is None:
        return Decline(diag, "could not find the call at this position")
    parent = ctx.parent(call)
    if isinstance(parent, cst.Lambda) and isinstance(ctx.parent(parent), cst.Arg):
        return Decline(diag, "already inside a lambda")
    reason = _not_liftable(ctx, call)
    if reason is not None:
        return Decline(diag, reason)
    return lambda_plan(ctx, diag, call, RNN_HELPER,
                       f"trace the recurrent module for this call only: `{RNN_HELPER}(lambda: ...)`")

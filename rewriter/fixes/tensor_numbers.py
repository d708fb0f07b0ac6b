"""MND310-MND329: a tensor used where Python needs a number (a size, a bound, a slice).

The repair: sizes computed from a module's 0-d integer buffers are read as Python numbers under compile
(:mod:`mend.rewriter.fixes.int_buffers`); other tensor sizes are captured as symbolic numbers for that
site only (:mod:`mend.rewriter.fixes.capture`, unsafe).
"""

from __future__ import annotations

import libcst as cst

from mend.analyzers.diagnostic import Diagnostic
from mend.rewriter.engine import Decline, FileContext, Plan
from mend.rewriter.fixes.base import fixer
from mend.rewriter.fixes.capture import capture_plan
from mend.rewriter.fixes.int_buffers import int_buffer_plan


@fixer("MND310", "MND311")
def fix_tensor_size(ctx: FileContext, diag: Diagnostic) -> Plan | Decline:
    node = ctx.find((cst.Call, cst.Subscript), diag)
    if node is None:
        return Decline(diag, "could not find the call or subscript at this position")
    folded = int_buffer_plan(ctx, diag, node)
    if folded is not None:
        return folded
    return capture_plan(ctx, diag, node, "capture_scalar_outputs",
                        "the size or bound is tensor data, not a module's integer buffers")

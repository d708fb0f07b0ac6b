"""MND301-MND305, MND310/MND311: Dynamo's scalar or dynamic-shape capture for the site only (unsafe).

The generic repair, last in each of these rules' lists: ``_mend_captured(lambda: <site>)``, or the config
patch on a function compiled itself; see :mod:`mend.rewriter.parts.capture` (when it declines, and why).
"""

from __future__ import annotations

from mend.analyzers.diagnostic import Diagnostic
from mend.rewriter.context import FileContext
from mend.rewriter.parts.capture import capture_plan
from mend.rewriter.parts.sites import (
    any_call,
    item_call,
    masked_subscript,
    number_call,
    size_site,
    tolist_call,
)
from mend.rewriter.plan import Decline, Example, Plan

EXAMPLES = (
    Example(
        rule="MND301",
        before="""
            import torch
            from torch import nn


            class M(nn.Module):
                def forward(self, x: torch.Tensor):
                    peak = x.max().item()
                    return torch.full_like(x, peak) - x
        """,
        after="""
            import torch
            from torch import nn
            from _mend import captured as _mend_captured


            class M(nn.Module):
                def forward(self, x: torch.Tensor):
                    peak = _mend_captured(lambda: x.max().item())
                    return torch.full_like(x, peak) - x
        """,
        run="compile(M())(torch.tensor([1.0, 5.0, 2.0]))",
        unsafe=True,
    ),
)


SCALAR, SHAPE = "capture_scalar_outputs", "capture_dynamic_output_shape_ops"
# rule -> (the site's finder, the capture flag, why the site breaks the graph)
SITES = {
    "MND301": (item_call, SCALAR, "the Python number is used outside tensor arithmetic"),
    "MND302": (number_call, SCALAR, "the Python number is used outside tensor arithmetic"),
    "MND303": (tolist_call, SCALAR, "a Python list is needed (capture helps integer tensors only)"),
    "MND304": (any_call, SHAPE, "the operator's output shape depends on tensor data"),
    "MND305": (masked_subscript, SHAPE, "the masked tensor's data-dependent shape is used"),
    "MND310": (size_site, SCALAR, "the size or bound is tensor data, not a module's integer buffers"),
    "MND311": (size_site, SCALAR, "the size or bound is tensor data, not a module's integer buffers"),
}


def repair(ctx: FileContext, diag: Diagnostic) -> Plan | Decline | None:
    find, flag, why = SITES[diag.code]
    node = find(ctx, diag)
    return node if isinstance(node, Decline) else capture_plan(ctx, diag, node, flag, why)

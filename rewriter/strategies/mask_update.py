"""MND305 ``t[mask] += v`` (``-=``, ``*=``, ``/=``; ``v`` a number literal): ``_mend_mask_update(t, "+", mask, v)``.

Python runs the statement as ``part = t[mask]; part += v; t[mask] = part``: the read ``t[mask]`` has a
data-dependent shape and breaks the graph. The helper runs exactly that in eager (same ops, so the same bits,
gradients and exceptions). Under compile, where the mask is a boolean tensor of ``t``'s leading dimensions
(on its device), ``t`` no leaf that requires grad, and the in-place op cannot reject the dtype (a floating or
complex ``t``; an integer ``t`` with an integer ``v`` and no ``/=``), it applies the same in-place op to a
copy of every element and stores it where the mask holds, ``t.copy_(torch.where(mask, updated, t))``: in
place, so aliases of ``t`` see the change, with the values the original computes element by element.
Otherwise the original statement runs (a graph break there, as before). **Safe**. Declined for any other
right-hand side: a tensor ``v`` broadcasts against ``t[mask]``, not against ``t``.
"""

from __future__ import annotations

import libcst as cst

from mend.analyzers.diagnostic import Diagnostic
from mend.analyzers.static.torch_facts import MASK_UPDATE_HELPER
from mend.rewriter.analysis import code, is_number, parse_stmt
from mend.rewriter.context import FileContext
from mend.rewriter.parts.sites import mask_index
from mend.rewriter.plan import Decline, Example, Plan

EXAMPLES = (
    Example(
        rule="MND305",
        before="""
            import torch
            from torch import nn


            class M(nn.Module):
                def forward(self, x, mask: torch.Tensor):
                    x = x * 2
                    x[mask > 0] *= 0.5  # halve the masked positions
                    return x.sin()
        """,
        after="""
            import torch
            from torch import nn
            from _mend import mask_update as _mend_mask_update


            class M(nn.Module):
                def forward(self, x, mask: torch.Tensor):
                    x = x * 2
                    _mend_mask_update(x, "*", mask > 0, 0.5)  # halve the masked positions
                    return x.sin()
        """,
        run="compile(M())(torch.arange(6.0).reshape(2, 3), torch.tensor([1, 0]))",
    ),
)

_OPS = {cst.AddAssign: "+", cst.SubtractAssign: "-", cst.MultiplyAssign: "*", cst.DivideAssign: "/"}


def repair(ctx: FileContext, diag: Diagnostic) -> Plan | Decline | None:
    sub = mask_index(ctx, diag)
    if isinstance(sub, Decline):
        return sub
    aug = ctx.parent(sub)
    if not (isinstance(aug, cst.AugAssign) and aug.target is sub):
        return None
    op = _OPS.get(type(aug.operator))
    if op is None:
        return Decline(diag, f"only `+=`, `-=`, `*=`, `/=` through a mask are repaired, not `{code(aug.operator).strip()}`")
    if not is_number(aug.value):
        return Decline(diag, "the right-hand side of `t[mask] op= v` is not a number literal (a tensor broadcasts "
                             "against `t[mask]`, not `t`)")
    stmt = ctx.statement_line(aug)
    if stmt is None or len(stmt.body) != 1 or len(sub.slice) != 1 or not isinstance(sub.slice[0].slice, cst.Index) \
            or sub.slice[0].slice.star is not None:
        return Decline(diag, "not one `t[mask] op= v` statement with a single index")
    mask = sub.slice[0].slice.value
    new = parse_stmt(f"{MASK_UPDATE_HELPER}({code(sub.value)}, \"{op}\", {code(mask)}, {code(aug.value)})\n").body[0]
    return Plan(diag, f"`t[mask] {op}= v` -> `_mend_mask_update(t, \"{op}\", mask, v)` (eager runs the original; "
                      "under compile an in-place `torch.where` store of the same values)", "safe", [(aug, new)],
                helpers=[MASK_UPDATE_HELPER])

"""MND301 a count whose every read runs only in eager: compute it only in eager (safe).

``n = (ids == k).sum().item()`` read only where ``if not is_torchdynamo_compiling() and n != m: raise ...``
(Qwen2-VL's token count) becomes ``n = ... if not torch.compiler.is_compiling() else None``: compiled code
never reads ``n``. Safe: eager runs the statement as written, and the ``.item()`` of a full reduction of an
expression that cannot raise, skipped under compile, could not raise.
"""

from __future__ import annotations

from mend.analyzers.diagnostic import Diagnostic
from mend.rewriter.context import FileContext
from mend.rewriter.parts.counts import counted_item, eager_only_value
from mend.rewriter.parts.sites import (
    item_call,
)
from mend.rewriter.plan import Decline, Example, Plan

EXAMPLES = (
    Example(
        rule="MND301",
        before="""
            import torch
            from torch import nn


            class M(nn.Module):
                def forward(self, ids, feats):
                    n_tokens = (ids == 7).sum().item()  # only the eager check reads it
                    if not torch.compiler.is_compiling() and n_tokens != feats.shape[0]:
                        raise ValueError(f"tokens: {n_tokens}, features: {feats.shape[0]}")
                    return feats.sin() * 2
        """,
        after="""
            import torch
            from torch import nn


            class M(nn.Module):
                def forward(self, ids, feats):
                    n_tokens = (ids == 7).sum().item() if not torch.compiler.is_compiling() else None  # only the eager check reads it
                    if not torch.compiler.is_compiling() and n_tokens != feats.shape[0]:
                        raise ValueError(f"tokens: {n_tokens}, features: {feats.shape[0]}")
                    return feats.sin() * 2
        """,
        run="compile(M())(torch.tensor([7, 1, 7]), torch.ones(2, 3))",
    ),
)


def repair(ctx: FileContext, diag: Diagnostic) -> Plan | Decline | None:
    call = item_call(ctx, diag)
    if isinstance(call, Decline):
        return call
    facts = ctx.facts(ctx.enclosing_function(call))
    counted = counted_item(ctx, facts, call)
    if counted is None or not all(ctx.eager_only(u) for u in facts.loads[counted[0]]):
        return None
    torch, imports = ctx.torch_name()
    return Plan(diag, f"compute `{counted[0]}` only in eager: every read of it runs only in eager", "safe",
                [(call, eager_only_value(call, torch))], imports=imports)

"""MND301 a count read only by one validation: the check moves into the graph with the count as a tensor.

``n = (ids == k).sum().item()`` read only by ``if n != m: raise ValueError(f"...{n}")`` (Qwen2.5-VL's and
Qwen2-Audio's token counts): eager keeps both; under compile the count stays a tensor inside the MND203
repair of the check (``torch._assert_async``, :mod:`mend.rewriter.parts.validation`) and ``n`` is not
computed. Unsafe, as that repair. Where the check is no validation that repair can move, the later
strategies of the rule are tried.
"""

from __future__ import annotations

from dataclasses import replace

import libcst as cst

from mend.analyzers.diagnostic import Diagnostic
from mend.rewriter.analysis import walk
from mend.rewriter.context import FileContext
from mend.rewriter.parts.counts import counted_item, eager_only_value
from mend.rewriter.parts.sites import (
    item_call,
)
from mend.rewriter.parts.validation import validation_plan
from mend.rewriter.plan import Decline, Example, Plan

EXAMPLES = (
    Example(
        rule="MND301",
        before="""
            import torch
            from torch import nn


            class M(nn.Module):
                def forward(self, ids, feats):
                    n_tokens = (ids == 7).sum().item()
                    if n_tokens != feats.shape[0]:
                        raise ValueError(f"tokens: {n_tokens}, features: {feats.shape[0]}")
                    return feats.sin() * 2
        """,
        after="""
            import torch
            from torch import nn


            class M(nn.Module):
                def forward(self, ids, feats):
                    n_tokens = (ids == 7).sum().item() if not torch.compiler.is_compiling() else None
                    if not torch.compiler.is_compiling():
                        if n_tokens != feats.shape[0]:
                            raise ValueError(f"tokens: {n_tokens}, features: {feats.shape[0]}")
                    else:
                        torch._assert_async(torch.logical_not((ids == 7).sum() != feats.shape[0]), '[mend:ValueError] tokens: {n_tokens}, features: {feats.shape[0]}')
                    return feats.sin() * 2
        """,
        run="compile(M())(torch.tensor([7, 1, 7]), torch.ones(2, 3))",
        unsafe=True,
    ),
)


def repair(ctx: FileContext, diag: Diagnostic) -> Plan | Decline | None:
    call = item_call(ctx, diag)
    if isinstance(call, Decline):
        return call
    facts = ctx.facts(ctx.enclosing_function(call))
    counted = counted_item(ctx, facts, call)
    if counted is None:
        return None
    name, receiver = counted
    guards = {id(g): g for g in (_enclosing_if(ctx, u) for u in facts.loads[name])}
    guard = next(iter(guards.values())) if len(guards) == 1 else None
    if guard is None or not any(u.value == name for u in walk(guard.test) if isinstance(u, cst.Name)):
        return None
    compiled_test = guard.test.visit(_Substitute(name, receiver))  # a call: an atom wherever it goes
    plan = validation_plan(ctx, diag, guard, compiled_test)
    if isinstance(plan, Decline):
        return None  # not a validation this repair can move: the other repairs of `.item()` are tried
    torch, _ = ctx.torch_name()
    return replace(plan, message=f"{plan.message}; the count `{name}` is computed only in eager",
                   edits=[(call, eager_only_value(call, torch)), *plan.edits])


def _enclosing_if(ctx: FileContext, node: cst.CSTNode) -> cst.If | None:
    for anc in ctx.ancestors(node):
        if isinstance(anc, cst.If):
            return anc
        if isinstance(anc, (cst.FunctionDef, cst.Lambda)):
            return None
    return None


class _Substitute(cst.CSTTransformer):
    """Every read of ``name`` replaced by ``value``."""

    def __init__(self, name: str, value: cst.BaseExpression) -> None:
        super().__init__()
        self.name, self.value = name, value

    def leave_Name(self, original: cst.Name, updated: cst.Name) -> cst.BaseExpression:
        return self.value if original.value == self.name else updated

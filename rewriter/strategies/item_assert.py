"""MND301 ``assert t.item() <= n`` / ``assert t.item()``: ``assert t <= n``, a tensor assert Dynamo keeps in the graph.

Dynamo turns an assert on a tensor into an in-graph ``torch._assert_async`` (measured on torch 2.13: one
graph). Unsafe: a failing check raises ``RuntimeError`` under compile, asynchronously on CUDA, and the
comparison runs in the tensor's dtype. Declined for the forms Dynamo breaks on (``not``, ``and``/``or``,
chained comparisons, a formatted message).
"""

from __future__ import annotations

import libcst as cst

from mend.analyzers.diagnostic import Diagnostic
from mend.rewriter.context import FileContext
from mend.rewriter.parts.sites import (
    in_test,
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
                def forward(self, x, lengths):
                    assert lengths.max().item() <= x.shape[1]
                    return x * lengths[:, None]
        """,
        after="""
            import torch
            from torch import nn


            class M(nn.Module):
                def forward(self, x, lengths):
                    assert lengths.max() <= x.shape[1]
                    return x * lengths[:, None]
        """,
        run="compile(M())(torch.ones(2, 3), torch.tensor([1, 3]))",
        unsafe=True,
    ),
)


def repair(ctx: FileContext, diag: Diagnostic) -> Plan | Decline | None:
    call = item_call(ctx, diag)
    if isinstance(call, Decline):
        return call
    assert_stmt = _assert_truth(ctx, call)
    if isinstance(assert_stmt, str):
        return Decline(diag, assert_stmt)
    if assert_stmt is None:
        return None
    receiver = call.func.value
    return Plan(diag, "assert on the tensor: drop `.item()` (Dynamo keeps a tensor assert in the graph)",
                "unsafe", [(call, receiver.with_changes(lpar=call.lpar, rpar=call.rpar) if call.lpar else receiver)])


def _assert_truth(ctx: FileContext, call: cst.Call) -> cst.Assert | str | None:
    """The ``assert`` whose truth value is all that ``call`` (an ``.item()``) feeds, a decline reason, or None.

    ``assert t.item()`` and ``assert t.item() <= n`` (one comparison operator, either side) qualify when
    the message is absent or a plain string literal: Dynamo turns ``assert <tensor>`` into an in-graph
    ``torch._assert_async`` (measured on torch 2.13: one graph), but breaks on ``not``, ``and``/``or``,
    chained comparisons and formatted messages, so those are declined.
    """
    node: cst.CSTNode = call
    parent = ctx.parent(node)
    if isinstance(parent, cst.ComparisonTarget):
        node = ctx.parent(parent)
        parent = ctx.parent(node)
    elif isinstance(parent, cst.Comparison) and parent.left is node:
        node = parent
        parent = ctx.parent(node)
    if not isinstance(parent, cst.Assert) or parent.test is not node:
        for anc in ctx.ancestors(call):
            if isinstance(anc, cst.Assert):
                if in_test(ctx, call, anc):
                    return ("`assert` on `.item()` is kept in the graph only as `assert t` or `assert t <op> x` "
                            "(one comparison, no `not`/`and`/`or`): Dynamo breaks on the other forms")
                return None
            if isinstance(anc, (cst.SimpleStatementLine, cst.BaseCompoundStatement)):
                return None
        return None
    if isinstance(node, cst.Comparison) and len(node.comparisons) != 1:
        return "a chained comparison on `.item()` in an `assert` needs Python's `and` on tensors (a break)"
    if isinstance(node, cst.Comparison) and not isinstance(
            node.comparisons[0].operator, (cst.LessThan, cst.LessThanEqual, cst.GreaterThan,
                                           cst.GreaterThanEqual, cst.Equal, cst.NotEqual)):
        return "only `<`, `<=`, `>`, `>=`, `==`, `!=` comparisons on `.item()` in an `assert` are rewritten"
    msg = parent.msg
    if msg is not None and not isinstance(msg, (cst.SimpleString, cst.ConcatenatedString)):
        return "the `assert` message is computed (Dynamo breaks on a formatted message under a tensor assert)"
    return parent

"""MND302 ``assert not t`` (``assert not torch.isnan(h).any()``): ``assert torch.logical_not(t)``.

Python's ``not`` asks the tensor for its truth value, a graph break; an ``assert`` on a tensor Dynamo keeps
in the graph (``torch._assert_async``, measured on torch 2.13: one graph). ``torch.logical_not(t)`` has the
opposite truth value of ``t`` for every one-element tensor (NaN is true, so its negation false, as ``not``
says), and a tensor of several elements raises the same ``RuntimeError`` from ``bool``. Eager is unchanged:
the same ``AssertionError`` with the same message. Unsafe: under compile a failing check raises
``RuntimeError`` with the message (asynchronously on CUDA) where the original raised ``AssertionError``; the
check runs inside the graph, so an error Dynamo meets while tracing the code after it (which the original never
reached) surfaces first (found by the property tests: ``IndexError`` of ``t[0]`` on an empty tensor).
Declined for a computed message (Dynamo breaks on a formatted message under a tensor assert).
"""

from __future__ import annotations

import libcst as cst

from mend.analyzers.diagnostic import Diagnostic
from mend.rewriter.analysis import code, parse_expr
from mend.rewriter.context import FileContext
from mend.rewriter.plan import Decline, Example, Plan

EXAMPLES = (
    Example(
        rule="MND302",
        before="""
            import torch
            from torch import nn


            class M(nn.Module):
                def forward(self, x: torch.Tensor):
                    h = x.exp()
                    assert not torch.isnan(h).any(), "NaN in the activations"
                    return h * 2
        """,
        after="""
            import torch
            from torch import nn


            class M(nn.Module):
                def forward(self, x: torch.Tensor):
                    h = x.exp()
                    assert torch.logical_not(torch.isnan(h).any()), "NaN in the activations"
                    return h * 2
        """,
        run="compile(M())(torch.arange(4.0))",
        unsafe=True,
    ),
)


def repair(ctx: FileContext, diag: Diagnostic) -> Plan | Decline | None:
    node = ctx.find(cst.UnaryOperation, diag, pred=lambda n: isinstance(n.operator, cst.Not))
    parent = ctx.parent(node) if node is not None else None
    if not (isinstance(parent, cst.Assert) and parent.test is node):
        return None
    if parent.msg is not None and not isinstance(parent.msg, (cst.SimpleString, cst.ConcatenatedString)):
        return Decline(diag, "the `assert` message is computed (Dynamo breaks on a formatted message under a "
                             "tensor assert)")
    torch, imports = ctx.torch_name()
    new = parse_expr(f"{torch}.logical_not({code(node.expression)})").with_changes(lpar=node.lpar, rpar=node.rpar)
    return Plan(diag, "`assert not t` -> `assert torch.logical_not(t)`: a tensor assert Dynamo keeps in the graph "
                      "(unsafe: a failing check raises RuntimeError under compile)", "unsafe", [(node, new)],
                imports=imports)

"""MND2xx: Python control flow that depends on tensor values."""

from __future__ import annotations

import ast

from mend.analyzers.static import tensors as tk
from mend.analyzers.static.rules.base import Rule, checker, register

_HDR = "import torch\nfrom torch import nn\n"

register(
    Rule(
        "MND201", "data-dependent-if",
        "`if` on a tensor value: Dynamo cannot trace data-dependent branching and breaks the graph",
        ("GB0170",), "break",
        what="""
            Finds `if` statements and conditional expressions whose condition is a tensor value
            (`if x.sum() > 0:`, `if mask.any():`, also through locals: `n = x.sum(); if n > 0:`).
            Conditions on shapes, dtypes, `None`, `self.training` or `isinstance` are static and are
            not reported. A tensor condition behind a dtype or `self.training` test in an `and` chain
            (`if h.dtype == torch.float16 and not torch.isfinite(h).all():`) is evaluated, and breaks,
            only for that dtype or mode, which the analyzer cannot see: it is not reported.
        """,
        why="""
            The branch taken depends on data Dynamo does not know at trace time, so it ends the graph
            at the condition and resumes in Python (GB0170).
        """,
        use_instead="""
            Compute both sides and select with `torch.where(cond, a, b)`, or use
            `torch.cond(pred, true_fn, false_fn, operands)`. For guards like `if torch.isinf(h).any():
            h = h.clamp(...)`, apply the transform unconditionally (clamp, `nan_to_num`).
        """,
        invalid=(_HDR + """
            class M(nn.Module):
                def forward(self, x):
                    if x.sum() > 0:
                        x = x * 2
                    return x
        """, _HDR + """
            class M(nn.Module):
                def forward(self, x):
                    n = x.abs().amax()
                    y = x / n if n > 1 else x
                    return y
        """),
        valid=(_HDR + """
            class M(nn.Module):
                def forward(self, x, mask=None):
                    if mask is not None and x.dim() == 3 and x.shape[0] > 1:
                        x = x * mask
                    if self.training or x.dtype == torch.float16 or isinstance(x, tuple):
                        x = x.float()
                    return torch.where(x.sum() > 0, x * 2, x)
        """,),
    ),
    Rule(
        "MND202", "data-dependent-while",
        "`while` on a tensor value: Dynamo cannot trace a data-dependent loop and breaks the graph",
        ("GB0170",), "break",
        what="Finds `while` loops whose condition is a tensor value.",
        why="Each evaluation of the condition is data-dependent branching: the graph breaks (GB0170), once per "
            "re-entry of the loop.",
        use_instead="Use `torch._higher_order_ops.while_loop(cond_fn, body_fn, operands)` or a fixed trip count.",
        invalid=(_HDR + """
            class M(nn.Module):
                def forward(self, x):
                    while x.abs().sum() > 1:
                        x = x / 2
                    return x
        """,),
        valid=(_HDR + """
            class M(nn.Module):
                def forward(self, x):
                    i = 0
                    while i < x.shape[0]:
                        i += 1
                    return x
        """,),
    ),
    Rule(
        "MND203", "data-dependent-validation-raise",
        "validation `raise` under a tensor condition: Dynamo cannot trace the data-dependent check and breaks "
        "the graph",
        ("GB0170",), "break",
        what="""
            Finds input validation of the form `if <tensor condition>: raise ...` (including
            `if not torch.equal(a, b): raise ...`) in traced code.
        """,
        why="""
            The check needs the tensor's values, so Dynamo breaks the graph at the condition (GB0170)
            on every call, even though the error path is never taken in practice.
        """,
        use_instead="""
            Validate outside the compiled region, or use `torch._check(...)`-style asserts that the
            compiler can keep in the graph, or drop the check under compile:
            `if not torch.compiler.is_compiling() and (mask.sum(-1) == 0).any(): raise ...`.
        """,
        invalid=(_HDR + """
            class M(nn.Module):
                def forward(self, x, mask):
                    if (mask.sum(-1) == 0).any():
                        raise ValueError("empty row")
                    return x * mask
        """,),
        valid=(_HDR + """
            class M(nn.Module):
                def forward(self, x, mask):
                    if x.dim() != 3:
                        raise ValueError("expected 3-d input")
                    return x * mask
        """,),
    ),
)


def _raises(body: list[ast.stmt]) -> bool:
    return any(isinstance(s, ast.Raise) for s in body) and all(
        isinstance(s, (ast.Raise, ast.Expr, ast.Assign, ast.Pass)) for s in body)


@checker("if")
def data_dependent_if(w, node: ast.If) -> None:
    if w.kind(node.test) != tk.T or w.mode_prefixed(node.test):
        return  # `x.dtype == torch.float16 and <tensor test>`: breaks only for that dtype (or mode)
    if _raises(node.body):
        w.report("MND203", node.test)
    else:
        w.report("MND201", node.test)


@checker("ifexp")
def data_dependent_ifexp(w, node: ast.IfExp) -> None:
    if w.kind(node.test) == tk.T and not w.mode_prefixed(node.test):
        w.report("MND201", node.test, "conditional expression on a tensor value: Dynamo cannot trace "
                                      "data-dependent branching and breaks the graph")


@checker("while")
def data_dependent_while(w, node: ast.While) -> None:
    if w.kind(node.test) == tk.T and not w.mode_prefixed(node.test):
        w.report("MND202", node.test)

"""MND3xx: tensor values turned into Python numbers, and operators with data-dependent shapes."""

from __future__ import annotations

import ast

from mend.analyzers.static import tensors as tk
from mend.analyzers.static.rules.base import Rule, checker, register

_HDR = "import torch\nfrom torch import nn\n"

register(
    Rule(
        "MND301", "tensor-item",
        "`.item()` in compiled code: Dynamo does not capture scalar outputs by default and breaks the graph",
        ("GB0124",), "break",
        what="Finds `t.item()` on tensors in traced code.",
        why="""
            With the default `capture_scalar_outputs=False`, Dynamo cannot represent the Python number
            `.item()` returns and breaks the graph (GB0124). `fullgraph=True` silently turns capture on,
            so this break does not show up there.
        """,
        use_instead="""
            Keep the value as a 0-d tensor (`loss / n.clamp(min=1)` instead of `/ max(n.item(), 1)`),
            or set `torch._dynamo.config.capture_scalar_outputs = True`.
        """,
        invalid=(_HDR + """
            class M(nn.Module):
                def forward(self, x):
                    n = x.sum().item()
                    return x / max(n, 1.0)
        """,),
        valid=(_HDR + """
            class M(nn.Module):
                def forward(self, x):
                    n = x.sum()
                    return x / n.clamp(min=1.0)
        """,),
    ),
    Rule(
        "MND302", "tensor-to-python-number",
        "tensor converted to a Python number in compiled code: `float`/`int`/`bool`/`math.*` need the value "
        "and break the graph",
        ("GB0124", "GB0170"), "break",
        what="Finds `float(t)`, `int(t)`, `bool(t)` and `math.<fn>(t)` on tensors in traced code.",
        why="These call `t.item()` under the hood (GB0124) or branch on the value (GB0170).",
        use_instead="Stay in tensor land: `t.float()`, `t.to(torch.int64)`, `torch.sqrt(t)`.",
        invalid=("import math\n" + _HDR + """
            class M(nn.Module):
                def forward(self, x):
                    scale = math.sqrt(x.var())
                    return x / scale
        """,),
        valid=(_HDR + """
            class M(nn.Module):
                def forward(self, x):
                    scale = torch.sqrt(x.var())
                    return x / scale + float(x.shape[-1])
        """,),
    ),
    Rule(
        "MND303", "tensor-tolist",
        "`.tolist()` in compiled code: Dynamo cannot turn tensor data into a Python list and breaks the graph",
        ("GB0109", "GB0033"), "break",
        what="Finds `t.tolist()` on tensors in traced code.",
        why="""
            A float tensor's `.tolist()` always breaks (GB0109, even with `capture_scalar_outputs`); an
            integer tensor's breaks by default (GB0033).
        """,
        use_instead="Use shapes (`t.shape[0]` rather than `len(t.tolist())`) or keep working on tensors.",
        invalid=(_HDR + """
            class M(nn.Module):
                def forward(self, x):
                    sizes = x.sum(-1).tolist()
                    return x * len(sizes)
        """,),
        valid=(_HDR + """
            class M(nn.Module):
                def forward(self, x):
                    return x * x.shape[0]
        """,),
    ),
    Rule(
        "MND304", "dynamic-shape-op",
        "operator with a data-dependent output shape in compiled code: Dynamo breaks the graph",
        ("GB0036",), "break",
        what="""
            Finds `nonzero`, `unique`, `unique_consecutive`, `masked_select`, `argwhere` and one-argument
            `torch.where(cond)` in traced code.
        """,
        why="""
            Their output shape depends on the values, which Dynamo does not capture by default
            (`capture_dynamic_output_shape_ops=False`): the graph breaks (GB0036).
        """,
        use_instead="""
            Keep static shapes: count with `(t != 0).sum()`, select with `torch.where(mask, t, 0)`,
            or set `torch._dynamo.config.capture_dynamic_output_shape_ops = True`.
        """,
        invalid=(_HDR + """
            class M(nn.Module):
                def forward(self, x):
                    idx = torch.nonzero(x > 0)
                    return x.sum() + idx.shape[0]
        """,),
        valid=(_HDR + """
            class M(nn.Module):
                def forward(self, x):
                    count = (x > 0).sum()
                    return x.sum() + count
        """,),
    ),
    Rule(
        "MND305", "boolean-mask-indexing",
        "boolean-mask indexing `t[mask]` in compiled code: the result's shape depends on the data and the "
        "graph breaks",
        ("GB0036",), "break",
        what="""
            Finds reads `t[mask]` where `mask` is a boolean tensor (a comparison of tensors, `isnan`,
            `.bool()`, `~mask`, or a tensor parameter whose name contains `mask`). Writes such as
            `t[mask] = 0` are traced and not reported.
        """,
        why="Indexing with a boolean mask runs `nonzero` under the hood: dynamic output shape (GB0036).",
        use_instead="`torch.where(mask, t, 0).sum() / mask.sum()` or `(t * mask).sum()` keep static shapes.",
        invalid=(_HDR + """
            class M(nn.Module):
                def forward(self, x):
                    return x[x > 0].mean()
        """,),
        valid=(_HDR + """
            class M(nn.Module):
                def forward(self, x):
                    m = x > 0
                    x[m] = 0
                    return torch.where(m, x, 0).sum()
        """,),
    ),
)

DYNAMIC_SHAPE_TORCH = frozenset(
    f"torch.{n}" for n in ("nonzero", "unique", "unique_consecutive", "masked_select", "argwhere", "nonzero_static")
)
DYNAMIC_SHAPE_METHODS = frozenset({"nonzero", "unique", "unique_consecutive", "masked_select", "argwhere"})


@checker("call")
def scalar_calls(w, call: ast.Call) -> None:
    f = call.func
    q = w.qualify(f)
    if q is not None:
        if q in ("builtins.float", "builtins.int", "builtins.bool") and call.args and w.kind(call.args[0]) == tk.T:
            w.report("MND302", call, f"`{q[9:]}(tensor)` in compiled code: converting a tensor to a Python number "
                                     "needs its value and breaks the graph")
        elif q.startswith("math.") and any(w.kind(a) == tk.T for a in call.args):
            w.report("MND302", call, f"`{q}(tensor)` in compiled code: converting a tensor to a Python number "
                                     "needs its value and breaks the graph")
        elif q in DYNAMIC_SHAPE_TORCH and q != "torch.nonzero_static":
            w.report("MND304", call, f"`{q}` in compiled code: its output shape depends on the data and the graph "
                                     "breaks")
        elif q == "torch.where" and len(call.args) == 1 and not call.keywords:
            w.report("MND304", call, "one-argument `torch.where(cond)` in compiled code: its output shape depends "
                                     "on the data and the graph breaks")
        return
    if not isinstance(f, ast.Attribute):
        return
    base = w.kind(f.value)
    if base not in (tk.T, tk.M):
        return
    if f.attr == "item" and not call.args:
        w.report("MND301", call)
    elif f.attr == "tolist" and not call.args:
        w.report("MND303", call)
    elif f.attr in DYNAMIC_SHAPE_METHODS:
        w.report("MND304", call, f"`.{f.attr}()` in compiled code: its output shape depends on the data and the "
                                 "graph breaks")


@checker("subscript")
def boolean_mask(w, node: ast.Subscript) -> None:
    if w.kind(node.value) not in (tk.T, tk.M):
        return
    idx = node.slice
    elts = idx.elts if isinstance(idx, ast.Tuple) else [idx]
    if any(w.is_bool_tensor(e) for e in elts):
        w.report("MND305", node)

"""MND401 ``self.step += 1`` on an int/float attribute in ``forward``: a registered buffer updated in place.

The attribute becomes a non-persistent registered buffer (``torch.tensor(0)``; floats as float64) in
``__init__``; the in-place update stays as written (a tensor ``+=`` is in place), and ``min(c, <expr of it>)`` /
``max(...)`` become ``torch.clamp``. Declined when the value reaches control flow, a call other than
min/max, or is written in any other way. Unsafe: the attribute's type changes for code outside the class
(``model.step`` is now a tensor).
"""

from __future__ import annotations

import libcst as cst

from mend.analyzers.diagnostic import Diagnostic
from mend.rewriter.analysis import code, is_number, parse_expr, self_attr, walk
from mend.rewriter.context import FileContext
from mend.rewriter.plan import Decline, Example, Plan

EXAMPLES = (
    Example(
        rule="MND401",
        before="""
            import torch
            from torch import nn


            class M(nn.Module):
                def __init__(self):
                    super().__init__()
                    self.calls = 0

                def forward(self, x):
                    self.calls += 1
                    return x * 2
        """,
        after="""
            import torch
            from torch import nn


            class M(nn.Module):
                def __init__(self):
                    super().__init__()
                    self.register_buffer("calls", torch.tensor(0), persistent=False)

                def forward(self, x):
                    self.calls += 1
                    return x * 2
        """,
        run="(lambda m: [m(torch.ones(2)) for _ in range(3)])(compile(M()))",
        unsafe=True,
    ),
)


def repair(ctx: FileContext, diag: Diagnostic) -> Plan | Decline:
    stmt = ctx.find((cst.AugAssign, cst.Assign), diag)
    if stmt is None:
        return Decline(diag, "could not find the attribute update at this position")
    target = stmt.target if isinstance(stmt, cst.AugAssign) else (
        stmt.targets[0].target if len(stmt.targets) == 1 else None)
    attr = self_attr(target) if target is not None else None
    if attr is None:
        return Decline(diag, "the update is not to `self.<name>`")
    cls = ctx.enclosing_class(stmt)
    if cls is None:
        return Decline(diag, "the update is not inside a class")
    ctx.prepare_parents(cls)  # reads in every method are followed below
    init = next((s for s in cls.body.body if isinstance(s, cst.FunctionDef) and s.name.value == "__init__"), None)
    if init is None:
        return Decline(diag, "the class has no __init__ to register a buffer in")
    found = _init_assignment(init, attr)
    if isinstance(found, str):
        return Decline(diag, found)
    line, small = found
    torch, imports = ctx.torch_name()
    edits: list = []
    problem = _other_writes(cls, attr, small) or _reads(ctx, cls, attr, torch, edits)
    if problem is not None:
        return Decline(diag, problem)
    is_float = isinstance(small.value, cst.Float) or isinstance(getattr(small.value, "expression", None), cst.Float)
    dtype = f", dtype={torch}.float64" if is_float else ""
    new_line = line.with_changes(body=[cst.Expr(parse_expr(
        f'self.register_buffer("{attr}", {torch}.tensor({code(small.value)}{dtype}), persistent=False)'))])
    edits.append((line, new_line))
    return Plan(diag, f"`self.{attr}` becomes a registered buffer updated in place (no recompile per value)",
                "unsafe", edits, imports=imports)


def _init_assignment(init: cst.FunctionDef, attr: str) -> tuple[cst.SimpleStatementLine, cst.Assign] | str:
    """The one ``self.attr = <number>`` line of ``__init__`` (after ``super().__init__()``), or why not."""
    found = None
    seen_super = False
    for s in init.body.body:
        if not isinstance(s, cst.SimpleStatementLine):
            continue
        for small in s.body:
            if "super().__init__" in code(small) or "Module.__init__" in code(small):
                seen_super = True
            if isinstance(small, cst.Assign) and len(small.targets) == 1 and \
                    self_attr(small.targets[0].target) == attr:
                if found is not None:
                    return f"`self.{attr}` is assigned twice in __init__"
                if not seen_super:
                    return f"`self.{attr}` is set before `super().__init__()`"
                found = (s, small)
    if found is None:
        return f"`self.{attr}` is not initialised in __init__ with a number"
    if len(found[0].body) != 1 or not is_number(found[1].value):
        return f"`self.{attr}` is not initialised with a plain number literal"
    return found


def _other_writes(cls: cst.ClassDef, attr: str, init_assign: cst.Assign) -> str | None:
    """Every write of ``self.attr`` other than the one in ``__init__`` must be an in-place numeric update."""
    for node in walk(cls):
        if isinstance(node, cst.AugAssign) and self_attr(node.target) == attr:
            if not is_number(node.value) and not isinstance(node.value, cst.Name):
                return f"`self.{attr}` is updated with a non-number"
            continue
        if isinstance(node, cst.Assign) and any(self_attr(t.target) == attr for t in node.targets):
            if node is not init_assign:
                return f"`self.{attr}` is rebound with `=`; only `+=`-style updates keep a buffer"
    return None


def _reads(ctx: FileContext, cls: cst.ClassDef, attr: str, torch: str, edits: list) -> str | None:
    """Every read of ``self.attr`` must stay in tensor arithmetic (``min``/``max`` become clamps in ``edits``)."""
    for node in walk(cls):
        if self_attr(node) != attr or _is_store(ctx, node):
            continue
        res = _check_read(ctx, node, torch, edits, set())
        if res is not None:
            return res
    return None


def _is_store(ctx: FileContext, node: cst.CSTNode) -> bool:
    parent = ctx.parent(node)
    if isinstance(parent, cst.AugAssign) and parent.target is node:
        return True
    return isinstance(parent, cst.AssignTarget)


def _check_read(ctx: FileContext, node: cst.CSTNode, torch: str, edits: list, seen: set) -> str | None:
    """None when the value of ``node`` only flows into tensor arithmetic (adding clamp edits)."""
    cur = node
    while True:
        parent = ctx.parent(cur)
        if isinstance(parent, cst.BinaryOperation):
            other = parent.right if parent.left is cur else parent.left
            facts = ctx.facts(ctx.enclosing_function(parent))
            if facts.is_tensor(other):
                return None  # meets a tensor: the result is a tensor either way
            cur = parent
            continue
        if isinstance(parent, cst.Arg):
            call = ctx.parent(parent)
            fname = code(call.func) if isinstance(call, cst.Call) else ""
            others = [a.value for a in call.args if a is not parent] if isinstance(call, cst.Call) else []
            if fname in {"min", "max"} and len(call.args) == 2 and all(is_number(o) for o in others):
                kw = "max" if fname == "min" else "min"
                edits.append((call, parse_expr(f"{torch}.clamp({code(cur)}, {kw}={code(others[0])})")))
                cur = call
                continue
            return f"the value reaches a call to `{fname or '?'}`, which needs a Python number"
        if isinstance(parent, cst.Assign) and parent.value is cur:
            if len(parent.targets) != 1 or not isinstance(parent.targets[0].target, cst.Name):
                return "the value is stored somewhere mend cannot follow"
            name = parent.targets[0].target.value
            if name in seen:
                return None
            seen.add(name)
            facts = ctx.facts(ctx.enclosing_function(parent))
            if len(facts.stores.get(name, [])) != 1:
                return f"`{name}` is assigned more than once"
            for use in facts.loads.get(name, []):
                res = _check_read(ctx, use, torch, edits, seen)
                if res is not None:
                    return res
            return None
        if isinstance(parent, cst.Return):
            return "the value is returned (callers may expect a Python number)"
        if isinstance(parent, (cst.Comparison, cst.If, cst.While, cst.IfExp, cst.BooleanOperation)):
            return "the value reaches control flow (a tensor there would be a data-dependent branch)"
        return f"the value is used in a `{type(parent).__name__}` mend does not follow"

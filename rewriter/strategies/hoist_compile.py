"""MND403 ``torch.compile`` inside a loop: hoisted before the loop (safe: the same object is compiled once).

``name = torch.compile(<expr>)`` whose arguments are not rebound in the loop moves before the loop.
"""

from __future__ import annotations

import libcst as cst

from mend.analyzers.diagnostic import Diagnostic
from mend.analyzers.static.torch_facts import COMPILE_NAMES
from mend.rewriter.analysis import code, names_in, walk
from mend.rewriter.context import FileContext
from mend.rewriter.plan import Decline, Example, Plan

EXAMPLES = (
    Example(
        rule="MND403",
        before="""
            import torch


            def double(x):
                return x * 2


            x = torch.ones(2)
            out = []
            for _ in range(3):
                fast = torch.compile(double, backend=lambda gm, example_inputs: gm.forward)
                out.append(fast(x))
        """,
        after="""
            import torch


            def double(x):
                return x * 2


            x = torch.ones(2)
            out = []
            fast = torch.compile(double, backend=lambda gm, example_inputs: gm.forward)
            for _ in range(3):
                out.append(fast(x))
        """,
        run="out",
    ),
)


def repair(ctx: FileContext, diag: Diagnostic) -> Plan | Decline:
    call = ctx.find(cst.Call, diag, pred=lambda n: _is_compile(ctx, n.func))
    if call is None:
        return Decline(diag, "could not find `torch.compile(...)` at this position")
    stmt = ctx.statement_line(call)
    loop = next((a for a in ctx.ancestors(call) if isinstance(a, (cst.For, cst.While, cst.FunctionDef))), None)
    if not isinstance(loop, (cst.For, cst.While)):
        return Decline(diag, "the compile call is in a repeatedly called function, not a loop; "
                             "move it to module level or cache the compiled object")
    if stmt is None or len(stmt.body) != 1 or not isinstance(stmt.body[0], cst.Assign) or \
            stmt.body[0].value is not call or ctx.parent(stmt) is not loop.body:
        return Decline(diag, "only `name = torch.compile(...)` directly in the loop body is hoisted")
    rebound = set()
    for node in walk(loop.body):
        if isinstance(node, (cst.Assign, cst.AugAssign, cst.AnnAssign)):
            targets = node.targets if isinstance(node, cst.Assign) else [node]
            for t in targets:
                tgt = t.target
                rebound |= names_in(tgt) if isinstance(tgt, (cst.Name, cst.Tuple, cst.List)) else set()
    if isinstance(loop, cst.For):
        rebound |= names_in(loop.target)
    used = names_in(call)
    target_name = code(stmt.body[0].targets[0].target)
    if used & rebound:
        return Decline(diag, f"the compiled object depends on names rebound in the loop: {sorted(used & rebound)}")
    if sum(1 for n in walk(loop.body) if isinstance(n, cst.Assign)
           and any(code(t.target) == target_name for t in n.targets)) != 1:
        return Decline(diag, f"`{target_name}` is assigned more than once in the loop")
    hoisted = stmt.with_changes(leading_lines=list(loop.leading_lines))

    def prepend(upd):
        return cst.FlattenSentinel([hoisted, upd.with_changes(leading_lines=[])])

    return Plan(diag, "hoist `torch.compile` out of the loop (compile once)", "safe",
                [(stmt, cst.RemovalSentinel.REMOVE), (loop, prepend)])


def _is_compile(ctx: FileContext, expr: cst.BaseExpression) -> bool:
    return ctx.imports.qualify(expr) in COMPILE_NAMES

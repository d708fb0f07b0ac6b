"""MND104 ``t0 = time.perf_counter()``: read the clock only in eager.

The value becomes ``time.perf_counter() if not torch.compiler.is_compiling() else 0.0``; safe only when every
use of the name is itself inside an output call (print/log) and the policy is ``guard``, which skips those
calls under compile too; otherwise unsafe (the compiled code computes with 0.0, or, under ``keep``, the kept
messages report 0.0).
"""

from __future__ import annotations

import libcst as cst

from mend.analyzers.diagnostic import Diagnostic
from mend.rewriter.analysis import code, parse_expr
from mend.rewriter.context import FileContext
from mend.rewriter.parts.reporting import is_reporting_call
from mend.rewriter.parts.sites import report_statement
from mend.rewriter.plan import Decline, Example, Plan

EXAMPLES = (
    Example(
        rule="MND104",
        before="""
            import time

            import torch
            from torch import nn


            class M(nn.Module):
                def forward(self, x):
                    start = time.perf_counter()
                    return x * 2
        """,
        after="""
            import time

            import torch
            from torch import nn


            class M(nn.Module):
                def forward(self, x):
                    start = time.perf_counter() if not torch.compiler.is_compiling() else 0.0
                    return x * 2
        """,
        run="compile(M())(torch.ones(3))",
        side_effects="guard",
    ),
)


def repair(ctx: FileContext, diag: Diagnostic) -> Plan | Decline | None:
    site = report_statement(ctx, diag)
    if isinstance(site, Decline):
        return site
    stmt, call = site
    small = stmt.body[0]
    if not isinstance(small, (cst.Assign, cst.AnnAssign)):
        return None
    return _fix_assigned_time(ctx, diag, stmt, small, call)


def _fix_assigned_time(ctx: FileContext, diag: Diagnostic, stmt: cst.SimpleStatementLine,
                       small: cst.Assign | cst.AnnAssign, call: cst.Call) -> Plan | Decline:
    value = small.value
    if value is None or not (value is call or isinstance(value, cst.Call)):
        return Decline(diag, "the time call is part of a larger expression")
    targets = small.targets if isinstance(small, cst.Assign) else [cst.AssignTarget(small.target)]
    if len(targets) != 1 or not isinstance(targets[0].target, cst.Name):
        return Decline(diag, "the time value is assigned to something other than one name")
    name = targets[0].target.value
    func = ctx.enclosing_function(stmt)
    facts = ctx.facts(func)
    only_reported = True
    for use in facts.loads.get(name, []):
        inside = False
        for anc in ctx.ancestors(use):
            if isinstance(anc, cst.Call) and is_reporting_call(ctx, anc):
                inside = True
                break
            if isinstance(anc, (cst.BaseCompoundStatement, cst.SimpleStatementLine)):
                break
        only_reported &= inside
    torch, imports = ctx.torch_name()
    new_value = parse_expr(f"({code(value)} if not {torch}.compiler.is_compiling() else 0.0)").with_changes(
        lpar=(), rpar=())
    new_small = small.with_changes(value=new_value)
    # only reported, and the reports are skipped under compile (guard): nothing can see the placeholder 0.0;
    # under keep the reports are made under compile too, and would show it
    guarded_reports = only_reported and ctx.options.side_effects == "guard"
    applic = "safe" if guarded_reports else "unsafe"
    msg = f"read the clock only in eager: `{name} = ... if not {torch}.compiler.is_compiling() else 0.0`"
    if not only_reported:
        msg += f" (`{name}` feeds more than output calls, so compiled results may change)"
    elif not guarded_reports:
        msg += f" (the messages that report `{name}` show 0.0 under compile)"
    return Plan(diag, msg, applic, [(small, new_small)], imports=imports)

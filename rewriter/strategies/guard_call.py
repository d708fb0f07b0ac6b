"""MND101-MND104, MND106: ``if not torch.compiler.is_compiling(): <statement>``.

Eager runs exactly as before; under torch.compile the statement is skipped (no output from inside the
graph). Safe. The policy ``guard`` for reports, and the repair of clocks and debugger stops (``keep``
never guards a report: ``emit_call`` declines one whose message cannot travel).
A call whose value is used is declined (``clock_value`` repairs an assigned clock).
"""

from __future__ import annotations

import libcst as cst

from mend.analyzers.diagnostic import Diagnostic
from mend.rewriter.analysis import parse_expr
from mend.rewriter.context import FileContext
from mend.rewriter.parts.reporting import guard_test
from mend.rewriter.parts.sites import call_statement
from mend.rewriter.plan import Decline, Example, Plan

EXAMPLES = (
    Example(
        rule="MND101",
        before="""
            import torch
            from torch import nn


            class M(nn.Module):
                def forward(self, x):
                    print("input", x.shape)
                    return x * 2
        """,
        after="""
            import torch
            from torch import nn


            class M(nn.Module):
                def forward(self, x):
                    if not torch.compiler.is_compiling():
                        print("input", x.shape)
                    return x * 2
        """,
        run="compile(M())(torch.ones(3))",
        side_effects="guard",
    ),
)


REPORTS = ("MND101", "MND102", "MND103")


def repair(ctx: FileContext, diag: Diagnostic) -> Plan | Decline | None:
    site = call_statement(ctx, diag)
    if site is None:
        return Decline(diag, "the call's value is used; only statements and assigned time calls are repaired")
    if isinstance(site, Decline):
        return site
    stmt, call = site
    test, imports = guard_test(ctx)
    guarded = cst.If(
        test=parse_expr(test),
        body=cst.IndentedBlock(body=[stmt.with_changes(leading_lines=[])]),
        leading_lines=stmt.leading_lines,
    )
    what = {"MND106": "debugger stop"}.get(diag.code, "call")
    why = " (side-effects = guard)" if diag.code in REPORTS else ""
    return Plan(diag, f"guard the {what} with `if {test}:` (eager unchanged, skipped under compile){why}",
                "safe", [(stmt, guarded)], imports=imports)

"""MND101-MND103 under the side-effect policy ``defer``: ``mend.rewriter.runtime.defer(fn, *args)``.

Eager calls ``fn`` at once; under compile the call and a snapshot of its tensor arguments are buffered and
replayed after the graph by the compile boundary (``mend.rewriter.runtime.boundary``, wrapped around every
``torch.compile`` of the file). Needs mend at run time; unsafe because output moves in time.
"""

from __future__ import annotations

import libcst as cst

from mend.analyzers.diagnostic import Diagnostic
from mend.rewriter.context import FileContext
from mend.rewriter.parts.boundaries import compile_boundaries
from mend.rewriter.parts.sites import call_statement, side_effect_policy
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
            from mend.rewriter.runtime import defer as _mend_defer


            class M(nn.Module):
                def forward(self, x):
                    _mend_defer(print, "input", x.shape)
                    return x * 2
        """,
        run="compile(M())(torch.ones(3))",
        unsafe=True,
        side_effects="defer",
    ),
)


REPORTS = ("MND101", "MND102", "MND103")


def repair(ctx: FileContext, diag: Diagnostic) -> Plan | Decline | None:
    site = call_statement(ctx, diag)
    if not isinstance(site, tuple) or side_effect_policy(ctx, diag) != "defer" or diag.code not in REPORTS:
        return site if isinstance(site, Decline) else None
    stmt, call = site
    if any(a.star for a in call.args):
        return Decline(diag, "cannot defer a call with *args/**kwargs unpacking")
    new_call = cst.Call(
        func=cst.Name("_mend_defer"),
        args=[cst.Arg(value=call.func, comma=cst.Comma(whitespace_after=cst.SimpleWhitespace(" ")))]
        + list(call.args),
    )
    new_stmt = stmt.with_changes(body=[cst.Expr(value=new_call)])
    edits: list = [(stmt, new_stmt)]
    imports = [("mend.rewriter.runtime", "defer", "_mend_defer")]
    boundaries = compile_boundaries(ctx, "_mend_boundary")
    if boundaries:  # flush deferred output after every call of this file's compiled objects
        edits += boundaries
        imports.append(("mend.rewriter.runtime", "boundary", "_mend_boundary"))
    return Plan(diag, "defer the call until after the graph (side-effects = defer)", "unsafe",
                edits, imports=imports)

"""MND101-MND103 under the side-effect policy ``keep`` (the default): the message is kept under compile.

``if not torch.compiler.is_compiling(): <statement> else: _mend_emit(__name__, "logger.info", *args)``. Eager
runs exactly as before; under torch.compile ``_mend_emit`` makes the same call through ``torch.ops.mend.emit``,
an operator registered as an ordered effect: the compiled graph makes the call where it stood, on every call,
in order with the graph's other effects, also from an inlined submodule or helper. Safe. Where the call cannot
travel through the operator (the callee is not a module global or builtin, a container or non-literal keyword
argument, ``logger.exception`` or a call in an ``except``:
:func:`~mend.rewriter.parts.reporting.emit_arguments` says why), the finding is declined: guarding would skip
the message under compile, which ``keep`` does not do (``--side-effects guard`` does).
"""

from __future__ import annotations

from mend.analyzers.diagnostic import Diagnostic
from mend.rewriter.analysis import eager_else, parse_stmt
from mend.rewriter.context import FileContext
from mend.rewriter.parts.reporting import emit_arguments
from mend.rewriter.parts.sites import call_statement, side_effect_policy
from mend.rewriter.plan import Decline, Example, Plan

EXAMPLES = (
    Example(
        rule="MND102",
        before="""
            import logging

            import torch
            from torch import nn

            logger = logging.getLogger(__name__)


            class M(nn.Module):
                def forward(self, x):
                    logger.info("mean %s", x.mean())
                    return x * 2
        """,
        after="""
            import logging

            import torch
            from torch import nn
            from _mend import emit as _mend_emit

            logger = logging.getLogger(__name__)


            class M(nn.Module):
                def forward(self, x):
                    if not torch.compiler.is_compiling():
                        logger.info("mean %s", x.mean())
                    else:
                        _mend_emit(__name__, "logger.info", "mean %s", x.mean())
                    return x * 2
        """,
        run="compile(M())(torch.ones(3))",
    ),
)


REPORTS = ("MND101", "MND102", "MND103")


def repair(ctx: FileContext, diag: Diagnostic) -> Plan | Decline | None:
    site = call_statement(ctx, diag)
    if not isinstance(site, tuple) or side_effect_policy(ctx, diag) != "keep" or diag.code not in REPORTS:
        return site if isinstance(site, Decline) else None
    stmt, call = site
    emit = emit_arguments(ctx, stmt, call)
    if isinstance(emit, str):  # guarding would lose the message under compile: not the policy's promise
        return Decline(diag, f"the message cannot be kept under compile: {emit} (`--side-effects guard` "
                             "skips it under compile)", final=True)
    torch, imports = ctx.torch_name()
    split = eager_else(torch, [stmt], [parse_stmt(f"_mend_emit({', '.join(emit)})\n")])
    return Plan(diag, "keep the message: eager unchanged, under compile the graph makes the call where it stood "
                      "(`_mend_emit`)", "safe", [(stmt, split)], imports=imports, helpers=["_mend_emit"])

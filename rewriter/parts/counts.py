"""``n = (ids == k).sum().item()``: a count read as a Python number (MND301's counted checks)."""

from __future__ import annotations

import libcst as cst

from mend.analyzers.static.torch_facts import TOTAL_REDUCTIONS
from mend.rewriter.analysis import FunctionFacts, code, parse_expr, strip_parens
from mend.rewriter.context import FileContext


def counted_item(ctx: FileContext, facts: FunctionFacts, call: cst.Call) -> tuple[str, cst.BaseExpression] | None:
    """``(n, t.sum())`` for ``n = t.sum().item()`` stored once, whose ``.item()`` of a full reduction of an
    expression that cannot raise (``is_total``) cannot raise either."""
    stmt = ctx.parent(call)
    if not (isinstance(stmt, cst.Assign) and stmt.value is call and len(stmt.targets) == 1
            and isinstance(stmt.targets[0].target, cst.Name)):
        return None
    name = stmt.targets[0].target.value
    receiver = strip_parens(call.func.value)
    if len(facts.stores.get(name, [])) != 1 or not facts.loads.get(name) or not (
            isinstance(receiver, cst.Call) and isinstance(receiver.func, cst.Attribute)
            and receiver.func.attr.value in TOTAL_REDUCTIONS and not receiver.args and facts.is_total(receiver)):
        return None
    return name, receiver


def eager_only_value(call: cst.Call, torch: str) -> cst.BaseExpression:
    return parse_expr(f"{code(call)} if not {torch}.compiler.is_compiling() else None")


__all__ = ["counted_item", "eager_only_value"]

"""Statement shapes the grouped-experts repairs share (MND303's split experts, MND304's grouped rows)."""

from __future__ import annotations

import libcst as cst

from mend.rewriter.analysis import code
from mend.rewriter.context import FileContext


def single_statement(stmt: cst.CSTNode) -> cst.BaseSmallStatement | None:
    if isinstance(stmt, cst.SimpleStatementLine) and len(stmt.body) == 1:
        return stmt.body[0]
    return None


def assign_to_name(stmt: cst.CSTNode) -> tuple[str, cst.BaseExpression] | None:
    a = single_statement(stmt)
    if isinstance(a, cst.Assign) and len(a.targets) == 1 and isinstance(a.targets[0].target, cst.Name):
        return a.targets[0].target.value, a.value
    return None


def empty_list(stmt: cst.CSTNode) -> str | None:
    a = assign_to_name(stmt)
    return a[0] if a is not None and isinstance(a[1], cst.List) and not a[1].elements else None


def concatenated(ctx: FileContext, stmt: cst.CSTNode, out: str) -> str | None:
    """``results = torch.cat(out, dim=0)``: the name of the result."""
    a = assign_to_name(stmt)
    if a is None or not isinstance(a[1], cst.Call) or ctx.imports.qualify(a[1].func) != "torch.cat":
        return None
    args = a[1].args
    if not args or code(args[0].value) != out or args[0].keyword is not None:
        return None
    dims = [code(x.value) for x in args[1:] if x.keyword is None or x.keyword.value == "dim"]
    return a[0] if len(args) <= 2 and dims in ([], ["0"]) else None


__all__ = ["assign_to_name", "concatenated", "empty_list", "single_statement"]

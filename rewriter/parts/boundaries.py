"""The ``torch.compile`` boundaries of a file, wrapped so that what a repair moved into the graph surfaces as
the original did (``_mend_restore_exceptions``: a check's exception; ``_mend_boundary``: deferred output)."""

from __future__ import annotations

import libcst as cst

from mend.rewriter.analysis import dotted, walk
from mend.rewriter.context import FileContext

WRAPPERS = ("_mend_restore_exceptions", "_mend_boundary")


def compile_boundaries(ctx: FileContext, wrapper: str = "_mend_restore_exceptions") -> list[tuple[cst.CSTNode, object]]:
    """Edits wrapping each torch.compile boundary of the file with ``wrapper``."""
    edits: list[tuple[cst.CSTNode, object]] = []
    ctx.prepare_all()
    for node in walk(ctx.module):
        if isinstance(node, cst.FunctionDef):
            decos = list(node.decorators)
            names = [ctx.imports.qualify(d.decorator.func if isinstance(d.decorator, cst.Call) else d.decorator)
                     for d in decos]
            if "torch.compile" in names and wrapper not in names:
                new_decos = [cst.Decorator(decorator=cst.Name(wrapper))] + decos
                edits.append((node, lambda upd, nd=new_decos: upd.with_changes(
                    decorators=[nd[0]] + list(upd.decorators))))
        elif isinstance(node, cst.Call) and ctx.imports.qualify(node.func) == "torch.compile":
            parent = ctx.parent(node)
            if isinstance(parent, cst.Decorator):
                continue
            if isinstance(parent, cst.Arg) and isinstance(ctx.parent(parent), cst.Call) and \
                    dotted(ctx.parent(parent).func) in (wrapper, "_mend_boundary"):
                continue
            if not node.args:
                continue
            edits.append((node, lambda upd: cst.Call(func=cst.Name(wrapper), args=[cst.Arg(value=upd)])))
    return edits


__all__ = ["WRAPPERS", "compile_boundaries"]

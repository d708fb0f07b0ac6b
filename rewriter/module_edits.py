"""Applying a round's edits to a parsed module, visiting only what changes (no torch import).

A LibCST transform over a whole 2,000-line file costs about as much as parsing it, and a round of repairs
changes a few statements. So :func:`apply_edits` descends only into the nodes on the way from the module
to an edited node (their parents are known from :class:`~mend.rewriter.context.FileContext`), and
:func:`add_imports` hands LibCST's ``AddImportsVisitor`` only the module's leading import block: that
visitor reads and changes nothing else (the imports before the first other statement, and the blank line
above that statement). Both give the same module as the whole-tree transforms (tests compare them).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

import libcst as cst
import libcst.matchers as m
from libcst.codemod import CodemodContext
from libcst.codemod.visitors import AddImportsVisitor

Replacement = Any  # a node, a sentinel (RemoveFromParent, FlattenSentinel) or a function of the updated node
ImportItem = tuple[str, str | None, str | None, int]  # module, object, alias, relative level


class _Apply(cst.CSTTransformer):
    def __init__(self, replacements: Mapping[int, Replacement], on_path: set[int] | None) -> None:
        super().__init__()
        self.replacements = replacements
        self.on_path = on_path  # ids of the nodes holding an edited node; None: visit everything

    def on_visit(self, node: cst.CSTNode) -> bool:
        return self.on_path is None or id(node) in self.on_path

    def on_leave(self, original_node: cst.CSTNode, updated_node: cst.CSTNode) -> Any:
        repl = self.replacements.get(id(original_node))
        if repl is None:
            return updated_node
        return repl(updated_node) if callable(repl) else repl


def apply_edits(module: cst.Module, edits: Iterable[tuple[cst.CSTNode, Replacement]],
                parent: Callable[[cst.CSTNode], cst.CSTNode | None]) -> cst.Module:
    """``module`` with every edit applied (a node's functions composed in order). ``parent`` gives a node's
    parent; where the way up from an edited node does not reach ``module``, the whole tree is visited."""
    replacements: dict[int, Replacement] = {}
    nodes: list[cst.CSTNode] = []
    for node, repl in edits:
        prev = replacements.get(id(node))
        if prev is not None and callable(prev) and callable(repl):
            replacements[id(node)] = (lambda a, b: (lambda upd: b(a(upd))))(prev, repl)
        else:
            replacements[id(node)] = repl
        nodes.append(node)
    result = module.visit(_Apply(replacements, _paths(module, nodes, parent)))
    assert isinstance(result, cst.Module)
    return result


def _paths(module: cst.Module, nodes: Sequence[cst.CSTNode],
           parent: Callable[[cst.CSTNode], cst.CSTNode | None]) -> set[int] | None:
    """The ids of ``module`` and of every node above one of ``nodes``; None when one's way up is unknown."""
    on_path = {id(module)}
    for node in nodes:
        cur = parent(node)
        while cur is not None and id(cur) not in on_path:
            on_path.add(id(cur))
            cur = parent(cur)
        if cur is None and node is not module:
            return None
    return on_path


def add_imports(module: cst.Module, imports: Sequence[ImportItem]) -> cst.Module:
    """``module`` with ``imports`` added as ``AddImportsVisitor`` adds them, the visitor shown only the
    module's head: its leading docstring and imports, and a stand-in for the first other statement that
    carries that statement's leading lines (where the visitor puts a blank line)."""
    context = CodemodContext()
    for mod, obj, asname, level in dict.fromkeys(imports):
        AddImportsVisitor.add_needed_import(context, mod, obj, asname, level)
    body = list(module.body)
    first = _first_other(body)
    if first >= len(body):
        return AddImportsVisitor(context).transform_module(module)
    stand_in = cst.SimpleStatementLine(body=[cst.Pass()], leading_lines=body[first].leading_lines)
    head = module.with_changes(body=[*body[:first], stand_in], footer=())
    new = AddImportsVisitor(context).transform_module(head)
    moved = new.body[-1]
    if not m.matches(moved, m.SimpleStatementLine(body=[m.Pass()])):  # not the stand-in: do it whole
        return AddImportsVisitor(context).transform_module(module)
    rest = [body[first].with_changes(leading_lines=moved.leading_lines), *body[first + 1:]]
    return module.with_changes(header=new.header, body=[*new.body[:-1], *rest])


def _first_other(body: Sequence[cst.CSTNode]) -> int:
    """The index of the first statement that is not the module docstring (or ``__strict__`` flag) nor an
    import line: the visitor's insertion point lies at or before it."""
    i = 1 if body and m.matches(body[0], m.SimpleStatementLine(body=[m.Expr(value=m.SimpleString())])
                                | m.SimpleStatementLine(body=[m.Assign(targets=[m.AssignTarget(
                                    target=m.Name("__strict__"))])])) else 0
    while i < len(body) and m.matches(body[i], m.SimpleStatementLine(body=[m.ImportFrom() | m.Import()])):
        i += 1
    return i


__all__ = ["ImportItem", "Replacement", "add_imports", "apply_edits"]

"""Light name resolution through imports and scopes (no LibCST metadata, no torch import).

A :class:`Scope` maps local names to :class:`Binding` values. ``qualify(expr)`` turns an expression
such as ``F.relu`` or ``t.compile`` into the dotted name it really refers to (``torch.nn.functional.relu``,
``torch.compile``), or ``None`` when the name is a local variable, a parameter or otherwise unknown.
Builtins that are not shadowed qualify as ``builtins.<name>``.

This is deliberately simpler than LibCST's ``QualifiedNameProvider``: one pass over a module's
imports and assignments, then one pass per function over its parameters, assignments and local
imports. It is what makes ``mend check`` fast, and it is enough to tell ``torch``, ``logging``,
``time``, ``random``, ``copy`` and ``warnings`` from a local variable of the same name.
"""

from __future__ import annotations

import ast
import builtins
from collections.abc import Iterator
from dataclasses import dataclass

from mend.analyzers.static.torch_facts import from_import_binding, import_binding, qualified, resolve_relative

BUILTIN_NAMES = frozenset(dir(builtins))

IMPORT, DEF, CLASS, VAR = "import", "def", "class", "var"

_AST = ast.AST


def children(node: ast.AST) -> list[ast.AST]:
    """``ast.iter_child_nodes`` as a list, about twice as fast (this is the analyzer's hot loop)."""
    out = []
    for name in node._fields:
        v = getattr(node, name, None)
        if v.__class__ is list:
            for x in v:
                if isinstance(x, _AST):
                    out.append(x)
        elif isinstance(v, _AST):
            out.append(v)
    return out


def walk_nodes(node: ast.AST) -> Iterator[ast.AST]:
    """``node`` and every node below it (depth first, children in reverse order)."""
    stack = [node]
    while stack:
        n = stack.pop()
        yield n
        stack.extend(children(n))


def target_names(t: ast.AST) -> Iterator[str]:
    """The names an assignment target binds (``a``, ``a, (b, *c)``)."""
    if isinstance(t, ast.Name):
        yield t.id
    elif isinstance(t, (ast.Tuple, ast.List)):
        for e in t.elts:
            yield from target_names(e)
    elif isinstance(t, ast.Starred):
        yield from target_names(t.value)


@dataclass(frozen=True, slots=True)
class Binding:
    """What a name is bound to. ``value``: the dotted name (imports), the function or class id
    (defs, classes), or a tag for variables (``logger``, ``lock``, ``instance:<class>``, ...)."""

    kind: str
    value: str = ""


UNKNOWN_VAR = Binding(VAR)


def import_bindings(node: ast.Import | ast.ImportFrom, module: str, is_package: bool) -> list[tuple[str, Binding]]:
    if isinstance(node, ast.Import):
        pairs = [import_binding(alias.name, alias.asname) for alias in node.names]
    else:
        base = resolve_relative(module, is_package, node.level, node.module)
        pairs = [from_import_binding(base, alias.name, alias.asname) for alias in node.names if alias.name != "*"]
    return [(local, Binding(IMPORT, target)) for local, target in pairs]


class Scope:
    """A chain of name tables: function locals, enclosing functions, the module."""

    __slots__ = ("names", "parent", "module")

    def __init__(self, module: str, parent: Scope | None = None) -> None:
        self.names: dict[str, Binding] = {}
        self.parent = parent
        self.module = module

    def lookup(self, name: str) -> Binding | None:
        scope: Scope | None = self
        while scope is not None:
            b = scope.names.get(name)
            if b is not None:
                return b
            scope = scope.parent
        return None

    def qualify(self, expr: ast.AST) -> str | None:
        """Dotted name of ``expr`` (``Name``/``Attribute`` chains), or ``None``."""
        attrs: list[str] = []
        while isinstance(expr, ast.Attribute):
            attrs.append(expr.attr)
            expr = expr.value
        if not isinstance(expr, ast.Name):
            return None
        b = self.lookup(expr.id)
        if b is None:
            base = f"builtins.{expr.id}" if expr.id in BUILTIN_NAMES else None
        elif b.kind == IMPORT:
            base = b.value
        elif b.kind in (DEF, CLASS):
            base = f"{self.module}.{b.value}" if self.module else b.value
        else:
            base = None
        if base is None:
            return None
        return qualified(base, reversed(attrs)) if attrs else base


def collect_function_locals(fn: ast.FunctionDef | ast.AsyncFunctionDef, scope: Scope, module: str,
                            is_package: bool, func_id: str, self_nodes: list | None = None) -> None:
    """Fill ``scope`` with ``fn``'s parameters, assigned names, local imports and nested defs.

    When ``self_nodes`` is given, assignments to attributes and ``register_*``/``add_module`` calls
    met on the way are appended to it (the class facts of methods come from the same walk)."""
    names = scope.names
    a = fn.args
    for arg in (*a.posonlyargs, *a.args, *a.kwonlyargs):
        names[arg.arg] = UNKNOWN_VAR
    if a.vararg:
        names[a.vararg.arg] = UNKNOWN_VAR
    if a.kwarg:
        names[a.kwarg.arg] = UNKNOWN_VAR
    declared_global: set[str] = set()
    stack: list[ast.AST] = list(fn.body)
    while stack:
        node = stack.pop()
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            names[node.name] = Binding(DEF, f"{func_id}.<locals>.{node.name}")
            stack.extend(node.decorator_list)
            continue
        if isinstance(node, ast.ClassDef):
            names[node.name] = UNKNOWN_VAR
            continue
        if isinstance(node, ast.Lambda):
            continue
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            for name, b in import_bindings(node, module, is_package):
                names[name] = b
            continue
        if isinstance(node, (ast.Global, ast.Nonlocal)):
            declared_global.update(node.names)
            continue
        t = node.__class__
        if t is ast.Name:
            if node.ctx.__class__ is not ast.Load:
                names.setdefault(node.id, UNKNOWN_VAR)
            continue
        if t is ast.ExceptHandler and node.name:
            names.setdefault(node.name, UNKNOWN_VAR)
        elif self_nodes is not None:
            if t is ast.Assign or t is ast.AnnAssign:
                self_nodes.append(node)
            elif t is ast.Call and node.func.__class__ is ast.Attribute and node.func.attr in (
                    "register_buffer", "register_parameter", "add_module"):
                self_nodes.append(node)
        stack.extend(children(node))
    for name in declared_global:
        names.pop(name, None)

"""Walking a LibCST tree without rebuilding it (no torch import).

A ``CSTVisitor`` pass rebuilds every node it passes (``_visit_and_replace_children`` constructs a copy of
each node, with validation), so walking a 2,000-line module that way costs about as much as parsing it.
The strategies walk the same functions many times a round. :func:`preorder` reads each node's children
straight from its fields, in the order LibCST visits them (read once per node type from the field names
its ``_visit_and_replace_children`` passes to the ``visit_*`` helpers), so its order is the visitor's;
``tests/rewriter/test_traversal.py`` compares the two on real files. :func:`walk` serves repeated walks of
one subtree from a small cache and walks of any subtree of an indexed module (:func:`index`) as a slice.
"""

from __future__ import annotations

import inspect
import re
from collections.abc import Iterator, Sequence

import libcst as cst

_FIELD = re.compile(r"visit_\w+\(\s*self,\s*\"(\w+)\"")
_FIELDS: dict[type, tuple[str, ...]] = {}


def child_fields(kind: type) -> tuple[str, ...]:
    """The fields of a node type that hold children, in LibCST's visiting order."""
    fields = _FIELDS.get(kind)
    if fields is None:
        source = inspect.getsource(kind._visit_and_replace_children)  # type: ignore[attr-defined]
        fields = _FIELDS[kind] = tuple(dict.fromkeys(_FIELD.findall(source)))
    return fields


_IS_NODE: dict[type, bool] = {}  # type -> a CSTNode (``isinstance`` against the abstract class is slow)


def _is_node(kind: type) -> bool:
    known = _IS_NODE.get(kind)
    if known is None:
        known = _IS_NODE[kind] = issubclass(kind, cst.CSTNode)
    return known


def children(node: cst.CSTNode) -> list[cst.CSTNode]:
    """The children of ``node`` in visiting order (``node.children`` without rebuilding ``node``)."""
    out: list[cst.CSTNode] = []
    fields = _FIELDS.get(type(node)) or child_fields(type(node))
    for name in fields:
        value = getattr(node, name)
        kind = type(value)
        if kind is tuple or kind is list:
            out.extend(v for v in value if _is_node(type(v)))
        elif _is_node(kind):
            out.append(value)
    return out


def preorder(node: cst.CSTNode) -> list[cst.CSTNode]:
    """``node`` and every node under it, in the order a ``CSTVisitor`` visits them."""
    out: list[cst.CSTNode] = []
    stack = [node]
    while stack:
        cur = stack.pop()
        out.append(cur)
        stack.extend(reversed(children(cur)))
    return out


class Index:
    """A module's nodes in visiting order, each node's parent and the end of its subtree in that order."""

    def __init__(self, root: cst.CSTNode) -> None:
        self.root = root
        self.nodes: list[cst.CSTNode] = []
        self.parents: dict[cst.CSTNode, cst.CSTNode] = {}
        self.span: dict[int, tuple[int, int]] = {}  # id(node) -> (first, end) in ``nodes``
        self._build(root)

    def _build(self, root: cst.CSTNode) -> None:
        nodes, parents, span = self.nodes, self.parents, self.span
        stack: list[tuple[cst.CSTNode, cst.CSTNode | None, bool]] = [(root, None, False)]
        while stack:
            node, parent, done = stack.pop()
            if done:
                span[id(node)] = (span[id(node)][0], len(nodes))
                continue
            span[id(node)] = (len(nodes), -1)
            nodes.append(node)
            if parent is not None:
                parents[node] = parent
            stack.append((node, parent, True))
            stack.extend((child, node, False) for child in reversed(children(node)))

    def subtree(self, node: cst.CSTNode) -> Sequence[cst.CSTNode] | None:
        first_end = self.span.get(id(node))
        if first_end is None or self.nodes[first_end[0]] is not node:
            return None
        return self.nodes[first_end[0]:first_end[1]]


_INDEXES: list[Index] = []  # the modules indexed last (a file and the modules it imports from)
_WALKS: dict[int, tuple[cst.CSTNode, list[cst.CSTNode]]] = {}
_KEEP_INDEXES = 4
_KEEP_WALKS = 2048


def index(root: cst.CSTNode) -> Index:
    """The index of ``root`` (built once while it is among the last few indexed); walks of its subtrees
    are then slices of it."""
    for found in _INDEXES:
        if found.root is root:
            return found
    built = Index(root)
    _INDEXES.insert(0, built)
    del _INDEXES[_KEEP_INDEXES:]
    return built


def walk(node: cst.CSTNode) -> Iterator[cst.CSTNode]:
    """``node`` and every node under it, in visiting order."""
    for found in _INDEXES:
        nodes = found.subtree(node)
        if nodes is not None:
            return iter(nodes)
    cached = _WALKS.get(id(node))
    if cached is not None and cached[0] is node:
        return iter(cached[1])
    nodes = preorder(node)
    if len(_WALKS) >= _KEEP_WALKS:
        _WALKS.clear()
    _WALKS[id(node)] = (node, nodes)
    return iter(nodes)


def add_parents(node: cst.CSTNode, parents: dict, parent: cst.CSTNode | None = None) -> None:
    """Record the parent of every node under ``node`` (and of ``node`` itself, if given)."""
    if parent is not None:
        parents[node] = parent
    stack = [(child, node) for child in reversed(children(node))]
    while stack:  # in visiting order: callers read the dict's order
        cur, up = stack.pop()
        parents[cur] = up
        stack.extend((child, cur) for child in reversed(children(cur)))

__all__ = ["Index", "add_parents", "child_fields", "children", "index", "preorder", "walk"]

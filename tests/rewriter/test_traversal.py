"""The fast tree walks and the narrow module edits give what LibCST's whole-tree visitors give."""

from __future__ import annotations

from pathlib import Path

import libcst as cst
import pytest
from libcst.codemod import CodemodContext
from libcst.codemod.visitors import AddImportsVisitor

from mend.rewriter import traversal
from mend.rewriter.module_edits import add_imports, apply_edits

ROOT = Path(__file__).resolve().parents[2]
SOURCES = sorted([*ROOT.glob("rewriter/**/*.py"), *ROOT.glob("tests/rewriter/fixtures/*.py"),
                  *ROOT.glob("examples/**/*.py")])


class _Visited(cst.CSTVisitor):
    def __init__(self) -> None:
        super().__init__()
        self.nodes: list[cst.CSTNode] = []
        self.parents: dict[cst.CSTNode, cst.CSTNode] = {}
        self.stack: list[cst.CSTNode] = []

    def on_visit(self, node: cst.CSTNode) -> bool:
        self.nodes.append(node)
        if self.stack:
            self.parents[node] = self.stack[-1]
        self.stack.append(node)
        return True

    def on_leave(self, original_node: cst.CSTNode) -> None:
        self.stack.pop()


def _module(path: Path) -> cst.Module:
    return cst.parse_module(path.read_text(encoding="utf-8"))


def test_sources_cover_many_node_types() -> None:
    kinds = {type(n) for p in SOURCES[:40] for n in traversal.preorder(_module(p))}
    assert len(SOURCES) > 100 and len(kinds) > 80


@pytest.mark.parametrize("path", SOURCES, ids=lambda p: str(p.relative_to(ROOT)))
def test_preorder_index_and_parents_are_the_visitors(path: Path) -> None:
    module = _module(path)
    seen = _Visited()
    module.visit(seen)
    assert [id(n) for n in traversal.preorder(module)] == [id(n) for n in seen.nodes]
    index = traversal.Index(module)
    assert [id(n) for n in index.nodes] == [id(n) for n in seen.nodes]
    assert index.parents == seen.parents
    parents: dict = {}
    traversal.add_parents(module, parents)
    assert list(parents.items()) == list(seen.parents.items())  # the same order: callers read it
    for node in seen.nodes[:: max(1, len(seen.nodes) // 50)]:  # a subtree is a slice of the index
        sub = _Visited()
        node.visit(sub)
        assert [id(n) for n in index.subtree(node)] == [id(n) for n in sub.nodes]
        assert [id(n) for n in traversal.walk(node)] == [id(n) for n in sub.nodes]


class _AllEdits(cst.CSTTransformer):
    def __init__(self, edits: dict) -> None:
        super().__init__()
        self.edits = edits

    def on_leave(self, original_node, updated_node):  # type: ignore[no-untyped-def]
        repl = self.edits.get(id(original_node))
        return updated_node if repl is None else repl(updated_node)


def _rename(node: cst.Name) -> cst.Name:
    return node.with_changes(value=node.value + "_x")


@pytest.mark.parametrize("path", SOURCES[::7], ids=lambda p: str(p.relative_to(ROOT)))
def test_apply_edits_visits_only_the_way_down_and_gives_the_whole_transform(path: Path) -> None:
    module = _module(path)
    index = traversal.Index(module)
    names = [n for n in index.nodes if isinstance(n, cst.Name)][::11]
    edits = [(n, _rename) for n in names] + [(names[0], _rename)] if names else []  # one node edited twice
    both = {id(names[0]): lambda n: _rename(_rename(n))} if names else {}
    expected = module.visit(_AllEdits({**{id(n): _rename for n in names}, **both}))
    assert apply_edits(module, edits, index.parents.get).code == expected.code
    assert apply_edits(module, edits, lambda node: None).code == expected.code  # the way up unknown: whole tree


HEADS = [
    "", "import os\n", '"""Doc."""\n', '"""Doc."""\nimport os\n\nx = 1\n', "# c\nimport os\n# section\n\nx = 1\n",
    "from __future__ import annotations\n\nimport torch\nfrom torch import nn\n\n\nclass A:\n    pass\n",
    "__strict__ = True\nimport os\nx = 1\n", "x = 1\nimport os\n", "from . import a\nfrom .b import c\n\ndef f():\n    import q\n",
    "from .._mend import emit as _mend_emit\nimport torch\n\ny = 2\n",
]
IMPORTS = [[("torch", None, None, 0)], [("_mend", "emit", "_mend_emit", 2), ("torch", None, None, 0)],
           [("_mend", "emit", "_mend_emit", 2), ("_mend", "where", "_mend_where", 2)], [("b", "d", None, 1)],
           [("__future__", "annotations", None, 0)]]


@pytest.mark.parametrize("head", HEADS)
@pytest.mark.parametrize("imports", IMPORTS)
def test_add_imports_is_add_imports_visitor(head: str, imports: list) -> None:
    module = cst.parse_module(head)
    context = CodemodContext()
    for mod, obj, asname, level in imports:
        AddImportsVisitor.add_needed_import(context, mod, obj, asname, level)
    assert add_imports(module, imports).code == AddImportsVisitor(context).transform_module(module).code


@pytest.mark.parametrize("path", SOURCES[::5], ids=lambda p: str(p.relative_to(ROOT)))
def test_add_imports_on_real_files(path: Path) -> None:
    module = _module(path)
    imports = [("_mend", "emit", "_mend_emit", 1), ("torch", None, None, 0), ("os", "path", None, 0)]
    context = CodemodContext()
    for item in imports:
        AddImportsVisitor.add_needed_import(context, *item)
    assert add_imports(module, imports).code == AddImportsVisitor(context).transform_module(module).code

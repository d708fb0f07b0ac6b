"""The module of helper functions a repaired tree imports (no torch import: the helpers' source is read as text).

Repaired code calls mend's helper functions (:mod:`mend.rewriter.helpers`) under private names, ``_mend_where``
for ``where``. Where it finds them is the ``helpers`` option (:class:`~mend.rewriter.options.FixOptions`):

* ``tree`` (the default): a module of the repaired tree, written by ``mend fix``. For a file inside a package
  (its folder has an ``__init__.py``) it is ``_mend.py`` at the top of that package, imported relatively
  (``from .._mend import where as _mend_where``); for a loose script, ``_mend.py`` beside it
  (``from _mend import where as _mend_where``). The module holds a copy of each helper the tree's repairs
  call, and of the helpers those call: once per tree, never pasted into the repaired files, extended (not
  rewritten) when a later repair needs another.
* ``import``: mend's own module, ``from mend.rewriter.helpers import where as _mend_where``: nothing is
  written besides the repaired files, and the code needs mend installed (the import hook's choice).

:func:`helper_import` says where a file's helpers come from, :func:`module_text` what the tree's module holds,
and :class:`TreeModules` writes it (through :mod:`mend.rewriter.files`, atomically) before a repaired file that
imports from it.
"""

from __future__ import annotations

import ast
import builtins
import keyword
import os
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

from mend.analyzers.paths import within
from mend.rewriter import files
from mend.rewriter.results import FileResult

HELPERS_SOURCE = Path(__file__).with_name("helpers.py")  # read, never imported here
MENDS_MODULE = "mend.rewriter.helpers"
TREE_MODULE = "_mend"
PREFIX = "_mend_"
HEADER = '''"""Functions that code repaired by `mend fix` calls (written by mend fix: do not edit).

Each is a copy of mend's own (`mend.rewriter.helpers`); the repaired files import them under private names
(`from ._mend import where as _mend_where`). `mend fix` adds the ones a later repair needs.
"""

import torch
'''


def public_name(alias: str) -> str:
    """The name in the helper module of the helper a repaired file calls ``alias`` (``_mend_where`` ->
    ``where``; ``_mend_any`` -> ``any_``, ``_mend_elif`` -> ``elif_``: a builtin and a keyword)."""
    name = alias.removeprefix(PREFIX)
    return f"{name}_" if keyword.iskeyword(name) or hasattr(builtins, name) else name


@dataclass(frozen=True)
class Unit:
    """One top-level function or class of the helper module, with the statements right after it."""

    name: str
    text: str
    calls: frozenset[str]  # the other units it uses


@lru_cache(maxsize=1)
def units() -> dict[str, Unit]:
    """The helper module's units, by name, in the order of the module."""
    source = HELPERS_SOURCE.read_text(encoding="utf-8")
    lines = source.splitlines(keepends=True)
    tree = ast.parse(source)
    starts = [(i, node) for i, node in enumerate(tree.body)
              if isinstance(node, (ast.FunctionDef, ast.ClassDef))]
    spans = []
    for k, (i, node) in enumerate(starts):
        first = min([node.lineno] + [d.lineno for d in node.decorator_list])
        nodes = tree.body[i:starts[k + 1][0] if k + 1 < len(starts) else len(tree.body)]
        spans.append((node.name, first, max(n.end_lineno or n.lineno for n in nodes), nodes))
    names = {name for name, *_ in spans}
    out: dict[str, Unit] = {}
    for name, first, last, nodes in spans:
        text = "".join(lines[first - 1:last]).rstrip("\n") + "\n"
        out[name] = Unit(name, text, frozenset(set().union(*map(_free_names, nodes)) & names - {name}))
    return out


def _free_names(node: ast.AST) -> set[str]:
    """The names ``node`` reads that it does not bind itself (a function's parameters and locals)."""
    reads = {n.id for n in ast.walk(node) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)}
    bound = {n.id for n in ast.walk(node) if isinstance(n, ast.Name) and not isinstance(n.ctx, ast.Load)}
    bound |= {a.arg for n in ast.walk(node) if isinstance(n, ast.arguments)
              for a in [*n.posonlyargs, *n.args, *n.kwonlyargs, n.vararg, n.kwarg] if a is not None}
    return reads - bound if isinstance(node, (ast.FunctionDef, ast.ClassDef)) else reads


def needed(aliases: Iterable[str]) -> list[str]:
    """The units the helpers ``aliases`` need (themselves and what they call), in the module's order."""
    table = units()
    todo = [public_name(a) for a in aliases]
    seen: set[str] = set()
    while todo:
        name = todo.pop()
        if name not in seen:
            if name not in table:
                raise KeyError(f"no helper `{name}` in {HELPERS_SOURCE}")
            seen.add(name)
            todo.extend(table[name].calls)
    return [n for n in table if n in seen]


def defined(text: str) -> set[str]:
    """The top-level functions and classes of a module's text."""
    return {n.name for n in ast.parse(text).body if isinstance(n, (ast.FunctionDef, ast.ClassDef))}


class NotOurs(Exception):
    """A ``_mend.py`` that ``mend fix`` did not write: it is left alone."""


def module_text(existing: str | None, aliases: Iterable[str]) -> str:
    """The tree's helper module holding the helpers ``aliases`` (and what they call): ``existing`` (the module
    as it is, or None) with the missing units appended, unchanged when it has them all."""
    if existing is not None and not existing.startswith(HEADER.split("\n", 1)[0]):
        raise NotOurs("it exists and was not written by mend fix")
    text = existing if existing is not None else HEADER
    have = defined(text)
    missing = [units()[n].text for n in needed(aliases) if n not in have]
    if not missing:
        return text
    return text.rstrip("\n") + "\n\n\n" + "\n\n".join(missing)


@dataclass(frozen=True)
class HelperImport:
    """Where a repaired file imports its helpers from: ``from <level dots><module> import ...``, and the file
    of the tree's module (None: mend's own module)."""

    module: str
    level: int
    path: Path | None


def helper_import(path: str, mode: str, within_paths: Sequence[str] = ()) -> HelperImport:
    """Where the file ``path`` finds its helpers under the ``helpers`` option ``mode`` (see the module's
    docstring): the top of its package, or its own folder for a loose script. ``within_paths``: the paths
    ``mend fix`` was given, which it writes under: the top of the package within the given folder that holds
    the file (the file's own folder at least); a file named itself takes the top of its package."""
    if mode == "import":
        return HelperImport(MENDS_MODULE, 0, None)
    folder = Path(os.path.abspath(path)).parent
    if not (folder / "__init__.py").is_file():
        return HelperImport(TREE_MODULE, 0, folder / f"{TREE_MODULE}.py")
    # a folder given to mend fix that holds the file bounds it (a file named itself does not)
    roots = [r for r in within_paths if os.path.isdir(r) and within(path, [r])]
    top, level = folder, 1
    while (top.parent / "__init__.py").is_file() and top.parent != top and (
            not roots or within(top.parent, roots)):
        top, level = top.parent, level + 1
    return HelperImport(TREE_MODULE, level, top / f"{TREE_MODULE}.py")


class TreeModules:
    """The tree helper modules of one ``mend fix`` run (``write``: on disk; else only proposed, for ``--diff``):
    each module's text as it grows, as a :class:`~mend.rewriter.results.FileResult` (the text before the run,
    empty for a new module, and now)."""

    def __init__(self, write: bool) -> None:
        self.write = write
        self.results: dict[Path, FileResult] = {}

    def provide(self, path: str, helpers: list[str], options_helpers: str, like: files.SourceFile,
                within_paths: Sequence[str] = ()) -> FileResult | None:
        """Make the helper module of the repaired file ``path`` hold ``helpers`` (written first: the file imports
        from it); the module's result, or None (no module in the tree: ``helpers`` is "import", or nothing is
        needed). Raises :class:`~mend.rewriter.files.FileProblem` when it cannot be read or written."""
        target = helper_import(path, options_helpers, within_paths).path
        if target is None or not helpers:
            return None
        result = self.results.get(target)
        existing: files.SourceFile | None = None
        if result is None or self.write:
            try:
                existing = files.read(target) if os.path.lexists(target) else None
            except files.FileProblem as exc:
                raise files.FileProblem(f"its helper module {target}: {exc}") from None
        now = result.fixed if result is not None and not self.write else (existing.text if existing else None)
        try:
            text = module_text(now, helpers)
        except NotOurs as exc:
            raise files.FileProblem(f"its helper module {target}: {exc}; left unchanged") from None
        if result is None:
            shown = str(target) if os.path.isabs(path) else os.path.relpath(target)  # as the file is shown
            result = self.results[target] = FileResult(shown, existing.text if existing else "", text)
        if text != now and self.write:
            try:
                files.write(existing, text) if existing is not None else files.create(target, text, like)
            except files.FileProblem as exc:
                raise files.FileProblem(f"its helper module {target}: {exc}") from None
        result.fixed = text
        return result


__all__ = [
    "HEADER", "HELPERS_SOURCE", "MENDS_MODULE", "PREFIX", "TREE_MODULE", "HelperImport", "NotOurs", "TreeModules", "Unit",
    "defined", "helper_import", "module_text", "needed", "public_name", "units",
]

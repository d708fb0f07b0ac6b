"""The product's modules form a layered graph: no import cycle, counting every import (function-level and
``TYPE_CHECKING`` ones too), no private name (``_x``) imported from another module, and no source file longer
than a reader can hold (800 lines). The modules are those pyproject.toml installs, found from the source."""

from __future__ import annotations

import ast
from pathlib import Path

import tomllib

REPO = Path(__file__).resolve().parents[1]
MAX_LINES = 800


def product_modules() -> dict[str, Path]:
    """Every module the distribution installs, by dotted name (from pyproject.toml's package folders)."""
    setup = tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["setuptools"]
    folders = setup["package-dir"]
    out = {}
    for package in setup["packages"]:
        owner = max((p for p in folders if package == p or package.startswith(p + ".")), key=len)
        folder = REPO / folders[owner] / Path(*package[len(owner):].split(".")[1:])
        for path in folder.glob("*.py"):
            out[package if path.stem == "__init__" else f"{package}.{path.stem}"] = path
    return out


def imports_of(name: str, path: Path, known: set[str]) -> list[tuple[str, list[str]]]:
    """Every import in the module, anywhere in it: (the known module it reaches, the names it takes)."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    out = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            out += [(a.name, []) for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                up = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join(up + ([base] if base else []))
            for a in node.names:  # `from pkg import module` reaches the module
                sub = f"{base}.{a.name}"
                out.append((sub, []) if sub in known else (base, [a.name]))
    return [(m, names) for m, names in out if m in known]


def import_graph(mods: dict[str, Path]) -> dict[str, set[str]]:
    return {n: {m for m, _ in imports_of(n, p, set(mods)) if m != n} for n, p in mods.items()}


def find_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """One import cycle of ``graph`` (its modules in order, the first repeated at the end), or None."""
    state: dict[str, int] = {}
    stack: list[str] = []

    def visit(n: str) -> list[str] | None:
        state[n] = 1
        stack.append(n)
        for m in sorted(graph.get(n, ())):
            if state.get(m) == 1:
                return stack[stack.index(m):] + [m]
            if m not in state:
                found = visit(m)
                if found:
                    return found
        stack.pop()
        state[n] = 2
        return None

    for n in sorted(graph):
        if n not in state:
            found = visit(n)
            if found:
                return found
    return None


def test_the_cycle_finder_finds_one() -> None:
    assert find_cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert find_cycle({"a": {"b"}, "b": set()}) is None


def test_every_installed_folder_is_seen() -> None:
    mods = product_modules()
    for name in ("mend", "mend.version", "mend.rewriter.engine", "mend.analyzers.static.rules.base",
                 "mend.compiler.codegen.triton.launch", "mend.imports.startup", "mend.cli.app"):
        assert name in mods, name
    assert len(mods) > 150


def test_no_import_cycle_lazy_and_type_only_imports_included() -> None:
    cycle = find_cycle(import_graph(product_modules()))
    assert cycle is None, " -> ".join(cycle or [])


def test_no_private_name_is_imported_from_another_module() -> None:
    mods = product_modules()
    found = [f"{n}: from {m} import {x}" for n, p in mods.items() for m, names in imports_of(n, p, set(mods))
             for x in names if x.startswith("_") and not x.startswith("__")]
    assert found == []


def test_no_source_file_over_the_line_limit() -> None:
    long = {str(p.relative_to(REPO)): n for p in product_modules().values()
            if (n := len(p.read_text(encoding="utf-8").splitlines())) > MAX_LINES}
    assert long == {}

"""The rewriter's modules form a layered graph: no import cycle, counting every import (function-level and
``TYPE_CHECKING`` ones too), and no private name (``_x``) imported from another module."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2] / "rewriter"
PACKAGE = "mend.rewriter"


def _modules() -> dict[str, Path]:
    out = {}
    for path in ROOT.rglob("*.py"):
        parts = list(path.relative_to(ROOT).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        out[".".join([PACKAGE, *parts])] = path
    return out


def _imports(name: str, path: Path, known: set[str]) -> list[tuple[str, list[str]]]:
    """Every import in the module, anywhere in it: (the rewriter module it reaches, the names it takes)."""
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


def _graph() -> dict[str, set[str]]:
    mods = _modules()
    return {n: {m for m, _ in _imports(n, p, set(mods)) if m != n} for n, p in mods.items()}


def _cycle(graph: dict[str, set[str]]) -> list[str] | None:
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
    assert _cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert _cycle({"a": {"b"}, "b": set()}) is None


def test_no_import_cycle_in_the_rewriter_lazy_imports_included() -> None:
    assert _cycle(_graph()) is None, " -> ".join(_cycle(_graph()) or [])


def test_no_private_name_is_imported_from_another_module() -> None:
    mods = _modules()
    found = [f"{n}: from {m} import {x}" for n, p in mods.items() for m, names in _imports(n, p, set(mods))
             for x in names if x.startswith("_") and not x.startswith("__")]
    assert found == []


def test_strategies_do_not_import_each_other_or_the_engine() -> None:
    mods = _modules()
    found = [f"{n} imports {m}" for n, p in mods.items() if n.startswith(f"{PACKAGE}.strategies.")
             for m, _ in _imports(n, p, set(mods))
             if m.startswith(f"{PACKAGE}.strategies.") or m in {f"{PACKAGE}.engine", f"{PACKAGE}.registry"}]
    assert found == []

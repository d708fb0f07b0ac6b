"""No import cycles in mend, and every module imports on its own.

Two checks over every module of every package that ``pyproject.toml`` lists:

* the static import graph (``ast``) has no cycle. Edges are the imports a module runs when it loads (its
  top level, class bodies, ``try`` blocks; not function bodies, not ``if TYPE_CHECKING``): the module it
  names, and the packages on the way that are not already being imported (its own parents are). In
  ``mend.compiler`` function-level imports count too: a function-local import there may defer an optional
  or heavy dependency, never hide a cycle.
* in a fresh interpreter, each module is imported alone, in a process forked for it (third-party packages
  are imported once beforehand, so each import costs only mend's own modules): a cycle that a particular
  entry point trips over fails here with Python's own error. ``__main__`` modules are run, not imported,
  and a module whose optional third-party dependency is not installed (Triton off Linux) is passed over.
"""

from __future__ import annotations

import ast
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import tomllib

REPO = Path(__file__).resolve().parent.parent
STRICT = "mend.compiler"  # function-level imports count as edges inside this package


def _packages() -> dict[str, Path]:
    """Every package of the distribution -> its folder (pyproject's packages and package-dir)."""
    cfg = tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["setuptools"]
    dirs = cfg.get("package-dir", {})
    out = {}
    for pkg in cfg["packages"]:
        base = max((p for p in dirs if pkg == p or pkg.startswith(p + ".")), key=len)
        out[pkg] = REPO / dirs[base] / Path(*pkg[len(base):].split(".")[1:]) if pkg != base else REPO / dirs[base]
    return out


def modules() -> dict[str, Path]:
    """Every module of mend -> its file (a package is its ``__init__.py``)."""
    out = {}
    for pkg, folder in _packages().items():
        for f in sorted(folder.glob("*.py")):
            out[pkg if f.stem == "__init__" else f"{pkg}.{f.stem}"] = f
    return out


def _absolute(module: str, is_package: bool, node: ast.ImportFrom) -> str:
    if not node.level:
        return node.module or ""
    base = module.split(".")
    base = base if is_package else base[:-1]
    base = base[: len(base) - (node.level - 1)]
    return ".".join(base + ([node.module] if node.module else []))


def _runs_at_import(tree: ast.Module, with_functions: bool):
    """The import statements that run when the module loads (with function bodies, if asked)."""
    stack = list(tree.body)
    while stack:
        node = stack.pop()
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            yield node
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)) and not with_functions:
            continue
        elif isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            stack.extend(node.orelse)
        else:
            stack.extend(ast.iter_child_nodes(node))


def import_graph() -> dict[str, set[str]]:
    mods = modules()

    def chain(name: str, importer: str) -> set[str]:
        # name and the packages above it that the import may run: not the importer's own parents
        parts = name.split(".")
        out = set()
        for i in range(1, len(parts) + 1):
            m = ".".join(parts[:i])
            if m in mods and not importer.startswith(m + ".") and m != importer:
                out.add(m)
        return out

    graph: dict[str, set[str]] = {}
    for mod, path in mods.items():
        is_package = path.name == "__init__.py"
        tree = ast.parse(path.read_text(), str(path))
        edges: set[str] = set()
        for node in _runs_at_import(tree, with_functions=mod == STRICT or mod.startswith(STRICT + ".")):
            if isinstance(node, ast.Import):
                for a in node.names:
                    edges |= chain(a.name, mod)
                continue
            target = _absolute(mod, is_package, node)
            edges |= chain(target, mod) - {target}
            names = [a.name for a in node.names]
            if target in mods and any(f"{target}.{n}" not in mods for n in names):
                edges.add(target)  # reads attributes the package's __init__ defines (maybe a parent's)
            edges |= {f"{target}.{n}" for n in names if f"{target}.{n}" in mods}
        graph[mod] = edges - {mod}
    return graph


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """One cycle per strongly connected component with more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    on, stack, out = set(), [], []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in sorted(graph.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(_one_cycle(graph, set(comp)))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return out


def _one_cycle(graph: dict[str, set[str]], comp: set[str]) -> list[str]:
    start = min(comp)
    path, seen = [start], {start}
    while True:
        nxt = sorted(w for w in graph[path[-1]] if w in comp)
        back = [w for w in nxt if w == start]
        if back:
            return path + [start]
        w = next((w for w in nxt if w not in seen), nxt[0])
        if w in seen:
            return path[path.index(w):] + [w]
        path.append(w)
        seen.add(w)


def test_the_module_list_is_complete():
    mods = modules()
    for name in ("mend", "mend.compiler.backend", "mend.compiler.ir.verify", "mend.compiler.codegen.triton.aot",
                 "mend.bench.worker", "mend.cli.app"):
        assert name in mods, name
    dirs = tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["setuptools"]["package-dir"].values()
    on_disk = {p.resolve() for d in dirs for p in (REPO / d).rglob("*.py") if "__pycache__" not in p.parts}
    missing = sorted(str(p.relative_to(REPO)) for p in on_disk - {p.resolve() for p in mods.values()})
    assert not missing, f"modules in folders pyproject.toml does not list as packages: {missing}"


def test_the_cycle_detector_finds_a_cycle():
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c", "a"]]
    assert cycles({"a": {"b"}, "b": set()}) == []


def test_no_import_cycles():
    found = cycles(import_graph())
    assert not found, "import cycles:\n" + "\n".join(" -> ".join(c) for c in found)


_IMPORT_EACH = r"""
import importlib, json, os, sys, traceback
mods = json.loads(sys.argv[1])
for heavy in ("torch", "torch._dynamo", "sympy", "libcst", "typer", "rich", "triton", "triton.language"):
    try:
        importlib.import_module(heavy)
    except Exception:
        pass
assert not any(m == "mend" or m.startswith("mend.") for m in sys.modules), "mend imported before the fork"
failures = {}
for name in mods:
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(r)
        try:
            importlib.import_module(name)
            msg = ""
        except ModuleNotFoundError as exc:
            msg = "" if exc.name and not exc.name.startswith("mend") else traceback.format_exc(limit=4)
        except BaseException:
            msg = traceback.format_exc(limit=4)
        os.write(w, msg.encode())
        os._exit(0)
    os.close(w)
    chunks = []
    while True:
        b = os.read(r, 65536)
        if not b:
            break
        chunks.append(b)
    os.close(r)
    os.waitpid(pid, 0)
    if chunks:
        failures[name] = b"".join(chunks).decode()
print(json.dumps(failures))
"""


@pytest.mark.slow  # imports torch and Triton once, then every module of mend in its own process
@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs os.fork")
def test_every_module_imports_alone_in_a_fresh_interpreter():
    mods = sorted(m for m in modules() if not m.endswith(".__main__"))
    env = dict(os.environ, PYTHONDONTWRITEBYTECODE="1")
    proc = subprocess.run([sys.executable, "-c", _IMPORT_EACH, json.dumps(mods)], capture_output=True, text=True,
                          cwd=REPO, env=env, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    failures = json.loads(proc.stdout.strip().splitlines()[-1])
    assert not failures, "\n\n".join(f"{m}:\n{tb}" for m, tb in failures.items())

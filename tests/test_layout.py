"""The product and its measuring equipment stay apart.

The installed ``mend`` is the packages ``pyproject.toml`` lists; ``benchmarks/`` (the model-zoo harness and
the scripts that print tables), ``tests/`` and ``examples/`` are not installed. They import ``mend``; no
module of ``mend`` imports them, at any level (function bodies and ``TYPE_CHECKING`` blocks included), by
an import statement or by a module name in a string (``importlib.import_module``, ``python -m``).
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import tomllib

REPO = Path(__file__).resolve().parent.parent
OUTSIDE = ("benchmarks", "tests", "examples")  # top-level names that are not the product
# a string naming a module outside the product: "benchmarks.zoo", "tests.x", or the zoo's old name
NAMED_IN_STRING = re.compile(r"^(?:(?:benchmarks|tests|examples)(?:\.\w+)+|mend\.zoo(?:\.\w+)*)$")


def product_folders() -> dict[str, Path]:
    """Every installed package -> its folder (pyproject's packages and package-dir)."""
    cfg = tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["setuptools"]
    dirs = cfg["package-dir"]
    out = {}
    for pkg in cfg["packages"]:
        base = max((p for p in dirs if pkg == p or pkg.startswith(p + ".")), key=len)
        out[pkg] = REPO / dirs[base] / Path(*pkg[len(base) + 1:].split(".")) if pkg != base else REPO / dirs[base]
    return out


def imported_names(tree: ast.Module) -> list[tuple[int, str]]:
    """(line, absolute module name) of every import in the module, wherever it sits; relative imports are
    left out (they stay inside the package)."""
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out += [(node.lineno, a.name) for a in node.names]
        elif isinstance(node, ast.ImportFrom) and not node.level and node.module:
            out.append((node.lineno, node.module))
    return out


def strays(path: Path, root: Path = REPO) -> list[str]:
    """What in ``path`` reaches outside the product: imports of, and strings naming, such modules."""
    tree = ast.parse(path.read_text(), str(path))
    rel = path.relative_to(root).as_posix()
    found = [f"{rel}:{line}: import {name}" for line, name in imported_names(tree)
             if name.split(".")[0] in OUTSIDE or name == "mend.zoo" or name.startswith("mend.zoo.")]
    found += [f"{rel}:{node.lineno}: names {node.value!r}" for node in ast.walk(tree)
              if isinstance(node, ast.Constant) and isinstance(node.value, str) and NAMED_IN_STRING.match(node.value)]
    return found


def test_no_product_package_lives_in_the_harness_tests_or_examples() -> None:
    folders = product_folders()
    assert "mend.cli" in folders and "mend.compiler" in folders  # the listing is read, not empty
    inside = [pkg for pkg, folder in folders.items()
              if folder.relative_to(REPO).parts[0] in OUTSIDE or not folder.is_dir()]
    assert not inside, f"installed packages that are harness, tests or examples (or missing): {inside}"


def test_the_product_never_imports_the_benchmark_harness() -> None:
    files = sorted({f for folder in product_folders().values() for f in folder.glob("*.py")})
    assert len(files) > 100  # every module of mend, not a handful
    found = [s for f in files for s in strays(f)]
    assert not found, "the installed mend reaches outside the product:\n" + "\n".join(found)


def test_the_check_sees_lazy_and_string_imports(tmp_path: Path) -> None:
    """The scan finds an import inside a function and a module named in a string (it would have caught the
    scorer that once imported the zoo harness from inside a method)."""
    f = tmp_path / "probe.py"
    f.write_text("import os\n\ndef g():\n    from benchmarks.zoo.lines import from_ranges\n"
                 "    return __import__('importlib').import_module('benchmarks.zoo.records')\n"
                 "from mend.analyzers import static\nx = 'benchmarks are nice'\n")
    assert strays(f, tmp_path) == ["probe.py:4: import benchmarks.zoo.lines",
                                   "probe.py:5: names 'benchmarks.zoo.records'"]

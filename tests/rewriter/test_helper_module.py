"""Helpers are code: the functions repaired code calls live in ``mend.rewriter.helpers``; a repaired tree gets a
copy of the ones it needs once, in one module (``_mend.py``), extended and never pasted per file."""

from __future__ import annotations

import ast
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from mend.rewriter import FixOptions, fix_source
from mend.rewriter.helper_module import (
    HEADER,
    HELPERS_SOURCE,
    NotOurs,
    helper_import,
    module_text,
    needed,
    public_name,
    units,
)
from tests.rewriter.conftest import ALL_HELPERS, FIXTURES, diag

MEND = [sys.executable, "-m", "mend.cli"]
# a package whose two modules need three helpers: `_mend_where` (a branch), `_mend_masked_sum`, `_mend_tolist_len`
MODEL = '''\
import torch
from torch import nn


class Block(nn.Module):
    def forward(self, x: torch.Tensor):
        y = x * 2
        if x.sum() > 0:
            y = x + 1
        return y + x[x > 0].sum()
'''
HEAD = '''\
import torch
from torch import nn


class Head(nn.Module):
    def forward(self, x: torch.Tensor):
        return x * len(x.tolist())
'''


def test_the_helper_names_map_to_the_module() -> None:
    assert public_name("_mend_where") == "where"
    assert public_name("_mend_any") == "any_" and public_name("_mend_elif") == "elif_"  # a builtin, a keyword
    assert sorted(ALL_HELPERS) == sorted(f"_mend_{n.rstrip('_')}" for n in units() if not n.startswith("_"))
    assert len(ALL_HELPERS) >= 20


def test_every_helper_a_repaired_fixture_imports_is_a_function_of_the_module() -> None:
    import mend.rewriter.helpers as helpers

    imported = set()
    for out in FIXTURES.glob("*.out.py"):
        for node in ast.parse(out.read_text()).body:
            if isinstance(node, ast.ImportFrom) and node.module == "_mend":
                imported |= {(a.name, a.asname) for a in node.names}
    assert len(imported) >= 15
    for name, alias in imported:
        assert public_name(alias) == name and callable(getattr(helpers, name)), name


def test_no_fixture_holds_a_copy_of_a_helper() -> None:
    for path in FIXTURES.glob("*.py"):
        defined = {n.name for n in ast.parse(path.read_text()).body if isinstance(n, ast.FunctionDef)}
        assert not {d for d in defined if d.startswith("_mend_")}, path.name


def test_a_helper_brings_what_it_calls() -> None:
    assert needed(["_mend_tensor_check"]) == ["eager_frame", "captured", "_capture_frame", "_capture_backend",
                                              "tensor_check"]
    assert needed(["_mend_arange", "_mend_where"]) == ["eager_frame", "where", "arange", "_Span"]


def test_the_module_text_is_the_helpers_own_source_and_grows_without_duplicates() -> None:
    source = HELPERS_SOURCE.read_text()
    text = module_text(None, ["_mend_where"])
    assert text.startswith(HEADER) and units()["where"].text in text and units()["where"].text in source
    assert module_text(text, ["_mend_where"]) == text  # nothing new: unchanged
    more = module_text(text, ["_mend_index", "_mend_where"])
    assert more.startswith(text) and more.count("def where(") == 1 and "def captured(" in more
    compile(more, "_mend.py", "exec")
    with pytest.raises(NotOurs):
        module_text("def mine(): pass\n", ["_mend_where"])


def test_where_a_file_finds_its_helpers(tmp_path: Path) -> None:
    (tmp_path / "pkg" / "models" / "bert").mkdir(parents=True)
    for folder in ("pkg", "pkg/models", "pkg/models/bert"):
        (tmp_path / folder / "__init__.py").write_text("")
    deep = helper_import(str(tmp_path / "pkg/models/bert/modeling.py"), "tree")
    assert (deep.module, deep.level, deep.path) == ("_mend", 3, tmp_path / "pkg" / "_mend.py")
    top = helper_import(str(tmp_path / "pkg/util.py"), "tree")
    assert (top.level, top.path) == (1, tmp_path / "pkg" / "_mend.py")
    script = helper_import(str(tmp_path / "train.py"), "tree")
    assert (script.level, script.path) == (0, tmp_path / "_mend.py")
    assert helper_import(str(tmp_path / "train.py"), "import").path is None
    # `mend fix pkg/models` writes only under pkg/models: the module goes to the top of the package there
    bounded = helper_import(str(tmp_path / "pkg/models/bert/modeling.py"), "tree", [str(tmp_path / "pkg/models")])
    assert (bounded.level, bounded.path) == (2, tmp_path / "pkg" / "models" / "_mend.py")
    named = helper_import(str(tmp_path / "pkg/models/bert/modeling.py"), "tree",
                          [str(tmp_path / "pkg/models/bert/modeling.py")])
    assert named == deep


def test_a_repaired_file_imports_its_helpers_in_one_statement(tmp_path: Path) -> None:
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "__init__.py").write_text("")
    src = textwrap.dedent('''\
        import torch


        def f(x: torch.Tensor):
            if x.sum() > 0:
                x = x + 1
            return x[x > 0].sum()
        ''')
    diags = [diag("MND201", 5, 5), diag("MND305", 7, 12)]
    res = fix_source(src, str(tmp_path / "pkg" / "m.py"), diags, FixOptions())
    added = [ln for ln in res.fixed.splitlines() if "_mend" in ln and "import" in ln]
    assert added == ["from ._mend import masked_sum as _mend_masked_sum, where as _mend_where"]
    assert sorted(res.helpers) == ["_mend_masked_sum", "_mend_where"]
    mine = fix_source(src, str(tmp_path / "pkg" / "m.py"), diags, FixOptions(helpers="import")).fixed
    assert "from mend.rewriter.helpers import masked_sum as _mend_masked_sum, where as _mend_where" in mine


def _package(root: Path) -> Path:
    pkg = root / "pkg"
    (pkg / "layers").mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "layers" / "__init__.py").write_text("")
    (pkg / "layers" / "block.py").write_text(MODEL)
    (pkg / "head.py").write_text(HEAD)
    return pkg


RUN = '''
import sys, torch
sys.path.insert(0, sys.argv[1])
from pkg.layers.block import Block
from pkg.head import Head
x = torch.arange(6.0).reshape(2, 3) - 2
print(repr(Block()(x).tolist()), repr(Head()(x).tolist()))
'''


def _mend(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run([*MEND, *args], cwd=cwd, capture_output=True, text=True, timeout=600)


def test_mend_fix_writes_the_helpers_once_per_tree_and_extends_them(tmp_path: Path) -> None:
    pkg = _package(tmp_path)
    before = subprocess.run([sys.executable, "-c", RUN, str(tmp_path)], capture_output=True, text=True, check=True)
    r = _mend("fix", "--isolated", "pkg/layers/block.py", cwd=tmp_path)
    assert r.returncode in (0, 1), r.stderr
    module = (pkg / "_mend.py").read_text()
    assert module.startswith(HEADER) and module.count("\ndef where(") == 1 and "def tolist_len(" not in module
    block = (pkg / "layers" / "block.py").read_text()
    assert "from .._mend import masked_sum as _mend_masked_sum, where as _mend_where" in block
    assert "def _mend" not in block
    again = _mend("fix", "--isolated", "pkg/layers/block.py", cwd=tmp_path)  # fixing twice = fixing once
    assert (pkg / "_mend.py").read_text() == module and (pkg / "layers" / "block.py").read_text() == block, again
    _mend("fix", "--isolated", "pkg", cwd=tmp_path)  # another file needs another helper: the module grows
    grown = (pkg / "_mend.py").read_text()
    assert grown.startswith(module) and grown.count("\ndef where(") == 1 and "\ndef tolist_len(" in grown
    assert "from ._mend import tolist_len as _mend_tolist_len" in (pkg / "head.py").read_text()
    after = subprocess.run([sys.executable, "-c", RUN, str(tmp_path)], capture_output=True, text=True, check=True)
    assert after.stdout == before.stdout
    check = _mend("check", "--isolated", "pkg/_mend.py", cwd=tmp_path)
    assert check.returncode == 0, check.stdout


def test_helpers_import_writes_no_module_and_diff_shows_the_module(tmp_path: Path) -> None:
    pkg = _package(tmp_path)
    diff = _mend("fix", "--isolated", "--diff", "pkg", cwd=tmp_path)
    assert diff.returncode == 1 and "+++ b/pkg/_mend.py" in diff.stdout and "+def where(" in diff.stdout
    assert not (pkg / "_mend.py").exists()
    r = _mend("fix", "--isolated", "--helpers", "import", "pkg", cwd=tmp_path)
    assert r.returncode in (0, 1), r.stderr
    assert not (pkg / "_mend.py").exists()
    assert "from mend.rewriter.helpers import" in (pkg / "head.py").read_text()
    bad = _mend("fix", "--isolated", "--helpers", "nowhere", "pkg", cwd=tmp_path)
    assert bad.returncode == 2 and "--helpers" in bad.stderr


def test_a_module_mend_did_not_write_is_left_alone_and_so_is_the_file(tmp_path: Path) -> None:
    pkg = _package(tmp_path)
    (pkg / "_mend.py").write_text("VALUE = 1\n")
    r = _mend("fix", "--isolated", "pkg/head.py", cwd=tmp_path)
    assert r.returncode == 2 and "not written by mend fix" in r.stderr
    assert (pkg / "_mend.py").read_text() == "VALUE = 1\n" and (pkg / "head.py").read_text() == HEAD


def test_the_static_path_never_imports_the_helpers_or_torch(tmp_path: Path) -> None:
    _package(tmp_path)
    code = ("import sys; from mend.cli.app import main; sys.argv = ['mend', 'fix', '--isolated', 'pkg']\n"
            "try:\n    main()\nexcept SystemExit:\n    pass\n"
            "print('mend.rewriter.helpers' in sys.modules, 'torch' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, capture_output=True, text=True, timeout=600)
    assert out.stdout.strip().splitlines()[-1] == "False False", out.stderr

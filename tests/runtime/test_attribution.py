"""Breaks inside library code are attributed to the user's calling line unless the library is --source."""

from __future__ import annotations

import sys
import textwrap

import pytest
import torch

from mend.analyzers.runtime import record
from mend.analyzers.runtime.recorder import ProjectFilter

from .conftest import line_of

LIB = """
import torch

def noisy(y):
    y = y * 2
    print("library says hi")  # lib-print
    return y + 1
"""


@pytest.fixture
def fakelib(tmp_path):
    root = tmp_path / "venv" / "lib" / "python3" / "site-packages"
    pkg = root / "fakelib"
    pkg.mkdir(parents=True)
    (pkg / "__init__.py").write_text(textwrap.dedent(LIB))
    sys.path.insert(0, str(root))
    sys.modules.pop("fakelib", None)
    import fakelib

    yield fakelib
    sys.path.remove(str(root))
    sys.modules.pop("fakelib", None)


USER = """
import torch
import fakelib

def f(x):
    y = x.sin()
    y = fakelib.noisy(y)  # call-site
    return y.cos()
"""


def test_library_break_goes_to_the_user_calling_line(fakelib, load_module):
    mod = load_module(USER)
    with record() as rec:
        torch.compile(mod.f, backend="eager")(torch.randn(4))
    sites = {(b.path, b.line, b.registry_id, b.in_library) for b in rec.breaks}
    assert sites == {(mod.__file__, line_of(mod, "# call-site"), "GB0059", False)}
    assert rec.breaks[0].count == 2  # inlined from f, then in noisy's own frame


def test_source_makes_the_library_part_of_the_project(fakelib, load_module):
    mod = load_module(USER)
    with record(source=[fakelib.__path__[0]]) as rec:
        torch.compile(mod.f, backend="eager")(torch.randn(4))
    (site,) = rec.breaks
    assert site.path == fakelib.__file__ and site.line == line_of(fakelib, "# lib-print")
    assert site.function == "noisy" and not site.in_library
    # the project frames of the stack lead from the user's call to the library line
    assert [s[1] for s in site.stack] == [line_of(mod, "# call-site"), line_of(fakelib, "# lib-print")]


def test_compiled_library_function_is_attributed_to_the_caller(fakelib, load_module):
    caller = load_module("import torch\nimport fakelib\n\ndef go(x):\n    c = torch.compile(fakelib.noisy, backend='eager')\n    return c(x)  # caller\n")
    with record() as rec:
        caller.go(torch.randn(4))
    (site,) = rec.breaks
    assert (site.path, site.line, site.in_library) == (caller.__file__, line_of(caller, "# caller"), False)
    (region,) = rec.regions.values()
    assert region.function == "noisy" and region.in_library


def test_project_filter_classification(tmp_path):
    flt = ProjectFilter(root=tmp_path)
    assert flt.is_project(str(tmp_path / "model.py"))
    assert not flt.is_project(torch.__file__)
    assert not flt.is_project(textwrap.__file__)  # stdlib
    assert not flt.is_project("<frozen runpy>")
    assert not flt.is_project("/x/lib/python3.11/site-packages/transformers/models/bart/modeling_bart.py")
    flt = ProjectFilter(source=["/x/lib/python3.11/site-packages/transformers"], root=tmp_path)
    assert flt.is_project("/x/lib/python3.11/site-packages/transformers/models/bart/modeling_bart.py")
    assert flt.display(str(tmp_path / "pkg" / "m.py")) == "pkg/m.py"

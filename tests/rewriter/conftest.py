"""Shared helpers for the rewriter tests."""

from __future__ import annotations

import atexit
import itertools
import re
import shutil
import sys
import tempfile
import types
from pathlib import Path

from mend.analyzers.diagnostic import Diagnostic
from mend.rewriter import FixOptions
from mend.rewriter.helper_module import TREE_MODULE, module_text, public_name, units

FIXTURES = Path(__file__).parent / "fixtures"
ALL_HELPERS = [f"_mend_{name.rstrip('_')}" for name in units() if not name.startswith("_")]


def _helper_folder() -> Path:
    """A folder on ``sys.path`` holding the helper module ``mend fix`` writes beside loose scripts, with every
    helper: what the repaired fixtures and test programs (``from _mend import where as _mend_where``) import."""
    folder = Path(tempfile.mkdtemp(prefix="mend_helpers_"))
    atexit.register(shutil.rmtree, folder, ignore_errors=True)
    (folder / f"{TREE_MODULE}.py").write_text(module_text(None, ALL_HELPERS), encoding="utf-8")
    sys.path.insert(0, str(folder))
    return folder


HELPERS = _helper_folder()
_FRESH = itertools.count()


def helpers(*aliases: str) -> dict:
    """The helpers ``aliases`` (``_mend_where``), from a fresh copy of the module a repaired tree gets."""
    module = types.ModuleType(f"mend_test_helpers_{next(_FRESH)}")
    sys.modules[module.__name__] = module  # Dynamo finds a function's globals through its module
    exec(compile(module_text(None, aliases), TREE_MODULE + ".py", "exec"), module.__dict__)  # noqa: S102 - mend's own
    return {a: module.__dict__[public_name(a)] for a in aliases}


def header_diagnostics(source: str, path: str = "fixture.py") -> tuple[list[Diagnostic], bool]:
    """Sites from a fixture's first line: ``# fixes: MND201@6:5 ... [unsafe] [side-effects=POLICY]``."""
    first = source.splitlines()[0]
    sites = re.findall(r"(MND\d+)@(\d+):(\d+)", first)
    diags = [Diagnostic(code=c, message="fixture", path=path, line=int(ln), col=int(col)) for c, ln, col in sites]
    return diags, "unsafe" in first


def header_options(source: str) -> FixOptions:
    """The fix options a fixture's first line asks for (``unsafe``, ``side-effects=POLICY``)."""
    first = source.splitlines()[0]
    policy = re.search(r"side-effects=(\w+)", first)
    return FixOptions(unsafe="unsafe" in first, side_effects=policy.group(1) if policy else "keep")


def diag(code: str, line: int, col: int, path: str = "t.py") -> Diagnostic:
    return Diagnostic(code=code, message="test", path=path, line=line, col=col)


def load_fixture(name: str, kind: str) -> dict:
    """The namespace of fixture ``name`` (``kind``: ``in`` or ``out``) executed with its ``@torch.compile``
    removed: eager code, for bitwise comparisons of the original and the repaired file."""
    src = (FIXTURES / f"{name}.{kind}.py").read_text().replace("@torch.compile\n", "")
    ns: dict = {"__name__": f"{name}_{kind}"}
    exec(compile(src, f"{name}.{kind}.py", "exec"), ns)  # noqa: S102 - the repository's own fixture
    return ns


def graphs_and_breaks(fn, *args):
    """``fn(*args)`` under torch.compile with a backend that counts Dynamo's graphs: (output, graphs, graph
    breaks)."""
    import torch

    graphs: list = []

    def backend(gm, example_inputs):
        graphs.append(gm)
        return gm.forward

    torch._dynamo.reset()
    torch._dynamo.utils.counters.clear()
    out = torch.compile(fn, backend=backend)(*args)
    return out, len(graphs), sum(torch._dynamo.utils.counters["graph_break"].values())

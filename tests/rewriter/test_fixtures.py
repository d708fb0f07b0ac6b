"""Before/after fixtures (``fixtures/*.in.py`` -> ``*.out.py``) and idempotence for every fix family."""

from __future__ import annotations

import os

import libcst as cst
import pytest

from mend.rewriter import FixOptions, fix_source
from tests.rewriter.conftest import FIXTURES, header_diagnostics, header_options

CASES = sorted(p.name[: -len(".in.py")] for p in FIXTURES.glob("*.in.py"))


def _fix(name: str) -> tuple[str, str]:
    src = (FIXTURES / f"{name}.in.py").read_text()
    diags, _ = header_diagnostics(src, f"{name}.py")
    res = fix_source(src, f"{name}.py", diags, header_options(src))
    assert res.error is None, res.error
    assert len(res.applied) == len(diags), [r.reason for r in res.remaining]
    return src, res.fixed


@pytest.mark.parametrize("name", CASES)
def test_fixture(name: str) -> None:
    src, fixed = _fix(name)
    out = FIXTURES / f"{name}.out.py"
    if os.environ.get("MEND_REGEN_FIXTURES"):
        out.write_text(fixed)
    assert fixed != src
    assert fixed == out.read_text()
    cst.parse_module(fixed)
    compile(fixed, name, "exec")


@pytest.mark.parametrize("name", CASES)
def test_fixture_idempotent(name: str) -> None:
    """Fixing the repaired file again (with the static analyzer's findings) changes nothing."""
    from mend.analyzers import static

    fixed = (FIXTURES / f"{name}.out.py").read_text()
    config = static.load_config([str(FIXTURES)], isolated=True)

    def diagnose(text: str):
        return static.check_source(text, f"{name}.py", config)

    again = fix_source(fixed, f"{name}.py", None, header_options((FIXTURES / f"{name}.in.py").read_text()),
                       diagnose)
    assert again.fixed == fixed
    assert again.applied == []


def test_comments_and_formatting_survive() -> None:
    _, fixed = _fix("guard_print")
    assert "# keep this comment" in fixed
    _, fixed = _fix("keep_print")
    assert "# keep this comment" in fixed
    _, fixed = _fix("where_else_less")
    assert "# overflow guard" in fixed


def test_dynamic_keyword_joins_decorator_arguments() -> None:
    """MND402: `@compile(backend=...)` (imported from torch) keeps its arguments and gains `dynamic=True`."""
    from tests.rewriter.conftest import diag

    src = ("from torch import compile\n\n\n@compile(backend=\"eager\")\ndef f(x, n):\n    return x * n\n\n\n"
           "f(1, 2)\nf(1, 3)\n")
    res = fix_source(src, "t.py", [diag("MND402", 10, 1)], FixOptions(unsafe=True))
    assert res.error is None and len(res.applied) == 1
    assert res.fixed == src.replace('@compile(backend="eager")', '@compile(backend="eager", dynamic=True)')
    safe_only = fix_source(src, "t.py", [diag("MND402", 10, 1)], FixOptions())
    assert safe_only.fixed == src and safe_only.remaining[0].unsafe_available

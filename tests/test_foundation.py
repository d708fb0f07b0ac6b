"""The project's foundation: packaging, the shared Diagnostic type, the CLI shell, harness loading."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import tomllib

from mend.analyzers import Applicability, Diagnostic, Edit, Fix, Severity, __version__
from mend.analyzers.runtime import harness

REPO = Path(__file__).resolve().parent.parent
PACKAGE_ROOTS = {"analyzers": "mend.analyzers", "rewriter": "mend.rewriter", "compiler": "mend.compiler", "cli": "mend.cli"}


def _pyproject() -> dict:
    return tomllib.loads((REPO / "pyproject.toml").read_text())


def test_version_matches_pyproject():
    assert _pyproject()["project"]["version"] == __version__


def test_every_source_package_is_installed():
    """A folder with __init__.py under a package root must be listed in pyproject's packages."""
    listed = set(_pyproject()["tool"]["setuptools"]["packages"])
    for folder, dotted in PACKAGE_ROOTS.items():
        for init in (REPO / folder).rglob("__init__.py"):
            rel = init.parent.relative_to(REPO / folder)
            name = ".".join([dotted, *rel.parts]) if rel.parts else dotted
            assert name in listed, f"{init.parent} is not in [tool.setuptools] packages"


def test_diagnostic_roundtrip_and_positions():
    d = Diagnostic(
        code="MND101",
        name="print-in-compiled-code",
        message="print() breaks the graph",
        path="m.py",
        line=3,
        col=5,
        end_line=3,
        end_col=20,
        severity=Severity.ERROR,
        fix=Fix("Defer print", Applicability.SAFE, (Edit("x", 3, 5, 3, 20),)),
        registry_ids=("GB0059",),
        data={"count": 2},
    )
    again = Diagnostic.from_dict(json.loads(json.dumps(d.to_dict())))
    assert again == d and again.data == {"count": 2}
    assert d.fixable and d.location() == "m.py:3:5"
    with pytest.raises(ValueError):
        Diagnostic(code="MND101", message="m", path="m.py", line=0, col=1)


def test_cli_version_and_help():
    out = subprocess.run([sys.executable, "-m", "mend.cli", "--version"], capture_output=True, text=True)
    assert out.returncode == 0 and out.stdout.strip() == f"mend {__version__}"
    out = subprocess.run([sys.executable, "-m", "mend.cli", "--help"], capture_output=True, text=True)
    assert out.returncode == 0 and "mend" in out.stdout


@pytest.mark.parametrize(
    "spec, message",
    [
        ("examples/transformer_block.py", "must be PATH.py:FUNCTION"),
        ("examples/missing.py:harness", "does not exist"),
        ("examples/transformer_block.py:nope", "has no function 'nope'"),
        ("examples/transformer_block.py:Block", "must return (model_or_fn, args, kwargs)"),
    ],
)
def test_harness_errors_are_clear(spec, message, monkeypatch):
    monkeypatch.chdir(REPO)
    with pytest.raises(harness.HarnessError) as err:
        harness.load(spec)
    assert message in str(err.value)


def test_harness_loads_an_example(monkeypatch):
    monkeypatch.chdir(REPO)
    h = harness.load("examples/validated_model.py:harness")
    out = h.target(*h.args, **h.kwargs)
    assert tuple(out.shape) == (4, 5)

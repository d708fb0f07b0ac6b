"""``mend fix --verify`` proves it ran the repaired code: each run reports where every repaired module was
imported from, the harness may live outside the tree being fixed, and verification fails when the
repaired modules (or, in the original run, the original ones) were not the ones loaded."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from mend.rewriter.verify import check_imports

MODEL = '''import torch


class Net(torch.nn.Module):
    def forward(self, x):
        y = x.sin()
        return y[y > 0].sum()
'''

HARNESS = '''import torch

from pkgcopy.model import Net


def harness():
    return Net(), (torch.randn(8),), {}
'''

# loads the model file by its path, around the import system: the repaired run cannot be redirected
BY_PATH = '''import importlib.util

import torch

spec = importlib.util.spec_from_file_location("model_by_path", {path!r})
model = importlib.util.module_from_spec(spec)
spec.loader.exec_module(model)


def harness():
    return model.Net(), (torch.randn(8),), {{}}
'''


def package(parent: Path) -> Path:
    """``parent/pkgcopy``: a package whose module breaks the graph on a boolean mask (2 graphs)."""
    pkg = parent / "pkgcopy"
    pkg.mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "model.py").write_text(MODEL)
    return pkg


def snapshot(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


def verify(cwd: Path, harness: str, target: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    cmd = [sys.executable, "-m", "mend.cli", "fix", "-q", "--unsafe-fixes", "--select", "MND305",
           "--verify", harness, target]
    return subprocess.run(cmd, cwd=cwd, capture_output=True, text=True, timeout=600,
                          env={**os.environ, "PYTHONDONTWRITEBYTECODE": "1", **(env or {})})


@pytest.mark.slow
def test_a_harness_outside_the_tree_runs_the_repaired_package(tmp_path: Path) -> None:
    """The harness in another folder imports the package from the working folder: the repaired run
    loads the repaired copy (2 graphs -> 1), and says so."""
    work = tmp_path / "work"
    package(work)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (elsewhere / "harness.py").write_text(HARNESS)
    before = snapshot(tmp_path)
    res = verify(work, f"{elsewhere / 'harness.py'}:harness", "pkgcopy/")
    assert res.returncode == 0, res.stdout + res.stderr
    assert f"verify {elsewhere / 'harness.py'}:harness: PASS\n" in res.stdout
    assert "graphs (first call): 2 -> 1" in res.stdout
    assert (f"imported: pkgcopy/model.py (pkgcopy.model): original run imported it from {work / 'pkgcopy'}; "
            "repaired run imported the repaired copy") in res.stdout
    assert snapshot(tmp_path) == before


@pytest.mark.slow
def test_a_harness_that_loads_the_original_file_fails(tmp_path: Path) -> None:
    """A harness that loads the module by its path runs the unrepaired file in both runs: FAIL (exit 1),
    not PASS with the same graph count."""
    work = tmp_path / "work"
    pkg = package(work)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (elsewhere / "harness.py").write_text(BY_PATH.format(path=str(pkg / "model.py")))
    res = verify(work, f"{elsewhere / 'harness.py'}:harness", "pkgcopy/")
    assert res.returncode == 1, res.stdout + res.stderr
    assert f"verify {elsewhere / 'harness.py'}:harness: FAIL\n" in res.stdout
    assert "FAIL: the repaired run did not import the repaired pkgcopy/model.py" in res.stdout
    assert (pkg / "model.py").read_text() == MODEL


@pytest.mark.slow
def test_an_original_run_that_imports_another_copy_fails(tmp_path: Path) -> None:
    """The harness imports ``pkgcopy`` from an installed copy (``PYTHONPATH``), not from the tree being
    fixed: neither run tests the repair; FAIL (exit 1) and the report names the file it used."""
    installed = tmp_path / "site"
    package(installed)
    work = tmp_path / "work"
    package(work / "checkout")
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (elsewhere / "harness.py").write_text(HARNESS)
    res = verify(work, f"{elsewhere / 'harness.py'}:harness", "checkout/pkgcopy",
                 env={"PYTHONPATH": str(installed)})
    assert res.returncode == 1, res.stdout + res.stderr
    assert "FAIL: the original run did not import checkout/pkgcopy/model.py from" in res.stdout
    assert f"original run imported {installed / 'pkgcopy' / 'model.py'} instead" in res.stdout


def test_check_imports_verdicts(tmp_path: Path) -> None:
    """The decision on the two runs' import reports (module name -> real path), without torch."""
    root = package(tmp_path / "orig")
    copy = package(tmp_path / "copy")
    orig_file, copy_file = str((root / "model.py").resolve()), str((copy / "model.py").resolve())
    other = str(tmp_path / "site" / "pkgcopy" / "model.py")
    shown = {"model.py": "pkgcopy/model.py"}

    def run(before: dict[str, str], after: dict[str, str]):
        return check_imports(root, copy, shown, before, after)

    good = run({orig_file: "pkgcopy.model"}, {copy_file: "pkgcopy.model"})
    assert good.problems == [] and good.untested == []
    unregistered = run({orig_file: ""}, {copy_file: ""})  # code that ran without a module in sys.modules
    assert unregistered.problems == [] and unregistered.untested == []
    stale = run({orig_file: "pkgcopy.model"}, {orig_file: "pkgcopy.model"})
    assert stale.problems == ["the repaired run did not import the repaired pkgcopy/model.py"]
    missing = run({orig_file: "pkgcopy.model"}, {})
    assert missing.problems == ["the repaired run did not import the repaired pkgcopy/model.py"]
    elsewhere = run({other: "pkgcopy.model"}, {other: "pkgcopy.model"})
    assert elsewhere.problems == [f"the original run did not import pkgcopy/model.py from {root}"]
    assert f"original run imported {other} instead" in elsewhere.lines[0]
    from_copy = run({copy_file: "pkgcopy.model"}, {copy_file: "pkgcopy.model"})
    assert from_copy.problems == [f"the original run did not import pkgcopy/model.py from {root}"]
    nothing = run({}, {})
    assert nothing.untested == ["pkgcopy/model.py"]
    assert nothing.problems == ["neither run imported a repaired file: the harness does not test the repair"]
    two = {"model.py": "pkgcopy/model.py", "__init__.py": "pkgcopy/__init__.py"}
    partial = check_imports(root, copy, two, {orig_file: "pkgcopy.model"}, {copy_file: "pkgcopy.model"})
    assert partial.problems == [] and partial.untested == ["pkgcopy/__init__.py"]

"""The shipped `.pre-commit-hooks.yaml` works with the real pre-commit framework.

pre-commit installs mend from a clone of this repository into its own environment (PyPI is needed
for libcst, typer, rich and sympy; torch is not a dependency, so nothing large is pulled).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
BAD = "import torch\nfrom torch import nn\n\n\nclass M(nn.Module):\n    def forward(self, x):\n        print(x)\n        return x\n"


def _git(*args, cwd):
    return subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True, text=True).stdout.strip()


@pytest.mark.slow
@pytest.mark.network
def test_mend_check_hook(tmp_path: Path):
    pre_commit = shutil.which("pre-commit", path=str(Path(sys.executable).parent)) or shutil.which("pre-commit")
    if pre_commit is None:
        pytest.skip("pre-commit is not installed")
    hooks = tmp_path / "hookrepo"
    subprocess.run(["git", "clone", "-q", str(REPO), str(hooks)], check=True)
    if not (hooks / ".pre-commit-hooks.yaml").exists():
        pytest.skip(".pre-commit-hooks.yaml is not committed yet")
    rev = _git("rev-parse", "HEAD", cwd=hooks)
    work = tmp_path / "work"
    work.mkdir()
    _git("init", "-q", cwd=work)
    (work / ".pre-commit-config.yaml").write_text(
        f"repos:\n  - repo: {hooks}\n    rev: {rev}\n    hooks:\n      - id: mend-check\n")
    (work / "README.md").write_text("docs only\n")
    _git("add", ".pre-commit-config.yaml", "README.md", cwd=work)
    env = dict(os.environ, PRE_COMMIT_HOME=str(tmp_path / "pc-home"), PIP_DISABLE_PIP_VERSION_CHECK="1")
    env.pop("VIRTUAL_ENV", None)

    # no staged Python file: the hook is skipped and passes
    ok = subprocess.run([pre_commit, "run"], cwd=work, capture_output=True, text=True, env=env, timeout=900)
    assert ok.returncode == 0, ok.stdout + ok.stderr
    assert "mend check" in ok.stdout

    # a staged file that breaks the graph: the hook fails and names the rule
    (work / "model.py").write_text(BAD)
    _git("add", "model.py", cwd=work)
    bad = subprocess.run([pre_commit, "run"], cwd=work, capture_output=True, text=True, env=env, timeout=900)
    assert bad.returncode == 1, bad.stdout + bad.stderr
    assert "model.py:7:9: MND101" in bad.stdout

"""``mend run --repair``, ``mend report`` and ``mend repair-cache``: outcomes and exit codes."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

MEND = [sys.executable, "-m", "mend.cli"]

MODEL = '''\
import logging

import torch
from torch import nn

logger = logging.getLogger(__name__)


class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(4, 4)

    def forward(self, x):
        h = self.lin(x)
        logger.debug("block output %s", h.shape)
        torch._dynamo.graph_break()
        return h * 2
'''
BREAK_LINE = 17  # torch._dynamo.graph_break() in the original file

SCRIPT = '''\
import sys

import torch

from cli_toy.model import Block

block = Block()
out = torch.compile(block, backend="eager")(torch.ones(2, 4))
print("sum", round(out.sum().item(), 4))
sys.exit(3)
'''


@pytest.fixture
def project(tmp_path):
    pkg = tmp_path / "pkgs" / "cli_toy"
    pkg.mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "model.py").write_text(MODEL)
    (tmp_path / "train.py").write_text(SCRIPT)
    env = dict(os.environ, PYTHONPATH=str(tmp_path / "pkgs"), MEND_REPAIR_CACHE=str(tmp_path / "cache"))
    env.pop("MEND_REPAIR", None)
    return tmp_path, env


def mend(args: list[str], cwd: Path, env: dict) -> subprocess.CompletedProcess:
    return subprocess.run([*MEND, *args], cwd=cwd, env=env, capture_output=True, text=True, timeout=600)


def test_bad_repair_arguments_exit_2(project):
    root, env = project
    for args, message in [(["--repair", "no_such_package_xyz"], "no installed package"),
                          (["--unsafe-fixes"], "need --repair"),
                          (["--repair", "cli_toy", "--from-run", "missing.json"], "no such data file"),
                          (["--repair", "cli_toy,not a name"], "not a package name")]:
        proc = mend(["run", *args, "train.py"], root, env)
        assert proc.returncode == 2, (args, proc.stderr)
        assert message in proc.stderr
        assert "sum" not in proc.stdout  # the program did not run


@pytest.mark.slow
def test_run_repair_reports_breaks_at_original_lines_and_what_was_repaired(project):
    root, env = project
    proc = mend(["run", "--repair", "cli_toy", "train.py"], root, env)
    assert proc.returncode == 3, proc.stderr  # the program's own exit code
    assert "sum" in proc.stdout
    data = json.loads((root / ".mend" / "run.json").read_text())
    model = str((root / "pkgs" / "cli_toy" / "model.py").resolve())
    sites = [(b["path"], b["line"], b["source_line"]) for b in data["breaks"]]
    assert sites == [(os.path.relpath(model, root), BREAK_LINE, "torch._dynamo.graph_break()")]
    [repaired] = data["repaired"]
    assert repaired["module"] == "cli_toy.model" and repaired["status"] == "repaired"
    assert [(a["code"], a["line"]) for a in repaired["applied"]] == [("MND102", 16)]
    report = mend(["report", "--no-static"], root, env)
    assert report.returncode == 0, report.stderr
    assert "Loaded repaired at import (1 module(s))" in report.stdout
    assert "model.py:16: MND102" in report.stdout
    # the same program without the hook: the logger call breaks too
    plain = mend(["run", "--data-file", "plain.json", "--source", "pkgs", "train.py"], root, env)
    assert plain.returncode == 3
    lines = sorted(b["line"] for b in json.loads((root / "plain.json").read_text())["breaks"])
    assert lines == [16, BREAK_LINE]
    # --from-run with the plain run's sites: the run still passes and reads them
    again = mend(["run", "--repair", "cli_toy", "--from-run", "plain.json", "--data-file", "again.json", "train.py"],
                 root, env)
    assert again.returncode == 3, again.stderr


def test_repair_cache_list_and_clear(project, tmp_path):
    root, env = project
    code = "import mend.imports as mi; mi.repair_imports(['cli_toy'], isolated=True); import cli_toy.model"
    subprocess.run([sys.executable, "-c", code], cwd=root, env=env, check=True, timeout=600)
    listed = mend(["repair-cache", "list"], root, env)
    assert listed.returncode == 0, listed.stderr
    assert "repaired   cli_toy.model" in listed.stdout and "MND102@16" in listed.stdout
    as_json = json.loads(mend(["repair-cache", "list", "--format", "json", "--all"], root, env).stdout)
    assert sorted(e["module"] for e in as_json) == ["cli_toy", "cli_toy.model"]
    assert mend(["repair-cache", "list", "--format", "xml"], root, env).returncode == 2
    cleared = mend(["repair-cache", "clear"], root, env)
    assert cleared.returncode == 0 and "removed 2 cached module(s)" in cleared.stdout
    assert json.loads(mend(["repair-cache", "list", "--format", "json"], root, env).stdout) == []
    (tmp_path / "a-file").write_text("")
    assert mend(["repair-cache", "list", "--cache-dir", str(tmp_path / "a-file")], root, env).returncode == 2


def test_the_hook_imports_no_torch_unless_the_program_does(tmp_path):
    """Installing the hook and repairing a package that does not use torch loads neither torch nor (warm)
    LibCST and the analyzer."""
    pkg = tmp_path / "pkgs" / "torchless"
    pkg.mkdir(parents=True)
    (pkg / "__init__.py").write_text("from torchless.util import twice\n")
    (pkg / "util.py").write_text("def twice(x):\n    return 2 * x\n")
    code = ("import sys, mend.imports as mi; mi.repair_imports(['torchless'], isolated=True); import torchless;"
            "print(torchless.twice(2), 'torch' in sys.modules, 'libcst' in sys.modules)")
    env = dict(os.environ, PYTHONPATH=str(tmp_path / "pkgs"), MEND_REPAIR_CACHE=str(tmp_path / "cache"))
    cold = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, env=env, capture_output=True, text=True)
    warm = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, env=env, capture_output=True, text=True)
    assert cold.stdout.split() == ["4", "False", "True"], cold.stderr  # a cold repair runs the analyzer
    assert warm.stdout.split() == ["4", "False", "False"], warm.stderr
    listed = subprocess.run([*MEND, "repair-cache", "list"], env=env, capture_output=True, text=True)
    assert listed.returncode == 0


def test_repair_cache_warm(project):
    root, env = project
    warmed = mend(["repair-cache", "warm", "cli_toy"], root, env)
    assert warmed.returncode == 0, warmed.stderr
    assert warmed.stdout.startswith("2 module(s): 1 repaired, 1 unchanged, 0 failed; 2 new"), warmed.stdout
    again = mend(["repair-cache", "warm", "cli_toy"], root, env)
    assert again.returncode == 0 and "; 0 new" in again.stdout, again.stdout
    listed = mend(["repair-cache", "list"], root, env)
    assert "repaired   cli_toy.model" in listed.stdout
    # the program's run finds every module cached: nothing new is written
    run = mend(["run", "--repair", "cli_toy", "train.py"], root, env)
    assert run.returncode == 3, run.stderr
    third = mend(["repair-cache", "warm", "cli_toy"], root, env)
    assert "; 0 new" in third.stdout, third.stdout
    assert mend(["repair-cache", "warm", "no_such_package_here"], root, env).returncode == 2
    assert mend(["repair-cache", "warm", "not-a-name"], root, env).returncode == 2

"""`mend run` end to end, in a subprocess: the program's output, exit code and exceptions are its own."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

PROGRAM = """
import sys
import torch

def f(x):
    y = x.sin()
    print("debug", y.shape)  # <<
    return y.cos()

if __name__ == "__main__":
    c = torch.compile(f, backend="eager")
    out = c(torch.ones(3))
    print("result", round(float(out.sum()), 4))
    print("args", sys.argv[1:])
    if len(sys.argv) > 1 and sys.argv[1] == "fail":
        raise ValueError("boom from the program")
    if len(sys.argv) > 1 and sys.argv[1].isdigit():
        sys.exit(int(sys.argv[1]))
"""


def mend(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONWARNINGS": "ignore"}
    return subprocess.run([sys.executable, "-m", "mend.cli", *args], cwd=cwd, capture_output=True, text=True, env=env, timeout=300)


@pytest.fixture
def project(tmp_path):
    (tmp_path / "prog.py").write_text(textwrap.dedent(PROGRAM))
    return tmp_path


def _data(project: Path, name: str = ".mend/run.json") -> dict:
    return json.loads((project / name).read_text())


@pytest.mark.slow
def test_run_records_and_keeps_program_output(project):
    plain = subprocess.run([sys.executable, "prog.py", "a", "--flag"], cwd=project, capture_output=True, text=True)
    res = mend("run", "prog.py", "a", "--flag", cwd=project)
    assert res.returncode == 0, res.stderr
    assert res.stdout == plain.stdout  # same output, same argv seen by the program
    assert "args ['a', '--flag']" in res.stdout
    data = _data(project)
    assert data["version"] == 1
    (site,) = data["breaks"]
    assert (site["path"], site["line"], site["registry_id"], site["count"]) == ("prog.py", 7, "GB0059", 1)
    assert data["summary"]["graphs"] == 2 and data["runs"][0]["exit_code"] == 0
    assert "recorded 1 graph break site" in res.stderr


@pytest.mark.slow
def test_run_passes_exit_code_and_exception_through(project):
    res = mend("run", "--data-file", "out/d.json", "prog.py", "3", cwd=project)
    assert res.returncode == 3
    assert _data(project, "out/d.json")["runs"][0]["exit_code"] == 3
    res = mend("run", "prog.py", "fail", cwd=project)
    assert res.returncode == 1
    assert "ValueError: boom from the program" in res.stderr
    assert 'File "prog.py", line' in res.stderr or "prog.py\", line" in res.stderr
    assert "runner.py" not in res.stderr and "runpy" not in res.stderr  # only the program's frames
    assert _data(project)["breaks"][0]["line"] == 7  # recorded before the failure


@pytest.mark.slow
def test_run_append_module_and_fast(project):
    pkg = project / "pkg"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "main.py").write_text((project / "prog.py").read_text())
    assert mend("run", "prog.py", cwd=project).returncode == 0
    res = mend("run", "--append", "--fast", "-m", "pkg.main", "x", cwd=project)
    assert res.returncode == 0, res.stderr
    assert "args ['x']" in res.stdout
    data = _data(project)
    assert len(data["runs"]) == 2 and data["runs"][1]["fast"] is True
    assert data["runs"][1]["argv"] == ["-m pkg.main", "x"]
    assert sorted((b["path"], b["line"]) for b in data["breaks"]) == [("pkg/main.py", 7), ("prog.py", 7)]


def test_run_missing_script_is_a_usage_error(tmp_path):
    res = mend("run", "nope.py", cwd=tmp_path)
    assert res.returncode == 2 and "no such file: nope.py" in res.stderr
    assert not (tmp_path / ".mend").exists()
    res = mend("run", cwd=tmp_path)
    assert res.returncode == 2 and "nothing to run" in res.stderr

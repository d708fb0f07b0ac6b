"""The distribution: a wheel built here, installed in a fresh virtual environment, runs `mend` (no network)."""

from __future__ import annotations

import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest
import tomllib

REPO = Path(__file__).resolve().parent.parent
DIST = "torch-mend"  # `mend` on the package registry is an unrelated project


def run(*cmd: str | Path, cwd: Path | None = None) -> str:
    proc = subprocess.run([str(c) for c in cmd], capture_output=True, text=True, cwd=cwd, timeout=600)
    assert proc.returncode == 0, f"{cmd}: {proc.stdout[-2000:]}{proc.stderr[-2000:]}"
    return proc.stdout


def test_the_distribution_name() -> None:
    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    assert project["name"] == DIST and project["scripts"]["mend"] == "mend.cli.app:main"
    readme = (REPO / "README.md").read_text()
    assert f'pip install "{DIST}[torch]"' in readme and 'pip install "mend' not in readme


@pytest.mark.slow
def test_wheel_installs_in_a_fresh_venv_and_runs(tmp_path: Path) -> None:
    """`pip wheel` (no build isolation, no index) then `pip install --no-deps` into a new venv whose
    dependencies come from the test's environment through a path entry; the `mend` there is the wheel's."""
    source = tmp_path / "source"  # a copy: building writes build/ and *.egg-info next to the sources
    shutil.copytree(REPO, source, ignore=shutil.ignore_patterns(
        ".git", ".venv", "build", "dist", "*.egg-info", "__pycache__", ".mend*", ".*_cache", ".hypothesis"))
    run(sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "--no-index",
        "-w", tmp_path / "dist", source)
    wheels = list((tmp_path / "dist").glob("*.whl"))
    assert [w.name.split("-")[0] for w in wheels] == ["torch_mend"]

    venv = tmp_path / "venv"
    run(sys.executable, "-m", "venv", "--without-pip", venv)
    python = venv / "bin" / "python"
    run(sys.executable, "-m", "pip", "--python", python, "install", "--no-deps", "--no-index", wheels[0])
    site = Path(run(python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])").strip())
    (site / "dependencies.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")  # typer, libcst, ...

    assert run(venv / "bin" / "mend", "--version").strip() == "mend 0.1.0"
    where = run(python, "-c", "import importlib.metadata as m, mend; from mend.analyzers.runtime import data; "
                              "data.schema(); print(mend.__file__); print(m.version('torch-mend'))", cwd=tmp_path).split()
    assert Path(where[0]).is_relative_to(venv) and where[1] == "0.1.0"
    proc = subprocess.run([venv / "bin" / "mend", "check", "--no-cache", "--isolated", "transformer_block.py"],
                          cwd=REPO / "examples", capture_output=True, text=True, timeout=300)
    assert proc.returncode == 1 and "MND102 [?]" in proc.stdout, proc.stdout + proc.stderr

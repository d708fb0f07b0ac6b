"""No command writes outside the paths it was given, nor through a link that leads out of them, unless the
user names that path: one test per command that writes (``fix --from-run`` is in
``tests/rewriter/test_from_run.py``, ``fix --verify`` in ``tests/rewriter/test_verify_imports.py``)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from mend.analyzers.runtime import data as rdata
from mend.cli.app import app

runner = CliRunner()

PRINTS = '''import torch


@torch.compile
def step(x: torch.Tensor) -> torch.Tensor:
    y = x.sin()
    print("step")
    return y
'''


def snapshot(root: Path) -> dict[str, bytes]:
    """Every file under ``root`` (links not followed) with its bytes."""
    out = {}
    for folder, dirs, names in os.walk(root):
        for name in names:
            p = Path(folder) / name
            out[str(p.relative_to(root))] = os.readlink(p).encode() if p.is_symlink() else p.read_bytes()
        out.update({str((Path(folder) / d).relative_to(root)) + "/": b"" for d in dirs})
    return out


def mend(*args: str, cwd: Path, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "mend.cli", *args], cwd=cwd, capture_output=True, text=True,
                          timeout=600, env={**os.environ, "PYTHONDONTWRITEBYTECODE": "1", **(env or {})})


@pytest.fixture
def outside(tmp_path: Path) -> Path:
    """A folder next to the project that no command is given: its bytes must never change."""
    folder = tmp_path / "outside"
    (folder / "dir").mkdir(parents=True)
    (folder / "victim.py").write_text(PRINTS)
    (folder / "dir" / "deep.py").write_text(PRINTS)
    return folder


def test_fix_leaves_files_reached_through_links_out_of_the_tree(tmp_path: Path, outside: Path) -> None:
    """``mend fix tree`` repairs the tree's own file and leaves the target of a file link that leads out of
    it (named in a note; a folder link is not followed); naming the link itself repairs its target."""
    tree = tmp_path / "tree"
    tree.mkdir()
    (tree / "own.py").write_text(PRINTS)
    (tree / "linked.py").symlink_to(outside / "victim.py")
    (tree / "linkdir").symlink_to(outside / "dir", target_is_directory=True)
    before = snapshot(outside)
    result = runner.invoke(app, ["fix", str(tree)])
    assert result.exit_code == 0, result.output
    assert "is_compiling" in (tree / "own.py").read_text()
    assert snapshot(outside) == before
    assert (f"note: {tree / 'linked.py'}: a link to {(outside / 'victim.py').resolve()}, outside the paths "
            "given; not fixed (name it to fix it)") in result.output
    named = runner.invoke(app, ["fix", str(tree / "linked.py")])
    assert named.exit_code == 0, named.output
    assert (tree / "linked.py").is_symlink() and "is_compiling" in (outside / "victim.py").read_text()


def test_check_does_not_write_its_cache_through_a_link(tmp_path: Path, outside: Path) -> None:
    """A ``.mend_cache`` link in the project (say, committed to a repository) leading elsewhere: the cache
    is not used and nothing is written there; a ``cache-dir`` in pyproject.toml that leads out of the
    project is a configuration error (exit 2); ``--cache-dir`` names a folder anywhere."""
    project = tmp_path / "project"
    project.mkdir()
    (project / "pyproject.toml").write_text("[tool.mend]\n")
    (project / "model.py").write_text(PRINTS)
    (project / ".mend_cache").symlink_to(outside, target_is_directory=True)
    before = snapshot(outside)
    res = mend("check", ".", cwd=project)
    assert res.returncode == 1, res.stdout + res.stderr
    assert "MND101" in res.stdout and "the result cache" in res.stderr and "is not used" in res.stderr
    assert snapshot(outside) == before
    (project / ".mend_cache").unlink()
    (project / "pyproject.toml").write_text(f'[tool.mend]\ncache-dir = "{outside}"\n')
    res = mend("check", ".", cwd=project)
    assert res.returncode == 2 and "cache-dir" in res.stderr and "outside" in res.stderr, res.stderr
    assert snapshot(outside) == before
    (project / "pyproject.toml").write_text("[tool.mend]\n")
    res = mend("check", "--cache-dir", str(outside / "cache"), ".", cwd=project)
    assert res.returncode == 1 and (outside / "cache" / "check").is_dir(), res.stderr


def test_run_does_not_write_its_data_file_through_a_link(tmp_path: Path, outside: Path) -> None:
    """``.mend`` is a link out of the working folder: ``mend run`` refuses before running the program
    (exit 2), and writes nothing there; ``pytest --mend`` likewise."""
    work = tmp_path / "work"
    work.mkdir()
    (work / ".mend").symlink_to(outside, target_is_directory=True)
    (work / "prog.py").write_text("open('ran', 'w').close()\n")
    (work / "test_x.py").write_text("def test_x():\n    pass\n")
    before = snapshot(outside)
    res = mend("run", "prog.py", cwd=work)
    assert res.returncode == 2, res.stdout + res.stderr
    assert f"{work / '.mend'} leads to {outside.resolve()}" in res.stderr and "--data-file" in res.stderr
    assert not (work / "ran").exists() and snapshot(outside) == before
    res = subprocess.run([sys.executable, "-m", "pytest", "--mend", "-p", "no:cacheprovider", "-q", "test_x.py"],
                         cwd=work, capture_output=True, text=True, timeout=600)
    assert res.returncode == 4 and "--mend-data-file" in res.stdout + res.stderr, res.stdout + res.stderr
    assert snapshot(outside) == before


def recorded(root: Path) -> rdata.RunData:
    return rdata.RunData(root=str(root), breaks=[rdata.BreakSite(
        path="model.py", line=7, function="step", gb_type="Failed to trace builtin operator",
        registry_id="GB0059", message="Dynamo does not know how to trace builtin operator `print`",
        source_line='print("step")')])


def test_report_and_gate_write_only_the_files_named(tmp_path: Path, outside: Path) -> None:
    """``report -o``, ``gate --update-baseline --baseline`` and ``check --output-file`` write the named file
    and nothing else (the static findings ``report`` matches do not write the result cache through the
    project's ``.mend_cache`` link either)."""
    project = tmp_path / "project"
    project.mkdir()
    (project / "model.py").write_text(PRINTS)
    (project / ".mend_cache").symlink_to(outside, target_is_directory=True)
    data_file = project / ".mend" / "run.json"
    rdata.save(recorded(project), data_file)
    before, outside_before = snapshot(project), snapshot(outside)
    for fmt in ("json", "html", "table"):
        res = mend("report", "--format", fmt, "-o", f"out/report.{fmt}", cwd=project)
        assert res.returncode == 0, res.stderr
    res = mend("gate", "--ignore-run-status", "--update-baseline", "--baseline", "out/baseline.json", cwd=project)
    assert res.returncode == 0, res.stdout + res.stderr
    res = mend("check", "--no-cache", "--output-file", "out/check.txt", "model.py", cwd=project)
    assert res.returncode == 1, res.stdout + res.stderr
    after = snapshot(project)
    assert {k for k in after if k not in before} == {
        "out/", "out/report.json", "out/report.html", "out/report.table", "out/baseline.json", "out/check.txt"}
    assert all(after[k] == v for k, v in before.items()) and snapshot(outside) == outside_before
    assert json.loads((project / "out" / "report.json").read_text())


TINY = '''import torch


@torch.compile
def step(x):
    print("step")
    return x + 1
'''


def test_repair_cache_never_writes_through_a_link_out_of_it(tmp_path: Path, outside: Path) -> None:
    """The cache folder's ``entries`` (and ``static``) are links elsewhere: ``warm`` caches nothing
    there, ``clear`` deletes nothing there."""
    site = tmp_path / "site"
    (site / "tinypkg").mkdir(parents=True)
    (site / "tinypkg" / "__init__.py").write_text(TINY)
    cache = tmp_path / "cache"
    cache.mkdir()
    (cache / "entries").symlink_to(outside, target_is_directory=True)
    (cache / "static").symlink_to(outside / "dir", target_is_directory=True)
    before = snapshot(outside)
    env = {"PYTHONPATH": str(site)}
    res = mend("repair-cache", "warm", "tinypkg", "--cache-dir", str(cache), cwd=tmp_path, env=env)
    assert res.returncode == 0, res.stdout + res.stderr
    assert "1 repaired" in res.stdout, res.stdout
    assert snapshot(outside) == before
    res = mend("repair-cache", "clear", "--cache-dir", str(cache), cwd=tmp_path, env=env)
    assert res.returncode == 0, res.stdout + res.stderr
    assert snapshot(outside) == before


HARNESS = '''import torch


def step(x):
    y = x.sin()
    print("step")
    return y


def harness():
    return step, (torch.randn(4),), {}
'''


@pytest.mark.slow
def test_bench_writes_only_its_named_outputs(tmp_path: Path) -> None:
    """``mend bench`` (repairing a copy itself) leaves the harness folder's bytes as they were and writes
    only the outputs it was given."""
    src = tmp_path / "src"
    src.mkdir()
    (src / "harness.py").write_text(HARNESS)
    before = snapshot(tmp_path)
    res = mend("bench", f"{src / 'harness.py'}:harness", "-b", "eager", "--device", "cpu", "--rounds", "1",
               "--calls", "1", "--warmup", "0", "--json", "out/bench.json", cwd=tmp_path)
    assert res.returncode == 0, res.stdout + res.stderr
    after = snapshot(tmp_path)
    assert {k for k in after if k not in before} == {"out/", "out/bench.json"}
    assert all(after[k] == v for k, v in before.items())

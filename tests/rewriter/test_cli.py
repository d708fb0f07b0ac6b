"""``mend fix`` end to end on copies of the examples (the static analyzer supplies the sites)."""

from __future__ import annotations

import os
import shutil
import signal
import stat
import subprocess
import sys
import time
from pathlib import Path

import pytest
from typer.testing import CliRunner

from mend.cli.app import app

runner = CliRunner()


@pytest.fixture
def examples_copy(tmp_path: Path, examples_dir: Path) -> Path:
    dest = tmp_path / "examples"
    shutil.copytree(examples_dir, dest, ignore=shutil.ignore_patterns("__pycache__"))
    return dest


def _snapshot(folder: Path) -> dict[str, str]:
    return {p.name: p.read_text() for p in sorted(folder.glob("*.py"))}


def test_diff_writes_nothing(examples_copy: Path) -> None:
    before = _snapshot(examples_copy)
    result = runner.invoke(app, ["fix", "--diff", str(examples_copy)])
    assert result.exit_code == 1, result.output
    assert "+        if not torch.compiler.is_compiling():" in result.output
    # the overflow guard computes torch.finfo(h.dtype) on every path under compile: an unsafe fix
    assert "MND201 not fixed: unsafe fix available with --unsafe-fixes" in result.output
    assert _snapshot(examples_copy) == before
    unsafe = runner.invoke(app, ["fix", "--diff", "--unsafe-fixes", str(examples_copy)])
    assert "+            h = _mend_where(_mend_cond0, torch.clamp(h" in unsafe.output
    assert _snapshot(examples_copy) == before


def test_fix_in_place_then_nothing_left_to_do(examples_copy: Path) -> None:
    target = examples_copy / "transformer_block.py"
    os.chmod(target, 0o640)
    result = runner.invoke(app, ["fix", "--unsafe-fixes", str(examples_copy)])
    assert "Fixed" in result.output, result.output
    text = target.read_text()
    assert "_mend_where(" in text and "logger.debug" in text
    assert stat.S_IMODE(os.stat(target).st_mode) == 0o640
    after = _snapshot(examples_copy)
    again = runner.invoke(app, ["fix", "--unsafe-fixes", str(examples_copy)])
    assert _snapshot(examples_copy) == after
    assert "Fixed 0 finding(s)" in again.output


def test_select_ignore_and_exit_non_zero_on_fix(examples_copy: Path) -> None:
    result = runner.invoke(app, ["fix", "--select", "MND102", "--exit-non-zero-on-fix", str(examples_copy)])
    assert result.exit_code == 1
    assert "MND102 fixed" in result.output and "MND201" not in result.output
    text = (examples_copy / "transformer_block.py").read_text()
    assert "torch.where" not in text and "is_compiling" in text
    result = runner.invoke(app, ["fix", "--ignore", "MND2,MND1", str(examples_copy / "transformer_block.py")])
    assert "torch.where" not in (examples_copy / "transformer_block.py").read_text()


def test_unsafe_fixes_and_summary(examples_copy: Path) -> None:
    result = runner.invoke(app, ["fix", "--diff", str(examples_copy)])
    assert "fixable with --unsafe-fixes" in result.output
    result = runner.invoke(app, ["fix", "--unsafe-fixes", str(examples_copy)])
    assert 'register_buffer("step"' in (examples_copy / "step_counter.py").read_text()
    assert "torch._assert_async" in (examples_copy / "validated_model.py").read_text()


def test_bad_input_is_a_clear_error(tmp_path: Path) -> None:
    result = runner.invoke(app, ["fix", str(tmp_path / "missing.py")])
    assert result.exit_code == 2
    assert "no such file" in result.output
    result = runner.invoke(app, ["fix", "--side-effects", "loud", str(tmp_path)])
    assert result.exit_code == 2


def test_side_effects_from_config(examples_copy: Path) -> None:
    (examples_copy / "pyproject.toml").write_text('[tool.mend]\nside-effects = "defer"\n')
    runner.invoke(app, ["fix", "--unsafe-fixes", "--select", "MND102", str(examples_copy)])
    assert "_mend_defer(logger.debug" in (examples_copy / "transformer_block.py").read_text()


MODEL = '''import torch


@torch.compile
def step{i}(x: torch.Tensor) -> torch.Tensor:
    y = x.sin()
    print("step", {i})
    if y.sum() > 0:
        y = torch.clamp(y, min=0.0)
    return y
'''


@pytest.mark.slow
def test_interrupt_leaves_every_file_old_or_new(tmp_path: Path) -> None:
    """Kill `mend fix` mid-run (SIGTERM, then SIGKILL): every file is byte-equal to old or new."""
    n = 150
    reference = tmp_path / "reference"
    reference.mkdir()
    for i in range(n):
        (reference / f"m{i:03d}.py").write_text(MODEL.format(i=i))
    old = {p.name: p.read_bytes() for p in reference.glob("*.py")}
    subprocess.run([sys.executable, "-m", "mend.cli", "fix", "-q", str(reference)], check=False,
                   capture_output=True, timeout=600)
    new = {p.name: p.read_bytes() for p in reference.glob("*.py")}
    assert all(new[k] != old[k] for k in old)
    for sig in (signal.SIGTERM, signal.SIGKILL):
        work = tmp_path / f"work_{sig.name}"
        work.mkdir()
        for name, data in old.items():
            (work / name).write_bytes(data)
        proc = subprocess.Popen([sys.executable, "-m", "mend.cli", "fix", "-q", str(work)],
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        deadline = time.time() + 300
        while time.time() < deadline:
            changed = sum((work / k).read_bytes() != old[k] for k in old)
            if changed >= 3 or proc.poll() is not None:
                break
            time.sleep(0.01)
        proc.send_signal(sig)
        proc.wait(timeout=60)
        states = [(work / k).read_bytes() for k in sorted(old)]
        for k, data in zip(sorted(old), states):
            assert data in (old[k], new[k]), k
        assert 0 < sum(d == new[k] for k, d in zip(sorted(old), states)) < n, "kill did not land mid-run"
        assert not list(work.glob(".*.mend-tmp")) or sig == signal.SIGKILL

"""mend bench's command line: bad input gives a clear message and exit code 2, and nothing is timed."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]


def mend(*args: str) -> subprocess.CompletedProcess:
    env = dict(os.environ, COLUMNS="200")
    return subprocess.run([sys.executable, "-m", "mend.cli", "bench", *args], capture_output=True, text=True,
                          cwd=REPO, env=env, timeout=300)


def test_help_lists_the_options():
    proc = mend("--help")
    assert proc.returncode == 0
    for opt in ("--fixed", "--backend", "--device", "--rounds", "--json", "--html", "--png", "--compare"):
        assert opt in proc.stdout


@pytest.mark.parametrize(
    "args, message",
    [
        (["examples/transformer_block.py"], "must be PATH.py:FUNCTION"),
        (["examples/missing.py:harness"], "does not exist"),
        (["examples/transformer_block.py:harness", "--device", "tpu"], "--device must be cpu, cuda or auto"),
        pytest.param(["examples/transformer_block.py:harness", "-b", "no-such-backend"],
                     "unknown backend no-such-backend", marks=pytest.mark.slow),  # asks torch._dynamo
        (["examples/transformer_block.py:harness", "--fixed", "examples/nowhere"], "not a folder"),
        (["examples/transformer_block.py:harness", "--dtype", "int8"], "--dtype must be"),
        pytest.param(["examples/transformer_block.py:harness", "--device", "cuda"], "torch sees no CUDA device",
                     marks=[pytest.mark.slow, pytest.mark.skipif("__import__('torch').cuda.is_available()")]),
    ],
)
def test_bad_options_are_refused(args, message):
    proc = mend(*args, "--no-repair")
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert message in " ".join(proc.stderr.split())


def test_compare_with_a_file_that_is_not_a_result(tmp_path):
    bad = tmp_path / "old.json"
    bad.write_text(json.dumps({"version": 1}))
    proc = mend("examples/transformer_block.py:harness", "--compare", str(bad))
    assert proc.returncode == 2 and "not a mend bench result" in proc.stderr


@pytest.mark.slow  # each starts a worker process that imports torch
@pytest.mark.parametrize(
    "body, message",
    [
        ("import torch\ndef harness():\n    return torch.nn.Linear(2, 2), (torch.randn(1, 2),)\n",
         "must return (model_or_fn, args, kwargs); it returned a tuple of length 2"),
        ("def other():\n    pass\n", "has no function 'harness'; callables defined there: other"),
        ("def harness():\n    raise RuntimeError('no weights here')\n", "raised RuntimeError: no weights here"),
    ],
)
def test_harness_errors_are_clear(tmp_path, body, message):
    h = tmp_path / "h.py"
    h.write_text(body)
    proc = mend(f"{h}:harness", "-b", "eager", "--no-repair", "--device", "cpu")
    assert proc.returncode == 2, proc.stdout + proc.stderr
    text = " ".join(proc.stderr.split())
    assert "the harness cannot be loaded" in text and message in text
    assert not (tmp_path / "__pycache__").exists()


@pytest.mark.slow
def test_fixed_folder_that_shadows_nothing_is_refused(tmp_path):
    (tmp_path / "unrelated.py").write_text("X = 1\n")
    proc = mend("examples/validated_model.py:harness", "-b", "eager", "--fixed", str(tmp_path), "--device", "cpu")
    assert proc.returncode == 2
    assert "imported nothing from that folder" in " ".join(proc.stderr.split())


MODEL = '''import torch


def step(x):
    y = x.sin()
    return y[y > 0].sum()
'''
# a harness that puts its own folder first on sys.path: the copy in --fixed DIR then imports the original model
PINNED = '''import sys

sys.path.insert(0, {folder!r})

import torch  # noqa: E402

import model  # noqa: E402


def harness():
    return model.step, (torch.randn(8),), {{}}
'''


@pytest.mark.slow
def test_fixed_folder_whose_modules_were_not_the_ones_loaded_is_refused(tmp_path):
    """The repaired harness copy imports the original ``model`` although --fixed DIR holds a repaired
    ``model.py``: the 'repaired' variant would time the original code, so bench refuses (exit 2) and names
    the module and the file it came from."""
    orig, fixed = tmp_path / "orig", tmp_path / "fixed"
    for folder in (orig, fixed):
        folder.mkdir()
        (folder / "harness.py").write_text(PINNED.format(folder=str(orig)))
    (orig / "model.py").write_text(MODEL)
    (fixed / "model.py").write_text(MODEL.replace("y[y > 0].sum()", "torch.where(y > 0, y, 0).sum()"))
    proc = mend(f"{orig / 'harness.py'}:harness", "-b", "eager", "--fixed", str(fixed), "--device", "cpu",
                "--rounds", "1", "--calls", "1", "--warmup", "0")
    assert proc.returncode == 2, proc.stdout + proc.stderr
    text = " ".join(proc.stderr.split())
    assert f"the 'repaired' variant imported model from {(orig / 'model.py').resolve()}, not the repaired copy" in text


@pytest.mark.slow
def test_original_variant_that_imports_the_repaired_folder_is_refused(tmp_path):
    """An original run that imports its module from --fixed DIR would compare the repair with itself."""
    orig, fixed = tmp_path / "orig", tmp_path / "fixed"
    orig.mkdir()
    fixed.mkdir()
    (orig / "harness.py").write_text(PINNED.format(folder=str(fixed)))
    (fixed / "model.py").write_text(MODEL)
    proc = mend(f"{orig / 'harness.py'}:harness", "-b", "eager", "--fixed", str(fixed), "--device", "cpu",
                "--rounds", "1", "--calls", "1", "--warmup", "0")
    assert proc.returncode == 2, proc.stdout + proc.stderr
    text = " ".join(proc.stderr.split())
    assert f"the original variant imported model from the repaired folder {fixed.resolve()}" in text

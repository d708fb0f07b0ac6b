"""MND301/MND302 keep the 0-d tensor of ``.item()``/``float(t)``: the kept tensor is detached, because the Python
number was a constant to autograd (found by the property tests: ``x * float(x.sum())`` kept as
``x * x.sum()`` doubled ``x``'s gradient)."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest
from typer.testing import CliRunner

from mend.cli.app import app

torch = pytest.importorskip("torch")

MODEL = """\
import torch
from torch import nn


class M(nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(4, 4)

    def forward(self, x: torch.Tensor, y: torch.Tensor):
        x = self.lin(x)
        y = y * float(y.sum() + 1)
        x = x * float(x.sum())
        s = x.abs().max().item()
        n = (x * 2).sum().item()
        x = x / s + max(n, 1.0)
        return x + y
"""


def _load(path: Path, name: str):
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _grads(module) -> list:
    torch.manual_seed(0)
    model = module.M()
    x = torch.randn(3, 4, requires_grad=True)
    y = torch.randn(3, 4, requires_grad=True)
    out = model(x, y)
    out.sum().backward()
    return [out.detach(), x.grad, y.grad, *(p.grad for p in model.parameters())]


def test_kept_numbers_stay_constants_to_autograd(tmp_path: Path) -> None:
    (tmp_path / "original").mkdir()
    (tmp_path / "repaired").mkdir()
    (tmp_path / "original" / "m.py").write_text(MODEL)
    (tmp_path / "repaired" / "m.py").write_text(MODEL)
    result = CliRunner().invoke(app, ["fix", "--unsafe-fixes", "--no-cache", "--isolated", str(tmp_path / "repaired")])
    text = (tmp_path / "repaired" / "m.py").read_text()
    assert "Fixed 4 finding(s)" in result.output, result.output
    assert "float(" not in text and ".item()" not in text and text.count(".detach()") == 4, text
    before = _grads(_load(tmp_path / "original" / "m.py", "mend_keep_original"))
    after = _grads(_load(tmp_path / "repaired" / "m.py", "mend_keep_repaired"))
    assert all(torch.equal(a, b) for a, b in zip(before, after))

"""A repair is kept only if it removes its finding: a plan whose site the re-checked text still has is taken
back, the file keeps those bytes, and ``mend fix`` says so once, at the user's line, with the reason.

The shape is Bamba's (transformers): the all-ones test of a mask is a repair of its own (``mask_to_none``), but
the same condition also reads ``cache_position[0] > 0`` of a tensor mend has no repair for here, so the repaired
``if`` still branches on a tensor (confirmed against Dynamo below). Where the file builds ``cache_position`` from
Python numbers (Bamba itself), another repair keeps a Python copy of them and the two together remove the break:
that is not taken back (the re-check reads ``not torch.compiler.is_compiling() and ...`` as skipped under
compile)."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest
from typer.testing import CliRunner

from mend.cli.app import app

runner = CliRunner()

PARTIAL = '''import torch
from torch import nn


class Mixer(nn.Module):
    def forward(self, hidden_states, cache_position: torch.Tensor, attention_mask=None):
        mamba_mask = attention_mask
        if cache_position[0] > 0 or (attention_mask is not None and torch.all(attention_mask == 1)):
            mamba_mask = None
        if mamba_mask is not None:
            hidden_states = hidden_states * mamba_mask[..., None]
        return hidden_states
'''

WHOLE = PARTIAL.replace("cache_position[0] > 0 or ", "")
# what mend wrote before the take-back: the all-ones test skipped under compile, the other operand left
APPLIED = PARTIAL.replace("torch.all(attention_mask == 1)", "(not torch.compiler.is_compiling() and "
                                                            "torch.all(attention_mask == 1))")


def _fix(tmp_path: Path, text: str, *extra: str):
    path = tmp_path / "mixer.py"
    path.write_text(text)
    result = runner.invoke(app, ["fix", "--unsafe-fixes", "--no-cache", *extra, str(path)])
    return path, result


def test_a_repair_that_leaves_its_finding_is_taken_back(tmp_path: Path) -> None:
    path, result = _fix(tmp_path, PARTIAL)
    assert result.exit_code == 1, result.output  # a finding is left
    assert path.read_text() == PARTIAL  # byte for byte: nothing applied
    lines = [ln for ln in result.output.splitlines() if "mixer.py:8:" in ln]
    assert len(lines) == 1 and "leaves the finding in place" in lines[0], result.output
    check = runner.invoke(app, ["check", str(path)])
    assert "[*]" not in check.output and "MND201" in check.output  # check promises no fix for it


def test_the_same_repair_is_kept_where_it_removes_the_finding(tmp_path: Path) -> None:
    path, result = _fix(tmp_path, WHOLE)
    assert result.exit_code == 0, result.output
    assert "torch.compiler.is_compiling()" in path.read_text()
    assert "MND201" not in runner.invoke(app, ["check", "--no-cache", str(path)]).output


def _break_lines(text: str, tmp_path: Path) -> list[int]:
    torch = pytest.importorskip("torch")
    path = tmp_path / f"m{abs(hash(text))}.py"
    path.write_text(text)
    spec = importlib.util.spec_from_file_location(path.stem, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    torch._dynamo.reset()
    mixer = module.Mixer()
    explained = torch._dynamo.explain(mixer)(torch.ones(2, 3, 4), torch.arange(3), torch.ones(2, 3))
    return sorted({frame.lineno for b in explained.break_reasons for frame in b.user_stack[-1:]
                   if frame.filename == str(path)})


def test_dynamo_breaks_at_the_site_before_and_after_the_repair_taken_back(tmp_path: Path) -> None:
    assert _break_lines(PARTIAL, tmp_path) == [8]
    assert _break_lines(APPLIED, tmp_path) == [8]  # the repair mend no longer applies left the break
    assert _break_lines(WHOLE, tmp_path) == [8]  # the all-ones test alone breaks too: what the kept repair removes

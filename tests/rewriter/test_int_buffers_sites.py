"""The integer-buffer fold (MND310/MND311) takes a size site only where the size itself comes from the buffers:
a slice bound counted from tensor data in the same ``forward`` is another repair's (found by the property
tests: the fold claimed it fixed, and a re-check still found it)."""

from __future__ import annotations

from pathlib import Path

from typer.testing import CliRunner

from mend.cli.app import app

MODEL = """\
import torch
from torch import nn


class M(nn.Module):
    def __init__(self):
        super().__init__()
        kernel_size = torch.tensor(3, dtype=torch.int64)
        stride = torch.tensor(1, dtype=torch.int64)
        self.register_buffer("kernel_size", kernel_size, persistent=False)
        self.register_buffer("stride", stride, persistent=False)
        self.register_buffer("padding_total", kernel_size - stride, persistent=False)

    def forward(self, x: torch.Tensor):
        k = torch.nn.functional.pad(x, (self.padding_total // 2, 0))
        x = x * k.shape[-1]
        n = (x > 0).sum()
        tail = x.reshape(-1)[n // 2:]
        return x + tail.sum()
"""


def test_a_bound_counted_from_data_is_not_claimed_by_the_fold(tmp_path: Path) -> None:
    (tmp_path / "m.py").write_text(MODEL)
    runner = CliRunner()
    fixed = runner.invoke(app, ["fix", "--unsafe-fixes", "--no-cache", "--isolated", str(tmp_path)])
    lines = {ln.split(": ", 1)[0].rsplit(":", 2)[-2]: ln for ln in fixed.output.splitlines() if " MND31" in ln}
    assert "fold the module's integer buffers" in lines["15"], fixed.output
    assert "fold the module's integer buffers" not in lines["18"], fixed.output
    again = runner.invoke(app, ["check", "--no-cache", "--isolated", str(tmp_path)])
    assert again.exit_code == 0, again.output

"""Code mend writes reads ``torch``: it must be bound where that code runs (transformers 5 files import torch
only for type checking, or inside functions)."""

from __future__ import annotations

import pytest

from mend.rewriter import FixOptions, fix_source
from tests.rewriter.conftest import diag

_SRC = '''import logging
from typing import TYPE_CHECKING

from torch import nn

if TYPE_CHECKING:
    import torch

logger = logging.getLogger(__name__)


class M(nn.Module):
    def forward(self, x):
        logger.warning("hello")
{late}        return x * 2
'''


def test_an_import_for_type_checking_only_is_not_taken_for_a_runtime_one() -> None:
    torch = pytest.importorskip("torch")
    src = _SRC.format(late="")
    res = fix_source(src, "t.py", [diag("MND102", 14, 9)], FixOptions())
    assert res.error is None and len(res.applied) == 1
    assert "\nimport torch\n" in res.fixed.split("if TYPE_CHECKING:")[0]  # bound where the module runs
    ns: dict = {"__name__": "t"}
    exec(compile(res.fixed, "t.py", "exec"), ns)  # the helpers' decorators read torch at import
    assert torch.equal(ns["M"]()(torch.ones(2)), torch.full((2,), 2.0))


def test_a_repair_that_would_read_torch_before_the_functions_own_import_leaves_the_file_unchanged() -> None:
    src = _SRC.format(late="        import torch\n        x = torch.relu(x)\n")
    res = fix_source(src, "t.py", [diag("MND102", 14, 9)], FixOptions())
    assert res.fixed == src and res.applied == []
    assert "`torch` would be read in forward() before the function binds it itself" in res.error


@pytest.mark.parametrize("top", [
    "import torch\nfrom torch import nn\n\n# --- models ---\n\n",
    "# --- models ---\n\nimport torch\nfrom torch import nn\n\n\n",
    '"""Models."""\n# --- models ---\n\nfrom torch import nn\nimport torch\n\n',
    "import torch\nfrom torch import nn\n\n# ----------\n# models\n# ----------\n\n",
])
def test_an_added_import_keeps_the_lines_around_a_section_comment(top: str) -> None:
    """The helper's import goes after the file's imports; every line of the original stays, in order (a blank
    line after a section comment included)."""
    src = top + "class M(nn.Module):\n    def forward(self, x: torch.Tensor):\n        peak = x.max().item()\n" \
                "        return torch.full_like(x, peak) - x\n"
    line = src.splitlines().index("        peak = x.max().item()") + 1
    res = fix_source(src, "t.py", [diag("MND301", line, 16)], FixOptions(unsafe=True))
    assert len(res.applied) == 1, res.remaining
    added = [ln for ln in res.fixed.splitlines() if ln not in src.splitlines()]
    assert added == ["from _mend import captured as _mend_captured",
                     "        peak = _mend_captured(lambda: x.max().item())"], added
    kept = [ln for ln in src.splitlines() if "x.max().item()" not in ln]
    assert [ln for ln in res.fixed.splitlines() if ln not in added] == kept

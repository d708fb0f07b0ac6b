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

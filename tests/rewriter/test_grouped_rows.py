"""MND304 repaired where rows are routed by runs of equal ids to modules (rewriter/fixes/grouped_rows.py)."""

from __future__ import annotations

import pytest

from mend.rewriter import FixOptions, fix_source
from tests.rewriter.conftest import diag, helpers, load_fixture

_SRC = '''
import torch
from torch import nn


class M(nn.Module):
    def forward(self, h, ids):
        ids, counts = torch.unique_consecutive(ids, return_counts=True)
        chunks = torch.split(h, counts.tolist(), 0)
        outs = []
        for i, (k, chunk) in enumerate(zip(ids, chunks)):
            name = list(self.adapters.keys())[int(k.item())]
            {append}
        h = torch.cat(outs, 0){tail}
        return h
'''


def _fix(append: str = "outs.append(self.adapters[name](chunk))", tail: str = "", unsafe: bool = True):
    src = _SRC.format(append=append, tail=tail)
    return src, fix_source(src, "t.py", [diag("MND304", 8, 23)], FixOptions(unsafe=unsafe))


def test_every_module_runs_on_every_row_under_compile_and_eager_keeps_the_routing() -> None:
    src, res = _fix()
    assert ("        if not torch.compiler.is_compiling():\n"
            "            ids, counts = torch.unique_consecutive(ids, return_counts=True)\n"
            "        else:\n"
            "            ids, counts = ids, None\n") in res.fixed
    assert "            h = _mend_grouped_rows(ids, list(self.adapters.values()), h)\n" in res.fixed
    assert res.applied[0].applicability == "unsafe"
    assert _fix(unsafe=False)[1].remaining[0].unsafe_available
    assert fix_source(res.fixed, "t.py", [], FixOptions(unsafe=True)).fixed == res.fixed


@pytest.mark.parametrize(("append", "tail", "reason"), [
    ("outs.append(self.adapters[name](chunk) * 2)", "", "the loop's second statement is not"),
    ("outs.append(self.adapters[name](chunk))", "\n        n = counts.sum()", "`counts` is read after the routing"),
    ("outs.append(self.adapters[name](chunk))", "\n        k = ids[0]", "`ids` is read after the routing"),
])
def test_declined_with_the_reason(append: str, tail: str, reason: str) -> None:
    src, res = _fix(append, tail)
    assert "_mend_grouped_rows" not in res.fixed
    assert any(reason in r.reason for r in res.remaining), [r.reason for r in res.remaining]


def test_the_helper_takes_each_rows_own_modules_output() -> None:
    torch = pytest.importorskip("torch")
    ns = helpers("_mend_grouped_rows")
    modules = [torch.nn.Linear(4, 4) for _ in range(3)]
    x, ids = torch.randn(5, 2, 4), torch.tensor([2, 2, 0, 1, 2])
    out = ns["_mend_grouped_rows"](ids, modules, x)
    for r in range(5):
        torch.testing.assert_close(out[r], modules[int(ids[r])](x[r]))


def test_eager_is_the_original_bitwise() -> None:
    torch = pytest.importorskip("torch")
    before, after = load_fixture("grouped_rows", "in"), load_fixture("grouped_rows", "out")
    for x, ids in [(torch.randn(5, 3, 8), torch.tensor([0, 0, 2, 1, 1])), (torch.randn(2, 1, 8), torch.tensor([2, 0]))]:
        assert torch.equal(before["f"](x, ids), after["f"](x, ids))

"""MND305 repaired where an expert's rows are stored through a boolean mask (rewriter/fixes/moe.py)."""

from __future__ import annotations

import pytest

from mend.rewriter import FixOptions, fix_source
from tests.rewriter.conftest import diag, helpers, load_fixture

torch = pytest.importorskip("torch")

_SRC = '''
import torch


def route(out, x, choice, experts):
    for idx, expert in enumerate(experts):
        mask = choice == idx
        {store}
    return out
'''


def _fix(store: str, unsafe: bool = True):
    src = _SRC.format(store=store)
    line = src.splitlines().index(f"        {store}") + 1
    col = 9 + store.index("x[")
    return src, fix_source(src, "t.py", [diag("MND305", line, col)], FixOptions(unsafe=unsafe))


def test_the_store_is_kept_in_eager_and_stored_through_torch_where_under_compile() -> None:
    src, res = _fix("out[mask] = expert(x[mask]).to(out.dtype)")
    assert ("        if not torch.compiler.is_compiling():\n"
            "            out[mask] = expert(x[mask]).to(out.dtype)\n"
            "        else:\n"
            "            _mend_routed_store(out, mask, expert(x).to(out.dtype))\n") in res.fixed
    assert res.applied[0].applicability == "unsafe"
    assert _fix("out[mask] = expert(x[mask])", unsafe=False)[1].remaining[0].unsafe_available
    assert fix_source(res.fixed, "t.py", [], FixOptions(unsafe=True)).fixed == res.fixed


@pytest.mark.parametrize(("store", "reason"), [
    ("out[mask] = torch.sort(x[mask], 0).values", None),  # not a call of the masked rows alone
    ("out[mask] = torch.relu(x[mask])", "is a function, not a module applied row by row"),
    ("out[mask] = sorted(x[mask])", "is a function, not a module applied row by row"),
    ("out[mask] = expert(x[mask], x[mask])", None),
    ("out[~mask] = expert(x[mask])", None),  # another mask
])
def test_other_stores_are_not_taken_for_routed_ones(store: str, reason: str | None) -> None:
    _, res = _fix(store)
    assert "_mend_routed_store" not in res.fixed
    if reason is not None:
        assert reason in res.remaining[0].reason, res.remaining[0].reason


def test_the_helper_stores_the_masked_rows_and_keeps_the_others() -> None:
    store = helpers("_mend_routed_store")["_mend_routed_store"]
    t, rows = torch.randn(2, 5, 3), torch.randn(2, 5, 3)
    rows[0, 1] = float("nan")  # not selected: must not leak
    mask = torch.tensor([[True, False, True, False, False], [False, False, True, True, True]])
    expected = t.clone()
    expected[mask] = rows[mask]
    store(t, mask, rows)
    assert torch.equal(t, expected)
    index, rows2 = torch.tensor([1, 3]), torch.randn(5, 3)  # an index tensor stores as before
    t2 = torch.randn(5, 3)
    expected2 = t2.clone()
    expected2[index] = rows2[index]
    store(t2, index, rows2)
    assert torch.equal(t2, expected2)


def test_fixture_eager_results_are_bitwise_equal() -> None:
    before, after = load_fixture("routed_store", "in")["f"], load_fixture("routed_store", "out")["f"]
    torch.manual_seed(5)
    for shape in [(2, 6, 8), (1, 1, 8), (3, 9, 8)]:
        x = torch.randn(*shape)
        a, b = before(x), after(x)
        assert a.dtype == b.dtype and torch.equal(a, b)

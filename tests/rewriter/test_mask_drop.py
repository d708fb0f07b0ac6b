"""MND201 repaired where a branch drops a mask of all ones (rewriter/fixes/mask_drop.py)."""

from __future__ import annotations

import pytest

from mend.rewriter import FixOptions, fix_source
from tests.rewriter.conftest import diag, load_fixture

_SRC = '''
import torch


def forward(x, attention_mask):
    mamba_mask = attention_mask
    if {test}:
        {target} = None
    return x, mamba_mask, attention_mask
'''


def _fix(test: str, target: str = "attention_mask", unsafe: bool = True):
    src = _SRC.format(test=test, target=target)
    return src, fix_source(src, "t.py", [diag("MND201", 7, 5)], FixOptions(unsafe=unsafe))


@pytest.mark.parametrize(("test", "guarded"), [
    ("not torch.any(~attention_mask)", "not torch.compiler.is_compiling() and not torch.any(~attention_mask)"),
    ("torch.all(attention_mask == 1)", "not torch.compiler.is_compiling() and torch.all(attention_mask == 1)"),
    ("attention_mask.all()", "not torch.compiler.is_compiling() and attention_mask.all()"),
    ("not (attention_mask == 0).any()", "not torch.compiler.is_compiling() and not (attention_mask == 0).any()"),
    ("x.shape[0] > 1 or (attention_mask is not None and attention_mask.bool().all())",
     "x.shape[0] > 1 or (attention_mask is not None and (not torch.compiler.is_compiling() and "
     "attention_mask.bool().all()))"),
])
def test_the_all_ones_test_is_false_under_compile(test: str, guarded: str) -> None:
    src, res = _fix(test)
    assert res.fixed == src.replace(test, guarded)
    assert res.applied[0].applicability == "unsafe"
    assert fix_source(res.fixed, "t.py", [diag("MND201", 7, 5)], FixOptions(unsafe=True)).fixed == res.fixed


def test_a_copy_made_just_before_is_dropped_too() -> None:
    _, res = _fix("torch.all(attention_mask == 1)", target="mamba_mask")
    assert "(not torch.compiler.is_compiling() and" not in res.fixed  # the whole condition: no parentheses
    assert "if not torch.compiler.is_compiling() and torch.all(attention_mask == 1):" in res.fixed


def test_a_copy_of_an_older_mask_is_not_taken_for_the_tested_one() -> None:
    src = _SRC.format(test="torch.all(attention_mask == 1)", target="mamba_mask").replace(
        "    mamba_mask = attention_mask\n", "    mamba_mask = attention_mask\n    attention_mask = attention_mask[:, 1:]\n")
    res = fix_source(src, "t.py", [diag("MND201", 8, 5)], FixOptions(unsafe=True))
    assert res.fixed == src
    assert "is not `attention_mask` nor a copy" in res.remaining[0].reason, res.remaining[0].reason


def test_without_unsafe_fixes_nothing_changes() -> None:
    src, res = _fix("torch.all(attention_mask == 1)", unsafe=False)
    assert res.fixed == src and res.remaining[0].unsafe_available


@pytest.mark.parametrize(("test", "target", "reason"), [
    ("torch.all(x == 1)", "x", "`x` is not named as a mask"),
    ("torch.all(attention_mask == 1)", "x", "`x`, set to None, is not `attention_mask` nor a copy"),
    ("torch.all(attention_mask == 1) and torch.all(mamba_mask == 1)", "attention_mask",
     "more than one mask"),
])
def test_declined_with_the_reason(test: str, target: str, reason: str) -> None:
    src, res = _fix(test, target=target)
    assert res.fixed == src
    assert reason in res.remaining[0].reason, res.remaining[0].reason


@pytest.mark.parametrize("test", [
    "not torch.all(attention_mask == 1)",  # a mask with a zero: not the fast path
    "not (x.sum() > 0 or torch.all(attention_mask == 1))",  # under `not`: forcing it false widens the branch
    "torch.any(attention_mask == 1)",
    "torch.all(attention_mask == 2)",
])
def test_other_tests_are_not_taken_for_all_ones(test: str) -> None:
    _, res = _fix(test)
    assert "is_compiling" not in res.fixed


def test_eager_is_the_original_bitwise() -> None:
    """The repaired fixture in eager: the same tensors, bit for bit, for a mask of ones and one with zeros."""
    torch = pytest.importorskip("torch")
    calls = [(torch.randn(2, 5, 8), torch.ones(2, 5, dtype=torch.bool)),
             (torch.randn(2, 5, 8), torch.tensor([[1, 1, 1, 0, 0], [1, 1, 1, 1, 1]], dtype=torch.bool))]
    before, after = load_fixture("mask_drop", "in"), load_fixture("mask_drop", "out")
    for args in calls:
        a, b = before["f"](*args), after["f"](*args)
        assert torch.equal(a, b)

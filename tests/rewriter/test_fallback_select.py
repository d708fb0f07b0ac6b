"""MND201 repaired where a data-dependent test returns another implementation's result early
(rewriter/fixes/fallback_select.py)."""

from __future__ import annotations

import textwrap

import pytest

from mend.rewriter import FixOptions, fix_source
from tests.rewriter.conftest import diag, load_fixture

_SRC = '''
import torch


class M(Base):
    def forward(self, x: torch.Tensor, mask: torch.Tensor | None = None):
        if mask is not None and (mask <= -1e4).all():
{body}
        y = self.proj(x)
{rest}
        return y * 2, None
'''


def _fix(body: str = "            return super().forward(x, mask)", rest: str = "", unsafe: bool = True):
    src = _SRC.format(body=body, rest=rest)
    return src, fix_source(src, "t.py", [diag("MND201", 7, 9)], FixOptions(unsafe=unsafe))


def test_under_compile_both_run_and_the_final_return_selects() -> None:
    src, res = _fix()
    assert res.applied[0].applicability == "unsafe", res.remaining
    assert textwrap.indent(textwrap.dedent('''
        _mend_taken0 = None
        if not torch.compiler.is_compiling() or torch.is_grad_enabled():
            if mask is not None and (mask <= -1e4).all():
                return super().forward(x, mask)
        elif mask is not None:
            _mend_taken0 = (mask <= -1e4).all()
            _mend_fallback0 = super().forward(x, mask)
        y = self.proj(x)

        if _mend_taken0 is not None:
            return _mend_where(_mend_taken0, _mend_fallback0, (y * 2, None))
        return y * 2, None
    ''').strip("\n"), "        ") in res.fixed, res.fixed
    again = fix_source(res.fixed, "t.py", [diag("MND201", res.fixed.splitlines().index(
        "            if mask is not None and (mask <= -1e4).all():") + 1, 13)], FixOptions(unsafe=True))
    assert again.fixed == res.fixed  # fixing twice equals fixing once


def test_a_branch_returning_a_submodule_call_selects_under_compile() -> None:
    """``if x.sum() > 0: return self.proj(x)`` then ``return x``: no chain repair takes a submodule call
    that returns (torch.cond takes only assignments); the fallback's selection does."""
    src = textwrap.dedent('''
        import torch
        class M(torch.nn.Module):
            def forward(self, x: torch.Tensor):
                if x.sum() > 0:
                    return self.proj(x)
                return x
    ''')
    res = fix_source(src, "t.py", [diag("MND201", 5, 9)], FixOptions(unsafe=True))
    assert res.applied and res.applied[0].applicability == "unsafe"
    assert "    else:\n            _mend_taken0 = x.sum() > 0\n            _mend_fallback0 = self.proj(x)\n" in res.fixed
    assert "            return _mend_where(_mend_taken0, _mend_fallback0, x)\n        return x\n" in res.fixed


def test_a_test_in_parentheses_over_lines_keeps_its_static_prefix() -> None:
    """musicgen's shape: the whole test in parentheses over several lines, the mask not annotated."""
    src = textwrap.dedent('''
        import torch
        class M(Base):
            def forward(self, x, mask=None):
                if (
                    mask is not None
                    and (mask.mean(dim=[1, 2, 3]) <= torch.finfo(mask.dtype).min).any()
                ):
                    return super().forward(x, mask=mask)
                return self.proj(x), None
    ''')
    res = fix_source(src, "t.py", [diag("MND201", 5, 9)], FixOptions(unsafe=True))
    assert res.applied, res.remaining
    assert "        elif mask is not None:\n            _mend_taken0 = (mask.mean(dim=[1, 2, 3]) <= " in res.fixed


def test_reports_before_the_return_stay_in_the_original() -> None:
    body = '            logger.warning_once("falling back")\n            return super().forward(x, mask)'
    _, res = _fix(body=body)
    assert res.applied and '                logger.warning_once("falling back")\n' in res.fixed


@pytest.mark.parametrize(("body", "rest", "reason"), [
    ("            z = x + 1\n            return super().forward(z, mask)", "", None),
    ("            return super().forward(x, mask)", "        if x.shape[0] == 1:\n            return y, None",
     "returns or yields before its last statement"),
])
def test_declined(body: str, rest: str, reason: str | None) -> None:
    src, res = _fix(body=body, rest=rest)
    assert res.fixed == src and not res.applied
    if reason is not None:
        assert reason in res.remaining[0].reason, res.remaining[0].reason


def test_without_unsafe_fixes_nothing_changes() -> None:
    src, res = _fix(unsafe=False)
    assert res.fixed == src and res.remaining[0].unsafe_available


torch = pytest.importorskip("torch")


def _masks():
    from tests.rewriter.test_runtime import _key_mask

    return [_key_mask(2, 5, ()), _key_mask(2, 5, (1,)), _key_mask(2, 5, (0, 1)), None]


def _run(ns, compiled: bool, grad: bool):
    torch._dynamo.reset()
    graphs = []

    def backend(gm, example_inputs):
        graphs.append(gm)
        return gm.forward

    module = ns["attention"]
    call = torch.compile(module, backend=backend) if compiled else module
    masks = _masks()
    torch.manual_seed(1)
    outs = []
    with torch.set_grad_enabled(grad):
        for mask in masks:
            out, weights, (key, value) = call(torch.randn(2, 5, 8), mask)
            outs.append((out, weights, key, value))
            if mask is not None and len(outs) == 2:
                first = len(graphs)
    return outs, first


def _bitwise(a, b) -> None:
    for x, y in zip(a, b, strict=True):
        for u, v in zip(x, y, strict=True):
            assert (u is None and v is None) or torch.equal(u, v)


@pytest.mark.parametrize("grad", [False, True])
def test_eager_is_unchanged_and_compiled_gives_eager_bits(grad: bool) -> None:
    """Eager: the repaired module computes the original's bits. Compiled with gradients off: one graph for
    the masks the fast path takes and the ones it falls back for, each output the original's bits (the
    selection picks whole results); with gradients on the original branch runs (graph breaks), same bits."""
    before, after = load_fixture("fallback_select", "in"), load_fixture("fallback_select", "out")
    eager, _ = _run(before, compiled=False, grad=grad)
    _bitwise(eager, _run(after, compiled=False, grad=grad)[0])
    compiled, graphs = _run(after, compiled=True, grad=grad)
    _bitwise(eager, compiled)
    assert graphs == (1 if not grad else 3)


def test_mend_where_selects_through_tuples_and_none() -> None:
    from tests.rewriter.conftest import helpers

    ns = helpers("_mend_where")
    where = ns["_mend_where"]
    a, b = torch.ones(2), torch.zeros(2)
    out = where(torch.tensor(True), (a, None, [a, a]), (b, None, [b, b]))
    assert type(out) is tuple and out[1] is None and type(out[2]) is list
    assert torch.equal(out[0], a) and torch.equal(out[2][1], a)
    assert torch.equal(where(torch.tensor([False]), (a,), (b,))[0], b)
    assert where(torch.tensor(False), (a, 1), (b, 2))[1] == 2  # not tensors: the original selection
    with pytest.raises(RuntimeError):  # a many-element condition: Python's truth, as in the original
        where(torch.tensor([True, False]), (a,), (b,))


def test_a_test_of_several_tensor_parts_is_one_tensor_condition() -> None:
    """The static prefix stays a Python test; the tensor parts after it are one bool tensor."""
    src, res = _fix()
    src = src.replace("if mask is not None and (mask <= -1e4).all():",
                      "if mask is not None and (mask <= -1e4).all() and x.sum() > 0:")
    res = fix_source(src, "t.py", [diag("MND201", 7, 9)], FixOptions(unsafe=True))
    assert "        elif mask is not None:\n            _mend_taken0 = torch.logical_and(" in res.fixed, res.fixed

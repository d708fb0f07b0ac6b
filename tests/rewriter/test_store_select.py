"""MND201 repaired where a data-dependent test guards one store into a tensor
(rewriter/fixes/store_select.py)."""

from __future__ import annotations

import textwrap

import pytest

from mend.rewriter import FixOptions, fix_source
from tests.rewriter.conftest import diag, graphs_and_breaks

torch = pytest.importorskip("torch")

_SRC = '''
import torch


class M(torch.nn.Module):
    def forward(self, x: torch.Tensor, keep: torch.Tensor):
        {prefix}
        rows = [False, False]
        if {test}:
            {store}
        return x * keep[:, None]
'''


def _fix(test: str = "not any(keep)", store: str = "keep[0] = True", prefix: str = "pass",
         unsafe: bool = True):
    src = _SRC.format(test=test, store=store, prefix=prefix)
    return src, fix_source(src, "t.py", [diag("MND201", 9, 12)], FixOptions(unsafe=unsafe))


def test_under_compile_the_element_is_stored_on_every_path() -> None:
    src, res = _fix()
    assert res.applied and res.applied[0].applicability == "unsafe", res.remaining
    assert textwrap.indent(textwrap.dedent('''
        if not torch.compiler.is_compiling() or torch.is_grad_enabled():
            if not any(keep):
                keep[0] = True
        else:
            keep[0] = _mend_where(torch.logical_not(_mend_any(keep)), torch.full_like(keep[0], True), keep[0])
    ''').strip("\\n"), "        ") in res.fixed, res.fixed
    assert fix_source(res.fixed, "t.py", [], FixOptions(unsafe=True)).fixed == res.fixed
    _, safe = _fix(unsafe=False)
    assert safe.fixed == src and safe.remaining[0].unsafe_available


def test_a_static_prefix_stays_a_python_test() -> None:
    _, res = _fix(test="x.dtype == torch.float16 and (keep.sum() == 0)", store="keep[1:] = keep[:-1]")
    assert "        elif x.dtype == torch.float16:\n            keep[1:] = _mend_where(keep.sum() == 0, keep[:-1], keep[1:])\n" \
        in res.fixed, res.fixed


@pytest.mark.parametrize(("store", "reason"), [
    ("keep[keep.nonzero()] = True", "index is not made of numbers"),
    ("keep[0] = self.pick(keep)", "cannot prove side-effect free"),
    ("self.keep[0] = True", "not a plain name"),
    ("rows[0] = True", "cannot prove `rows` is a tensor"),
])
def test_declined(store: str, reason: str) -> None:
    src, res = _fix(store=store)
    assert res.fixed == src
    assert any(reason in r.reason for r in res.remaining), [r.reason for r in res.remaining]


@pytest.mark.parametrize("store", ["keep[0] = True", "keep[-1:] = keep[:1] | True", "keep[0] = 1",
                                   "keep[keep == False] = True", "keep[~(x[:, 0] > 0)] = 0"])  # noqa: E712
def test_compiled_store_equals_eager_on_both_paths(store: str) -> None:
    src, res = _fix(store=store)
    before, after = {}, {}
    exec(compile(src, "before.py", "exec"), before)
    exec(compile(res.fixed, "after.py", "exec"), after)
    for keep in (torch.zeros(4, dtype=torch.bool), torch.tensor([False, True, False, True])):
        x = torch.randn(4, 3)
        want_keep = keep.clone()
        with torch.no_grad():
            want = before["M"]()(x, want_keep)
            got_keep = keep.clone()
            got, graphs, breaks = graphs_and_breaks(after["M"](), x, got_keep)
        assert torch.equal(got, want) and torch.equal(got_keep, want_keep) and (graphs, breaks) == (1, 0)
        with torch.no_grad():
            assert graphs_and_breaks(before["M"](), x, keep.clone())[2] >= 1  # the original breaks at the test


@pytest.mark.parametrize("shape", [(), (3, 1), (3, 2)])
def test_any_of_a_tensor_that_is_not_1d_acts_as_pythons(shape: tuple) -> None:
    """``any(t)`` of a 0-d tensor raises TypeError, of rows of several numbers RuntimeError, of one-number
    rows it reads them: the helper hands such tensors to Python's ``any``, under compile too."""
    from tests.rewriter.conftest import helpers

    ns = helpers("_mend_any")
    t = torch.zeros(shape, dtype=torch.bool)
    if t.dim() == 1 or (t.dim() == 2 and t.shape[1] == 1):
        assert bool(ns["_mend_any"](t)) is any(t)
        return
    with pytest.raises(Exception) as want:
        any(t)
    with pytest.raises(type(want.value)):
        ns["_mend_any"](t)
    torch._dynamo.reset()
    with pytest.raises(Exception) as compiled:  # compiled, the original's own error (Dynamo's, for a 0-d t)
        torch.compile(lambda u: any(u), backend="eager")(t)
    torch._dynamo.reset()
    with pytest.raises(type(compiled.value)):
        torch.compile(lambda u: ns["_mend_any"](u), backend="eager")(t)  # called from compiled code, as repaired


_MASKED = '''
import torch


def regulate(x, durations):
    if durations.sum() == 0:
        durations[durations.sum(dim=1).eq(0)] = 1
    return x * durations.sum(dim=1, keepdim=True)
'''


def test_a_number_stored_through_a_bool_mask_is_stored_where_the_test_holds() -> None:
    """fastspeech2's ``length_regulator``: an unannotated parameter known as a tensor by its use
    (``.sum(dim=1)``), a number stored through a bool mask under a data-dependent test. Under compile the
    store goes through ``_mend_mask_if``: the same elements where the test holds, none where it fails;
    the durations, changed in place, and the output are eager's bits, with one graph and no break."""
    res = fix_source(_MASKED, "t.py", [diag("MND201", 6, 7)], FixOptions(unsafe=True))
    assert res.applied, [r.reason for r in res.remaining]
    assert "        durations[_mend_mask_if(durations.sum() == 0, durations.sum(dim=1).eq(0))] = 1\n" in res.fixed
    assert fix_source(res.fixed, "t.py", [], FixOptions(unsafe=True)).fixed == res.fixed
    before, after = {}, {}
    exec(compile(_MASKED, "before.py", "exec"), before)
    exec(compile(res.fixed, "after.py", "exec"), after)
    cases = [torch.zeros(3, 4, dtype=torch.long),                       # test true: every row gets 1s
             torch.tensor([[0, 0, 0], [2, 0, 1]]),                      # a zero row, test false: left alone
             torch.tensor([[1, 2], [3, 4]])]                            # no zero row
    for durations in cases:
        x = torch.randn(durations.shape[0], 5)
        want_d = durations.clone()
        want = before["regulate"](x, want_d)
        got_d = durations.clone()
        with torch.no_grad():
            got, graphs, breaks = graphs_and_breaks(after["regulate"], x, got_d)
        assert torch.equal(got, want) and torch.equal(got_d, want_d) and (graphs, breaks) == (1, 0), durations
        assert graphs_and_breaks(before["regulate"], x, durations.clone())[1] > 1  # the original splits there


@pytest.mark.parametrize(("store", "reason"), [
    ("keep[keep == False] = x[0, 0]", "not a number"),             # noqa: E712 (source text)
    ("keep[x[:, 0] > 0] = self.pick(keep)", "not a number"),
])
def test_a_mask_store_declined(store: str, reason: str) -> None:
    src, res = _fix(store=store)
    assert res.fixed == src
    assert any(reason in r.reason for r in res.remaining), [r.reason for r in res.remaining]


@pytest.mark.parametrize(("body", "tensor"), [
    ("return p.sum(dim=1)", True),            # ``dim=``: torch's spelling (NumPy says ``axis=``)
    ("return p.long() + 1", True),            # a method no list, number or array has
    ("return p.sum(axis=1)", False),          # NumPy's spelling
    ("return p.sum()", False),                # arrays have it too
    ("p = [1]\n    return p.long()", False),  # bound again to a list
    ("p = p.contiguous()\n    return p.long()", True),  # bound again to itself as a tensor
])
def test_a_parameter_is_a_tensor_by_its_use(body: str, tensor: bool) -> None:
    import libcst as cst

    from mend.rewriter.analysis import FunctionFacts, ImportMap

    module = cst.parse_module(f"import torch\n\n\ndef f(p):\n    {body}\n")
    func = next(s for s in module.body if isinstance(s, cst.FunctionDef))
    assert ("p" in FunctionFacts(func, ImportMap(module)).tensor_names) is tensor

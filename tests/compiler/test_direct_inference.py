"""Inference graphs traced without aot_autograd (``compat.trace_inference``): the same ATen graph as
aot_autograd's, the same results, and aot_autograd wherever it is needed (autograd, mutation of an input
or of a storage another tensor shares, aliasing outputs, dynamic shapes, autocast)."""

from __future__ import annotations

import re

import pytest
import torch
import torch.nn as nn

from mend.compiler import backend, compat
from mend.compiler.lowering.decomps import decomposition_table

from .models import MLP, Block, ResidualLN


def _direct(fn, *args):
    """(result of the compiled ``fn``, how many of its graphs skipped aot_autograd)."""
    torch._dynamo.reset()
    before = backend.STATS["direct_inference_graphs"]
    out = torch.compile(fn, backend="mend")(*args)
    return out, backend.STATS["direct_inference_graphs"] - before


def _aten_graphs(gm_fn, args):
    """The ATen code of ``gm_fn``'s Dynamo graph traced both ways: (direct, aot_autograd)."""
    codes = {}

    def capture(gm, example_inputs):
        assert compat.inference_eligible(gm, example_inputs)
        traced = compat.trace_inference(gm, example_inputs, decomposition_table())
        codes["direct"] = traced[0].code if traced is not None else None

        def nop(g, _):
            codes["aot"] = g.code
            return compat.make_boxed_func(g.forward)

        return compat.aot_module_simplified(gm, example_inputs, fw_compiler=nop, bw_compiler=nop,
                                            inference_compiler=nop, decompositions=decomposition_table())

    torch._dynamo.reset()
    with torch.no_grad():
        torch.compile(gm_fn, backend=capture)(*args)
    return codes["direct"], codes["aot"]


def _norm(code: str) -> str:
    return re.sub(r"\s+", " ", code).strip()


@pytest.mark.parametrize("name", ["mlp", "residual_ln", "block", "softmax"])
def test_direct_trace_is_aot_autograds_graph_and_runs_the_same(name):
    torch.manual_seed(0)
    x = torch.randn(2, 16, 32)
    model = {
        "mlp": lambda: MLP(32, 64),
        "residual_ln": lambda: ResidualLN(32),
        "block": lambda: Block(32, 4),
        "softmax": lambda: (lambda t: torch.softmax(t * 0.5 + 1, -1)),
    }[name]()
    args = (x,) if name != "residual_ln" else (x, torch.randn_like(x))
    direct, aot = _aten_graphs(model, args)
    assert direct is not None
    assert _norm(direct) == _norm(aot)
    with torch.no_grad():
        out, n = _direct(model, *args)
        ref = model(*args)
    assert n == 1
    torch.testing.assert_close(out, ref, rtol=1e-4, atol=1e-5)


def test_inference_mode_outputs_stay_inference_tensors():
    m = nn.Sequential(nn.Conv2d(3, 4, 3), nn.BatchNorm2d(4), nn.ReLU()).eval()
    x = torch.randn(2, 3, 8, 8)
    with torch.inference_mode():
        out, n = _direct(m, x)
        ref = m(x)
    assert n == 1 and out.is_inference()
    torch.testing.assert_close(out, ref)


def test_training_goes_through_aot_autograd():
    torch.manual_seed(0)
    m = MLP(16, 32)
    x = torch.randn(4, 16)
    out, n = _direct(m, x)
    assert n == 0 and out.requires_grad
    out.sum().backward()
    g = m.fc1.weight.grad.clone()
    m.zero_grad()
    m(x).sum().backward()
    torch.testing.assert_close(g, m.fc1.weight.grad)


def test_input_mutation_goes_through_aot_autograd_and_is_kept():
    def f(a):
        a.mul_(2)
        return a + 1

    a = torch.arange(4.0)
    with torch.no_grad():
        out, n = _direct(f, a)
    assert n == 0
    assert a.tolist() == [0.0, 2.0, 4.0, 6.0]
    assert out.tolist() == [1.0, 3.0, 5.0, 7.0]


def test_in_place_ops_on_intermediates_are_traced_directly():
    """``ReLU(inplace=True)``, BERT's ``embeddings += position``, a ``matmul`` result scaled in place (its
    ``bmm`` -> ``_unsafe_view`` owns its storage): out-of-place forms, later uses reading the new value;
    the same ATen graph as aot_autograd's functionalized one, the same results."""
    def scores(q, k, bias):
        s = torch.matmul(q, k.transpose(-1, -2))
        s.mul_(0.125)
        before = s.sum()  # read between two updates: sees the first only
        s += bias
        return torch.softmax(s, -1), before

    m = nn.Sequential(nn.Linear(8, 8), nn.ReLU(inplace=True))
    q, k, bias = torch.randn(2, 5, 8), torch.randn(2, 5, 8), torch.randn(5, 5)
    for fn, args in ((m, (torch.randn(3, 8),)), (scores, (q, k, bias))):
        direct, aot = _aten_graphs(fn, args)
        assert direct is not None and "_." not in direct  # no in-place op left
        with torch.no_grad():
            out, n = _direct(fn, *args)
            ref = fn(*args)
        assert n == 1
        torch.testing.assert_close(out, ref, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("case", ["view_then_update", "update_of_a_view", "shared_source"])
def test_in_place_op_on_a_shared_storage_goes_through_aot_autograd(case):
    """Where another tensor shares the updated storage (a view taken before the update, a view of a tensor
    read elsewhere) the update must show through it: aot_autograd's functionalization handles those."""
    def view_then_update(a):
        b = a * 2
        v = b.view(4)
        b.add_(1)
        return v + 0

    def update_of_a_view(a):
        b = a * 2
        v = b[0]
        v.add_(1)
        return b + 0

    def shared_source(a):
        b = a * 2
        c = b.view(2, 2)
        c.mul_(3)
        return b + 0, c + 0

    fn = {"view_then_update": view_then_update, "update_of_a_view": update_of_a_view,
          "shared_source": shared_source}[case]
    a = torch.arange(4.0).reshape(2, 2)
    with torch.no_grad():
        out, n = _direct(fn, a)
        ref = fn(a)
    assert n == 0
    torch.testing.assert_close(out, ref)


@pytest.mark.parametrize("case", ["view_of_input", "slice_of_input", "view_of_output"])
def test_aliasing_outputs_go_through_aot_autograd(case):
    fns = {
        "view_of_input": lambda a: (a.view(2, 2), a + 1),
        "slice_of_input": lambda a: (a[1:], a.sum()),
        "view_of_output": lambda a: (lambda b: (b, b.view(2, 2)))(a * 3),
    }
    a = torch.arange(4.0)
    with torch.no_grad():
        out, n = _direct(fns[case], a)
    assert n == 0
    if case in ("view_of_input", "slice_of_input"):
        assert out[0]._base is a
    if case == "view_of_output":
        assert out[1].data_ptr() == out[0].data_ptr()


def test_dynamic_shapes_and_autocast_go_through_aot_autograd():
    torch._dynamo.reset()
    f = torch.compile(lambda x: torch.relu(x * 2), backend="mend", dynamic=True)
    before = backend.STATS["direct_inference_graphs"]
    x = torch.randn(5)
    with torch.no_grad():
        torch.testing.assert_close(f(x), torch.relu(x * 2))
    assert backend.STATS["direct_inference_graphs"] == before
    lin = nn.Linear(8, 8)
    x = torch.randn(2, 8)
    with torch.autocast("cpu", dtype=torch.bfloat16), torch.no_grad():
        out, n = _direct(lin, x)
        ref = lin(x)
    assert n == 0 and out.dtype == torch.bfloat16
    torch.testing.assert_close(out, ref)


def _compile_fresh(fn, *args):
    """Compile ``fn`` again after ``torch._dynamo.reset()`` (a warm process: on-disk caches kept); returns
    (result, dynamo-level cache hits of that compile)."""
    torch._dynamo.reset()
    before = backend.STATS["dynamo_cache_hits"]
    with torch.no_grad():
        out = torch.compile(fn, backend="mend")(*args)
    return out, backend.STATS["dynamo_cache_hits"] - before


def _fresh_matches(model, x, hits_expected):
    """Compile ``model`` afresh on ``x``: as many dynamo-level cache hits as expected, and eager's result."""
    with torch.no_grad():
        ref = model(x)
    out, hits = _compile_fresh(model, x)
    assert hits == hits_expected
    torch.testing.assert_close(out, ref, rtol=1e-4, atol=1e-5)


def test_warm_compile_skips_the_trace_and_matches(tmp_path, monkeypatch):
    monkeypatch.setenv("MEND_CACHE_DIR", str(tmp_path))
    torch.manual_seed(0)
    block = Block(32, 4).eval()
    x = torch.randn(2, 8, 32)
    _fresh_matches(block, x, 0)
    _fresh_matches(block, x, 1)
    _fresh_matches(Block(32, 4).eval(), x, 1)  # other weights, same graph: a hit computing with the new ones
    _fresh_matches(block, torch.randn(3, 8, 32), 0)  # another shape: another key


def test_warm_compile_with_a_lost_graph_entry_traces_again(tmp_path, monkeypatch):
    monkeypatch.setenv("MEND_CACHE_DIR", str(tmp_path))
    f = lambda x: torch.softmax(x * 3, -1)  # noqa: E731
    x = torch.randn(4, 16)
    _compile_fresh(f, x)
    for p in (tmp_path / "v1" / "graphs").rglob("*.pkl"):
        if not p.name.startswith("dynamo-"):
            p.unlink()  # the ATen graph's entry is gone; Dynamo's still names it
    out, hits = _compile_fresh(f, x)
    assert hits == 0
    torch.testing.assert_close(out, torch.softmax(x * 3, -1))
    _, hits = _compile_fresh(f, x)
    assert hits == 1


def _dynamo_graph(fn, *args):
    got = {}

    def capture(gm, example_inputs):
        got["gm"], got["inputs"] = gm, list(example_inputs)
        return gm.forward

    torch._dynamo.reset()
    torch.compile(fn, backend=capture)(*args)
    return got["gm"], got["inputs"]


def test_dynamo_key_names_what_the_trace_depends_on():
    from mend.compiler.runtime import graph_cache

    x = torch.randn(4, 8)
    key = lambda fn, *a: graph_cache.dynamo_key(*_dynamo_graph(fn, *a))  # noqa: E731
    base = key(lambda t: torch.relu(t * 2), x)
    assert base is not None
    assert key(lambda t: torch.relu(t * 2), torch.randn(4, 8)) == base  # values do not matter
    assert key(lambda t: torch.relu(t * 3), x) != base  # a constant does
    assert key(lambda t: torch.sigmoid(t * 2), x) != base  # the op
    assert key(lambda t: torch.relu(t * 2), torch.randn(8, 4).t()) != base  # the strides
    assert key(lambda t: torch.relu(t * 2), x.double()) != base  # the dtype
    with torch.no_grad():
        assert key(lambda t: torch.relu(t * 2), x) != base  # grad mode


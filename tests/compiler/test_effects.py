"""Operators with an ordered side effect (``torch.ops.mend.emit``, the call ``mend fix`` keeps a message with):
the compiled graph makes the call on every call, in program order, never computed once, through
aot_autograd's ``with_effects`` form (training, the token passed as None at run time) and the direct form."""

from __future__ import annotations

import logging
import sys
import types

import pytest
import torch

from mend.compiler import backend as mend_backend
from mend.rewriter import helpers


@pytest.fixture(scope="module")
def emit():
    """The helper repaired code calls, with the globals of a program module it reports from."""
    module = types.ModuleType("mend_effects_prog")
    module.torch = torch
    module.log = logging.getLogger("mend_effects_prog")
    sys.modules[module.__name__] = module
    yield helpers.emit
    del sys.modules[module.__name__]


def program(emit):
    def f(x):
        emit("mend_effects_prog", "print", "first, no input read", 1)
        y = x * 2
        emit("mend_effects_prog", "print 1.shape", "then", y)
        emit("mend_effects_prog", "print 0.format.1", "rows={}", y.shape[0])
        return y + 1
    return f


def run(fn, inputs, capsys, grad: bool):
    out = []
    for x in inputs:
        x = x.clone().requires_grad_(grad)
        y = fn(x)
        if grad:
            y.sum().backward()
        out.append(capsys.readouterr().out)
    return out


@pytest.mark.parametrize("grad", [False, True], ids=["direct", "aot"])
def test_every_call_emits_in_order(emit, capsys, grad: bool) -> None:
    torch._dynamo.reset()
    inputs = [torch.randn(3, 2), torch.randn(3, 2), torch.randn(5, 2), torch.randn(6, 2)]  # then dynamic
    f = program(emit)
    eager = run(f, inputs, capsys, grad)
    before = dict(mend_backend.STATS)
    compiled = run(torch.compile(f, backend="mend", fullgraph=True), inputs, capsys, grad)
    assert compiled == eager
    assert eager[0] == "first, no input read 1\nthen torch.Size([3, 2])\nrows=3\n"
    assert mend_backend.STATS["fallback_graphs"] == before["fallback_graphs"]  # compiled, not run eagerly


def test_an_effect_is_never_computed_once(emit, capsys) -> None:
    """A call that reads no graph input would be a step of the first call only (``schedule/fold.py``)."""
    torch._dynamo.reset()

    def f(x):
        emit("mend_effects_prog", "print", "constant message")
        return x.sin()

    g = torch.compile(f, backend="mend", fullgraph=True)
    with torch.no_grad():
        for _ in range(3):
            g(torch.randn(4))
    assert capsys.readouterr().out == "constant message\n" * 3


def test_a_graph_with_an_effect_is_not_replayed_as_a_cuda_graph(emit) -> None:
    """A replay repeats kernels, not Python: a graph that prints would print at its capture only."""
    from mend.compiler.runtime.cudagraphs import decline_reason

    def f(x):
        torch.ops.mend.emit.default("mend_effects_prog", "print|s", ["hi"], [], [], [])
        return x + 1

    def g(x):
        return x + 1

    from torch.fx.experimental.proxy_tensor import make_fx

    why = decline_reason(make_fx(f)(torch.randn(2)), None, [])
    assert why is not None and "side effect" in why
    assert decline_reason(make_fx(g)(torch.randn(2)), None, []) is None

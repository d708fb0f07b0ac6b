"""Graphs with symbolic shapes (a shape changed, or dynamic=True) compile once per concrete shape."""

from __future__ import annotations

import logging

import pytest
import torch

from mend.compiler import backend
from mend.compiler.runtime import specialize

from .helpers import sum_backward_step


@pytest.fixture(autouse=True)
def _fresh():
    torch._dynamo.reset()
    yield
    torch._dynamo.reset()


def _counts():
    return dict(backend.STATS), dict(specialize.STATS)


def test_changing_batch_size_forward_and_backward_stays_compiled():
    torch.manual_seed(0)
    lin = torch.nn.Linear(8, 8)
    fn = lambda x: torch.softmax(lin(x) * 2, -1) + x.shape[0]  # noqa: E731
    f = torch.compile(fn, backend="mend")
    b0, s0 = _counts()
    for n in (4, 5, 6, 5, 4):
        out, want, got, want_grad = sum_backward_step(f, fn, torch.randn(n, 8, requires_grad=True))
        torch.testing.assert_close(out, want)
        torch.testing.assert_close(got, want_grad)
    b1, s1 = _counts()
    assert b1["fallback_graphs"] == b0["fallback_graphs"]  # nothing ran eagerly
    assert s1["dynamic_graphs"] - s0["dynamic_graphs"] == 2  # forward and backward, symbolic
    # Dynamo's dynamic graph serves sizes 5, 6 and (checked first) 4 again: three forward and three backward
    # specializations; the second 5 reuses its own
    assert s1["specializations"] - s0["specializations"] == 6
    assert s1["eager_calls"] == s0["eager_calls"]


def test_dynamic_true_specializes_from_the_first_call():
    f = torch.compile(lambda x, y: (x * y).sum(-1) + y.shape[0], backend="mend", dynamic=True)
    b0, s0 = _counts()
    for n in (3, 9, 3):
        x, y = torch.randn(n, 5), torch.randn(5)
        torch.testing.assert_close(f(x, y), (x * y).sum(-1) + 5)
    b1, s1 = _counts()
    assert s1["specializations"] - s0["specializations"] == 2
    assert b1["fallback_graphs"] == b0["fallback_graphs"]


def test_past_the_limit_new_shapes_run_eagerly(monkeypatch, caplog):
    monkeypatch.setenv("MEND_MAX_SPECIALIZATIONS", "2")
    f = torch.compile(lambda x: torch.relu(x) * 3, backend="mend", dynamic=True)
    _, s0 = _counts()
    with caplog.at_level(logging.WARNING, logger="mend.compiler"):
        for n in (2, 3, 4, 5, 2):
            x = torch.randn(n)
            torch.testing.assert_close(f(x), torch.relu(x) * 3)
    _, s1 = _counts()
    assert s1["specializations"] - s0["specializations"] == 2
    assert s1["eager_calls"] - s0["eager_calls"] == 2  # sizes 4 and 5
    assert sum("MEND_MAX_SPECIALIZATIONS" in r.message for r in caplog.records) == 1


def test_is_dynamic():
    from torch.fx.experimental.symbolic_shapes import ShapeEnv

    assert not specialize.is_dynamic([torch.randn(2, 3), 4, 2.5])
    s = ShapeEnv().create_unbacked_symint()
    assert specialize.is_dynamic([torch.randn(2), s])


def test_baked_scalar_inputs_are_checked():
    from torch.fx.experimental.proxy_tensor import make_fx

    gm = make_fx(lambda x, n: x * n)(torch.randn(3), 4)
    call = backend.compile_graph(gm, [torch.randn(3), 4])
    x = torch.randn(3)
    torch.testing.assert_close(call([x, 4])[0], x * 4)
    with pytest.raises(RuntimeError, match="compiled for input 1 == 4"):
        call([x, 5])

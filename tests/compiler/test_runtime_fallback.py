"""A compiled graph never crashes the program: ATen ops that return None where their meta function promised a
tensor (the flash-attention kernels on a GPU), and the run-time fallback to the ATen graph
(``runtime/guard.py``), with ``MEND_STRICT=1`` raising instead."""

from __future__ import annotations

import logging

import pytest
import torch
from torch.fx.experimental.proxy_tensor import make_fx

from mend.compiler import backend
from mend.compiler.lowering.decomps import decomposition_table
from mend.compiler.runtime import guard

from .helpers import assert_same

# An ATen-style op like the CUDA flash-attention forward in half precision: its meta function promises a
# tensor for every output, its kernel returns None (an undefined tensor) for the last one.
_LIB = torch.library.Library("mendtest_runtime", "DEF")
_LIB.define("pair(Tensor x) -> (Tensor, Tensor)")
_LIB.impl("pair", lambda x: (x + 1, None), "CPU")
_LIB.impl("pair", lambda x: (torch.empty_like(x), torch.empty(0, dtype=x.dtype, device=x.device)), "Meta")
_LIB.define("pair_full(Tensor x) -> (Tensor, Tensor)")
_LIB.impl("pair_full", lambda x: (x + 1, None), "CPU")
_LIB.impl("pair_full", lambda x: (torch.empty_like(x), torch.empty_like(x)), "Meta")
pair = torch.ops.mendtest_runtime.pair
pair_full = torch.ops.mendtest_runtime.pair_full


def compiled(fn, *args):
    gm = make_fx(fn, decomposition_table=decomposition_table(), tracing_mode="fake")(*args)
    return backend.compile_graph(gm, list(args))


def test_meta_promised_tensor_that_is_none_at_run_time_is_not_touched():
    x = torch.randn(4, 6)

    def fn(x):
        a, _ = pair(x)
        return (a * 2).relu()

    call = compiled(fn, x)
    assert call.mend_extern_ops and call.mend_graph is not None
    assert_same(call([x])[0], fn(x))


def test_none_output_of_an_aten_op_is_returned_as_none():
    x = torch.randn(4, 6)

    def fn(x):
        a, b = pair(x)
        return a.exp(), b

    got = compiled(fn, x)([x])
    want = fn(x)
    assert_same(got[0], want[0])
    assert got[1] is None and want[1] is None


def test_error_that_eager_raises_too_is_raised_and_the_graph_stays_compiled(monkeypatch):
    monkeypatch.delenv("MEND_STRICT", raising=False)
    monkeypatch.delenv("MEND_COMPILER_STRICT", raising=False)
    x = torch.randn(3, 5)

    def fn(x):
        a, b = pair_full(x)
        return a * 2, b + 1  # the ATen graph raises too (add of None)

    call = compiled(fn, x)
    before = guard.STATS["runtime_fallbacks"]
    with pytest.raises(RuntimeError, match="got None"):
        call([x])
    assert guard.STATS["runtime_fallbacks"] == before
    assert call.failed is None


def _failing_kernels(monkeypatch):
    """Every kernel of graphs compiled from now on fails when it runs (a launch failure on a GPU, say)."""
    monkeypatch.setenv("MEND_DISABLE_KERNELS", "all")

    def boom(kernel, *tensors):
        raise RuntimeError(f"simulated launch failure of {kernel.name}")

    monkeypatch.setattr(backend, "run_kernel", boom)


def test_run_time_failure_falls_back_to_the_aten_graph_with_one_warning(monkeypatch, caplog):
    monkeypatch.delenv("MEND_STRICT", raising=False)
    monkeypatch.delenv("MEND_COMPILER_STRICT", raising=False)
    _failing_kernels(monkeypatch)
    x = torch.randn(8, 16)
    fn = lambda x: (torch.softmax(x * 3, -1), x.sum(0))  # noqa: E731
    call = compiled(fn, x)
    before = guard.STATS["runtime_fallbacks"]
    with caplog.at_level(logging.WARNING, logger="mend.compiler"):
        first = call([x])
        second = call([x * 2])
    for got, want in ((first, fn(x)), (second, fn(x * 2))):
        for g, w in zip(got, want):
            assert_same(g, w)
    assert guard.STATS["runtime_fallbacks"] == before + 1
    msgs = [r.getMessage() for r in caplog.records if "failed at run time" in r.getMessage()]
    assert len(msgs) == 1
    assert "inference graph" in msgs[0] and "simulated launch failure" in msgs[0] and "MEND_STRICT" in msgs[0]


def test_strict_raises_the_compiled_graphs_error(monkeypatch):
    monkeypatch.setenv("MEND_STRICT", "1")
    _failing_kernels(monkeypatch)
    x = torch.randn(8, 16)
    call = compiled(lambda x: torch.softmax(x, -1), x)
    with pytest.raises(RuntimeError, match="simulated launch failure"):
        call([x])


def test_the_users_program_goes_on_through_torch_compile(monkeypatch, caplog):
    monkeypatch.delenv("MEND_STRICT", raising=False)
    monkeypatch.delenv("MEND_COMPILER_STRICT", raising=False)
    monkeypatch.setenv("MEND_DISABLE_CACHE", "1")
    _failing_kernels(monkeypatch)
    torch._dynamo.reset()
    m = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.GELU(), torch.nn.LayerNorm(32))
    x = torch.randn(4, 16)
    with torch.no_grad(), caplog.at_level(logging.WARNING, logger="mend.compiler"):
        got = torch.compile(m, backend="mend")(x)
        want = m(x)
    torch._dynamo.reset()
    assert_same(got, want)
    assert any("failed at run time" in r.getMessage() for r in caplog.records)

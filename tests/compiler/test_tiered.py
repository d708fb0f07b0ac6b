"""Asynchronous compilation (``async_compile``): the ATen graph runs until the kernels are built, then the
compiled graph, with the same results either way."""

from __future__ import annotations

import threading
from concurrent.futures import Future

import pytest
import torch
import torch.nn as nn
from torch.fx.experimental.proxy_tensor import make_fx

import mend.compiler
from mend.compiler import backend
from mend.compiler.codegen.cpp import build as cpp_build
from mend.compiler.lowering.decomps import decomposition_table
from mend.compiler.mode import ASYNC
from mend.compiler.runtime import tiered


@pytest.fixture
def gated_build(monkeypatch):
    """The C++ build waits until the test opens the gate: the switch from ATen to compiled code happens
    exactly where the test wants it."""
    gate = threading.Event()
    real = cpp_build.build

    def build(source):
        assert gate.wait(60), "the test never opened the gate"
        return real(source)

    monkeypatch.setattr(cpp_build, "build", build)
    yield gate
    gate.set()


def _fx(fn, *args):
    return make_fx(fn, decomposition_table=decomposition_table(), tracing_mode="fake")(*args)


def _f(x, y):  # a tuple, as aot_autograd's graphs return
    return ((torch.softmax(x * 2 + y, dim=-1) - 1).relu().sum(-1),)


def test_runs_aten_until_the_kernels_are_built_then_switches_for_good(gated_build):
    x, y = torch.randn(16, 33), torch.randn(33)
    (want,) = _f(x, y)
    before = dict(tiered.STATS)
    call = backend.compile_graph(_fx(_f, x, y), [x, y], ASYNC)
    assert isinstance(call, tiered.TieredGraph)
    for _ in range(3):  # the build is blocked: every call runs the ATen graph
        (got,) = call([x, y])
        torch.testing.assert_close(got, want)
    assert tiered.STATS["aten_calls"] - before["aten_calls"] == 3
    assert not call.ready() and call.compiled is None
    assert tiered.pending() >= 1
    assert mend.compiler.wait(0.05) is False  # still blocked: a timeout, not a hang

    gated_build.set()
    assert mend.compiler.wait(60) is True
    assert call.ready() and tiered.pending() == 0
    (got,) = call([x, y])
    torch.testing.assert_close(got, want)
    assert tiered.STATS["switched"] - before["switched"] == 1
    assert call.compiled is not None
    assert call.mend_graph.kernels, "the compiled graph has kernels"
    assert call.mend_interpreted == []
    (got,) = call([x, y])  # compiled from now on
    torch.testing.assert_close(got, want)
    assert tiered.STATS["aten_calls"] - before["aten_calls"] == 3
    assert tiered.STATS["switched"] - before["switched"] == 1


def test_a_graph_that_cannot_compile_stays_on_aten(monkeypatch):
    monkeypatch.setenv("MEND_STRICT", "0")
    monkeypatch.setenv("MEND_COMPILER_FALLBACK", "eager")
    x, y = torch.randn(4, 5), torch.randn(5)
    call = backend.compile_graph(_fx(_f, x, y), [x, y], ASYNC)
    assert call.ready() and call.wait(0.05)  # nothing to build
    for _ in range(2):
        (got,) = call([x, y])
        torch.testing.assert_close(got, _f(x, y)[0])
    assert call.compiled is not None and not hasattr(call.compiled, "mend_graph")


def test_waits_for_the_kernel_compiles_the_graph_submitted():
    """A built graph whose kernel compiles (futures in ``mend_pending``) are still running is not switched
    to; it is once they are done."""
    x = torch.randn(8)
    gm = _fx(lambda t: (t * 3,), x)
    compiled_calls = []

    def compiled(args):
        compiled_calls.append(1)
        return (args[0] * 3,)

    kernel = Future()
    compiled.mend_pending = [kernel]
    call = tiered.TieredGraph(gm, compiled, "test graph")
    assert call.wait(0.05) is False  # the kernel is still compiling
    (got,) = call([x])
    torch.testing.assert_close(got, x * 3)
    assert compiled_calls == []
    kernel.set_result({"name": "k"})
    assert call.wait(5)
    (got,) = call([x])
    torch.testing.assert_close(got, x * 3)
    assert compiled_calls == [1]


def test_kernel_futures_are_the_worker_compiles_and_deferred_in_process_ones(monkeypatch):
    from mend.compiler.codegen.triton import aot as triton_aot

    class Launcher:
        def __init__(self, aot):
            self.aot = aot

    compiled = []
    monkeypatch.setattr(triton_aot, "_run_inline", lambda job: compiled.append(job) or {"name": job["n"]})
    f1, f2 = Future(), Future()
    lazy = triton_aot._LazyFuture({"n": "k"})  # no worker pool: compiled in the calling thread
    fns = {"a": (Launcher({0: f1, 1: f2}), "tensor"), "b": (Launcher({0: lazy}), "tensor"),
           "c": (lambda *p: None, "ptr")}
    # a plain compile: the lazy compile happens at the first launch, nothing to wait for
    assert backend._kernel_futures(fns) == [f1, f2]
    assert compiled == []
    # asynchronous compilation: the lazy compile runs on the background thread and is waited for
    futures = backend._kernel_futures(fns, defer=True)
    assert futures[:2] == [f1, f2] and len(futures) == 3
    assert futures[2].result(30) == {"name": "k"}
    assert compiled == [{"n": "k"}] and lazy.done()
    assert lazy.result() == {"name": "k"} and compiled == [{"n": "k"}]  # compiled once


def test_requested_by_option_or_environment(monkeypatch):
    monkeypatch.delenv("MEND_ASYNC_COMPILE", raising=False)
    assert not tiered.requested({})
    assert tiered.requested({"options": {"async_compile": True}})
    monkeypatch.setenv("MEND_ASYNC_COMPILE", "0")
    assert not tiered.requested({"options": {"async_compile": True}})
    monkeypatch.setenv("MEND_ASYNC_COMPILE", "1")
    assert tiered.requested({})


def test_training_gradients_match_before_and_after_the_switch(gated_build):
    """Forward and backward graphs switch independently; the gradients are the eager ones throughout."""
    torch._dynamo.reset()
    torch.manual_seed(0)
    m = nn.Sequential(nn.Linear(16, 32), nn.GELU(), nn.LayerNorm(32), nn.Linear(32, 4))
    x = torch.randn(8, 16)

    def grads(model):
        model.zero_grad()
        model(x).pow(2).sum().backward()
        return [p.grad.clone() for p in model.parameters()]

    want = grads(m)
    c = mend.compiler.compile(m, async_compile=True)
    before = dict(tiered.STATS)
    for got, w in zip(grads(c), want):  # both graphs on ATen (the builds are blocked)
        torch.testing.assert_close(got, w)
    assert tiered.STATS["aten_calls"] - before["aten_calls"] == 2
    gated_build.set()
    assert mend.compiler.wait(120)
    for _ in range(2):
        for got, w in zip(grads(c), want):
            torch.testing.assert_close(got, w, rtol=1e-4, atol=1e-5)
    assert tiered.STATS["switched"] - before["switched"] == 2
    assert tiered.STATS["aten_calls"] - before["aten_calls"] == 2


def test_changing_shapes_compile_asynchronously_per_shape(gated_build):
    torch._dynamo.reset()
    c = mend.compiler.compile(lambda t: torch.tanh(t) * t.sum(-1, keepdim=True), dynamic=True, async_compile=True)
    before = dict(tiered.STATS)
    for n in (5, 7):
        t = torch.randn(3, n)
        torch.testing.assert_close(c(t), torch.tanh(t) * t.sum(-1, keepdim=True))
    assert tiered.STATS["graphs"] - before["graphs"] == 2  # one per concrete shape, both on ATen so far
    assert tiered.STATS["aten_calls"] - before["aten_calls"] == 2
    gated_build.set()
    assert mend.compiler.wait(60)
    for n in (5, 7):
        t = torch.randn(3, n)
        torch.testing.assert_close(c(t), torch.tanh(t) * t.sum(-1, keepdim=True))
    assert tiered.STATS["switched"] - before["switched"] == 2


def test_a_program_that_ends_does_not_wait_for_a_build():
    """The build thread is a daemon: a program that ends before its build finishes exits at once."""
    import subprocess
    import sys
    import time

    code = (
        "import time, torch\n"
        "from mend.compiler.codegen.cpp import build as cpp_build\n"
        "import mend.compiler\n"
        "cpp_build.build = lambda source: time.sleep(60)\n"
        "f = mend.compiler.compile(lambda t: torch.tanh(t) * 2, async_compile=True)\n"
        "print(f(torch.ones(3)).tolist())\n"
    )
    t0 = time.monotonic()
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert proc.stdout.strip().splitlines()[-1] == str([torch.tanh(torch.ones(3)).mul(2)[0].item()] * 3)
    assert time.monotonic() - t0 < 45, "exit waited for the 60 s build"


def test_an_inference_graph_runs_dynamos_graph_until_its_second_call_compiles_it(monkeypatch, tmp_path):
    """The first call waits for Dynamo alone: nothing is traced to ATen or lowered until the second call,
    which does both on the calling thread (FX's tracing state is process-wide) and leaves the kernels
    building in the background; the switch comes after them, with the same results."""
    from mend.compiler import compat

    traced_at = []
    real = compat.trace_inference

    def trace(gm, example_inputs, decompositions):
        traced_at.append((calls[0], threading.current_thread().name))
        return real(gm, example_inputs, decompositions)

    monkeypatch.setattr(compat, "trace_inference", trace)
    monkeypatch.setenv("MEND_CACHE_DIR", str(tmp_path))  # no graph of an earlier run found by Dynamo's key
    assert mend.compiler.wait(120)  # no earlier test's build still running
    torch._dynamo.reset()
    torch.manual_seed(0)
    m = nn.Sequential(nn.Linear(16, 32), nn.GELU(), nn.LayerNorm(32), nn.Linear(32, 8)).eval()
    x = torch.randn(4, 16)
    calls = [0]
    before = dict(tiered.STATS)
    with torch.no_grad():
        want = m(x)
        c = torch.compile(m, backend="mend", options={"async_compile": True})
        torch.testing.assert_close(c(x), want)
        calls[0] = 1
        assert traced_at == [] and tiered.pending() >= 1
        torch.testing.assert_close(c(x), want)  # the second call traces and lowers
        assert traced_at == [(1, threading.main_thread().name)]
        assert mend.compiler.wait(120)
        for _ in range(2):
            torch.testing.assert_close(c(x), want)
    assert tiered.STATS["aten_calls"] - before["aten_calls"] == 2
    assert tiered.STATS["switched"] - before["switched"] == 1


def test_a_deferred_graph_that_mutates_its_input_goes_through_aot_autograd(monkeypatch):
    monkeypatch.setenv("MEND_STRICT", "1")
    torch._dynamo.reset()

    def g(a, b):
        a.add_(1)
        return a * b

    a, b = torch.randn(5), torch.randn(5)
    c = torch.compile(g, backend="mend", options={"async_compile": True})
    got_a, want_a = a.clone(), a.clone()
    before = dict(tiered.STATS)
    got = [c(got_a, b), c(got_a, b)]
    assert mend.compiler.wait(120)
    got.append(c(got_a, b))
    want = [g(want_a, b) for _ in range(3)]
    for x, y in zip(got, want):
        torch.testing.assert_close(x, y)
    torch.testing.assert_close(got_a, want_a)
    assert tiered.STATS["switched"] - before["switched"] == 1


def test_waiting_compiles_a_deferred_graph(monkeypatch, tmp_path):
    monkeypatch.setenv("MEND_CACHE_DIR", str(tmp_path))
    assert mend.compiler.wait(120)
    torch._dynamo.reset()
    c = torch.compile(lambda t: torch.tanh(t) * 3, backend="mend", options={"async_compile": True})
    t = torch.randn(6)
    torch.testing.assert_close(c(t), torch.tanh(t) * 3)
    assert tiered.pending() >= 1
    assert mend.compiler.wait(120) and tiered.pending() == 0
    before = dict(tiered.STATS)
    torch.testing.assert_close(c(t), torch.tanh(t) * 3)
    assert tiered.STATS["switched"] - before["switched"] == 1


def test_defer_off_lowers_an_inference_graph_when_it_is_compiled(monkeypatch, tmp_path):
    from mend.compiler import compat

    traced = []
    real = compat.trace_inference
    monkeypatch.setattr(compat, "trace_inference", lambda *a: traced.append(1) or real(*a))
    monkeypatch.setenv("MEND_CACHE_DIR", str(tmp_path))
    monkeypatch.setenv("MEND_ASYNC_DEFER", "0")
    assert mend.compiler.wait(120)
    torch._dynamo.reset()
    c = torch.compile(lambda t: torch.tanh(t) * 5, backend="mend", options={"async_compile": True})
    t = torch.randn(6)
    torch.testing.assert_close(c(t), torch.tanh(t) * 5)
    assert traced == [1]  # traced and lowered in the first call, as for every other graph


def test_compiled_calls_run_while_kernels_of_a_deferred_graph_build(monkeypatch, tmp_path, gated_build):
    """Between the second call and the switch, calls of this and of other compiled functions run (no
    tracing state leaks from the compile); results equal eager's throughout."""
    monkeypatch.setenv("MEND_STRICT", "1")
    monkeypatch.setenv("MEND_CACHE_DIR", str(tmp_path))
    torch._dynamo.reset()
    torch.manual_seed(0)
    m = nn.Sequential(nn.Linear(16, 16), nn.GELU(), nn.Linear(16, 16)).eval()
    other = nn.Sequential(nn.Linear(16, 16), nn.Tanh()).eval()
    x = torch.randn(4, 16)
    with torch.no_grad():
        want, want_other = m(x), other(x)
        c = torch.compile(m, backend="mend", options={"async_compile": True})
        c_other = torch.compile(other, backend="mend", options={"async_compile": True})
        for _ in range(4):  # the C++ build is held: ATen until the gate opens
            torch.testing.assert_close(c(x), want)
            torch.testing.assert_close(c_other(x), want_other)
        assert tiered.pending() >= 2
        gated_build.set()
        assert mend.compiler.wait(120)
        torch.testing.assert_close(c(x), want, rtol=1e-5, atol=1e-5)

"""CUDA graphs option of the mend backend: what can be checked without a GPU (the replay itself is in
``test_triton_gpu.py``)."""

from __future__ import annotations

import torch
from torch.fx.experimental.proxy_tensor import make_fx

from mend.compiler.lowering.decomps import decomposition_table
from mend.compiler.runtime import cudagraphs

from .helpers import lower_and_schedule


def test_requested_by_mode_options_and_environment(monkeypatch):
    monkeypatch.delenv("MEND_CUDAGRAPHS", raising=False)
    assert cudagraphs.requested({"mode": "reduce-overhead"})
    assert cudagraphs.requested({"options": {"cudagraphs": True}})
    assert not cudagraphs.requested({})
    assert not cudagraphs.requested({"mode": "max-autotune"})
    assert not cudagraphs.requested({"mode": "reduce-overhead", "options": {"cudagraphs": False}})
    monkeypatch.setenv("MEND_CUDAGRAPHS", "0")
    assert not cudagraphs.requested({"mode": "reduce-overhead"})
    monkeypatch.setenv("MEND_CUDAGRAPHS", "1")
    assert cudagraphs.requested({})


def _graphs(fn, *args):
    gm = make_fx(fn, decomposition_table=decomposition_table())(*args)
    sg = lower_and_schedule(gm, args)
    return gm, sg


def test_decline_reasons():
    x = torch.randn(4)
    gm, sg = _graphs(lambda x: x * 2, x)
    assert "not on the GPU" in cudagraphs.decline_reason(gm, sg, [x])
    gm, sg = _graphs(lambda x, c: (c.add_(1), x * 2)[1], x, torch.zeros(4))
    assert "mutates" in cudagraphs.decline_reason(gm, sg, [x, torch.zeros(4)])


def test_reduce_overhead_on_cpu_tensors_compiles_without_cuda_graphs():
    f = torch.compile(lambda x: torch.softmax(x, -1) * 3, backend="mend", mode="reduce-overhead")
    x = torch.randn(5, 7)
    for _ in range(3):
        torch.testing.assert_close(f(x), torch.softmax(x, -1) * 3)


def test_mend_compile_passes_mode_and_options(monkeypatch):
    import mend.compiler as mc
    from mend.compiler import backend

    seen = []
    real = backend.mend_backend

    def spy(gm, example_inputs, **kwargs):
        seen.append(kwargs)
        return real(gm, example_inputs, **kwargs)

    monkeypatch.setattr(backend, "mend_backend", spy)
    torch._dynamo.reset()
    mc.compile(lambda x: x + 1, mode="reduce-overhead")(torch.randn(3))
    torch._dynamo.reset()
    mc.compile(lambda x: x + 2, cudagraphs=True)(torch.randn(3))
    assert cudagraphs.requested(seen[0]) and cudagraphs.requested(seen[1])


def test_static_layouts():
    """The static buffer an input is copied into: its own strides, expanded dims once; none for a view
    that overlaps itself."""
    x = torch.randn(3, 4)
    layout = cudagraphs.static_layout
    assert layout(x) == ((3, 4), (4, 1)) and layout(x.t()) == ((4, 3), (1, 4))
    assert layout(x[:, :1]) == ((3, 1), (4, 1)) and layout(x[:, ::2]) == ((3, 2), (4, 2))  # gaps are fine
    assert layout(torch.randn(3, 1, 5).transpose(0, 2)) == ((5, 1, 3), (1, 5, 5))
    assert layout(torch.randn(4, 1).expand(4, 6)) == ((4, 1), (1, 0))
    assert layout(torch.tensor(2.0).expand(8, 512, 768)) == ((1, 1, 1), (0, 0, 0))
    assert layout(x.as_strided((3, 3), (1, 1))) is None  # overlapping
    assert layout(torch.randn(0, 3)) is not None and layout(torch.tensor(1.0)) == ((), ())


class _FakeGraph:
    """Stands in for torch.cuda.CUDAGraph on a CPU: replay re-runs the captured call and writes the results
    into the buffers the capture returned (what a real replay does)."""

    current = None

    def __init__(self):
        self.fn = None

    def replay(self):
        outs = self.fn()
        for dst, src in zip(self.outs, outs):
            if isinstance(dst, torch.Tensor) and dst.data_ptr() != src.data_ptr():
                dst.copy_(src)


def _fake_cuda(monkeypatch):
    import contextlib

    @contextlib.contextmanager
    def graph(g):
        _FakeGraph.current = g
        yield

    class _Stream:
        def __init__(self, *a):
            pass

        def wait_stream(self, other):
            pass

    monkeypatch.setattr(torch.cuda, "CUDAGraph", _FakeGraph)
    monkeypatch.setattr(torch.cuda, "graph", graph)
    monkeypatch.setattr(torch.cuda, "Stream", _Stream)
    monkeypatch.setattr(torch.cuda, "stream", lambda s: contextlib.nullcontext())
    monkeypatch.setattr(torch.cuda, "current_stream", lambda *a: _Stream())
    monkeypatch.setattr(torch.cuda, "synchronize", lambda *a: None)


def test_replay_logic_copies_inputs_rebuilds_aliases_and_copies_outputs_per_storage(monkeypatch):
    _fake_cuda(monkeypatch)
    w = torch.nn.Parameter(torch.randn(5))

    def body(x, w):
        y = x * w + 1
        return [x, x[1:].t(), y, y[2:], w]

    def call(args):
        x, w = args
        args.clear()
        return body(x, w)

    cg = cudagraphs.CudaGraphCall(call, "test graph")
    orig_capture = cg._capture

    def capture(args):
        orig_capture(args)
        static = list(cg.static_inputs)
        cg.graph.fn = lambda: call(list(static))
        cg.graph.outs = cg.static_outputs

    monkeypatch.setattr(cg, "_capture", capture)
    batched = []  # each replay copies its inputs in and its outputs out with one multi-tensor call each
    real_copy_all = torch._foreach_copy_
    monkeypatch.setattr(torch, "_foreach_copy_", lambda d, s: (batched.append(len(d)), real_copy_all(d, s)))
    kept = []
    for i in range(4):
        x = torch.randn(6, 5)
        x0 = x.clone()
        got = cg([x, w])
        want = body(x, w)
        for g, e in zip(got, want):
            torch.testing.assert_close(g, e)
            assert g.shape == e.shape and g.stride() == e.stride()
        assert torch.equal(x, x0)
        if i >= 1:  # captured: inputs are the caller's, intermediates share one copied storage
            assert got[0].data_ptr() == x.data_ptr() and got[1].data_ptr() == x[1:].data_ptr()
            assert got[4] is w or got[4].data_ptr() == w.data_ptr()
            assert got[3].untyped_storage().data_ptr() == got[2].untyped_storage().data_ptr()
            assert got[2].data_ptr() != cg.static_outputs[2].data_ptr()
        kept.append((got[2], got[2].clone()))
    assert batched == [1] + [1, 1] * 3  # capture: x in; replays 2-4: x in, y's storage out (x's views are rebuilt)
    assert cg.graph is not None and cg.captures == 1
    for out, out0 in kept:
        assert torch.equal(out, out0)
    # another input layout: the plain graph runs, no new capture
    x = torch.randn(5, 6).t()
    got = cg([x, w])
    torch.testing.assert_close(got[2], body(x, w)[2])
    assert cg.captures == 1


def test_an_expanded_input_is_captured_and_copied_once_per_replay(monkeypatch):
    """A backward graph's incoming gradient of a mean is a scalar expanded to the output's shape: it is
    captured (a static buffer of one element read through stride 0), and each replay sees the new value."""
    _fake_cuda(monkeypatch)
    w = torch.nn.Parameter(torch.randn(6, 5))

    def call(args):
        g, w = args
        args.clear()
        return [g * w + 1]

    cg = cudagraphs.CudaGraphCall(call, "test graph")
    orig_capture = cg._capture

    def capture(args):
        orig_capture(args)
        static = list(cg.static_inputs)
        cg.graph.fn = lambda: call(list(static))
        cg.graph.outs = cg.static_outputs

    monkeypatch.setattr(cg, "_capture", capture)
    for i in range(4):
        g = torch.tensor(float(i + 1)).expand(6, 5)
        got = cg([g, w])
        torch.testing.assert_close(got[0], g * w + 1)
    assert cg.graph is not None and cg.captures == 1 and not cg.disabled
    (buf, _), = cg.buffers.values()
    assert buf.numel() == 1 and cg.static_inputs[0].stride() == (0, 0)


def test_a_graph_without_tensor_inputs_is_captured_on_its_own_device(monkeypatch):
    """A graph whose inputs are all numbers (or none: everything it computes comes from constants) has no
    input to take the device from; the capture takes the graph's (it raised StopIteration and ran without
    CUDA graphs: BART's fp16 graphs on an H200)."""
    _fake_cuda(monkeypatch)
    synced = []
    monkeypatch.setattr(torch.cuda, "synchronize", lambda *a: synced.append(a))

    def call(args):
        args.clear()
        return [torch.arange(4) * 2]

    cg = cudagraphs.CudaGraphCall(call, "test graph", torch.device("cpu"))
    orig_capture = cg._capture

    def capture(args):
        orig_capture(args)
        cg.graph.fn = lambda: call([])
        cg.graph.outs = cg.static_outputs

    monkeypatch.setattr(cg, "_capture", capture)
    for _ in range(3):
        assert torch.equal(cg([])[0], torch.arange(4) * 2)
    assert cg.graph is not None and not cg.disabled and cg.captures == 1
    assert (torch.device("cpu"),) in synced

"""CUDA graphs option of the mend backend: what can be checked without a GPU (the replay itself is in
``test_triton_gpu.py``)."""

from __future__ import annotations

import torch
from torch.fx.experimental.proxy_tensor import make_fx

from mend.compiler import cudagraphs
from mend.compiler.decomps import decomposition_table
from mend.compiler.lowering import Lowering
from mend.compiler.scheduler import schedule


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
    sg, _ = schedule(Lowering(gm, list(args)).run(), "cpu")
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


def test_dense_layouts():
    x = torch.randn(4, 6)
    assert cudagraphs._dense(x) and cudagraphs._dense(x.t()) and cudagraphs._dense(x[:1])
    assert not cudagraphs._dense(x[:, :1])  # a column: gaps between its elements
    assert cudagraphs._dense(torch.randn(3, 1, 5).transpose(0, 2))
    assert not cudagraphs._dense(torch.randn(4, 1).expand(4, 6))
    assert not cudagraphs._dense(x[:, ::2])
    assert not cudagraphs._dense(x.as_strided((3, 3), (1, 1)))  # overlapping
    assert cudagraphs._dense(torch.randn(0, 3)) and cudagraphs._dense(torch.tensor(1.0))

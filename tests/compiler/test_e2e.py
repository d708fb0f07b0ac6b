"""End-to-end through Dynamo: torch.compile(backend="mend") against eager, forward and backward."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

import mend.compiler
from mend.compiler import backend

from .models import MLP, Attention, Block, ResidualLN, SDPABlock


def _params_and_inputs(model, inputs):
    return [p for p in model.parameters()] + [x for x in inputs if x.requires_grad]


def _check_train(model, *inputs, rtol=1e-4, atol=1e-5):
    """Compare outputs and every gradient (inputs and parameters) of eager and mend."""
    torch.manual_seed(0)
    compiled = mend.compiler.compile(model)
    before = dict(backend.STATS)
    out = compiled(*inputs)
    grad = torch.randn_like(out)
    out.backward(grad)
    got = [t.grad.clone() for t in _params_and_inputs(model, inputs)]
    for t in _params_and_inputs(model, inputs):
        t.grad = None
    want = model(*inputs)
    want.backward(grad)
    torch.testing.assert_close(out, want, rtol=rtol, atol=atol)
    for g, t in zip(got, _params_and_inputs(model, inputs)):
        torch.testing.assert_close(g, t.grad, rtol=rtol, atol=atol)
    # forward and backward were both compiled by mend, with no graph-level fallback
    assert backend.STATS["graphs"] - before["graphs"] == 2
    assert backend.STATS["fallback_graphs"] == before["fallback_graphs"]
    assert backend.STATS["interpreted_kernels"] == before["interpreted_kernels"]


@pytest.mark.slow
@pytest.mark.parametrize("name", ["mlp", "residual_ln", "attention", "block", "sdpa_block"])
def test_models_forward_backward(name):
    torch.manual_seed(0)
    x = torch.randn(2, 8, 32, requires_grad=True)
    if name == "mlp":
        _check_train(MLP(), x)
    elif name == "residual_ln":
        _check_train(ResidualLN(32 if False else 64), torch.randn(4, 6, 64, requires_grad=True),
                     torch.randn(4, 6, 64, requires_grad=True))
    elif name == "attention":
        _check_train(Attention(), x)
    elif name == "block":
        _check_train(Block(), x)
    else:
        _check_train(SDPABlock(), x)


def _graph_of(fn, *args):
    """Compile an inference graph and return the wrapper (with .mend_graph) that mend built for it."""
    calls = []
    orig = backend.compile_graph

    def spy(gm, ex, *args, **kw):
        c = orig(gm, ex, *args, **kw)
        calls.append(c)
        return c

    backend.compile_graph = spy
    try:
        with torch.no_grad():
            out = torch.compile(fn, backend="mend", fullgraph=True)(*args)
    finally:
        backend.compile_graph = orig
    return out, calls


def _compare(fn, *args, kernels=None):
    torch._dynamo.reset()
    out, calls = _graph_of(fn, *args)
    torch.testing.assert_close(out, fn(*args), rtol=1e-5, atol=1e-5)
    assert len(calls) == 1
    if kernels is not None:
        assert len(calls[0].mend_graph.kernels) == kernels, str(calls[0].mend_graph)
    return calls[0]


def test_softmax_is_one_row_kernel_without_intermediate_buffers():
    call = _compare(lambda x: torch.softmax(x * 0.125, -1), torch.randn(64, 100), kernels=1)
    k = call.mend_graph.kernels[0]
    assert k.rdims == (1,)
    assert [s.kind for s in k.stages] == ["reduction", "pointwise", "reduction", "pointwise"]
    assert [s.store is not None for s in k.stages] == [False, False, False, True]
    assert len(call.mend_graph.buffers) == 1  # only the output is allocated


def _transposed_softmax_chain(x):
    a = torch.softmax(x, -1) * 2
    b = torch.softmax(a.t().contiguous() + 1, -1)
    c = torch.softmax(b.t().contiguous() * 3, -1)
    return torch.softmax(c.t().contiguous() - 1, -1).t().contiguous().sum(0)


def test_dead_kernel_buffers_are_taken_over_by_later_outputs():
    """A kernel output of the same layout as a dead buffer takes its storage (no allocator call): the
    result is still eager's, and fewer buffers are allocated than there are kernel outputs."""
    x = torch.randn(32, 32)
    call = _compare(_transposed_softmax_chain, x)
    src = call.mend_wrapper_source
    outputs = sum(len(k.outputs) for k in call.mend_graph.steps if hasattr(k, "stages"))
    taken = src.count("; del ")
    assert taken >= 3, src
    assert src.count("_empty(") == outputs - taken, src
    # the same wrapper called twice gives the same answer (a taken-over buffer holds no stale state)
    call2 = _compare(_transposed_softmax_chain, x * 3)
    assert call2.mend_wrapper_source.count("; del ") == taken


def test_buffers_read_by_extern_ops_are_never_taken_over():
    """An extern op may return a view of its input: such a buffer keeps its own storage."""
    w = torch.randn(32, 32)
    call = _compare(lambda x: (torch.softmax(x, -1) @ w).softmax(-1) @ w + 1, torch.randn(32, 32))
    assert "; del " not in call.mend_wrapper_source, call.mend_wrapper_source


def test_layer_norm_is_one_kernel():
    ln = torch.nn.LayerNorm(48)
    call = _compare(ln, torch.randn(4, 5, 48), kernels=1)
    assert call.mend_graph.kernels[0].rdims == (2,)


def test_residual_layer_norm_relu_is_one_kernel():
    ln = torch.nn.LayerNorm(40)
    _compare(lambda x, y: F.relu(ln(x + y)), torch.randn(8, 40), torch.randn(8, 40), kernels=1)


def test_pointwise_chain_is_one_flat_kernel():
    call = _compare(lambda x, w, b: torch.relu(x * w + b) * torch.sigmoid(x), torch.randn(16, 64),
                    torch.randn(64), torch.randn(64), kernels=1)
    assert len(call.mend_graph.kernels[0].stages) == 1


def test_siblings_reading_one_input_share_a_kernel():
    call = _compare(lambda x: (x.sum(-1), (x * x).sum(-1), x.amax(-1)), torch.randn(32, 50), kernels=1)
    assert len(call.mend_graph.kernels[0].stages) == 3


def test_column_reduction_and_broadcast_epilogue():
    _compare(lambda x: x - x.mean(0, keepdim=True), torch.randn(30, 20), kernels=1)


def test_inference_with_module_buffers_and_constants():
    bn = torch.nn.BatchNorm1d(16).eval()
    bn.running_mean.normal_()
    bn.running_var.uniform_(0.5, 2)
    _compare(lambda x: bn(x).relu(), torch.randn(8, 16))


def test_training_batchnorm_updates_running_stats():
    torch.manual_seed(0)
    bn_e = torch.nn.BatchNorm1d(8)
    bn_c = torch.nn.BatchNorm1d(8)
    bn_c.load_state_dict(bn_e.state_dict())
    x = torch.randn(16, 8)
    torch._dynamo.reset()
    c = torch.compile(bn_c, backend="mend", fullgraph=True)
    for _ in range(2):
        torch.testing.assert_close(c(x), bn_e(x), rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(bn_c.running_mean, bn_e.running_mean)
    torch.testing.assert_close(bn_c.running_var, bn_e.running_var)


class _EmbedDropout(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.emb = torch.nn.Embedding(50, 16)
        self.ln = torch.nn.LayerNorm(16)
        self.drop = torch.nn.Dropout(0.1)
        self.fc = torch.nn.Linear(16, 16)
        self.register_buffer("pos", torch.arange(8))

    def forward(self, ids):
        h = self.emb(ids) + self.emb(self.pos)[None]
        return self.fc(self.drop(self.ln(h))).tanh()


@pytest.mark.slow
def test_embedding_dropout_eval_and_train():
    torch.manual_seed(0)
    m = _EmbedDropout()
    ids = torch.randint(0, 50, (2, 8))
    c = mend.compiler.compile(m)
    m.eval()
    torch.testing.assert_close(c(ids), m(ids))
    m.train()
    out = c(ids)
    out.sum().backward()
    assert out.shape == (2, 8, 16) and m.emb.weight.grad.abs().sum() > 0
    assert torch.isfinite(m.fc.weight.grad).all()


def test_input_mutation_is_applied():
    def mut(x, y):
        x.add_(y)
        return x * 2

    a, b = torch.randn(5), torch.randn(5)
    a0 = a.clone()
    r = mend.compiler.compile(mut)(a, b)
    torch.testing.assert_close(a, a0 + b)
    torch.testing.assert_close(r, (a0 + b) * 2)


@pytest.mark.slow
def test_huggingface_gpt2_forward_is_one_graph():
    transformers = pytest.importorskip("transformers")
    torch.manual_seed(0)
    cfg = transformers.GPT2Config(n_layer=2, n_head=4, n_embd=64, vocab_size=100, n_positions=32,
                                  bos_token_id=0, eos_token_id=0)
    model = transformers.GPT2LMHeadModel(cfg).eval()
    ids = torch.randint(0, 100, (2, 16))
    before = dict(backend.STATS)
    with torch.no_grad():
        got = mend.compiler.compile(model)(ids).logits
        want = model(ids).logits
    torch.testing.assert_close(got, want, rtol=1e-4, atol=1e-5)
    assert backend.STATS["fallback_graphs"] == before["fallback_graphs"]
    assert backend.STATS["kernels"] > before["kernels"]

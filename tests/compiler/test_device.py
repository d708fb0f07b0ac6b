"""Device placement: every tensor the compiled graph makes lives on the graph's device, and tensors the
program keeps on the CPU inside a device graph (a CPU scalar, an index built by ``torch.arange`` without
``device=``) stay where eager puts them.

No GPU is needed: the graph's device is ``meta`` (a non-CPU device that runs every ATen op), the kernels
run in the reference interpreter through a generator that records the device of every tensor handed to it,
and ``torch.empty_strided`` (the wrapper's allocator) records the device of every buffer."""

from __future__ import annotations

import pytest
import torch
from torch.fx.experimental.proxy_tensor import make_fx

from mend.compiler import backend
from mend.compiler.lowering import graph_device
from mend.compiler.lowering.decomps import decomposition_table
from mend.compiler.runtime.interpret import run_kernel


def reformer_like(s, x):
    """Patterns from Reformer's LSH/local attention: an arange-built gather index, torch.full masks,
    new_zeros, a CPU scalar used in device arithmetic, CPU-side index arithmetic used to index."""
    n = x.shape[-1]
    idx = torch.arange(n, device=x.device).repeat(x.shape[0], 1)
    g = torch.gather(x, -1, (idx + 3) % n)
    fill = torch.full((x.shape[0], n), -1e4, device=x.device)
    z = x.new_zeros(x.shape[0], n)
    out = torch.where(idx < 5, g, fill) + z * s
    lut = torch.arange(16) * 2  # no device=: a CPU tensor in eager
    pick = lut[torch.arange(3)] % n
    cols = out[:, pick.to(x.device)]
    return out.softmax(-1), cols, pick


class RecordingGenerator:
    """Runs every kernel in the interpreter and records the devices of the tensors it is given."""

    name = "recording"

    def __init__(self, seen):
        self.seen = seen

    def compile(self, kernels, dump):
        def make(k):
            def fn(*ts):
                self.seen.extend((k.name, t.device) for t in ts)
                run_kernel(k, *ts)

            return fn, "tensor"

        return {k.name: make(k) for k in kernels}


def _compile(monkeypatch, fn, args):
    seen, allocs, devices = [], [], []
    monkeypatch.setattr(backend, "generator_for", lambda device_type: (devices.append(device_type),
                                                                        RecordingGenerator(seen))[1])
    monkeypatch.setattr(backend.graph_cache, "load", lambda key: None)
    gm = make_fx(fn, decomposition_table=decomposition_table(), tracing_mode="fake")(*args)
    call = backend.compile_graph(gm, list(args))
    real = torch.empty_strided

    def empty_strided(*a, **kw):
        allocs.append(torch.device(kw.get("device") or "cpu"))
        return real(*a, **kw)

    monkeypatch.setattr(torch, "empty_strided", empty_strided)
    return gm, call, seen, allocs, devices


def test_graph_device_is_not_taken_from_a_cpu_scalar_input():
    s, x = torch.tensor(2.0), torch.randn(4, 8, device="meta")
    gm = make_fx(reformer_like, decomposition_table=decomposition_table(), tracing_mode="fake")(s, x)
    assert graph_device(gm, [s, x]) == torch.device("meta")
    assert graph_device(gm, [s]) == torch.device("meta")  # from the values the graph computes
    assert graph_device(make_fx(lambda a: a + 1)(s), [s]) == torch.device("cpu")


def test_every_tensor_the_wrapper_makes_is_on_the_graph_device(monkeypatch):
    s, x = torch.tensor(2.0), torch.randn(4, 8, device="meta")  # the CPU scalar comes first
    _, call, seen, allocs, devices = _compile(monkeypatch, reformer_like, (s, x))
    assert devices == ["meta"]
    assert call.mend_graph.kernels, "nothing was lowered"
    assert call.mend_interpreted == []
    # the arange without device= and the CPU-side arithmetic stay ATen calls on the CPU
    assert any("arange" in op for op in call.mend_extern_ops)
    got = call([s, x])
    want = reformer_like(s, x)
    assert [t.device for t in got] == [t.device for t in want] == [x.device, x.device, torch.device("cpu")]
    assert [t.shape for t in got] == [t.shape for t in want]
    assert seen and all(d == torch.device("meta") for _, d in seen), seen
    assert allocs and all(d == torch.device("meta") for d in allocs), allocs


def test_reformer_like_graph_matches_eager_on_cpu(monkeypatch):
    s, x = torch.tensor(2.0), torch.randn(4, 8)
    _, call, _, _, devices = _compile(monkeypatch, reformer_like, (s, x))
    assert devices == ["cpu"]
    for g, w in zip(call([s, x]), reformer_like(s, x)):
        torch.testing.assert_close(g, w)


@pytest.mark.slow
def test_small_reformer_model_matches_eager(tmp_path, monkeypatch):
    transformers = pytest.importorskip("transformers")
    monkeypatch.setenv("MEND_CACHE_DIR", str(tmp_path))
    torch.manual_seed(0)
    cfg = transformers.ReformerConfig(
        vocab_size=64, hidden_size=32, num_attention_heads=2, attention_head_size=16,
        attn_layers=["local", "lsh"], axial_pos_embds=True, axial_pos_shape=(4, 8), axial_pos_embds_dim=(16, 16),
        feed_forward_size=64, local_attn_chunk_length=8, lsh_attn_chunk_length=8, num_buckets=4, num_hashes=1,
        max_position_embeddings=32, is_decoder=False, hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0,
        lsh_attention_probs_dropout_prob=0.0, local_attention_probs_dropout_prob=0.0, pad_token_id=0)
    m = transformers.ReformerModel(cfg).eval()
    ids = torch.randint(1, 64, (2, 32))
    torch._dynamo.reset()
    before = dict(backend.STATS)
    with torch.no_grad():
        torch.manual_seed(1)  # LSH hashing draws random rotations on every call
        want = m(ids).last_hidden_state
        torch.manual_seed(1)
        got = torch.compile(m, backend="mend")(ids).last_hidden_state
    torch._dynamo.reset()
    torch.testing.assert_close(got, want, rtol=1e-4, atol=1e-5)
    assert backend.STATS["graphs"] > before["graphs"]
    assert backend.STATS["kernels"] > before["kernels"]
    assert backend.STATS["fallback_graphs"] == before["fallback_graphs"]
    assert backend.STATS["interpreted_kernels"] == before["interpreted_kernels"]

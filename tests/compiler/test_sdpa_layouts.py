"""The attention bias that mend hands to SDPA's memory-efficient and cuDNN kernels: those read it with vector
loads and reject a bias whose strides are not multiples of 16 bytes ("attn_bias is not correctly aligned",
Swin's [.., 49, 49] window bias in fp32). On the CPU the efficient-attention op has no kernel: a stand-in
registered for the test checks the bias as the CUDA kernel does, records its layout and computes the math
attention, so the whole compiled graph runs."""

from __future__ import annotations

import pytest
import torch
from torch.fx.experimental.proxy_tensor import make_fx

from mend.compiler import ir
from mend.compiler.lowering.decomps import decomposition_table
from mend.compiler.lowering.values import ALIGNMENT

from .helpers import lower_and_schedule, mend_compile_fx

aten = torch.ops.aten
SEEN: list = []


def _efficient_attention_cpu(q, k, v, bias, compute_log_sumexp, dropout_p=0.0, is_causal=False, *, scale=None):
    """aten._scaled_dot_product_efficient_attention on the CPU: the CUDA kernel's bias checks
    (kernel_forward.h), then the math attention."""
    if bias is not None:
        SEEN.append((tuple(bias.shape), tuple(bias.stride()), bias.storage_offset()))
        align = 16 // bias.element_size()
        for d, (n, name) in enumerate(((q.shape[0], "strideB"), (q.shape[1], "strideH"), (q.shape[2], "strideM"))):
            if n > 1 and bias.stride(d) % align:
                raise RuntimeError(f"attn_bias is not correctly aligned ({name}). attn_bias.stride({d}) = "
                                   f"{bias.stride(d)}, and should be a multiple of {align}.")
        if bias.stride(-1) != 1 or bias.data_ptr() % 16:
            raise RuntimeError("attn_bias is not correctly aligned")
    metas = aten._scaled_dot_product_efficient_attention(*(t.to("meta") for t in (q, k, v)),
                                                         None if bias is None else bias.to("meta"),
                                                         compute_log_sumexp, dropout_p, is_causal, scale=scale)
    res = [torch.empty_strided(m.shape, m.stride(), dtype=m.dtype) for m in metas]
    res[0].copy_(aten._scaled_dot_product_attention_math(q, k, v, bias, dropout_p, is_causal, scale=scale)[0])
    for t in res[1:]:
        t.zero_()
    return tuple(res)


@pytest.fixture
def efficient_attention_on_cpu():
    lib = torch.library.Library("aten", "IMPL")
    lib.impl("_scaled_dot_product_efficient_attention", _efficient_attention_cpu, "CPU")
    SEEN.clear()
    yield SEEN
    lib._destroy()


def _attention(bias_fn, preprocess=True):
    def fn(q, k, v, *bias_inputs):
        b = bias_fn(*bias_inputs)
        if preprocess:  # what ATen's sdpa hands the efficient kernel on a GPU (preprocess_mask): padded, sliced
            n = b.shape[-1]
            b = torch.nn.functional.pad(b, (0, -n % ALIGNMENT))[..., :n]
        return aten._scaled_dot_product_efficient_attention(q, k, v, b, False)[0] * 2

    return fn


def r(*shape):
    return torch.randn(*shape)


# (name, bias from its inputs, bias inputs): q, k, v are [4, 3, 49, 32] (Swin's first stage: 3 heads, 7x7 windows)
CASES = [
    ("computed: window bias + mask", lambda rel, mask: rel[None] + mask[:, None], [r(3, 49, 49), r(4, 49, 49)]),
    ("computed, broadcast over heads", lambda mask: (mask * 0.5)[:, None].expand(4, 3, 49, 49), [r(4, 49, 49)]),
    ("a dense input", lambda b: b, [r(4, 3, 49, 49)]),
    ("an input broadcast over the batch", lambda b: b.expand(4, 3, 49, 49), [r(1, 3, 49, 49)]),
]


@pytest.mark.parametrize("name,bias_fn,bias_inputs", CASES, ids=[c[0] for c in CASES])
def test_efficient_attention_gets_an_aligned_bias(efficient_attention_on_cpu, name, bias_fn, bias_inputs):
    q, k, v = (r(4, 3, 49, 32) for _ in range(3))
    fn = _attention(bias_fn)
    bias = bias_fn(*bias_inputs)
    want = aten._scaled_dot_product_attention_math(q, k, v, bias)[0] * 2
    call = mend_compile_fx(fn, q, k, v, *bias_inputs)
    got = call([q, k, v, *bias_inputs])[0]
    torch.testing.assert_close(got, want)  # the efficient kernel's output layout, not the math kernel's
    [(shape, stride, offset)] = efficient_attention_on_cpu
    assert shape == (4, 3, 49, 49)
    assert stride[-1] == 1 and offset % ALIGNMENT == 0
    assert all(s % ALIGNMENT == 0 for s in stride[:-1]), stride
    if "broadcast" in name:  # the broadcast dim is not materialized
        assert 0 in stride[:2], stride


def test_an_aligned_bias_is_passed_as_it_is(efficient_attention_on_cpu):
    """An input already laid out as the kernel needs (ATen's padded slice) is not copied."""
    q, k, v = (r(4, 3, 49, 32) for _ in range(3))
    storage = r(4, 3, 49, 56)
    fn = _attention(lambda b: b, preprocess=False)
    call = mend_compile_fx(fn, q, k, v, storage[..., :49])
    [step] = [s for s in call.mend_graph.steps if isinstance(s, ir.ExternKernel)]
    assert step.args[3].buf == "arg3"  # the input itself
    got = call([q, k, v, storage[..., :49]])[0]
    torch.testing.assert_close(got, aten._scaled_dot_product_attention_math(q, k, v, storage[..., :49])[0] * 2)
    assert efficient_attention_on_cpu == [((4, 3, 49, 49), (3 * 49 * 56, 49 * 56, 56, 1), 0)]


def test_every_sdpa_op_with_a_bias_gets_it_aligned():
    """The backward of efficient attention and cuDNN's forward and backward read the bias the same way
    (lowered only: no CPU kernel runs them)."""
    tensors = dict(q=r(4, 3, 49, 32), k=r(4, 3, 49, 32), v=r(4, 3, 49, 32), out=r(4, 3, 49, 32),
                   g=r(4, 3, 49, 32), lse=r(4, 3, 64), seed=torch.tensor(0), offset=torch.tensor(0),
                   rel=r(3, 49, 49), mask=r(4, 49, 49))
    calls = {
        aten._scaled_dot_product_efficient_attention_backward.default: (
            4, lambda t, b: aten._scaled_dot_product_efficient_attention_backward(
                t["g"], t["q"], t["k"], t["v"], b, t["out"], t["lse"], t["seed"], t["offset"], 0.0,
                [True, True, True, False])),
        aten._scaled_dot_product_cudnn_attention.default: (
            3, lambda t, b: aten._scaled_dot_product_cudnn_attention(t["q"], t["k"], t["v"], b, False)),
        aten._scaled_dot_product_cudnn_attention_backward.default: (
            8, lambda t, b: aten._scaled_dot_product_cudnn_attention_backward(
                t["g"], t["q"], t["k"], t["v"], t["out"], t["lse"][..., :49], t["seed"], t["offset"], b, None,
                None, 49, 49, 0.0, False)),
    }
    for op, (position, call) in calls.items():
        def fn(*args, call=call):
            t = dict(zip(tensors, args))
            return call(t, t["rel"][None] + t["mask"][:, None])

        args = list(tensors.values())
        gm = make_fx(lambda *a: fn(*a), decomposition_table=decomposition_table(), tracing_mode="fake")(*args)
        [step] = [s for s in lower_and_schedule(gm, args).steps if isinstance(s, ir.ExternKernel) and s.op == op]
        ref = step.args[position]
        assert isinstance(ref, ir.TensorRef), op
        assert ref.layout.size == (4, 3, 49, 49), op
        assert ref.layout.stride == (3 * 49 * 56, 49 * 56, 56, 1), (op, ref.layout)

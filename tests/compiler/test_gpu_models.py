"""The bundled compiler on a GPU the way users run it: half precision, flash and efficient attention, real
architectures, tall reductions, eager's output strides. Skipped without CUDA; run on the GPU machine
(``benchmarks/gpu_check.sh``)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F

pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device"),
]

pytest.importorskip("triton")

from mend.compiler import backend  # noqa: E402
from mend.compiler.runtime import guard  # noqa: E402

from .helpers import assert_same  # noqa: E402
from .test_triton_gpu import DEV, _fresh, check, r  # noqa: E402, F401  (_fresh: autouse fixture)

BENCHMARKS = Path(__file__).resolve().parents[2] / "benchmarks"
HALF = [torch.bfloat16, torch.float16]


def _sdpa_backends():
    from torch.nn.attention import SDPBackend

    return {"flash": SDPBackend.FLASH_ATTENTION, "efficient": SDPBackend.EFFICIENT_ATTENTION,
            "math": SDPBackend.MATH}


@pytest.mark.parametrize("dtype", HALF)
@pytest.mark.parametrize("kernel", ["flash", "efficient", "math"])
def test_sdpa_in_half_precision_forward_and_backward(dtype, kernel):
    """On a GPU in half precision SDPA lowers to the flash/efficient-attention ops, whose outputs include
    None where their meta functions promise tensors: the wrapper must never touch those."""
    from torch.nn.attention import sdpa_kernel

    q, k, v = (r(2, 4, 128, 64, dtype=dtype) for _ in range(3))

    def fn(q, k, v):
        return (F.scaled_dot_product_attention(q * 1.5, k, v, is_causal=True) + 1).relu()

    with sdpa_kernel(_sdpa_backends()[kernel]):
        check(fn, q, k, v, dtype=dtype)
        torch._dynamo.reset()
        qs = [t.clone().requires_grad_() for t in (q, k, v)]
        out = torch.compile(fn, backend="mend")(*qs)
        out.float().square().sum().backward()
        got = [t.grad for t in qs]
        qe = [t.clone().requires_grad_() for t in (q, k, v)]
        want = fn(*qe)
        want.float().square().sum().backward()
    assert_same(out, want, dtype)
    for g, w in zip(got, [t.grad for t in qe]):
        torch.testing.assert_close(g.float(), w.float(), rtol=5e-2, atol=5e-2)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_efficient_attention_with_a_computed_window_bias(dtype):
    """Swin's window bias ([.., 49, 49], computed in the graph) fed to the memory-efficient kernel, which
    rejects a bias whose strides are not multiples of 16 bytes: mend stores it with a padded last dim."""
    from torch.nn.attention import SDPBackend, sdpa_kernel

    q, k, v = (r(8, 3, 49, 32, dtype=dtype) for _ in range(3))
    rel, mask = r(3, 49, 49, dtype=dtype), r(8, 49, 49, dtype=dtype)

    def fn(q, k, v, rel, mask):
        return F.scaled_dot_product_attention(q, k, v, attn_mask=rel[None] + mask[:, None] * 0.5) * 2

    with sdpa_kernel(SDPBackend.EFFICIENT_ATTENTION):
        want = fn(q, k, v, rel, mask)
        got = torch.compile(fn, backend="mend")(q, k, v, rel, mask)
        torch._dynamo.reset()
        qs = [t.clone().requires_grad_() for t in (q, k, v)]
        torch.compile(fn, backend="mend")(*qs, rel, mask).float().square().sum().backward()
        qe = [t.clone().requires_grad_() for t in (q, k, v)]
        fn(*qe, rel, mask).float().square().sum().backward()
    t = dict(rtol=2e-2, atol=2e-2) if dtype != torch.float32 else dict(rtol=1e-4, atol=1e-4)
    torch.testing.assert_close(got, want, **t)
    for a, b in zip(qs, qe):
        torch.testing.assert_close(a.grad, b.grad, **t)


def _zoo():
    sys.path.insert(0, str(BENCHMARKS))
    import compiler_gpu_zoo

    return compiler_gpu_zoo


@pytest.mark.parametrize("name,dtype", [(n, torch.bfloat16) for n in ("gpt2", "llama", "mistral", "bart", "whisper",
                                                                       "bert", "t5", "vit")]
                         + [(n, torch.float16) for n in ("bart", "whisper", "gpt2")])
def test_transformers_models_in_half_precision(name, dtype):
    """The models that crashed in bf16/fp16 (and three that ran), small configs: no graph, kernel or run
    falls back, and the output is within half precision of eager's."""
    pytest.importorskip("transformers")
    zoo = _zoo()
    model, inputs = zoo.build(name, zoo.SIZES["tiny"], DEV, dtype)
    before, rf = dict(backend.STATS), guard.STATS["runtime_fallbacks"]
    with torch.no_grad():
        want = zoo.first_tensor(model(**inputs))
        got = zoo.first_tensor(torch.compile(model, backend="mend")(**inputs))
    assert backend.STATS["fallback_graphs"] == before["fallback_graphs"]
    assert backend.STATS["interpreted_kernels"] == before["interpreted_kernels"]
    assert guard.STATS["runtime_fallbacks"] == rf
    scale = want.float().abs().max().item()
    assert (got.float() - want.float()).abs().max().item() <= 3e-2 * max(1.0, scale)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_swin_runs_compiled(dtype):
    """Swin's attention bias (windows of 2 x 2 here, 7 x 7 at real sizes) goes to the memory-efficient
    kernel: it ran eagerly at run time in fp32 before the bias was stored aligned."""
    pytest.importorskip("transformers")
    zoo = _zoo()
    model, inputs = zoo.build("swin", zoo.SIZES["tiny"], DEV, dtype)
    before, rf = dict(backend.STATS), guard.STATS["runtime_fallbacks"]
    with torch.no_grad():
        want = zoo.first_tensor(model(**inputs))
        got = zoo.first_tensor(torch.compile(model, backend="mend")(**inputs))
    assert backend.STATS["fallback_graphs"] == before["fallback_graphs"]
    assert guard.STATS["runtime_fallbacks"] == rf
    scale = want.float().abs().max().item()
    tol = 1e-4 if dtype == torch.float32 else 3e-2
    assert (got.float() - want.float()).abs().max().item() <= tol * max(1.0, scale)


def test_tall_column_reduction_with_an_epilogue():
    """The benchmark case at its size: split into partial sums and a combine, the epilogue on its own."""
    x, b, c = r(65536, 1024), r(1024), r(1024)
    check(lambda x, b, c: F.gelu(x + b, approximate="tanh") * c - x.abs().mean(0), x, b, c)
    check(lambda x: (x.sum(0), x.amax(0), x - x.mean(0, keepdim=True)), r(200000, 16))


def test_outputs_keep_eagers_strides_on_the_gpu():
    base = r(6, 10, 8)
    cl = r(4, 8, 16, 16).to(memory_format=torch.channels_last)
    for x in (base[0].t(), base.permute(2, 0, 1), cl, r(10, 1).expand(10, 7), base[:, 2:9:2, 1:]):
        check(lambda x: ((x * 2 + 1).sigmoid(), x.sum(-1), torch.softmax(x, -1)), x)
    check(lambda x: (F.layer_norm(x, (16,)), (x * 2)[:, 1:], (x + 1).transpose(0, 1).unsqueeze(0)), cl)
    conv = torch.nn.Conv2d(8, 8, 3, padding=1).to(DEV).to(memory_format=torch.channels_last)
    with torch.no_grad():
        check(lambda x: F.gelu(conv(x)) + x, cl)


@pytest.mark.parametrize("dtype", HALF)
def test_matmul_epilogues_on_the_gpu(dtype):
    """Linear + bias + GELU + residual and a SwiGLU in half precision: the products run as Triton
    matmul kernels with their epilogues (no cuBLAS call left), as accurate as eager against float64."""
    from mend.compiler import ir
    from mend.compiler.codegen.triton import launch as triton_launch

    from .helpers import mend_compile_fx

    cases = [
        (lambda x, w, b, res: F.gelu(F.linear(x, w, b)) + res, [(4, 256, 768), (3072, 768), (3072,), (4, 256, 3072)]),
        (lambda x, wg, wu: F.silu(F.linear(x, wg)) * F.linear(x, wu), [(2, 128, 512), (1376, 512), (1376, 512)]),
        (lambda q, k: (torch.bmm(q, k.transpose(1, 2)) * 0.125).relu(), [(48, 256, 64), (48, 256, 64)]),
    ]
    for fn, shapes in cases:
        args = [r(*s, dtype=dtype) * 0.5 for s in shapes]
        before = dict(triton_launch.STATS)
        call = mend_compile_fx(fn, *args)
        assert not [s for s in call.mend_graph.steps if isinstance(s, ir.ExternKernel)]
        got = call(list(args))
        torch.cuda.synchronize()
        assert triton_launch.STATS["launch_fallbacks"] == before["launch_fallbacks"]
        want = fn(*args)
        ref = fn(*[a.double() for a in args])
        mine, eager = (got[0].double() - ref).abs().max().item(), (want.double() - ref).abs().max().item()
        assert mine <= 2 * eager + 1e-3, (mine, eager)


@pytest.mark.parametrize("cudagraphs", [False, True])
def test_matmul_kernels_tune_in_the_background(cudagraphs):
    """A bfloat16 linear + GELU with no tuning record: the first call runs cuBLAS and the epilogue kernel
    while the fused configurations compile; once built, a call times them and switches (with CUDA graphs,
    the capture settles the tuning first). Every result matches eager's."""
    import mend.compiler
    from mend.compiler.codegen.triton import launch as triton_launch

    x, w, b = r(4096, 768, dtype=torch.bfloat16), r(3072, 768, dtype=torch.bfloat16), r(3072, dtype=torch.bfloat16)

    def fn(x, w, b):
        return F.gelu(F.linear(x, w, b))

    want = fn(x, w, b)
    before = dict(triton_launch.STATS)
    f = torch.compile(fn, backend="mend", mode="reduce-overhead" if cudagraphs else None)
    outs = [f(x, w, b).clone()]
    if not cudagraphs:
        assert triton_launch.STATS["tuned_in_background"] == before["tuned_in_background"]
        assert mend.compiler.wait(timeout=300)
    for _ in range(3):
        outs.append(f(x, w, b).clone())
    torch.cuda.synchronize()
    assert triton_launch.STATS["tuned_in_background"] == before["tuned_in_background"] + 1
    for got in outs:
        torch.testing.assert_close(got, want, rtol=2e-2, atol=2e-2)

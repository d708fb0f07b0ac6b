"""The Triton generator on a real GPU: ``torch.compile(..., backend="mend")`` on CUDA tensors, end to end.

Skipped without CUDA (CI has no GPU); run on the GPU machine with ``pytest -m gpu tests/compiler``. Every
test compiles through Dynamo, aot_autograd, mend's lowering and scheduler and the Triton generator, runs
the generated kernels, compares with eager, and checks that no graph, kernel or launch fell back.
"""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device"),
]

pytest.importorskip("triton")

from mend.compiler import backend  # noqa: E402
from mend.compiler.codegen.triton import aot as triton_aot  # noqa: E402
from mend.compiler.codegen.triton import launch as triton_launch  # noqa: E402

from .helpers import assert_same, sum_backward_step  # noqa: E402
from .models import MLP, Block, ResidualLN  # noqa: E402

DEV = "cuda"


@pytest.fixture(autouse=True)
def _fresh(monkeypatch, tmp_path):
    monkeypatch.delenv("TRITON_INTERPRET", raising=False)
    monkeypatch.setenv("MEND_CACHE_DIR", str(tmp_path / "cache"))
    torch._dynamo.reset()
    yield
    torch._dynamo.reset()


class _Counts:
    def __init__(self):
        self.b = dict(backend.STATS)
        self.t = dict(triton_launch.STATS)

    def check(self):
        assert backend.STATS["fallback_graphs"] == self.b["fallback_graphs"], "a graph ran eagerly"
        assert backend.STATS["interpreted_kernels"] == self.b["interpreted_kernels"], "kernels not generated"
        assert triton_launch.STATS["launch_fallbacks"] == self.t["launch_fallbacks"], "a kernel did not build"
        assert triton_launch.STATS["kernels_built"] > self.t["kernels_built"], "no Triton kernel ran"


def check(fn, *args, dtype=None):
    counts = _Counts()
    want = fn(*args)
    got = torch.compile(fn, backend="mend", fullgraph=True)(*args)
    torch.cuda.synchronize()
    want = want if isinstance(want, tuple) else (want,)
    got = got if isinstance(got, tuple) else (got,)
    for i, (g, w) in enumerate(zip(got, want)):
        assert g.device.type == "cuda"
        assert_same(g, w, dtype, msg=f"output {i}")
    counts.check()


def r(*shape, dtype=torch.float32):
    return torch.randn(*shape, device=DEV).to(dtype)


def test_pointwise_broadcast_noncontiguous():
    x, w, b = r(257, 130), r(130), r(130)
    check(lambda x, w, b: torch.relu(x * w + b) * torch.sigmoid(x), x, w, b)
    check(lambda x, y: (x.t() - y).abs() + x.t().exp(), r(40, 24), r(24, 1))


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_half_dtypes(dtype):
    x, y = r(64, 48, dtype=dtype), (torch.rand(48, device=DEV) + 0.5).to(dtype)
    check(lambda x, y: ((torch.exp(x) + x * x) * y + 2, (x * y).float(), torch.softmax(x, -1)), x, y, dtype=dtype)


def test_integer_semantics():
    a = torch.randint(-50, 50, (300,), device=DEV)
    b = torch.randint(1, 9, (300,), device=DEV) * torch.where(torch.rand(300, device=DEV) > 0.5, 1, -1)
    m = torch.rand(300, device=DEV) > 0.3
    check(lambda a, b, m: (torch.div(a, b, rounding_mode="floor"), torch.div(a, b, rounding_mode="trunc"),
                           torch.remainder(a, b), torch.fmod(a, b), torch.where(m, a, b), (a > b) & m,
                           a.sign(), m.sum()), a, b, m)


def _unary_cases():
    from .test_triton import UNARY

    return UNARY


@pytest.mark.parametrize("name", sorted(_unary_cases()))
def test_math_functions_use_libdevice(name):
    x = r(1000) * 2
    check(_unary_cases()[name], x)


def test_softmax_layernorm_residual():
    x, w, b = r(512, 768), r(768), r(768)
    check(lambda x: torch.softmax(x * 0.125, -1), x)
    check(lambda x, w, b: F.layer_norm(x, (768,), w, b), x, w, b)
    check(lambda x, y, w, b: F.relu(F.layer_norm(x + y, (768,), w, b)), x, r(512, 768), w, b)


def test_long_rows_use_the_looped_template():
    x = r(16, 50000)
    x[3, 777] = 1e4
    check(lambda x: (torch.softmax(x, -1), x.argmax(-1), x.amax(-1), x.sum(-1)), x)


def test_reductions_nan_ties_and_infinities():
    x = r(64, 333)
    x[2, 5] = float("nan")
    x[5, 3] = x[5, 7] = 50.0
    x[6, 10] = x[6, 20] = -50.0
    x[8, :] = float("-inf")
    x[9, 100] = float("nan")
    x[9, 200] = float("nan")
    check(lambda x: (x.amax(-1), x.amin(-1), x.argmax(-1), x.argmin(-1), x.sum(-1), x.prod(-1) * 0), x)
    y = r(8, 9000)
    y[1, 8000] = float("nan")
    y[2, 100] = y[2, 4000] = 99.0
    check(lambda y: (y.amax(-1), y.argmax(-1), y.argmin(-1)), y)


def test_full_and_few_row_reductions_are_split():
    # float32 sums of 1e5-3e6 terms, added in another order than eager's, differ by ~1e-4 absolute: a sum
    # that lands near zero fails float32's relative tolerance, so these compare at 2e-3 (the fp16 tolerance)
    torch.manual_seed(0)
    loose = torch.float16
    y = r(3 * 2**20)
    y[123456] = 7.5
    check(lambda y: (y.sum(), ((y - 1) ** 2).mean(), y.argmax(), y.amin()), y, dtype=loose)
    x = r(4, 200000)
    x[2, 150000] = float("nan")
    check(lambda x: (x.sum(-1), x.amax(-1), x.argmin(-1), (x > 4).any(-1), x * 2), x, dtype=loose)
    check(lambda x: (x.sum(0), x.amax(0)), r(100000, 8), dtype=loose)


def test_int_bool_and_column_reductions():
    a = torch.randint(-100, 100, (70, 290), device=DEV)
    m = a > 90
    check(lambda a, m: (a.sum(-1), a.amax(-1), a.amin(0), a.argmax(-1), a.argmin(0), m.any(-1), m.all(-1),
                        m.any(0)), a, m)
    x = r(3000, 96)
    check(lambda x: (x.sum(0), x.amax(0), x.mean(0)), x)


@pytest.mark.parametrize("name", ["mlp", "residual_ln", "block"])
def test_models_forward_and_backward(name):
    torch.manual_seed(0)
    model = {"mlp": lambda: MLP(64, 256), "residual_ln": lambda: ResidualLN(128),
             "block": lambda: Block(64, 4)}[name]().to(DEV)
    inputs = [r(4, 16, 64 if name != "residual_ln" else 128).requires_grad_()]
    if name == "residual_ln":
        inputs.append(r(4, 16, 128))
    counts = _Counts()
    compiled = torch.compile(model, backend="mend", fullgraph=True)
    out = compiled(*inputs)
    g = torch.randn_like(out)
    out.backward(g)
    params = list(model.parameters()) + [inputs[0]]
    got = [p.grad.clone() for p in params]
    for p in params:
        p.grad = None
    want = model(*inputs)
    want.backward(g)
    torch.testing.assert_close(out, want, rtol=1e-4, atol=1e-4)
    for a, p in zip(got, params):
        torch.testing.assert_close(a, p.grad, rtol=1e-3, atol=1e-4)
    counts.check()


def test_large_kernels_are_autotuned_once_and_cached(monkeypatch):
    monkeypatch.setenv("MEND_TRITON_AUTOTUNE", "1")
    x = r(1 << 22)
    before = dict(triton_launch.STATS)
    check(lambda x: torch.relu(x * 2 + 1) * torch.sigmoid(x), x)
    assert triton_launch.STATS["autotuned"] == before["autotuned"] + 1
    torch._dynamo.reset()
    check(lambda x: torch.relu(x * 2 + 1) * torch.sigmoid(x), x)
    assert triton_launch.STATS["autotune_hits"] == before["autotune_hits"] + 1


def test_repeated_calls_new_inputs_and_misaligned_views():
    """After the first call kernels launch directly (fast path); results must stay right for new inputs,
    and a view whose data pointer is not 16-byte aligned must take Triton's specializing path."""
    f = torch.compile(lambda x, w: (torch.softmax(x * w, -1), (x + 1).sum(-1)), backend="mend", fullgraph=True)
    counts = _Counts()
    w = r(129)
    for i in range(4):
        base = r(300 * 129 + 1)
        x = base[1:].view(300, 129) if i == 2 else base[:-1].view(300, 129)
        got = f(x, w)
        want = (torch.softmax(x * w, -1), (x + 1).sum(-1))
        for g, ww in zip(got, want):
            assert_same(g, ww, msg=f"call {i}")
    counts.check()


@pytest.mark.slow
def test_int64_indexing_past_2_31_elements():
    n = 2**31 + 4096
    x = torch.ones(n, dtype=torch.float16, device=DEV)
    x[-1] = 3.0
    counts = _Counts()
    y = torch.compile(lambda x: x * 2 + 1, backend="mend", fullgraph=True)(x)
    assert y[-1].item() == 7.0 and y[0].item() == 3.0 and y[2**31 + 5].item() == 3.0
    assert int((y != 3.0).sum().item()) == 1
    counts.check()
    del x, y
    torch.cuda.empty_cache()


# ------------------------------------------------------------------ ahead-of-time compile, static launch


def _static_launcher_available() -> bool:
    return triton_aot.compat.static_cuda_launcher() is not None


@pytest.mark.parametrize("workers", ["4", "0"])
def test_kernels_are_compiled_ahead_and_launched_statically(monkeypatch, workers):
    monkeypatch.setenv("MEND_COMPILE_WORKERS", workers)
    triton_aot.shutdown()
    before = dict(triton_aot.STATS)
    torch.manual_seed(0)
    model = Block(64, 4).to(DEV)
    x = r(4, 16, 64)
    with torch.no_grad():
        check(model, x)
    assert triton_aot.STATS["submitted"] > before["submitted"]
    assert triton_aot.STATS["failed"] == before["failed"]
    if _static_launcher_available():
        assert triton_aot.STATS["static_loaded"] > before["static_loaded"]
    if workers == "0":
        assert triton_aot.pool() is None
    triton_aot.shutdown()


def test_aot_off_uses_tritons_jit(monkeypatch):
    monkeypatch.setenv("MEND_TRITON_AOT", "0")
    before = dict(triton_aot.STATS)
    check(lambda x: torch.softmax(x, -1) * 2, r(64, 100))
    assert triton_aot.STATS["submitted"] == before["submitted"]


def test_statically_launched_misaligned_and_repeated_calls(monkeypatch):
    monkeypatch.setenv("MEND_TRITON_AUTOTUNE", "1")
    f = torch.compile(lambda x: (torch.relu(x * 2 + 1) * torch.sigmoid(x), x.sum(-1)), backend="mend",
                      fullgraph=True)
    counts = _Counts()
    for i in range(4):
        base = r(1024 * 1025 + 1)
        x = base[1:].view(1024, 1025) if i == 2 else base[:-1].view(1024, 1025)
        got = f(x)
        want = (torch.relu(x * 2 + 1) * torch.sigmoid(x), x.sum(-1))
        for g, w in zip(got, want):
            assert_same(g, w, msg=f"call {i}")
    counts.check()


# ------------------------------------------------------------------------------------------- CUDA graphs


def test_cudagraphs_replay_matches_eager_and_protects_inputs_and_outputs():
    from mend.compiler.runtime import cudagraphs

    torch.manual_seed(0)
    model = Block(64, 4).to(DEV).eval()
    f = torch.compile(model, backend="mend", mode="reduce-overhead", fullgraph=True)
    before = dict(cudagraphs.STATS)
    kept, inputs = [], []
    with torch.no_grad():
        for i in range(5):
            x = r(4, 16, 64)
            inputs.append((x, x.clone()))
            got = f(x)
            assert_same(got, model(x), msg=f"call {i}")
            kept.append((got, got.clone()))
    assert cudagraphs.STATS["captured"] == before["captured"] + 1
    assert cudagraphs.STATS["replays"] >= before["replays"] + 3
    for x, x0 in inputs:  # the caller's inputs are never written
        assert torch.equal(x, x0)
    for out, out0 in kept:  # earlier results are not overwritten by later replays
        assert torch.equal(out, out0)


def test_cudagraphs_forward_and_backward():
    from mend.compiler.runtime import cudagraphs

    torch.manual_seed(0)
    model = MLP(64, 256).to(DEV)
    ref = MLP(64, 256).to(DEV)
    ref.load_state_dict(model.state_dict())
    f = mend_compile(model)
    before = dict(cudagraphs.STATS)
    for i in range(4):
        _train_step_matches(f, model, ref, r(8, 64))
    assert cudagraphs.STATS["captured"] >= before["captured"] + 2  # forward and backward graphs
    assert cudagraphs.STATS["replays"] > before["replays"]


def _train_step_matches(f, model, ref, x):
    """One training step of the compiled ``f`` (over ``model``) and of ``ref`` (same weights): outputs and
    parameter gradients agree; the gradients are then cleared."""
    out = f(x)
    out.sum().backward()
    want = ref(x)
    want.sum().backward()
    torch.testing.assert_close(out, want, rtol=1e-4, atol=1e-4)
    for p, q in zip(model.parameters(), ref.parameters()):
        torch.testing.assert_close(p.grad, q.grad, rtol=1e-3, atol=1e-4)
        p.grad = q.grad = None


def mend_compile(model):
    import mend.compiler

    return mend.compiler.compile(model, mode="reduce-overhead")


def test_cudagraphs_decline_a_graph_that_mutates_its_input():
    from mend.compiler.runtime import cudagraphs

    before = dict(cudagraphs.STATS)

    def step(x, counter):
        counter.add_(1)
        return x * 2 + counter

    f = torch.compile(step, backend="mend", options={"cudagraphs": True})
    c1, c2 = torch.zeros(4, device=DEV), torch.zeros(4, device=DEV)
    for _ in range(3):
        x = r(4)
        torch.testing.assert_close(f(x, c1), step(x, c2))
    torch.testing.assert_close(c1, c2)
    assert cudagraphs.STATS["declined"] > before["declined"]
    assert cudagraphs.STATS["captured"] == before["captured"]


def test_cudagraphs_outputs_that_alias_inputs_and_each_other():
    from mend.compiler.runtime import cudagraphs

    def f(x, w):
        y = x * w + 1
        return x, x[1:].t(), y, y[2:], w

    c = torch.compile(f, backend="mend", mode="reduce-overhead")
    before = dict(cudagraphs.STATS)
    for i in range(4):
        x, w = r(6, 5), r(5)
        got, want = c(x, w), f(x, w)
        for g, ww in zip(got, want):
            assert_same(g, ww, msg=f"call {i}")
        # views of inputs are views of the caller's tensors, as in eager
        assert got[0].data_ptr() == x.data_ptr() and got[1].data_ptr() == x[1:].data_ptr()
        assert got[4].data_ptr() == w.data_ptr()
        assert got[3].stride() == want[3].stride()
    assert cudagraphs.STATS["replays"] > before["replays"]


# ---------------------------------------------------------------------------------------- symbolic shapes


@pytest.mark.parametrize("cudagraphs", [False, True], ids=["plain", "cudagraphs"])
def test_changing_shapes_compile_per_shape_on_the_gpu(cudagraphs):
    from mend.compiler.runtime import specialize

    torch.manual_seed(0)
    lin = torch.nn.Linear(32, 32).to(DEV)
    fn = lambda x: torch.softmax(lin(x) * 2, -1) + x.shape[0]  # noqa: E731
    f = torch.compile(fn, backend="mend", options={"cudagraphs": cudagraphs})
    counts, s0 = _Counts(), dict(specialize.STATS)
    for n in (4, 7, 9, 7, 4):
        out, want, got, want_grad = sum_backward_step(f, fn, r(n, 32).requires_grad_())
        assert out.device.type == "cuda"
        torch.testing.assert_close(out, want, rtol=1e-4, atol=1e-4)
        torch.testing.assert_close(got, want_grad, rtol=1e-4, atol=1e-4)
    counts.check()
    assert specialize.STATS["dynamic_graphs"] > s0["dynamic_graphs"]  # a symbolic graph was compiled
    assert specialize.STATS["eager_calls"] == s0["eager_calls"]


def test_async_compile_without_workers_compiles_off_the_first_call(monkeypatch):
    """``MEND_COMPILE_WORKERS=0`` and ``async_compile``: the kernels compile on the background thread, not
    in the first call, which runs the ATen graph."""
    import mend.compiler
    from mend.compiler.runtime import tiered

    monkeypatch.setenv("MEND_COMPILE_WORKERS", "0")
    triton_aot.shutdown()
    torch._dynamo.reset()
    import time

    x = r(512, 257)
    scale = 0.5 + (time.time_ns() % 100003) * 1e-7  # a kernel no cache has seen: its compile takes a while
    f = mend.compiler.compile(lambda t: torch.softmax(t * scale, -1) + 1, async_compile=True)
    s0 = dict(tiered.STATS)
    with torch.no_grad():
        torch.testing.assert_close(f(x), torch.softmax(x * scale, -1) + 1)
        assert mend.compiler.wait(300)
        torch.testing.assert_close(f(x), torch.softmax(x * scale, -1) + 1)
    assert tiered.STATS["aten_calls"] - s0["aten_calls"] == 1
    assert tiered.STATS["switched"] - s0["switched"] == 1


@pytest.mark.parametrize("cudagraphs", [False, True], ids=["plain", "cudagraphs"])
def test_async_compile_runs_aten_until_the_kernels_are_built(monkeypatch, cudagraphs):
    """``async_compile``: forward and backward run through ATen while the kernel compiles are held back,
    then switch to the compiled kernels; the gradients are eager's throughout."""
    import threading
    from concurrent.futures import Future

    import mend.compiler
    from mend.compiler.runtime import tiered

    gate = threading.Event()
    real = triton_aot.submit

    def gated(job):
        inner, out = real(job), Future()

        def finish():
            gate.wait(120)
            try:
                out.set_result(inner.result())
            except Exception as exc:  # noqa: BLE001
                out.set_exception(exc)

        threading.Thread(target=finish, daemon=True).start()
        return out

    monkeypatch.setattr(triton_aot, "submit", gated)
    torch.manual_seed(0)
    model = Block(64, 4).to(DEV)
    ref = Block(64, 4).to(DEV)
    ref.load_state_dict(model.state_dict())
    f = mend.compiler.compile(model, async_compile=True, cudagraphs=cudagraphs)
    s0, counts = dict(tiered.STATS), _Counts()

    def step(x):
        _train_step_matches(f, model, ref, x)

    try:
        step(r(4, 16, 64))
        assert tiered.STATS["aten_calls"] - s0["aten_calls"] == 2  # forward and backward, on ATen
        assert mend.compiler.pending() >= 2
    finally:
        gate.set()
    assert mend.compiler.wait(300)
    for _ in range(3):
        step(r(4, 16, 64))
    assert tiered.STATS["switched"] - s0["switched"] == 2
    assert tiered.STATS["aten_calls"] - s0["aten_calls"] == 2
    counts.check()

"""The backend contract: registration, mend.compiler.compile, graph breaks, fallbacks, debug switches."""

from __future__ import annotations

import dataclasses
import importlib.metadata

import pytest
import torch

import mend.compiler
from mend.compiler import GraphBreakError, backend, lowering
from mend.compiler.mode import Mode

from .helpers import check, mend_compile_fx


def test_backend_is_registered_by_name_and_entry_point():
    import torch._dynamo

    assert "mend" in torch._dynamo.list_backends(exclude_tags=())
    eps = importlib.metadata.entry_points(group="torch_dynamo_backends")
    ep = [e for e in eps if e.name == "mend"]
    assert ep and ep[0].load() is backend.mend_backend


@pytest.mark.parametrize("first", ["", "import mend.compiler.backend; ", "torch._dynamo.list_backends(); import mend.compiler; "])
def test_backend_string_works_in_a_fresh_process(first):
    """``torch.compile(backend="mend")`` with nothing imported first: torch loads mend through its entry point
    (mend must not register the name a second time while being loaded); also after importing mend."""
    import subprocess
    import sys

    code = f"import torch; {first}print(torch.compile(lambda x: x * 2 + 1, backend='mend')(torch.ones(3)).tolist())"
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert proc.stdout.strip().splitlines()[-1] == "[3.0, 3.0, 3.0]"


def test_torch_compile_backend_string_runs_our_compiler():
    torch._dynamo.reset()
    before = backend.STATS["graphs"]
    f = torch.compile(lambda x: torch.tanh(x) * 2, backend="mend")
    x = torch.randn(10)
    torch.testing.assert_close(f(x), torch.tanh(x) * 2)
    assert backend.STATS["graphs"] == before + 1


def test_compile_convenience_decorator_and_module():
    @mend.compiler.compile
    def f(x):
        return x.softmax(-1)

    x = torch.randn(4, 9)
    torch.testing.assert_close(f(x), x.softmax(-1))
    m = torch.nn.Sequential(torch.nn.Linear(5, 5), torch.nn.ReLU())
    cm = mend.compiler.compile(m)
    y = torch.randn(3, 5)
    torch.testing.assert_close(cm(y), m(y))


def test_graph_break_under_fullgraph_points_to_mend_check_and_fix():
    def f(x):
        print("side effect")
        return x + 1

    cf = mend.compiler.compile(f)
    with pytest.raises(GraphBreakError) as info:
        cf(torch.randn(3))
    msg = str(info.value)
    assert "mend check" in msg and "mend fix" in msg
    assert isinstance(info.value.__cause__, Exception)


def test_graph_break_in_module_forward_raises_too():
    class M(torch.nn.Module):
        def forward(self, x):
            if x.sum() > 0:  # data-dependent branch
                return x * 2
            return x

    with pytest.raises(GraphBreakError):
        mend.compiler.compile(M())(torch.ones(3))


def test_op_level_fallback_calls_aten():
    a = torch.randn(6, 4)
    call = check(lambda a: torch.cumsum(a, 0) * 2, a, allow_extern=True)
    assert any("cumsum" in op for op in call.mend_extern_ops)


def test_kernel_level_fallback_interprets_disabled_kernels(monkeypatch):
    monkeypatch.setenv("MEND_DISABLE_KERNELS", "k0")
    x = torch.randn(8, 12)
    call = check(lambda x: (x.softmax(-1), (x * 3).exp() + 1), x, allow_interpreted=True)
    assert call.mend_interpreted == ["k0"]
    monkeypatch.setenv("MEND_DISABLE_KERNELS", "all")
    call = check(lambda x: (x.softmax(-1), (x * 3).exp() + 1, x.mean(0)), x, allow_interpreted=True)
    assert sorted(call.mend_interpreted) == sorted(k.name for k in call.mend_graph.kernels)


def test_kernel_level_fallback_when_generation_fails(monkeypatch):
    from mend.compiler.codegen.cpp import kernel as cpp

    real = cpp.render_kernel

    def broken(k):
        if k.rdims:
            raise NotImplementedError("simulated unsupported kernel")
        return real(k)

    monkeypatch.setattr(cpp, "render_kernel", broken)
    monkeypatch.setattr("mend.compiler.codegen.cpp.generator.render_kernel", broken)
    x = torch.randn(5, 7)
    call = check(lambda x: (x.softmax(-1), x * 2), x, allow_interpreted=True)
    assert len(call.mend_interpreted) == 1


def test_graph_level_fallback_runs_eagerly(monkeypatch, tmp_path):
    monkeypatch.delenv("MEND_STRICT")
    monkeypatch.setenv("MEND_CACHE_DIR", str(tmp_path))  # no graph-cache hit may skip the lowering

    def boom(self):
        raise lowering.LoweringError("simulated")

    monkeypatch.setattr(lowering.Lowering, "run", boom)
    before = backend.STATS["fallback_graphs"]
    x = torch.randn(4)
    call = mend_compile_fx(lambda x: (x.exp(),), x)
    torch.testing.assert_close(call([x])[0], x.exp())
    assert backend.STATS["fallback_graphs"] == before + 1
    assert not hasattr(call, "mend_graph")


def test_debug_dump_writes_every_stage(monkeypatch, tmp_path):
    dump = tmp_path / "dump"
    monkeypatch.setenv("MEND_COMPILER_DEBUG", str(dump))
    monkeypatch.setenv("MEND_CACHE_DIR", str(tmp_path / "cache"))
    x = torch.randn(6, 10)
    check(lambda x: (x.softmax(-1), x.cos()), x)
    torch._dynamo.reset()
    check(lambda x: (x.softmax(-1), x.cos()), x)  # the graph cache now holds it: the dump is still complete
    dirs = sorted(dump.iterdir())
    assert len(dirs) == 2
    assert {p.name for p in dirs[0].iterdir()} == {p.name for p in dirs[1].iterdir()}
    dirs = dirs[1:]
    assert len(dirs) == 1
    names = {p.name for p in dirs[0].iterdir()}
    assert {"fx_graph.py", "ir.txt", "fusion.txt", "scheduled.txt", "kernels.cpp", "wrapper.py"} <= names
    assert 'extern "C" void k0' in (dirs[0] / "kernels.cpp").read_text()
    assert "new kernel" in (dirs[0] / "fusion.txt").read_text()


def test_self_check_mode_reports_a_miscompile(monkeypatch, tmp_path):
    from mend.compiler.codegen.cpp import emit as cpp_emit

    monkeypatch.setenv("MEND_COMPILER_CHECK", "1")
    monkeypatch.setenv("MEND_COMPILER_DEBUG", str(tmp_path / "good"))
    x = torch.randn(6, 10)
    check(lambda x: x.log_softmax(-1), x)
    assert not list((tmp_path / "good").rglob("selfcheck.txt"))
    # a deliberately wrong code generator: exp emitted as log
    monkeypatch.setitem(cpp_emit.FLOAT_FN, "exp", "mend_log({0})")
    monkeypatch.setenv("MEND_COMPILER_DEBUG", str(tmp_path / "bad"))
    call = mend_compile_fx(lambda x: (x.exp(),), x)
    call([x])
    report = list((tmp_path / "bad").rglob("selfcheck.txt"))
    assert report and "outputs [0] differ" in report[0].read_text()


def test_unsupported_device_dtype_falls_back_per_op():
    z = torch.randn(4, dtype=torch.complex64)
    call = check(lambda z: (z * 2, z.abs()), z, allow_extern=True)
    assert call.mend_extern_ops


@pytest.mark.parametrize("eager", [False, True], ids=["lazy", "eager"])
def test_backward_graph_compiles_with_the_forward_when_asked(eager):
    """On a GPU the backend compiles the backward graph right after the forward one (its kernels then
    compile in the workers while the forward waits for its own); aot_autograd's default is lazy."""
    from mend.compiler import compat
    from mend.compiler.lowering.decomps import decomposition_table

    if eager and not compat.eager_backward_supported():
        pytest.skip("this torch cannot compile the backward ahead")
    order = []

    def compiler(kind):
        def compile_one(gm, example_inputs):
            order.append(kind)
            return backend.compile_graph(gm, example_inputs, kind=kind)

        return compile_one

    def dynamo_backend(gm, example_inputs):
        return compat.aot_module_simplified(
            gm, example_inputs, fw_compiler=compiler("forward"), bw_compiler=compiler("backward"),
            inference_compiler=compiler("inference"), decompositions=decomposition_table(), eager_backward=eager)

    torch._dynamo.reset()
    lin = torch.nn.Linear(8, 8)
    fn = lambda x: torch.tanh(lin(x)) * 2  # noqa: E731
    f = torch.compile(fn, backend=dynamo_backend)
    x = torch.randn(4, 8, requires_grad=True)
    out = f(x)
    assert order == (["forward", "backward"] if eager else ["forward"])
    out.sum().backward()
    assert order == ["forward", "backward"]
    got = (x.grad.clone(), lin.weight.grad.clone())
    x.grad = None
    lin.weight.grad = None
    fn(x).sum().backward()
    torch.testing.assert_close(got[0], x.grad)
    torch.testing.assert_close(got[1], lin.weight.grad)
    torch._dynamo.reset()


def test_eager_backward_switch(monkeypatch):
    monkeypatch.delenv("MEND_EAGER_BACKWARD", raising=False)
    assert Mode.requested({}, on_cuda=True).eager_backward
    assert not Mode.requested({}, on_cuda=False).eager_backward  # a CPU graph: nothing compiles ahead
    monkeypatch.setenv("MEND_EAGER_BACKWARD", "0")
    assert not Mode.requested({}, on_cuda=True).eager_backward


def test_the_mode_a_backend_call_asks_for(monkeypatch):
    for var in ("MEND_ASYNC_COMPILE", "MEND_ASYNC_DEFER", "MEND_CUDAGRAPHS"):
        monkeypatch.delenv(var, raising=False)
    assert Mode.requested({}) == Mode("sync", cudagraphs=False)
    assert Mode.requested({"options": {"async_compile": True}}).timing == "deferred"
    assert Mode.requested({"options": {"async_compile": True}, "mode": "reduce-overhead"}) == Mode("async", True)
    monkeypatch.setenv("MEND_ASYNC_DEFER", "0")
    assert Mode.requested({"options": {"async_compile": True}}) == Mode("async")
    monkeypatch.setenv("MEND_ASYNC_COMPILE", "0")
    assert not Mode.requested({"options": {"async_compile": True}}).async_compile
    with pytest.raises(dataclasses.FrozenInstanceError):
        Mode().timing = "async"

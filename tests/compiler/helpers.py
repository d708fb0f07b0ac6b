"""Compile ATen graphs with mend directly (make_fx + compile_graph): no Dynamo, so op tests stay fast."""

from __future__ import annotations

import torch
import torch.utils._pytree
from torch.fx.experimental.proxy_tensor import make_fx

from mend.compiler.backend import compile_graph
from mend.compiler.ir.verify import verify_graph, verify_scheduled
from mend.compiler.lowering import Lowering
from mend.compiler.lowering.decomps import decomposition_table
from mend.compiler.schedule import schedule


def mend_compile_fx(fn, *args):
    gm = make_fx(fn, decomposition_table=decomposition_table(), tracing_mode="fake")(*args)
    return compile_graph(gm, list(args))


def lower_and_schedule(gm, args, device: str = "cpu"):
    """The scheduled graph of the ATen graph ``gm`` (lowering, then scheduling), the IR verified after each
    stage."""
    g = Lowering(gm, list(args)).run()
    verify_graph(g)
    sg, _ = schedule(g, device)
    verify_scheduled(sg)
    return sg


def run_mend(fn, *args):
    """(outputs as a tuple, compiled callable)."""
    call = mend_compile_fx(fn, *args)
    out = call(list(args))
    return tuple(out), call


def tol(dtype):
    if dtype in (torch.float16,):
        return dict(rtol=2e-3, atol=2e-3)
    if dtype == torch.bfloat16:
        return dict(rtol=1.6e-2, atol=1.6e-2)
    if dtype == torch.float64:
        return dict(rtol=1e-9, atol=1e-9)
    return dict(rtol=1e-5, atol=1e-5)


def same_strides(got: torch.Tensor, want: torch.Tensor) -> bool:
    """Eager's strides, on every dim of more than one element (a dim of size 1 has no meaningful stride)."""
    if got.numel() <= 1:
        return True
    return all(g == w for g, w, n in zip(got.stride(), want.stride(), want.shape) if n > 1)


def assert_same(got, want, dtype=None, msg=""):
    if isinstance(want, torch.Tensor):
        assert isinstance(got, torch.Tensor), msg
        assert got.shape == want.shape, f"{msg}: shape {tuple(got.shape)} != {tuple(want.shape)}"
        assert got.dtype == want.dtype, f"{msg}: dtype {got.dtype} != {want.dtype}"
        assert same_strides(got, want), f"{msg}: strides {got.stride()} != eager's {want.stride()}"
        if want.dtype.is_floating_point:
            t = tol(dtype or want.dtype)
            torch.testing.assert_close(got, want, equal_nan=True, msg=lambda m: f"{msg}: {m}", **t)
        else:
            assert torch.equal(got, want), f"{msg}: {got} != {want}"
    else:
        assert got == want, msg


def check(fn, *args, dtype=None, allow_extern=False, allow_interpreted=False):
    """Run ``fn`` eagerly and through mend; assert equal outputs; return the compiled callable."""
    want = tuple(torch.utils._pytree.tree_leaves(fn(*args)))
    got, call = run_mend(fn, *args)
    assert getattr(call, "mend_graph", None) is not None, "graph fell back to eager"
    if not allow_interpreted:
        assert call.mend_interpreted == [], f"kernels interpreted: {call.mend_interpreted}"
    if not allow_extern:
        assert call.mend_extern_ops == [], f"ops not lowered: {call.mend_extern_ops}"
    assert len(got) == len(want)
    for i, (g, w) in enumerate(zip(got, want)):
        assert_same(g, w, dtype, msg=f"output {i}")
    return call


def sum_backward_step(f, fn, x):
    """The compiled ``f`` and the eager ``fn`` on ``x`` (which requires grad), each followed by the backward
    of its sum: (compiled output, eager output, compiled grad of x, eager grad of x)."""
    out = f(x)
    out.sum().backward()
    got = x.grad.clone()
    x.grad = None
    want = fn(x)
    want.sum().backward()
    return out, want, got, x.grad

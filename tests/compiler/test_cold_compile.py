"""Cold-compile work of the CPU generator: each kernel is rendered once per graph, and the translation unit
is the same text as ``cpp.render_graph`` (so build-cache keys do not change)."""

from __future__ import annotations

import torch
from torch.fx.experimental.proxy_tensor import make_fx

from mend.compiler.codegen.cpp import build as cpp_build
from mend.compiler.codegen.cpp import generator as cpp_generator
from mend.compiler.codegen.cpp import kernel as cpp
from mend.compiler.debug import Dump
from mend.compiler.lowering.decomps import decomposition_table

from .helpers import lower_and_schedule


def _kernels(fn, *args):
    gm = make_fx(fn, decomposition_table=decomposition_table(), tracing_mode="fake")(*args)
    sg = lower_and_schedule(gm, args)
    return sg.kernels


def test_each_kernel_is_rendered_once_and_the_unit_is_unchanged(monkeypatch, tmp_path):
    monkeypatch.setenv("MEND_CACHE_DIR", str(tmp_path))
    x, y = torch.randn(8, 12), torch.randn(50)
    kernels = _kernels(lambda x, y: (x.softmax(-1), (y * 3).exp() + 1, x.mean(0)), x, y)
    assert len(kernels) >= 2
    calls, sources = [], []
    real_render, real_build = cpp_generator.render_kernel, cpp_build.build

    def render(k):
        calls.append(k.name)
        return real_render(k)

    def build(src):
        sources.append(src)
        return real_build(src)

    monkeypatch.setattr(cpp_generator, "render_kernel", render)
    monkeypatch.setattr(cpp, "render_kernel", render)  # what cpp.render_graph calls
    monkeypatch.setattr(cpp_build, "build", build)
    fns = cpp_generator.CppGenerator().compile(kernels, Dump("t"))
    assert sorted(calls) == sorted(k.name for k in kernels)
    assert set(fns) == {k.name for k in kernels}
    calls.clear()
    assert sources == [cpp.render_graph(kernels)]

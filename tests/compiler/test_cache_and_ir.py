"""Kernel cache (hits, invalidation, atomic publish) and the IR/symbolic layer."""

from __future__ import annotations

import sympy
import torch

from mend.compiler import ir
from mend.compiler.codegen.cpp import build as cpp_build
from mend.compiler.ir.symbolic import FloorDiv, IMod, print_c, simplify_index, unravel, variables
from mend.compiler.lowering.views import Strided, compute_stride

SRC = 'extern "C" void k(void* a) { ((float*)a)[0] = 42.0f; }\n'


def _count(path):
    return sorted(p.name for p in path.rglob("*") if p.is_file())


def test_cache_hit_and_layout(monkeypatch, tmp_path):
    monkeypatch.setenv("MEND_CACHE_DIR", str(tmp_path))
    monkeypatch.delenv("MEND_DISABLE_CACHE", raising=False)
    c0, h0 = cpp_build.STATS["compiles"], cpp_build.STATS["hits"]
    so = cpp_build.build(SRC)
    assert cpp_build.STATS["compiles"] == c0 + 1
    key = cpp_build.cache_key(SRC)
    assert so == tmp_path / "v1" / "cpp" / key[:2] / f"{key}.so"
    assert cpp_build.build(SRC) == so
    assert cpp_build.STATS["hits"] == h0 + 1 and cpp_build.STATS["compiles"] == c0 + 1
    # published atomically: only the final .so and its source, no temporaries
    assert _count(tmp_path) == sorted([f"{key}.cpp", f"{key}.so"])
    lib = cpp_build.load(so)
    fn = cpp_build.kernel_function(lib, "k", 1)
    t = torch.zeros(1)
    fn(t.data_ptr())
    assert t.item() == 42.0


def test_cache_key_invalidation(monkeypatch):
    base = cpp_build.cache_key(SRC)
    assert cpp_build.cache_key(SRC.replace("42", "43")) != base
    monkeypatch.setattr(cpp_build, "FLAGS", cpp_build.FLAGS + ["-DX=1"])
    assert cpp_build.cache_key(SRC) != base
    monkeypatch.setattr(cpp_build, "FLAGS", cpp_build.FLAGS[:-1])
    assert cpp_build.cache_key(SRC) == base
    monkeypatch.setattr(cpp_build, "toolchain_fingerprint", lambda: "g++ 99 / other cpu / torch 3")
    assert cpp_build.cache_key(SRC) != base


def test_deleted_cache_entry_is_rebuilt(monkeypatch, tmp_path):
    monkeypatch.setenv("MEND_CACHE_DIR", str(tmp_path))
    so = cpp_build.build(SRC + "// rebuilt\n")
    so.unlink()
    c0 = cpp_build.STATS["compiles"]
    assert cpp_build.build(SRC + "// rebuilt\n").exists()
    assert cpp_build.STATS["compiles"] == c0 + 1


def test_disable_cache_leaves_cache_dir_empty(monkeypatch, tmp_path):
    monkeypatch.setenv("MEND_CACHE_DIR", str(tmp_path / "c"))
    monkeypatch.setenv("MEND_DISABLE_CACHE", "1")
    so = cpp_build.build(SRC + "// nocache\n")
    assert so.exists() and not (tmp_path / "c").exists()


def test_second_compile_of_a_graph_hits_the_cache(monkeypatch, tmp_path):
    from .helpers import check

    monkeypatch.setenv("MEND_CACHE_DIR", str(tmp_path))
    x = torch.randn(9, 31)
    fn = lambda x: (x * 0.5).softmax(-1) + x.cos()  # noqa: E731
    c0 = cpp_build.STATS["compiles"]
    check(fn, x)
    assert cpp_build.STATS["compiles"] == c0 + 1
    h0 = cpp_build.STATS["hits"]
    check(fn, x)
    assert cpp_build.STATS["compiles"] == c0 + 1 and cpp_build.STATS["hits"] == h0 + 1


def test_graph_cache_skips_lowering_in_a_warm_compile(monkeypatch, tmp_path):
    from mend.compiler import backend, lowering

    from .helpers import check

    monkeypatch.setenv("MEND_CACHE_DIR", str(tmp_path))
    x = torch.randn(5, 40)
    fn = lambda x: (x.layer_norm if False else torch.nn.functional.layer_norm(x, (40,)), x.sum(0))  # noqa: E731
    h0 = backend.STATS["graph_cache_hits"]
    first = check(fn, x)
    assert backend.STATS["graph_cache_hits"] == h0
    assert list((tmp_path / "v1" / "graphs").rglob("*.pkl"))

    def no_lowering(self):
        raise AssertionError("lowering ran on a graph-cache hit")

    monkeypatch.setattr(lowering.Lowering, "run", no_lowering)
    second = check(fn, x)
    assert backend.STATS["graph_cache_hits"] == h0 + 1
    assert str(second.mend_graph) == str(first.mend_graph)


def test_damaged_graph_cache_entry_is_rebuilt(monkeypatch, tmp_path):
    from .helpers import check

    monkeypatch.setenv("MEND_CACHE_DIR", str(tmp_path))
    x = torch.randn(3, 7)
    check(lambda x: (x.exp() + 1,), x)
    for p in (tmp_path / "v1" / "graphs").rglob("*.pkl"):
        p.write_bytes(b"not a pickle")
    check(lambda x: (x.exp() + 1,), x)


# ----------------------------------------------------------------------------------------- symbolic


def test_reshape_round_trip_simplifies_to_linear_index():
    y0, y1 = variables(2)
    rng = {y0: 16, y1: 64}
    old = [simplify_index(e, rng) for e in unravel(64 * y0 + y1, (2, 8, 64))]
    assert old == [FloorDiv(y0, 8), IMod(y0, 8), y1]
    assert simplify_index(512 * old[0] + 64 * old[1] + old[2], rng) == 64 * y0 + y1


def test_floordiv_and_mod_rules():
    x0, x1 = variables(2)
    rng = {x0: 5, x1: 7}
    assert simplify_index(IMod(FloorDiv(x0 + 5 * x1, 5), 7), rng) == x1
    assert simplify_index(IMod(x0 + 5 * x1, 5), rng) == x0
    assert simplify_index(FloorDiv(x0, 5), rng) == 0
    assert print_c(simplify_index(FloorDiv(x0 + 3 * x1, 4), rng)) == "((x0 + 3*x1) / 4)"


def test_view_strides_follow_torch():
    cases = [((4, 6), (6, 1), (24,)), ((4, 6), (1, 4), (24,)), ((2, 3, 4), (12, 4, 1), (6, 4)),
             ((2, 3, 4), (1, 2, 6), (2, 12)), ((4, 6), (6, 1), (2, 2, 3, 2)), ((0, 3), (3, 1), (3, 0))]
    for size, stride, new in cases:
        t = torch.empty_strided(size, stride)
        try:
            want = t.view(new).stride()
        except RuntimeError:
            want = None
        assert compute_stride(size, stride, new) == (tuple(want) if want is not None else None), (size, stride, new)
    s = Strided((4, 6, 8), (48, 8, 1))
    t = torch.empty(4, 6, 8)
    for f in [lambda v: v.permute((2, 0, 1)), lambda v: v.transpose(0, 2), lambda v: v.select(1, 2),
              lambda v: v.slice(2, 1, 7, 2), lambda v: v.unsqueeze(1).expand((4, 3, 6, 8)), lambda v: v.squeeze(),
              lambda v: v.diagonal(0, 1, 2), lambda v: v.unfold(2, 3, 2)]:
        a = f(s)
        b = f(_TorchAdapter(t))
        assert (a.shape, a.stride(), a.storage_offset()) == (tuple(b.shape), tuple(b.stride()), b.storage_offset())


class _TorchAdapter:
    def __init__(self, t):
        self.t = t

    def __getattr__(self, name):
        if name == "slice":
            return lambda d, s, e, st: torch.ops.aten.slice.Tensor(self.t, d, s, e, st)
        return getattr(self.t, name)


# ---------------------------------------------------------------------------------------------- IR


def test_ir_is_hashable_printable_and_hash_consed():
    x0 = variables(1)[0]
    a = ir.Op("add", (ir.Load("arg0", x0, torch.float32), ir.Const(1.0, torch.float32)), torch.float32)
    b = ir.Op("add", (ir.Load("arg0", x0, torch.float32), ir.Const(1.0, torch.float32)), torch.float32)
    assert a == b and hash(a) == hash(b) and len({a, b}) == 1
    assert str(a) == "add(arg0[x0], 1.0:float32):float32"
    e = ir.Op("mul", (a, a), torch.float32)
    assert len(ir.walk(e)) == 4  # load, const, add, mul: the shared add is visited once
    lay = ir.Layout.contiguous((2, 3), torch.float16)
    assert str(lay) == "float16[2, 3]/[3, 1]" and lay.index(variables(2)) == 3 * variables(2)[0] + variables(2)[1]
    sub = ir.substitute(a, {x0: 2 * x0 + 1})
    assert sub.args[0].index == 2 * x0 + 1


def test_scheduled_graph_prints_kernels():
    from .helpers import mend_compile_fx

    call = mend_compile_fx(lambda x: (x.softmax(-1),), torch.randn(4, 8))
    text = str(call.mend_graph)
    assert "kernel k0 size=[4, 8] rdims=[1]" in text
    assert "reduction max" in text and "reduction sum" in text and "(kernel-local)" in text
    _ = sympy


def test_simplification_memo_keys_on_the_symbols_ranges():
    x = sympy.Symbol("x", integer=True, nonnegative=True)
    e = FloorDiv(x, sympy.Integer(8))
    assert simplify_index(e, {x: 8}) == 0  # x < 8: x // 8 == 0
    assert simplify_index(e, {x: 64}) == FloorDiv(x, sympy.Integer(8))  # same expression, other range
    assert simplify_index(e, {x: 8}) == 0

"""The Triton generator on a CPU-only machine.

Tier 1: generated kernels run in Triton's interpreter (``TRITON_INTERPRET=1``) on CPU tensors and are
compared with eager PyTorch. The graphs go through the core's real pipeline (make_fx with mend's
decompositions -> lowering -> scheduler for device "cuda"), then the wrapper runs them with the Triton
launchers. Shapes are small (a few programs per launch).

Tier 2: every kernel generated for those graphs (and every launch configuration the autotuner may pick)
is compiled for sm_90 with no GPU: ``triton.compile(ASTSource(...), target=GPUTarget("cuda", 90, 32))``.
"""

from __future__ import annotations

import math

import pytest
import sympy
import torch
import torch.nn.functional as F
import torch.utils._pytree as pytree

pytest.importorskip("triton")
pytest.importorskip("numpy")
pytestmark = pytest.mark.filterwarnings("ignore::RuntimeWarning")  # numpy under the interpreter: inf/nan math

from torch.fx.experimental.proxy_tensor import make_fx  # noqa: E402

from mend.compiler import backend, ir  # noqa: E402
from mend.compiler.codegen import KernelCompileError, generator_for  # noqa: E402
from mend.compiler.codegen.triton import build as triton_build  # noqa: E402
from mend.compiler.codegen.triton import launch as triton_launch  # noqa: E402
from mend.compiler.codegen.triton.generator import TritonGenerator  # noqa: E402
from mend.compiler.codegen.triton.kernel import KernelSource  # noqa: E402
from mend.compiler.codegen.triton.module import render_module  # noqa: E402
from mend.compiler.codegen.triton.plan import next_pow2  # noqa: E402
from mend.compiler.debug import Dump  # noqa: E402
from mend.compiler.ir.symbolic import variables  # noqa: E402
from mend.compiler.lowering import Lowering  # noqa: E402
from mend.compiler.lowering.decomps import decomposition_table  # noqa: E402
from mend.compiler.runtime import wrapper  # noqa: E402
from mend.compiler.schedule import split as split_pass  # noqa: E402

from .helpers import assert_same, lower_and_schedule, same_strides  # noqa: E402
from .models import ResidualLN  # noqa: E402


@pytest.fixture(autouse=True)
def _interpret(monkeypatch, tmp_path):
    monkeypatch.setenv("TRITON_INTERPRET", "1")
    monkeypatch.setenv("MEND_CACHE_DIR", str(tmp_path / "cache"))
    torch.manual_seed(0)  # the same data every run: a float32 sum of 2048 values in another order can land
    # 2e-5 off eager's, past the tolerance, for one draw in about ten (seen in y.sum((0, 1)) below)


def scheduled(fn, *args):
    gm = make_fx(fn, decomposition_table=decomposition_table(), tracing_mode="fake")(*args)
    return gm, lower_and_schedule(gm, args, "cuda")


def run_triton(fn, *args, rmax=None, split_min=None, **opts):
    """Compile ``fn`` with the Triton generator, run it in the interpreter; (outputs, graph, launchers)."""
    gm, sg = scheduled(fn, *args)
    if rmax is not None:
        opts["persistent_rmax"] = rmax
    if split_min is not None:
        opts["split_min_rnumel"] = split_min
    gen = TritonGenerator(**opts)
    fns = gen.compile(sg.kernels, Dump("t"))
    for _, (f, style) in fns.items():
        assert isinstance(f, (triton_launch.TritonLauncher, triton_launch.TritonSplitLauncher))
        assert style == "tensor"
    assert set(fns) == {k.name for k in sg.kernels}
    consts = {c.name: getattr(gm, c.attr) for c in sg.constants}
    call, _ = wrapper.build(sg, fns, consts, torch.device("cpu"))
    out = tuple(call(list(args)))
    for f, _ in fns.values():
        assert f.fallback is None, f"{f.kernel.name} fell back to the interpreter"
    return out, sg, fns


def check(fn, *args, rmax=None, templates=None, dtype=None, split_min=None, **opts):
    want = tuple(pytree.tree_leaves(fn(*args)))
    got, sg, fns = run_triton(fn, *args, rmax=rmax, split_min=split_min, **opts)
    assert len(got) == len(want)
    for i, (g, w) in enumerate(zip(got, want)):
        assert_same(g, w, dtype, msg=f"output {i}")
    used = sorted({f.template for f, _ in fns.values()})
    if templates is not None:
        assert used == sorted(templates), used
    return sg, fns


# ---------------------------------------------------------------------------------- tier 1: pointwise


def test_generator_hook_selects_triton_for_cuda():
    assert isinstance(generator_for("cuda"), TritonGenerator)


def test_pointwise_chain_is_one_flat_kernel():
    x, w, b = torch.randn(33, 70), torch.randn(70), torch.randn(70)
    sg, fns = check(lambda x, w, b: torch.relu(x * w + b) * torch.sigmoid(x), x, w, b,
                    templates=["pointwise"])
    assert len(sg.kernels) == 1


def test_broadcast_and_noncontiguous_inputs():
    base = torch.randn(24, 40)
    x = base.t()  # non-contiguous
    y = torch.randn(40, 1)
    z = torch.randn(100, 30)[::3, 2:26].t()  # strided slice, transposed
    assert not x.is_contiguous() and not z.is_contiguous()
    check(lambda x, y: (x - y).abs() + x.exp(), x, y)
    check(lambda z, b: z * 2 + b, z, torch.randn(24, 34))


def test_expand_and_scalar_and_permute():
    x = torch.randn(2, 3, 4, 5)
    s = torch.tensor(1.5)
    check(lambda x, s: x.permute(0, 2, 3, 1) * s + x.permute(0, 2, 3, 1).square(), x, s)
    check(lambda x: x[:, :1].expand(2, 3, 4, 5) + x, x)


def test_outputs_keep_eagers_strides():
    """Transposed, permuted, channels-last, expanded and sliced inputs; reductions over them; outputs that
    are views of computed values (``check`` compares strides and values)."""
    base = torch.randn(6, 10, 8)
    cl = torch.randn(2, 5, 4, 3).to(memory_format=torch.channels_last)
    for x in (base[0].t(), base.permute(2, 0, 1), cl, torch.randn(10, 1).expand(10, 7), base[:, 2:9:2, 1:]):
        check(lambda x: ((x * 2 + 1).sigmoid(), x.sum(-1), torch.softmax(x, -1)), x)
    check(lambda x: (F.layer_norm(x, (3,)), (x * 2)[:, 1:], (x + 1).transpose(0, 1).unsqueeze(0)), cl)


def test_multiple_pointwise_kernels_of_different_sizes():
    x, y = torch.randn(50), torch.randn(8, 9)
    check(lambda x, y: (x * 3, y.sin() + 1, (y > 0).float()), x, y)


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_half_dtypes_compute_in_float32_and_round_on_store(dtype):
    # eager rounds every intermediate to the half type, mend only on casts and stores: compare on
    # expressions without cancellation
    torch.manual_seed(0)
    x = torch.randn(40, 30).to(dtype)
    y = torch.rand(30).to(dtype) + 0.5
    check(lambda x, y: ((torch.exp(x) + x * x) * y + 2, (x * y).float(), x.float().to(dtype) / 3), x, y,
          dtype=dtype)


def test_integer_and_bool_semantics():
    a = torch.randint(-50, 50, (64,))
    b = torch.randint(1, 9, (64,)) * torch.where(torch.rand(64) > 0.5, 1, -1)
    m = torch.rand(64) > 0.3
    check(lambda a, b, m: (torch.div(a, b, rounding_mode="floor"), torch.div(a, b, rounding_mode="trunc"),
                           torch.remainder(a, b), torch.fmod(a, b), torch.where(m, a, b), a.abs(),
                           torch.maximum(a, b), (a > b) & m, ~m | (a == 3), a.sign(), m.sum()), a, b, m)


def test_integer_power_is_exact():
    a = torch.randint(-9, 10, (40,))
    b = torch.randint(0, 12, (40,))
    check(lambda a, b: (torch.pow(a, b), a ** 3, torch.pow(a.int(), b.int())), a, b)


def test_float_division_modes_and_sign():
    a = torch.randn(100) * 10
    b = torch.randn(100) * 3
    check(lambda a, b: (torch.div(a, b, rounding_mode="floor"), torch.remainder(a, b), torch.fmod(a, b),
                        a.sign(), torch.div(a, b, rounding_mode="trunc")), a, b)


UNARY = {
    "exp": torch.exp, "log": lambda x: torch.log(x.abs() + 0.1), "sqrt": lambda x: x.abs().sqrt(),
    "rsqrt": lambda x: (x.abs() + 0.1).rsqrt(), "sigmoid": torch.sigmoid, "erf": torch.erf,
    "sin": torch.sin, "cos": torch.cos, "tanh": torch.tanh, "expm1": torch.expm1,
    "log1p": lambda x: torch.log1p(x.abs()), "log10": lambda x: torch.log10(x.abs() + 0.1),
    "log2": lambda x: torch.log2(x.abs() + 0.1), "exp2": torch.exp2, "tan": lambda x: torch.tan(x * 0.5),
    "asin": lambda x: torch.asin(x.clamp(-1, 1)), "acos": lambda x: torch.acos(x.clamp(-1, 1)),
    "atan": torch.atan, "sinh": torch.sinh, "cosh": torch.cosh, "asinh": torch.asinh,
    "acosh": lambda x: torch.acosh(x.abs() + 1), "atanh": lambda x: torch.atanh(x.clamp(-0.9, 0.9)),
    "erfc": torch.erfc, "floor": torch.floor, "ceil": torch.ceil, "round": lambda x: torch.round(x * 2),
    "trunc": torch.trunc, "gelu": F.gelu, "gelu_tanh": lambda x: F.gelu(x, approximate="tanh"),
    "silu": lambda x: F.silu(x), "softplus": lambda x: F.softplus(x), "pow_scalar": lambda x: x.abs() ** 2.5,
    "pow_tensor": lambda x: torch.pow(x.abs() + 0.5, x), "atan2": lambda x: torch.atan2(x, x.flip(0)),
    "isinf_isnan": lambda x: (torch.isinf(x / 0.0) & ~torch.isnan(x)).float(),
    "clamp_where": lambda x: torch.where(x > 0, x.clamp(max=0.5), -x),
    "nan_minmax": lambda x: torch.maximum(x, torch.full_like(x, float("nan"))) + torch.minimum(x, x * 0),
}


@pytest.mark.parametrize("name", sorted(UNARY))
def test_math_functions(name):
    x = torch.randn(97) * 2
    x[3] = 0.0
    x[5] = 1e-6
    check(UNARY[name], x)


def test_pow_special_cases():
    a = torch.tensor([-2.0, -2.0, 0.0, 0.0, 0.0, 1.0, float("nan"), 3.0, -8.0, 2.0])
    b = torch.tensor([3.0, 2.0, 2.0, 0.0, -1.0, float("nan"), 0.0, 0.5, 1 / 3, -2.0])
    check(lambda a, b: torch.pow(a, b), a, b)


def test_arange_full_and_cat():
    x = torch.randn(6, 5)
    check(lambda x: (x + torch.arange(5), torch.cat([x, x * 2], 0), torch.full((3, 2), 7.0)), x)


def test_zero_size_inputs():
    x = torch.randn(0, 7)
    check(lambda x: (x * 2 + 1, x.sum(-1)), x)
    y = torch.randn(4, 0)
    check(lambda y: (y.sum(-1), y.exp()), y)


# ------------------------------------------------------------------------------ tier 1: reductions


def test_softmax_is_one_persistent_kernel():
    x = torch.randn(16, 100)
    sg, fns = check(lambda x: torch.softmax(x * 0.5, -1), x, templates=["persistent"])
    assert len(sg.kernels) == 1


def test_softmax_looped():
    x = torch.randn(6, 300)
    check(lambda x: torch.softmax(x, -1), x, rmax=64, templates=["looped"])


def test_log_softmax_and_half_softmax():
    x = torch.randn(12, 33)
    check(lambda x: F.log_softmax(x, -1), x)
    h = torch.randn(12, 33).half()
    check(lambda h: torch.softmax(h, -1), h, dtype=torch.float16)


@pytest.mark.parametrize("rmax", [4096, 16])
def test_layer_norm(rmax):
    x, w, b = torch.randn(3, 5, 48), torch.randn(48), torch.randn(48)
    check(lambda x, w, b: F.layer_norm(x, (48,), w, b), x, w, b, rmax=rmax,
          templates=["persistent"] if rmax > 48 else ["looped"])


def test_residual_layer_norm_relu():
    x, y, w, b = torch.randn(10, 64), torch.randn(10, 64), torch.randn(64), torch.randn(64)
    sg, _ = check(lambda x, y, w, b: F.relu(F.layer_norm(x + y, (64,), w, b)), x, y, w, b)
    assert len(sg.kernels) == 1


def test_bf16_layer_norm():
    x = torch.randn(8, 64).bfloat16()
    w, b = torch.randn(64).bfloat16(), torch.randn(64).bfloat16()
    check(lambda x, w, b: F.layer_norm(x, (64,), w, b), x, w, b, dtype=torch.bfloat16)


@pytest.mark.parametrize("rmax", [4096, 8])
def test_row_reductions(rmax):
    x = torch.randn(9, 37)
    x[2, 5] = float("nan")
    x[5, 3] = x[5, 7] = 50.0  # ties: the first index wins
    x[6, 10] = x[6, 20] = -50.0
    check(lambda x: (x.sum(-1), x.amax(-1), x.amin(-1), x.argmax(-1), x.argmin(-1), x.mean(-1),
                     torch.var_mean(x, -1), x.prod(-1)), x, rmax=rmax)
    y = x.clone()
    y[4, :] = float("-inf")
    y[3, :] = float("inf")
    y[7, 30] = float("nan")
    check(lambda y: (y.amax(-1), y.amin(-1), y.argmax(-1), y.argmin(-1), y.prod(-1)), y, rmax=rmax)


@pytest.mark.parametrize("rmax", [4096, 4])
def test_int_and_bool_reductions(rmax):
    a = torch.randint(-100, 100, (7, 29))
    m = a > 90
    check(lambda a, m: (a.sum(-1), a.amax(-1), a.amin(0), a.argmax(-1), a.argmin(0), m.any(-1), m.all(-1),
                        (~m).all(-1), m.any(0)), a, m, rmax=rmax)


def test_column_and_multi_dim_reductions():
    x = torch.randn(20, 6, 10)
    check(lambda x: (x.sum(0), x.amax(1), x.sum((0, 2)), x.mean((1, 2)), x.argmax(1)), x)


def test_outer_reduction_uses_wide_row_tiles():
    x = torch.randn(300, 24)
    sg, fns = check(lambda x: (x.sum(0), x.amax(0)), x, templates=["looped"])
    assert all(f.plan.outer_reduction for f, _ in fns.values())
    assert all(f.plan.configs[0].XBLOCK >= 16 for f, _ in fns.values())


def test_reduction_with_epilogue_and_prologue_stores():
    x = torch.randn(8, 40)

    def f(x):
        y = x * 2 + 1  # stored (returned) and reduced
        s = y.sum(-1, keepdim=True)
        return y, y / s, s.squeeze(-1) * 3

    for rmax in (4096, 8):
        check(f, x, rmax=rmax)


def test_looped_reduction_over_long_rows():
    x = torch.randn(2, 5000)
    x[1, 4321] = 1e4
    sg, fns = check(lambda x: (torch.softmax(x, -1), x.argmax(-1), x.amax(-1)), x, templates=["looped"])


@pytest.mark.parametrize("rmax", [4096, 4])
def test_several_rows_per_program_with_a_partial_last_block(rmax):
    # 29 rows in programs of 8 rows: the masked rows of the last program must not be stored
    from mend.compiler.codegen.triton.plan import Config

    x = torch.randn(29, 12)
    fn = lambda x: (torch.softmax(x, -1), x.argmax(-1), x.sum(-1))  # noqa: E731
    gm, sg = scheduled(fn, x)
    fns = TritonGenerator(persistent_rmax=rmax).compile(sg.kernels, Dump("t"))
    for f, _ in fns.values():
        f.config = Config(8, 16 if f.template == "persistent" else 4, 4)
    call, _ = wrapper.build(sg, fns, {}, torch.device("cpu"))
    got = call([x])
    for g, w in zip(got, fn(x)):
        assert_same(g, w)


def test_few_long_rows_are_split_across_programs():
    x = torch.randn(3, 9000)
    x[1, 5000] = float("nan")
    x[2, 100] = x[2, 7000] = 50.0  # a tie across chunks: the first index wins
    x[0, 8999] = -60.0
    sg, fns = check(lambda x: (x.sum(-1), x.amax(-1), x.amin(-1), x.argmax(-1), x.argmin(-1), x.mean(-1),
                               (x > 0).any(-1), (x > -5).all(-1), x * 2, (x * 2).sum(-1)), x,
                    split_min=4096, templates=["split"])
    f = next(iter(fns.values()))[0]
    assert f.plan.nsplit >= 2 and f.plan.nsplit * f.plan.rchunk >= 9000


def test_full_reductions_split():
    y = torch.randn(20000)
    a = torch.randint(-5, 5, (12000,))
    check(lambda y: (y.sum(), y.mean(), y.amax(), y.argmax(), ((y - 1) ** 2).mean()), y, split_min=4096,
          templates=["split"])
    check(lambda a: (a.sum(), a.amax(), a.argmin(), (a == 4).any(), (a < 9).all()), a, split_min=4096,
          templates=["split"])
    z = torch.rand(9000) * 0.002 + 0.999
    check(lambda z: z.prod(), z, split_min=4096, templates=["split"])


def test_column_reduction_with_few_columns_splits():
    x = torch.randn(20000, 3)
    check(lambda x: (x.sum(0), x.amax(0)), x, split_min=4096, templates=["split"])


@pytest.mark.slow
@pytest.mark.parametrize("rmax,split_min", [(4096, None), (8, None), (4096, 1024)])
def test_gpu_max_min_variant_propagates_nan(rmax, split_min):
    """On a GPU, max/min reduce with a NaN-propagating combine (the interpreter default is tl.max plus a
    NaN flag): run that variant here on small rows."""
    x = torch.randn(3, 2100)
    x[1, 7] = float("nan")
    x[2, 2000] = float("nan")
    x[0, 1500] = 9.0
    x[0, 2090] = -9.0  # past 2048: a row this long is not split, and its one tile must cover it all
    sg, fns = check(lambda x: (x.amax(-1), x.amin(-1), x.amax(0), x * 2), x, rmax=rmax, split_min=split_min,
                    nan_combine=True)
    assert all(f.source.nan_combine for f, _ in fns.values())
    assert any("_max_nan" in f.kernel_text for f, _ in fns.values())


def test_dependent_reductions_are_not_split():
    x = torch.randn(2, 9000)
    check(lambda x: torch.softmax(x, -1), x, split_min=4096, templates=["looped"])


# -------------------------------------------------- split reductions (schedule/split.py, before fusion)


@pytest.fixture
def small_split(monkeypatch):
    """Split reductions at interpreter-sized shapes (the defaults start at 2**20 elements)."""
    monkeypatch.setattr(split_pass, "MIN_NUMEL", 1 << 14)
    monkeypatch.setattr(split_pass, "MIN_RNUMEL", 256)
    monkeypatch.setattr(split_pass, "MIN_CHUNK", 64)


def _split_notes(fn, *args, device="cuda"):
    gm = make_fx(fn, decomposition_table=decomposition_table(), tracing_mode="fake")(*args)
    return split_pass.split_reductions(Lowering(gm, list(args)).run(), device)[1]


def test_tall_column_reduction_with_a_pointwise_epilogue_is_split(small_split):
    """x.abs().mean(0) of a tall x, broadcast back into a pointwise expression: partial sums over chunks of
    rows, their combine, and the epilogue as a pointwise kernel of its own (not walked by the few programs
    of a column reduction)."""
    x, b, c = torch.randn(2048, 48), torch.randn(48), torch.randn(48)
    fn = lambda x, b, c: F.gelu(x + b, approximate="tanh") * c - x.abs().mean(0)  # noqa: E731
    sg, fns = check(fn, x, b, c)
    kinds = [(k.size, k.rdims) for k in sg.kernels]
    assert kinds == [((32, 64, 48), (1,)), ((32, 48), (0,)), ((2048, 48), ())], kinds
    assert [f.template for f, _ in fns.values()] == ["persistent", "persistent", "pointwise"]
    assert _split_notes(fn, x, b, c) == ["buf1: split reduction, 32 partials over dim 0 (buf1_part)"]
    assert _split_notes(fn, x, b, c, device="cpu") == []  # the CPU's column kernels keep the fused form


def test_split_reductions_of_every_kind_and_shape(small_split):
    x = torch.randn(1024, 40)
    x[700, 3] = float("nan")
    check(lambda x: (x.sum(0), x.amax(0), x.amin(0), (x > 2).any(0), (x > -4).all(0), x.mean(0) * 2,
                     (x * 0.001 + 1).prod(0)), x)
    y = torch.randn(64, 32, 12)  # over the two leading dims: split along the first
    check(lambda y: (y.sum((0, 1)), y - y.mean((0, 1), keepdim=True)), y)
    z = torch.randn(3, 9000)  # few long rows (the last dim): split into contiguous chunks
    sg, _ = check(lambda z: (z.sum(-1), z - z.amax(-1, keepdim=True)), z)
    assert any(k.size[0] > 1 and len(k.size) == 3 for k in sg.kernels)
    h = torch.randn(4096, 8).to(torch.bfloat16)  # partial sums stay in float32
    check(lambda h: (h.sum(0), h.float().mean(0)), h, dtype=torch.bfloat16)


def test_argmax_and_short_or_many_rows_are_not_split(small_split):
    assert _split_notes(lambda x: x.argmax(0), torch.randn(4096, 8)) == []
    assert _split_notes(lambda x: x.sum(0), torch.randn(100, 400)) == []  # rows of 100: short
    assert _split_notes(lambda x: x.sum(-1), torch.randn(512, 1024)) == []  # 512 rows: enough programs
    assert _split_notes(lambda x: x.sum(0), torch.randn(16384, 4)) != []


# ------------------------------------------- matrix products with their epilogues (schedule/matmul.py)


def _as_accurate_as_eager(fn, args, got):
    """Each output no further from a float64 evaluation of ``fn`` than twice eager's own distance plus one
    unit in the last place at the output's scale (half precision rounds the product once here, maybe twice
    in eager, and each rounding may land an ulp apart)."""
    want = pytree.tree_leaves(fn(*args))
    ref = pytree.tree_leaves(fn(*[a.double() for a in args]))
    for g, w, r in zip(got, want, ref):
        assert g.dtype == w.dtype and g.shape == w.shape and same_strides(g, w)
        mine, eager = (g.double() - r).abs().max().item(), (w.double() - r).abs().max().item()
        ulp = torch.finfo(w.dtype).eps * r.abs().max().item()
        assert mine <= 2 * eager + ulp, (mine, eager, ulp)


MATMUL_CASES = {
    "linear_gelu_residual": (lambda x, w, b, r: F.gelu(F.linear(x, w, b)) + r, [(64, 48), (80, 48), (80,), (64, 80)]),
    "mlp_3d": (lambda x, w1, b1, w2: F.linear(F.gelu(F.linear(x, w1, b1), approximate="tanh"), w2) + x,
               [(2, 24, 48), (96, 48), (96,), (48, 96)]),
    "swiglu": (lambda x, wg, wu: F.silu(F.linear(x, wg)) * F.linear(x, wu), [(2, 24, 48), (96, 48), (96, 48)]),
    "bmm_scale": (lambda q, k: (torch.bmm(q, k.transpose(1, 2)) * 0.25).relu(), [(6, 40, 16), (6, 40, 16)]),
    "odd_sizes_column_major": (lambda a, b: (a.t().contiguous().t() @ b).float() * 2, [(33, 70), (70, 17)]),
}


@pytest.mark.parametrize("case", sorted(MATMUL_CASES))
def test_matrix_products_take_their_epilogues(case):
    fn, shapes = MATMUL_CASES[case]
    args = [torch.randn(*sh).to(torch.float16) for sh in shapes]
    got, sg, fns = run_triton(fn, *args)
    _as_accurate_as_eager(fn, args, got)
    assert not [s for s in sg.steps if isinstance(s, ir.ExternKernel)]  # no cuBLAS call left
    assert "matmul" in {f.template for f, _ in fns.values()}
    products = [k for k in sg.kernels if len(k.size) >= 3 and k.rdims == (len(k.size) - 1,)]
    assert products and all(len(k.stages) >= 2 for k in products)  # each with its epilogue


def test_linear_gelu_residual_is_one_kernel_in_bfloat16():
    fn, shapes = MATMUL_CASES["linear_gelu_residual"]
    args = [torch.randn(*sh).to(torch.bfloat16) for sh in shapes]
    got, sg, fns = run_triton(fn, *args)
    _as_accurate_as_eager(fn, args, got)
    (k,) = sg.kernels
    assert [st.kind for st in k.stages] == ["reduction", "outer", "outer"]
    f = fns[k.name][0]
    assert f.template == "matmul" and "tl.dot(" in f.kernel_text and "tl.math.erf" in f.kernel_text


@pytest.mark.parametrize("case", sorted(MATMUL_CASES))
def test_the_cublas_candidate_computes_the_same_epilogue(case):
    """The matmul launcher's other candidate: torch.matmul on views of the operands, then the epilogue
    kernel alone (the launcher times it against the fused kernel on a GPU and keeps the faster)."""
    fn, shapes = MATMUL_CASES[case]
    args = [torch.randn(*sh).to(torch.float16) for sh in shapes]
    gm, sg = scheduled(fn, *args)
    fns = TritonGenerator().compile(sg.kernels, Dump("t"))
    products = [f for f, _ in fns.values() if f.template == "matmul"]
    assert products
    for f in products:
        assert f.epilogue.template == "pointwise" and len(f.source.compile_units()) == 2
        f.config = triton_launch.CUBLAS
    call, _ = wrapper.build(sg, fns, {}, torch.device("cpu"))
    _as_accurate_as_eager(fn, args, call(list(args)))
    assert all(f.epilogue.config is not None for f in products)  # the epilogue kernel ran


def test_products_stay_aten_calls_without_an_epilogue_in_float32_or_when_switched_off(monkeypatch):
    x, w = torch.randn(16, 32), torch.randn(24, 32)
    _, sg = scheduled(lambda x, w: F.gelu(F.linear(x, w)), x, w)  # float32: cuBLAS keeps it
    assert [str(s.op) for s in sg.steps if isinstance(s, ir.ExternKernel)] == ["aten.mm.default"]
    h, hw = x.half(), w.half()
    _, sg = scheduled(lambda x, w: F.linear(x, w).sum(), h, hw)  # read by a reduction only
    assert any(isinstance(s, ir.ExternKernel) for s in sg.steps)
    monkeypatch.setenv("MEND_MATMUL_EPILOGUE", "0")
    _, sg = scheduled(lambda x, w: F.gelu(F.linear(x, w)), h, hw)
    assert any(isinstance(s, ir.ExternKernel) for s in sg.steps)


def test_two_products_of_one_input_stay_two_kernels():
    """q, k and v projections read the same input: each product is its kernel's only reduction."""
    x, wq, wk = torch.randn(32, 48).half(), torch.randn(40, 48).half(), torch.randn(40, 48).half()
    fn = lambda x, wq, wk: (F.linear(x, wq).relu(), F.linear(x, wk).sigmoid())  # noqa: E731
    got, sg, fns = run_triton(fn, x, wq, wk)
    _as_accurate_as_eager(fn, [x, wq, wk], got)
    assert len(sg.kernels) == 2 and {f.template for f, _ in fns.values()} == {"matmul"}


def test_the_reference_interpreter_runs_a_product_as_a_matrix_product():
    from mend.compiler.runtime.interpret import run_kernel

    fn, shapes = MATMUL_CASES["bmm_scale"]
    args = [torch.randn(*sh).half() for sh in shapes]
    _, sg = scheduled(fn, *args)
    (k,) = sg.kernels
    out = torch.empty(6, 40, 40, dtype=torch.float16)
    run_kernel(k, *args, out)
    _as_accurate_as_eager(fn, args, [out])


def test_identical_kernels_share_one_function_and_one_launcher():
    """Four layers of the same shapes render four identical kernels: one function, one launcher."""
    args = [torch.randn(16, 32) for _ in range(4)] + [torch.randn(32) for _ in range(4)]
    fn = lambda *a: tuple(F.layer_norm(a[i] * 2, (32,), a[4 + i]) for i in range(4))  # noqa: E731
    got, sg, fns = run_triton(fn, *args)
    for g, e in zip(got, fn(*args)):
        assert_same(g, e)
    assert len(sg.kernels) == 4 and len({id(f) for f, _ in fns.values()}) == 1


# ----------------------------------------------------------------- through Dynamo + aot_autograd


@pytest.mark.slow
def test_backend_forward_and_backward_with_triton_generator(monkeypatch):
    """torch.compile(backend="mend") with the Triton generator (CPU tensors, interpreter): training."""
    monkeypatch.setattr(backend, "generator_for", lambda device_type: TritonGenerator())
    torch._dynamo.reset()
    m = ResidualLN(32)
    x = torch.randn(6, 32, requires_grad=True)
    y = torch.randn(6, 32)
    before = dict(backend.STATS)
    compiled = torch.compile(m, backend="mend", fullgraph=True)
    out = compiled(x, y)
    g = torch.randn_like(out)
    out.backward(g)
    got = [x.grad.clone(), m.ln.weight.grad.clone(), m.ln.bias.grad.clone()]
    x.grad = m.ln.weight.grad = m.ln.bias.grad = None
    want = m(x, y)
    want.backward(g)
    torch.testing.assert_close(out, want, rtol=1e-5, atol=1e-5)
    for a, b in zip(got, [x.grad, m.ln.weight.grad, m.ln.bias.grad]):
        torch.testing.assert_close(a, b, rtol=1e-4, atol=1e-5)
    assert backend.STATS["graphs"] - before["graphs"] == 2
    assert backend.STATS["fallback_graphs"] == before["fallback_graphs"]
    assert backend.STATS["interpreted_kernels"] == before["interpreted_kernels"]
    torch._dynamo.reset()


# ------------------------------------------------------------------------- fallbacks and caching


def _kernel(size, rdims, stages, inputs, outputs, dtypes):
    return ir.Kernel("kx", tuple(size), tuple(rdims), tuple(stages), tuple(inputs), tuple(outputs),
                     tuple(dtypes))


def test_unsupported_kernel_raises_kernel_compile_error_and_keeps_the_others():
    x0, = variables(1)
    lay = ir.Layout.contiguous((8,), torch.complex64)
    bad = ir.Kernel("kbad", (8,), (), (ir.Stage("o", "pointwise", ir.Load("a", x0, torch.complex64),
                                                 torch.complex64, lay, None, False, x0),),
                    ("a",), ("o",), (("a", torch.complex64), ("o", torch.complex64)))
    x = torch.randn(8)
    _, sg = scheduled(lambda x: x + 1, x)
    with pytest.raises(KernelCompileError) as ei:
        TritonGenerator().compile([bad] + sg.kernels, Dump("t"))
    assert ei.value.failed == ["kbad"]
    assert set(ei.value.partial) == {k.name for k in sg.kernels}


def test_launch_failure_falls_back_to_the_reference_interpreter(monkeypatch):
    x = torch.randn(10)
    gm, sg = scheduled(lambda x: x * 2, x)
    fns = TritonGenerator().compile(sg.kernels, Dump("t"))
    launcher = fns[sg.kernels[0].name][0]

    class Broken:
        def __getitem__(self, grid):
            raise RuntimeError("triton failed to compile")

    launcher.fn = Broken()
    before = triton_launch.STATS["launch_fallbacks"]
    call, _ = wrapper.build(sg, fns, {}, torch.device("cpu"))
    (out,) = call([x])
    torch.testing.assert_close(out, x * 2)
    assert launcher.fallback is not None
    assert triton_launch.STATS["launch_fallbacks"] == before + 1


def test_module_is_written_to_the_cache_and_reused(tmp_path):
    x = torch.randn(10)
    _, sg = scheduled(lambda x: x.exp(), x)
    gen = TritonGenerator()
    src = gen.module_source(sg.kernels)
    m1 = triton_build.load_module(src)
    files = list((tmp_path / "cache" / "v1" / "triton").rglob("*.py"))
    assert len(files) == 1 and files[0].read_text() == src
    hits = triton_build.STATS["module_hits"]
    assert triton_build.load_module(src) is m1
    assert triton_build.STATS["module_hits"] == hits + 1


def test_autotune_results_round_trip_on_disk():
    key = "ab" * 32
    assert triton_launch.read_tuned(key) is None
    triton_launch.write_tuned(key, {"config": [1024, 1, 4]})
    assert triton_launch.read_tuned(key) == {"config": [1024, 1, 4]}


def test_int64_indices_for_huge_kernels():
    x0, = variables(1)
    n = 2**31 + 16
    lay = ir.Layout.contiguous((n,), torch.float32)
    k = ir.Kernel("kbig", (n,), (), (ir.Stage("o", "pointwise", ir.Op("mul", (
        ir.Load("a", x0, torch.float32), ir.Const(2.0, torch.float32)), torch.float32), torch.float32, lay,
        None, False, x0),), ("a",), ("o",), (("a", torch.float32), ("o", torch.float32)))
    s = KernelSource(k)
    assert s.plan.index_dtype == "tl.int64"
    assert "tl.program_id(0).to(tl.int64)" in s.render()
    small = KernelSource(_kernel((1000,), (), k.stages, k.inputs, k.outputs, k.dtypes))
    assert small.plan.index_dtype == "tl.int32"


def test_block_heuristics():
    assert next_pow2(1) == 1 and next_pow2(100) == 128 and next_pow2(4096) == 4096
    x = torch.randn(64, 1000)
    _, sg = scheduled(lambda x: torch.softmax(x, -1), x)
    s = KernelSource(sg.kernels[0])
    assert s.plan.template == "persistent"
    for c in s.plan.configs:
        assert c.RBLOCK == 1024 and c.XBLOCK * c.RBLOCK <= 8192
    _, sg = scheduled(lambda x: x.exp(), torch.randn(1 << 20))
    s = KernelSource(sg.kernels[0])
    assert {c.XBLOCK for c in s.plan.configs} == {512, 1024, 2048}


# ------------------------------------------------------------- tier 2: compile for sm_90, no GPU

TIER2_CASES = {
    "pointwise": (lambda x, w: torch.relu(x * w) * torch.sigmoid(x) + torch.tanh(x) ** 1.5,
                  (torch.randn(64, 32), torch.randn(32))),
    "transposed": (lambda x: x.t().exp() + 1, (torch.randn(16, 24),)),
    "half": (lambda x: (x.exp() * 2).half(), (torch.randn(33, 7),)),
    "bf16_ln": (lambda x, w, b: F.layer_norm(x, (64,), w, b),
                (torch.randn(8, 64).bfloat16(), torch.randn(64).bfloat16(), torch.randn(64).bfloat16())),
    "softmax": (lambda x: torch.softmax(x, -1), (torch.randn(16, 1000),)),
    "softmax_long": (lambda x: torch.softmax(x, -1), (torch.randn(4, 10000),)),
    "reductions": (lambda x: (x.sum(-1), x.amax(-1), x.argmax(-1), x.argmin(-1), x.prod(-1),
                              torch.var_mean(x, -1)), (torch.randn(9, 37),)),
    "reductions_long": (lambda x: (x.amax(-1), x.argmax(-1), x.amin(-1), x.prod(-1)), (torch.randn(3, 9000),)),
    "columns": (lambda x: (x.sum(0), x.amax(0), x.argmax(0)), (torch.randn(300, 24),)),
    "ints": (lambda a, m: (torch.div(a, 3, rounding_mode="floor"), torch.remainder(a, 7), m.any(-1), m.all(-1),
                           a.sum(-1), a.amax(-1), a ** 3),
             (torch.randint(-9, 9, (5, 20)), torch.rand(5, 20) > 0.5)),
    "math": (lambda x: (torch.expm1(x) + torch.log1p(x.abs()) + torch.atan2(x, x + 1) + torch.erfc(x)
                        + torch.round(x) + torch.trunc(x) + torch.asinh(x) + torch.sinh(x)
                        + torch.remainder(x, 0.3) + x.sign()), (torch.randn(50),)),
}


def _compile_sm90(sources, module):
    import triton
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource

    compiled = 0
    for s in sources:
        for name, sig, launches in s.compile_units():
            fn = getattr(module, name)
            for constexprs, options in launches:
                src = ASTSource(fn=fn, signature=sig, constexprs=constexprs)
                out = triton.compile(src, target=GPUTarget("cuda", 90, 32), options=options)
                assert out.asm["cubin"], name
                assert out.metadata.shared <= 228 * 1024
                compiled += 1
    return compiled


@pytest.mark.slow
@pytest.mark.parametrize("case", sorted(TIER2_CASES))
def test_every_kernel_compiles_for_sm90(case, monkeypatch):
    monkeypatch.setenv("TRITON_INTERPRET", "0")
    fn, args = TIER2_CASES[case]
    _, sg = scheduled(fn, *args)
    gen = TritonGenerator(interpret=False)
    sources, bad = gen.sources(sg.kernels)
    assert not bad
    module = triton_build.load_module(render_module(sources, interpret=False))
    n = _compile_sm90(sources, module)
    assert n >= len(sg.kernels) >= 1
    # and the interpreter gets the same kernels right
    monkeypatch.setenv("TRITON_INTERPRET", "1")
    check(fn, *args)


@pytest.mark.slow
def test_split_template_compiles_for_sm90(monkeypatch):
    monkeypatch.setenv("TRITON_INTERPRET", "0")
    x = torch.randn(4, 40000)
    _, sg = scheduled(lambda x: (x.sum(-1), x.argmax(-1), x.amin(-1), (x > 0).all(-1), x.prod(-1), x * 3,
                                 x.mean(-1) + 1), x)
    y = torch.randn(3 * 2**20)
    _, sg2 = scheduled(lambda y: (y.sum(), ((y - 1) ** 2).mean(), y.argmin()), y)
    gen = TritonGenerator(interpret=False)
    templates = set()
    for graph in (sg, sg2):  # one module per graph (kernel names repeat across graphs)
        sources, bad = gen.sources(graph.kernels)
        assert not bad
        templates |= {s.plan.template for s in sources}
        module = triton_build.load_module(render_module(sources, interpret=False))
        assert _compile_sm90(sources, module) >= 2
    assert "split" in templates


@pytest.mark.slow
def test_split_reduction_kernels_compile_for_sm90(monkeypatch):
    """The benchmark's tall column reduction at its real size (default thresholds): partial, combine and
    epilogue kernels, every launch configuration, compiled for sm_90."""
    monkeypatch.setenv("TRITON_INTERPRET", "0")
    x, b, c = torch.empty(65536, 1024), torch.empty(1024), torch.empty(1024)
    _, sg = scheduled(lambda x, b, c: F.gelu(x + b, approximate="tanh") * c - x.abs().mean(0), x, b, c)
    assert [(k.size, k.rdims) for k in sg.kernels] == [((32, 2048, 1024), (1,)), ((32, 1024), (0,)),
                                                       ((65536, 1024), ())]
    sources, bad = TritonGenerator(interpret=False).sources(sg.kernels)
    assert not bad
    assert [s.plan.template for s in sources] == ["looped", "persistent", "pointwise"]
    assert sources[0].plan.xnumel // sources[0].plan.configs[0].XBLOCK >= 264  # programs: two waves or more
    module = triton_build.load_module(render_module(sources, interpret=False))
    assert _compile_sm90(sources, module) >= 3


@pytest.mark.slow
def test_matmul_template_compiles_for_sm90_with_tensor_cores(monkeypatch):
    """A BERT-sized MLP in bfloat16: both products with their epilogues, every configuration, compiled
    for sm_90 the way the compile workers do (16-byte aligned pointers: pipelined loads, wgmma)."""
    from mend.compiler.codegen.triton import aot
    from mend.compiler.codegen.triton.worker import compile_job

    monkeypatch.setenv("TRITON_INTERPRET", "0")
    bf = torch.bfloat16
    x, w1, b1, w2 = (torch.empty(*s, dtype=bf) for s in ((8, 512, 768), (3072, 768), (3072,), (768, 3072)))
    _, sg = scheduled(lambda x, w1, b1, w2: F.linear(F.gelu(F.linear(x, w1, b1)), w2) + x, x, w1, b1, w2)
    sources, bad = TritonGenerator(interpret=False).sources(sg.kernels)
    assert not bad and [s.plan.template for s in sources] == ["matmul", "matmul"]
    module = triton_build.load_module(render_module(sources, interpret=False))
    for s in sources:
        for name, sig, launches in s.compile_units():  # the fused kernel, then the epilogue alone
            for constexprs, options in launches:
                r = compile_job(aot.job_for(module, name, sig, constexprs, options, ("cuda", 90, 32)))
                assert "error" not in r, r.get("error")
                assert r["shared"] <= 228 * 1024
    import triton
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource

    name, sig, launches = sources[0].compile_units()[0]
    ck = triton.compile(ASTSource(fn=getattr(module, name), signature=sig, constexprs=launches[0][0]),
                        target=GPUTarget("cuda", 90, 32), options=launches[0][1])
    assert "wgmma.mma_async" in ck.asm["ptx"]


@pytest.mark.slow
def test_looped_templates_compile_for_sm90(monkeypatch):
    monkeypatch.setenv("TRITON_INTERPRET", "0")
    x = torch.randn(6, 300)
    _, sg = scheduled(lambda x: (torch.softmax(x, -1), x.argmax(-1), x.amin(-1), (x > 0).any(-1)), x)
    gen = TritonGenerator(persistent_rmax=64, interpret=False)
    sources, bad = gen.sources(sg.kernels)
    assert not bad and {s.plan.template for s in sources} == {"looped"}
    module = triton_build.load_module(render_module(sources, interpret=False))
    assert _compile_sm90(sources, module) >= 1


def test_int64_kernel_compiles_for_sm90(monkeypatch):
    monkeypatch.setenv("TRITON_INTERPRET", "0")
    x0, = variables(1)
    n = 2**31 + 16
    lay = ir.Layout.contiguous((n,), torch.float16)
    k = ir.Kernel("kbig", (n,), (), (ir.Stage("o", "pointwise", ir.Op("exp", (
        ir.Load("a", x0 + sympy.Integer(0), torch.float16),), torch.float16), torch.float16, lay, None, False,
        x0),), ("a",), ("o",), (("a", torch.float16), ("o", torch.float16)))
    s = KernelSource(k)
    module = triton_build.load_module(render_module([s], interpret=False))
    assert _compile_sm90([s], module) == len(s.plan.configs)
    assert math.prod(k.size) > 2**31


# ------------------------------------------------------------- interpreted-kernel accounting (by identity)


def _compile_with_triton(monkeypatch, fn, *args):
    monkeypatch.setattr(backend, "generator_for", lambda device_type: TritonGenerator())
    monkeypatch.setenv("MEND_STRICT", "1")
    gm = make_fx(fn, decomposition_table=decomposition_table(), tracing_mode="fake")(*args)
    before = dict(backend.STATS)
    call = backend.compile_graph(gm, list(args))
    return call, before


def test_triton_kernels_are_not_counted_as_interpreted(monkeypatch):
    """Triton launchers are called with tensors ("tensor" style) but are generated kernels."""
    x, y = torch.randn(8, 12), torch.randn(50)
    fn = lambda x, y: (x.softmax(-1), (y * 3).exp() + 1)
    call, before = _compile_with_triton(monkeypatch, fn, x, y)
    assert len(call.mend_graph.kernels) == 2
    assert call.mend_interpreted == []
    assert backend.STATS["interpreted_kernels"] == before["interpreted_kernels"]
    got = call([x, y])
    for g, w in zip(got, fn(x, y)):
        assert_same(g, w, None)


def test_triton_kernel_that_fails_generation_is_the_only_interpreted_one(monkeypatch):
    from mend.compiler.codegen.triton import kernel as triton_source

    real = triton_source.KernelSource.render

    def render(self):
        if self.k.rdims:
            raise NotImplementedError("simulated unsupported kernel")
        return real(self)

    monkeypatch.setattr(triton_source.KernelSource, "render", render)
    x, y = torch.randn(8, 12), torch.randn(50)
    fn = lambda x, y: (x.softmax(-1), (y * 3).exp() + 1)
    call, before = _compile_with_triton(monkeypatch, fn, x, y)
    red = [k.name for k in call.mend_graph.kernels if k.rdims]
    assert len(red) == 1 and len(call.mend_graph.kernels) == 2
    assert call.mend_interpreted == red
    assert backend.STATS["interpreted_kernels"] - before["interpreted_kernels"] == 1
    got = call([x, y])
    for g, w in zip(got, fn(x, y)):
        assert_same(g, w, None)


def test_a_float32_addmm_read_by_a_pointwise_node_becomes_mm_and_its_bias_moves_into_the_epilogue():
    """cuBLAS's product by ``mm`` and the bias added in the kernel that reads it (fused, no extra pass); an
    ``addmm`` that nothing pointwise reads stays as it is."""
    x, w, b, res = torch.randn(64, 48), torch.randn(96, 48), torch.randn(96), torch.randn(64, 96)

    def fn(x, w, b, res):
        return F.gelu(F.linear(x, w, b)) + res, F.linear(x, w, b * 2)

    gm, sg = scheduled(fn, x, w, b, res)
    externs = [str(s.op) for s in sg.steps if isinstance(s, ir.ExternKernel)]
    assert sorted(externs) == ["aten.addmm.default", "aten.mm.default"], externs
    (k,) = [k for k in sg.kernels if "erf" in str(k.stages)]
    assert "arg2" in k.inputs  # the bias is read by the GELU's kernel
    fns = TritonGenerator().compile(sg.kernels, Dump("t"))
    call, _ = wrapper.build(sg, fns, {}, torch.device("cpu"))
    for got, want in zip(call([x, w, b, res]), fn(x, w, b, res)):
        assert_same(got, want)


@pytest.mark.parametrize(("dtype", "fmt"), [(torch.float32, torch.contiguous_format), (torch.bfloat16, torch.contiguous_format),
                                           (torch.float32, torch.channels_last)])
def test_a_convolution_bias_is_added_where_its_readers_load_the_output(dtype, fmt):
    """ATen on the GPU adds a convolution's bias in a kernel of its own (GPU zoo, ConvNeXt: 8 a call): the
    convolution runs without it and each reader adds it, reading the output through a permute (ConvNeXt's
    layer norm over channels) or directly; a channels-last output (cuDNN's for depthwise convolutions on the
    GPU) too. A convolution that is an output keeps its bias."""
    x, w, b = torch.randn(2, 8, 6, 5).to(dtype), torch.randn(8, 1, 3, 3).to(dtype), torch.randn(8).to(dtype)
    x = x.contiguous(memory_format=fmt)  # channels-last: a dense output in another order of its dims

    def fn(x, w, b):
        y = F.conv2d(x, w, b, padding=1, groups=8)
        ln = F.layer_norm(y.permute(0, 2, 3, 1), (8,))
        return ln * 2, torch.relu(y) + x

    gm, sg = scheduled(fn, x, w, b)
    externs = [s for s in sg.steps if isinstance(s, ir.ExternKernel)]
    assert [str(s.op) for s in externs] == ["aten.convolution.default"]
    assert externs[0].args[2] is None  # the bias left the ATen call
    assert externs[0].out_layouts[0].is_contiguous() == (fmt == torch.contiguous_format)
    assert all("arg2" in k.inputs for k in sg.kernels)  # each reader loads the bias
    got, _, _ = run_triton(fn, x, w, b)
    for g, want in zip(got, fn(x, w, b)):
        assert_same(g, want)
    sg = scheduled(lambda x, w, b: (F.conv2d(x, w, b, groups=8), F.conv2d(x, w, b, groups=8) * 2), x, w, b)[1]
    assert [s.args[2] is None for s in sg.steps if isinstance(s, ir.ExternKernel)] == [False, True]


def test_a_float32_addmm_read_through_a_transpose_or_a_reshape_adds_its_bias_in_each_reader():
    """Attention heads (``linear(x).view(b, t, h, d).transpose(1, 2)``) and a residual layer norm read the
    product at other indices than it is written: the bias is added where each reader loads the product, so
    no kernel adds the bias alone (GPU zoo, BERT fp32: 20 such kernels a call before). Two products, two
    readers each: two ``mm`` calls, no stage that stores a product, two kernels (the heads' scale fused
    with the layer norm, and the heads' sum), eager's values and strides."""
    x, w, b = torch.randn(2, 16, 32), torch.randn(32, 32), torch.randn(32)

    def fn(x, w, b):
        heads = F.linear(x, w, b).view(2, 16, 4, 8).transpose(1, 2)
        return heads * 0.125 + 1, F.layer_norm(F.linear(x, w, b) + x, (32,)), heads.sum(-1)

    gm, sg = scheduled(fn, x, w, b)
    externs = [s for s in sg.steps if isinstance(s, ir.ExternKernel)]
    assert [str(s.op) for s in externs] == ["aten.mm.default"] * 2
    products = {s.name.removesuffix("_mm") for s in externs}
    assert not [st.name for k in sg.kernels for st in k.stages if st.name in products]
    assert len(sg.kernels) == 2
    got, _, _ = run_triton(fn, x, w, b)
    for g, want in zip(got, fn(x, w, b)):
        assert_same(g, want)
    # a product that is an output keeps its addmm (its buffer holds the bias); the other one folds
    sg = scheduled(lambda x, w, b: (F.linear(x, w, b), F.linear(x, w, b).transpose(0, 1) * 2), x[0], w, b)[1]
    assert [str(s.op) for s in sg.steps if isinstance(s, ir.ExternKernel)] == ["aten.addmm.default", "aten.mm.default"]


@pytest.mark.parametrize("form", ["mm", "bmm", "addmm"])
def test_a_product_with_unaligned_rows_runs_into_padded_rows_and_returns_eager_strides(monkeypatch, form):
    """cuBLAS needs rows that start 16-byte aligned for its fast kernels: a language-model head of 50257
    columns (GPT-2) ran an sm75 CUTLASS kernel on an H200, 3.4 ms against 0.45 ms aligned. The wrapper pads
    the second operand's columns (and a bias's) with zeros, keeps the first columns of the product and copies
    them to eager's layout."""
    monkeypatch.setattr(wrapper, "_pads", lambda device: True)  # the GPU's rule, checked on the CPU
    monkeypatch.setattr(wrapper, "_PAD_MIN_ROWS", 0)
    x, w, b = (t.to(torch.bfloat16) for t in (torch.randn(2, 6, 16), torch.randn(13, 16).t(), torch.randn(13)))

    def fn(x, w, b):
        first = {"mm": lambda: x @ w, "bmm": lambda: torch.bmm(x, w.expand(2, 16, 13)),
                 "addmm": lambda: torch.addmm(b, x.view(12, 16), w)}[form]()
        return first, x.view(12, 16) @ w  # no pointwise reader: the products stay ATen calls

    gm, sg = scheduled(fn, x, w, b)
    products = [s for s in sg.steps if isinstance(s, ir.ExternKernel) and s.op in wrapper._PADDED]
    assert str(products[0].op) == f"aten.{form}.default"
    assert products and all(wrapper._padded_columns(s, "cuda") == (13, 3) for s in products)  # 13 -> 16
    fns = TritonGenerator().compile(sg.kernels, Dump("t"))
    call, src = wrapper.build(sg, fns, {c.name: getattr(gm, c.attr) for c in sg.constants}, torch.device("cpu"))
    assert src.count("_padded(") == len(products)
    for got, want in zip(call([x, w, b]), fn(x, w, b)):
        assert got.stride() == want.stride()
        torch.testing.assert_close(got, want)
    products32 = [s for s in scheduled(fn, x.float(), w.float(), b.float())[1].steps
                  if isinstance(s, ir.ExternKernel) and s.op in wrapper._PADDED]
    assert products32 and all(wrapper._padded_columns(s, "cuda") is None for s in products32)  # no TF32
    monkeypatch.setattr(wrapper, "_pads", lambda device: False)
    assert all(wrapper._padded_columns(s, "cpu") is None for s in products)
    aligned = scheduled(lambda x, w: x @ w, x, torch.randn(16, 16, dtype=torch.bfloat16))[1]
    monkeypatch.setattr(wrapper, "_pads", lambda device: True)
    assert all(wrapper._padded_columns(s, "cuda") is None for s in aligned.steps if isinstance(s, ir.ExternKernel))


def test_a_mask_from_the_shape_runs_once_in_triton():
    """Steps that read no input (``schedule/fold.py``) run at the first call only: the Triton kernels of a
    causal mask built from the sequence length, the per-call kernel reading what they kept."""
    def f(x):
        pos = torch.arange(x.shape[-1])
        seg = torch.cumsum((pos % 3 == 0).to(torch.int64), -1)
        mask = torch.where((pos[:, None] >= pos[None, :]) & (seg[:, None] == seg[None, :]), 0.0, float("-inf"))
        return (x + mask).softmax(-1)

    x = torch.randn(2, 12, 12)
    gm, sg = scheduled(f, x)
    assert sg.once and [k for k in sg.kernels if k.name not in sg.once]
    gen = TritonGenerator()
    fns = gen.compile(sg.kernels, Dump("t"))
    launched = []
    counted = {n: (lambda *a, _f=fn, _n=n: (launched.append(_n), _f(*a))[1], style) for n, (fn, style) in fns.items()}
    call, _ = wrapper.build(sg, counted, {}, torch.device("cpu"))
    for i in range(2):
        x = torch.randn(2, 12, 12)
        assert_same(call([x])[0], f(x), None)
        if i == 0:
            assert set(sg.once) & set(launched)
            launched.clear()
    assert launched and not set(sg.once) & set(launched)

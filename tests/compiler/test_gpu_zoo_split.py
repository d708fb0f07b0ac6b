"""The GPU zoo's split of a warm call's GPU time by kind of kernel (benchmarks/compiler_gpu_zoo.py --profile)."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))

import compiler_gpu_zoo as Z  # noqa: E402


def test_kernel_kinds() -> None:
    assert Z._kernel_kind("sm80_xmma_gemm_f32f32_f32f32_f32_nn_n_tilesize64x64x8") == "library"
    assert Z._kernel_kind("fmha_cutlassF_f32_aligned_64x64_rf_sm80(PyTorchMemEffAttention") == "library"
    assert Z._kernel_kind("mend_mat_8e49ca8754006acc") == "matmul"
    assert Z._kernel_kind("triton_tem_fused_addmm_0") == "matmul"
    assert Z._kernel_kind("mend_per_392776255164b3be") == "generated"
    assert Z._kernel_kind("triton_poi_fused_add_mul_pow_tanh_view_4") == "generated"
    assert Z._kernel_kind("void at::native::vectorized_gather_kernel<16, long>") == "aten"
    assert Z._kernel_kind("Memset (Device)") == "memory"


def _row(ind: dict, mend: dict, top=()) -> dict:
    return {"profile": {"inductor": {"top": list(top), "split": ind}, "mend": {"top": list(top), "split": mend}}}


def test_floor_is_mends_matrix_products_over_inductors_whole_gpu_time() -> None:
    ind = {"library": 900.0, "matmul": 0.0, "generated": 80.0, "aten": 0.0, "memory": 20.0}
    mend = {"library": 850.0, "matmul": 50.0, "generated": 120.0, "aten": 10.0, "memory": 20.0}
    text = "\n".join(Z._gpu_lines({"m": _row(ind, mend)}))
    line = next(ln for ln in text.splitlines() if ln.startswith("m "))
    assert line.split()[-3:] == ["1.50x", "1.050x", "0.900x"]  # 120/80, 1050/1000, (850+50)/1000


def test_rows_profiled_before_matmul_templates_were_counted_apart_are_left_out() -> None:
    old = {"library": 500.0, "generated": 800.0, "aten": 0.0, "memory": 0.0}
    hidden = _row(old, old, top=[("mend_mat_1", 700.0, 4)])
    shown = _row(old, old, top=[("sm80_xmma_gemm", 500.0, 4)])
    text = "\n".join(Z._gpu_lines({"a": hidden, "b": shown}))
    assert "not shown: a," in text and any(ln.startswith("b ") for ln in text.splitlines())
    assert not any(ln.startswith("a ") for ln in text.splitlines())

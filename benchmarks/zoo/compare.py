"""Model outputs as flat tensor lists, and their comparison (bitwise and max |diff|). Imports torch."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch

# compiled vs eager: the tolerance a backend that reorders nothing meets easily, per dtype
TOLERANCE = {torch.float32: (1e-4, 1e-5), torch.float16: (1e-2, 1e-2), torch.bfloat16: (5e-2, 5e-2)}


def flatten(out: Any, prefix: str = "out") -> list[tuple[str, torch.Tensor]]:
    """Every tensor in a model output (ModelOutput, tuples, lists, dicts, caches), in a stable order."""
    if isinstance(out, torch.Tensor):
        return [(prefix, out.detach().cpu())]
    if isinstance(out, dict):  # ModelOutput is an OrderedDict of its non-None fields
        return [t for k, v in out.items() for t in flatten(v, f"{prefix}.{k}")]
    if isinstance(out, (list, tuple)):
        return [t for i, v in enumerate(out) for t in flatten(v, f"{prefix}[{i}]")]
    legacy = getattr(out, "to_legacy_cache", None)  # a transformers Cache
    if callable(legacy):
        try:
            return flatten(legacy(), f"{prefix}.cache")
        except Exception:  # caches without a legacy form: their tensors by attribute
            pass
    if hasattr(out, "__dict__") and not isinstance(out, type):
        return [t for k, v in sorted(vars(out).items()) if not k.startswith("_") for t in flatten(v, f"{prefix}.{k}")]
    return []


@dataclass
class Diff:
    same: bool  # same keys, shapes, dtypes and bits (NaN equal to NaN)
    max_abs_diff: float  # over float tensors of matching shapes; inf when structure differs
    close: bool  # within the tolerance of the dtype
    note: str = ""  # what differs first


def _bits_equal(a: torch.Tensor, b: torch.Tensor) -> bool:
    if a.is_floating_point() or a.is_complex():
        return bool(torch.equal(a, b) or ((a == b) | (a.isnan() & b.isnan())).all())
    return bool(torch.equal(a, b))


def compare(a: list[tuple[str, torch.Tensor]], b: list[tuple[str, torch.Tensor]]) -> Diff:
    """Compare two flattened outputs: ``a`` is the reference."""
    if [k for k, _ in a] != [k for k, _ in b]:
        return Diff(False, float("inf"), False, f"outputs differ: {len(a)} vs {len(b)} tensors")
    same, close, worst, note = True, True, 0.0, ""
    for (key, x), (_, y) in zip(a, b):
        if x.shape != y.shape or x.dtype != y.dtype:
            return Diff(False, float("inf"), False, f"{key}: {tuple(x.shape)} {x.dtype} vs {tuple(y.shape)} {y.dtype}")
        if _bits_equal(x, y):
            continue
        same = False
        if x.is_floating_point() or x.is_complex():
            d = (x.double() - y.double()).abs().nan_to_num(nan=float("inf"))
            worst = max(worst, float(d.max()) if d.numel() else 0.0)
            rtol, atol = TOLERANCE.get(x.dtype, (1e-4, 1e-5))
            ok = torch.allclose(x.double(), y.double(), rtol=rtol, atol=atol, equal_nan=True)
        else:
            worst, ok = float("inf"), False
        if not ok and close:
            close, note = False, f"{key} differs (max |diff| {worst:.3g})"
    return Diff(same, worst, close, note)

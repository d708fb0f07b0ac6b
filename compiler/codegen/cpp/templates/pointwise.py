"""C++ template ``pointwise``: a kernel without reduced dims.

The iteration space is coalesced (``codegen/common.py``); a contiguous chain becomes one flat
``#pragma omp parallel for simd`` loop, other kernels a collapsed parallel nest with a ``simd`` innermost loop.
Every stage is computed at the same point.
"""

from __future__ import annotations

import math

from .... import ir
from ....ir.symbolic import variables
from ...common import coalesce
from ..emit import CppEmitter, store
from . import PARALLEL_THRESHOLD


def render(k: ir.Kernel, ptrs: dict) -> list[str]:
    sizes, mapping = coalesce(k)
    nv = variables(len(sizes))
    ranges = dict(zip(nv, sizes))
    values = {}
    em = CppEmitter(ptrs, lambda e: values[e.name], mapping, ranges)
    stores = []
    for st in k.stages:
        v = em.emit(st.expr)
        values[st.name] = v
        if st.store is not None:
            idx = em.index(st.store_index)
            stores.append(store(ptrs[st.name], idx, v, st.dtype))
    inner = ["    " + ln for ln in em.lines + stores]
    numel = math.prod(sizes) if sizes else 1
    par = numel >= PARALLEL_THRESHOLD
    out = []
    if not sizes:
        return ["  {"] + inner + ["  }"]
    if len(sizes) == 1:
        out.append("  #pragma omp parallel for simd schedule(static)" if par else "  #pragma omp simd")
        out.append(f"  for (int64_t x0 = 0; x0 < {sizes[0]}L; ++x0) {{")
        return out + inner + ["  }"]
    nouter = len(sizes) - 1
    if par:
        coll = f" collapse({nouter})" if nouter > 1 else ""
        out.append(f"  #pragma omp parallel for schedule(static){coll}")
    for i in range(nouter):
        out.append(f"  for (int64_t x{i} = 0; x{i} < {sizes[i]}L; ++x{i})")
    out.append("  #pragma omp simd")
    out.append(f"  for (int64_t x{nouter} = 0; x{nouter} < {sizes[nouter]}L; ++x{nouter}) {{")
    return out + inner + ["  }"]

"""One CPU kernel as an ``extern "C"`` C++ function; a graph's kernels as one translation unit.

A kernel takes ``void*`` data pointers (inputs then outputs, ``Kernel.inputs + Kernel.outputs``), cast to
typed ``__restrict__`` pointers; its body is rendered by one of the loop templates (``templates/``):
``pointwise`` without reduced dims, ``columns`` for reductions over leading dims, ``rows`` otherwise.
The unit starts with ``prelude.h``.
"""

from __future__ import annotations

from pathlib import Path

from ... import ir
from .emit import STORAGE
from .templates import columns, pointwise, rows

PRELUDE = (Path(__file__).with_name("prelude.h")).read_text()


def render_kernel(k: ir.Kernel) -> str:
    ptrs = {}
    lines = []
    params = []
    for i, b in enumerate(list(k.inputs) + list(k.outputs)):
        ptrs[b] = f"p{i}"
        dt = k.dtype_of(b)
        const = "const " if b in k.inputs else ""
        params.append(f"void* v{i}")
        lines.append(f"  {const}{STORAGE[dt]}* __restrict__ p{i} = ({const}{STORAGE[dt]}*)v{i};")
    if not k.rdims:
        body = pointwise.render(k, ptrs)
    elif columns.applies(k):
        body = columns.render(k, ptrs)
    else:
        body = rows.render(k, ptrs)
    return "\n".join([f'extern "C" void {k.name}({", ".join(params)}) {{'] + lines + body + ["}"])


def render_graph(kernels: list[ir.Kernel]) -> str:
    parts = [PRELUDE]
    for k in kernels:
        parts.append(render_kernel(k))
    return "\n\n".join(parts) + "\n"

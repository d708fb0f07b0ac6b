"""Split reductions (GPU): a long reduction over few rows becomes partial reductions, then a combine.

A GPU kernel reduces each row (or, for a reduction over leading dims, each tile of columns) in one
program. A tall input reduced over its rows (``x.abs().mean(0)`` of a 65536 x 1024 tensor: 1024 columns,
32 programs of 32 columns each) leaves most of the GPU idle, and a pointwise epilogue over the whole input
fused into that kernel (``f(x) - x.abs().mean(0)``) is then walked by those few programs too. Like
Inductor's split reductions, the reduction is cut in two before fusion:

* a partial reduction over ``nsplit`` chunks of the outermost reduced dim: ``nsplit`` times the rows, each
  ``1/nsplit`` as long (an iteration space with one more, leading, dim: the chunk);
* the combine: the same reduction over the ``nsplit`` partials of each row, under the original node's
  name, so every reader is unchanged (an epilogue per row fuses into it as an ``outer`` stage).

A pointwise epilogue over the input's space no longer shares an iteration space with the reduction: it
becomes a pointwise kernel of its own, with as many programs as it has elements.

Only on a GPU, for ``sum``, ``prod``, ``max``, ``min``, ``any`` and ``all`` (a partial of each is the same
reduction; argmax/argmin keep value and index pairs and stay with the Triton ``split`` template), when the
reduction is large (:data:`MIN_NUMEL` elements), its rows long (:data:`MIN_RNUMEL`) and one program per
row (or per tile of :data:`OUTER_TILE` columns) would give fewer than :data:`MIN_PROGRAMS` programs.
"""

from __future__ import annotations

import math

import sympy

from .. import ir
from ..ir import ComputedBuffer, Layout, Load
from ..ir.symbolic import contiguous_strides, simplify_index, variables

KINDS = ("sum", "prod", "max", "min", "any", "all")
MIN_NUMEL = 1 << 20  # smaller reductions take a few microseconds either way
MIN_RNUMEL = 1024  # shorter rows are reduced fast enough by one program each
MIN_PROGRAMS = 264  # two waves of an H100's 132 SMs
OUTER_TILE = 32  # columns per program of a reduction over leading dims (Triton's looped template)
MIN_CHUNK = 256  # reduction elements per partial
MAX_SPLIT = 256


def split_reductions(g: ir.GraphIR, device: str) -> tuple[ir.GraphIR, list[str]]:
    """``g`` with every reduction that :func:`nsplit` cuts in two rewritten as partial + combine, and
    a note per split (for ``fusion.txt``). Other devices get ``g`` unchanged."""
    if device != "cuda":
        return g, []
    nodes, notes = [], []
    for node in g.nodes:
        n = nsplit(node) if isinstance(node, ComputedBuffer) else 1
        if n < 2:
            nodes.append(node)
            continue
        part, combine = _split(node, n)
        nodes += [part, combine]
        notes.append(f"{node.name}: split reduction, {n} partials over dim {node.body.rdims[0]} ({part.name})")
    if not notes:
        return g, []
    return ir.GraphIR(g.inputs, tuple(nodes), g.outputs, g.constants), notes


def _unit_stride_is_reduced(red: ir.Reduction) -> bool:
    """Whether the loads walk memory contiguously along a reduced dim (a row reduction) rather than
    along a kept one (a reduction over leading dims, whose programs take tiles of columns)."""
    xs = variables(len(red.size))
    zero = {x: 0 for x in xs}
    votes = 0
    for ld in ir.loads(red.expr):
        base = ld.index.xreplace(zero)
        for i, x in enumerate(xs):
            if red.size[i] > 1 and ld.index.xreplace({**zero, x: 1}) - base == 1:
                votes += 1 if i in red.rdims else -1
    return votes >= 0


def nsplit(node: ComputedBuffer) -> int:
    """How many partials to cut ``node``'s reduction into (1: none)."""
    red = node.body
    if not isinstance(red, ir.Reduction) or red.kind not in KINDS or not red.rdims:
        return 1
    rnumel = math.prod(red.size[d] for d in red.rdims)
    numel = math.prod(red.size)
    if numel < MIN_NUMEL or rnumel < MIN_RNUMEL:
        return 1
    rows = numel // rnumel
    programs = rows if _unit_stride_is_reduced(red) else -(-rows // OUTER_TILE)
    if programs >= MIN_PROGRAMS:
        return 1
    want = min(MAX_SPLIT, 1 << math.ceil(math.log2(2 * MIN_PROGRAMS / max(programs, 1))))
    d0 = red.rdims[0]
    size = red.size[d0]
    # the largest divisor of the outermost reduced dim up to ``want`` that leaves chunks of MIN_CHUNK
    for n in range(min(want, size), 1, -1):
        if size % n == 0 and rnumel // n >= MIN_CHUNK:
            return n
    return 1


def _split(node: ComputedBuffer, n: int) -> tuple[ComputedBuffer, ComputedBuffer]:
    """(partial, combine) for ``node``'s reduction cut into ``n`` chunks of its outermost reduced dim."""
    red = node.body
    d0 = red.rdims[0]
    m = red.size[d0] // n
    # partial space: (chunk, *size with dim d0 of length m); the old x_d0 is chunk * m + its new variable
    ys = variables(len(red.size) + 1)
    mapping = {x: ys[i + 1] for i, x in enumerate(variables(len(red.size)))}
    mapping[variables(len(red.size))[d0]] = ys[0] * m + ys[d0 + 1]
    psize = (n,) + tuple(m if i == d0 else s for i, s in enumerate(red.size))
    prdims = tuple(d + 1 for d in red.rdims)
    ranges = dict(zip(ys, psize))
    pexpr = ir.substitute(red.expr, mapping, lambda e: simplify_index(e, ranges))
    pbody = ir.Reduction(psize, prdims, red.kind, pexpr)
    playout = Layout.contiguous(pbody.out_size, node.layout.dtype)
    part = ComputedBuffer(f"{node.name}_part", playout, pbody, node.origin)
    # combine: over the chunk dim of the partials, one row per output element
    csize = pbody.out_size
    cx = variables(len(csize))
    index = sum((st * x for st, x, s in zip(contiguous_strides(csize), cx, csize) if s != 1), sympy.Integer(0))
    cbody = ir.Reduction(csize, (0,), red.kind, Load(part.name, index, node.layout.dtype))
    return part, ComputedBuffer(node.name, node.layout, cbody, node.origin)

"""Fusion and scheduling: :class:`ir.GraphIR` -> :class:`ir.ScheduledGraph`.

Lowering has already inlined cheap pointwise producers into their consumers. The scheduler groups the
remaining realized nodes into kernels, greedily in topological order:

* a kernel has an iteration space ``size`` and reduced dims ``rdims`` (empty for a pointwise kernel);
* a node joins a kernel when its iteration space maps onto the kernel's: a pointwise node over ``size``
  (a pointwise stage, or a row stage of a row group), a pointwise node over the non-reduced dims (an
  ``outer`` stage, e.g. ``rsqrt(var + eps)``), or a reduction over the same ``size`` and ``rdims``;
* every read of a value produced inside the kernel must hit the element the producer wrote at the same
  iteration point (the producer's store index equals the consumer's load index after renaming variables):
  such reads become ``Local`` values (registers or row-local scratch);
* the kernel must be able to run at its position: everything the node reads from outside the kernel is
  produced by an earlier step (this keeps the step list acyclic without ancestor sets);
* candidates are the kernels the node reads from (vertical) or shares an input with (siblings, multi-output),
  latest first, within a window of 64 steps; a kernel holds at most 64 stages.

A fused value that nobody outside its kernel reads and that is not a graph output gets no buffer. Last,
the steps that read no graph input are marked to run once (``fold.py``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import sympy

from .. import ir
from ..ir import ComputedBuffer, ExternKernel, Kernel, Load, Local, Stage
from ..ir.contraction import contraction
from ..ir.symbolic import simplify_index, unravel, variables
from .fold import fold_once
from .matmul import matmul_epilogues
from .split import split_reductions

WINDOW = 64
MAX_STAGES = 64


@dataclass
class _Member:
    node: ComputedBuffer
    kind: str  # pointwise | outer | reduction
    expr: ir.Expr  # in the group's variable space (loads of members not yet rewritten)
    store_index: sympy.Expr  # the member's store index in the group's variable space


@dataclass
class _Group:
    size: tuple
    rdims: tuple | None  # None: pure pointwise so far
    members: list = field(default_factory=list)

    @property
    def names(self):
        return {m.node.name for m in self.members}


def _map_into(node: ComputedBuffer, size, rdims):
    """(kind, var mapping) for running ``node`` in the space (size, rdims), or None."""
    xs = variables(len(size))
    body = node.body
    if isinstance(body, ir.Reduction):
        if body.size == tuple(size) and (rdims is None or tuple(body.rdims) == tuple(rdims)):
            return "reduction", {}
        return None
    p = tuple(body.size)
    if p == tuple(size):
        return "pointwise", {}
    if math.prod(p) == math.prod(size) and math.prod(p) > 0:
        # same elements in row-major order (a reshape of the space): re-express p's variables
        return "pointwise", _reinterpret(p, list(xs), size)
    if not rdims:
        return None
    outer = [i for i in range(len(size)) if i not in rdims]
    osize = tuple(size[i] for i in outer)
    if p == osize:
        return "outer", {variables(len(p))[j]: xs[i] for j, i in enumerate(outer)}
    keep = tuple(1 if i in rdims else s for i, s in enumerate(size))
    if p == keep:
        return "outer", {xs[i]: sympy.Integer(0) for i in rdims}
    if math.prod(p) == math.prod(osize) and math.prod(p) > 0:
        return "outer", _reinterpret(p, [xs[i] for i in outer], osize)
    return None


def _reinterpret(p, vars_, vsize):
    """Variables of a row-major space ``p`` in terms of ``vars_`` (ranging over ``vsize``, same numel)."""
    flat = sympy.Integer(0)
    acc = 1
    for v, n in reversed(list(zip(vars_, vsize))):
        flat = flat + acc * v
        acc *= n
    rng = dict(zip(vars_, vsize))
    return {variables(len(p))[j]: simplify_index(e, rng) for j, e in enumerate(unravel(flat, p))}


def _store_point(node: ComputedBuffer, mapping):
    """The node's own iteration point expressed in the group's variables."""
    body = node.body
    if isinstance(body, ir.Reduction):
        return [variables(len(body.size))[i] for i in range(len(body.size)) if i not in body.rdims]
    own = variables(len(body.size))
    return [mapping.get(v, v) for v in own]


def _ranges(size):
    return {v: s for v, s in zip(variables(len(size)), size)}


def schedule(g: ir.GraphIR, device: str = "cpu"):
    """Returns (ScheduledGraph, decisions) where decisions are human-readable fusion notes. On a GPU, long
    reductions over few rows are split first (``split.py``), and matrix products with a pointwise epilogue
    become contractions that the epilogue fuses into (``matmul.py``)."""
    g, decisions = matmul_epilogues(g, device)
    g, notes = split_reductions(g, device)
    decisions += notes
    units: list = []  # _Group | ExternKernel
    unit_of: dict[str, int] = {}
    external = {i.name for i in g.inputs} | {c.name for c in g.constants}

    for node in g.nodes:
        if isinstance(node, ExternKernel):
            units.append(node)
            for n in node.output_names():
                unit_of[n] = len(units) - 1
            continue
        reads = {ld.buf for ld in ir.loads(node.body.expr)}
        chosen = None
        lo = max(0, len(units) - WINDOW)
        for ui in range(len(units) - 1, lo - 1, -1):
            grp = units[ui]
            if not isinstance(grp, _Group) or len(grp.members) >= MAX_STAGES:
                continue
            names = grp.names
            member_inputs = set()
            for m in grp.members:
                member_inputs |= {ld.buf for ld in ir.loads(m.expr)}
            if not (reads & names or reads & member_inputs):
                continue
            why = _try_join(grp, node, reads, ui, unit_of, external)
            if why is None:
                chosen = ui
                break
            decisions.append(f"{node.name} !-> kernel#{ui}: {why}")
        if chosen is None:
            body = node.body
            if isinstance(body, ir.Reduction):
                grp = _Group(tuple(body.size), tuple(body.rdims))
            else:
                grp = _Group(tuple(body.size), None)
            units.append(grp)
            chosen = len(units) - 1
            err = _try_join(grp, node, reads, chosen, unit_of, external)
            assert err is None, err
            decisions.append(f"{node.name}: new kernel#{chosen} ({type(body).__name__.lower()} {list(body.size)})")
        else:
            decisions.append(f"{node.name} -> kernel#{chosen} (fused)")
        unit_of[node.name] = chosen

    # who reads what, to decide which fused values need a buffer
    readers: dict[str, set] = {}
    for ui, u in enumerate(units):
        names = u.input_names() if isinstance(u, ExternKernel) else [
            ld.buf for m in u.members for ld in ir.loads(m.expr)]
        for n in names:
            readers.setdefault(n, set()).add(ui)
    out_bufs = {o.buf for o in g.outputs if isinstance(o, ir.TensorRef)}

    steps = []
    buffers = []
    kcount = 0
    for ui, u in enumerate(units):
        if isinstance(u, ExternKernel):
            steps.append(u)
            continue
        k = _make_kernel(u, f"k{kcount}", ui, readers, out_bufs)
        kcount += 1
        steps.append(k)
        for s in k.stages:
            if s.store is not None:
                buffers.append(ir.BufferDecl(s.name, s.store))
        eliminated = [s.name for s in k.stages if s.store is None]
        if eliminated:
            decisions.append(f"{k.name}: no buffer for {', '.join(eliminated)} (kernel-local)")
    sg = ir.ScheduledGraph(tuple(g.inputs), tuple(g.constants), tuple(buffers), tuple(steps), tuple(g.outputs),
                           device)
    sg, notes = fold_once(sg)
    return sg, decisions + notes


def _is_product(node: ComputedBuffer) -> bool:
    b = node.body
    return isinstance(b, ir.Reduction) and contraction(b.kind, tuple(b.size), tuple(b.rdims), b.expr) is not None


def _product_rule(grp: _Group, node: ComputedBuffer, kind: str) -> str | None:
    """A matrix product is its kernel's only reduction, with per-row (``outer``) stages after it only: the
    shape the generators' matrix-multiply templates take."""
    has_product = any(_is_product(m.node) for m in grp.members)
    if kind == "reduction" and grp.members and (has_product or _is_product(node)):
        return "a matrix product is its kernel's only reduction"
    if has_product and kind == "pointwise":
        return "a matrix product kernel takes per-row stages only"
    return None


def _try_join(grp: _Group, node: ComputedBuffer, reads, ui, unit_of, external):
    m = _map_into(node, grp.size, grp.rdims)
    if m is None:
        return "iteration spaces differ"
    kind, mapping = m
    why = _product_rule(grp, node, kind)
    if why is not None:
        return why
    rdims = grp.rdims
    if kind == "reduction" and rdims is None:
        rdims = tuple(node.body.rdims)
        if any(mm.kind != "pointwise" for mm in grp.members):
            return "pointwise kernel has non-row stages"
    names = grp.names
    for b in reads - names:
        if b in external:
            continue
        pu = unit_of.get(b)
        if pu is None or pu >= ui:
            return f"reads {b}, produced after the kernel"
    rng = _ranges(grp.size)
    expr = node.body.expr
    if mapping:
        expr = ir.substitute(expr, mapping, lambda e: simplify_index(e, rng))
    store = {mm.node.name: mm for mm in grp.members}
    for ld in ir.loads(expr):
        mm = store.get(ld.buf)
        if mm is None:
            continue
        if kind == "outer" and mm.kind == "pointwise":
            return f"per-row value reads row element of {ld.buf}"
        if sympy.expand(ld.index - mm.store_index) != 0:
            return f"reads {ld.buf} at {ld.index}, written at {mm.store_index}"
    point = _store_point(node, mapping)
    store_index = simplify_index(node.layout.index(point), rng)
    grp.rdims = rdims
    grp.members.append(_Member(node, kind, expr, store_index))
    return None


def _make_kernel(grp: _Group, name, ui, readers, out_bufs) -> Kernel:
    names = grp.names
    local_read: set = set()
    for m in grp.members:
        for ld in ir.loads(m.expr):
            if ld.buf in names:
                local_read.add(ld.buf)
    stages = []
    inputs: list[str] = []
    outputs: list[str] = []
    dtypes: dict = {}
    for m in grp.members:
        def to_local(e):
            if isinstance(e, Load):
                if e.buf in names:
                    return Local(e.buf, e.dtype)
                if e.buf not in inputs:
                    inputs.append(e.buf)
                    dtypes[e.buf] = e.dtype
            return None

        expr = ir.map_expr(m.expr, to_local)
        n = m.node
        outside = bool(readers.get(n.name, set()) - {ui}) or n.name in out_bufs
        store = n.layout if outside else None
        if store is not None:
            outputs.append(n.name)
            dtypes[n.name] = n.layout.dtype
        kind = m.kind
        red = n.body.kind if isinstance(n.body, ir.Reduction) else None
        stages.append(Stage(n.name, kind, expr, n.layout.dtype, store, red, n.name in local_read,
                            m.store_index if store is not None else None))
    rdims = grp.rdims or ()
    return Kernel(name, tuple(grp.size), tuple(rdims), tuple(stages), tuple(inputs), tuple(outputs),
                  tuple(dtypes.items()))

"""The IR verifier: checks the invariants of the contract (``ir/__init__.py``) between two stages.

:func:`verify_graph` checks a lowered :class:`~mend.compiler.ir.GraphIR`, :func:`verify_scheduled` a
:class:`~mend.compiler.ir.ScheduledGraph`; each raises :class:`IRError` listing every violation it finds.
The backend runs them after lowering and after scheduling (and on a graph-cache hit) when
``MEND_COMPILER_VERIFY=1`` or ``MEND_COMPILER_DEBUG`` is set; the compiler's tests set the first.

What is checked, like tinygrad's ``type_verify`` checks each op against its spec:

* expressions: every node is a ``Load``, ``Const``, ``IndexValue`` or ``Op`` (``Local`` only inside a
  kernel, naming an earlier stage, with its dtype); an ``Op`` is in the op table with its arity; ``where``
  selects on a bool; every ``Load`` reads a buffer defined before it, with that buffer's dtype; index
  expressions use only the iteration variables and are never negative (where their range is known);
* graphs: names defined once and before use, layouts that fit their nodes (a computed buffer is
  dense, as large as its body's iteration space), reductions over distinct, sorted, in-range dims
  of a known kind, outputs that name buffers;
* kernels: stage kinds and reduction kinds, stores exactly for the kernel's outputs and inside their
  buffers, per-row values (``reduction``/``outer`` stages) that do not read the reduced dims, a kernel
  without reduced dims made of pointwise stages only, ``local_users`` exactly when a later stage reads the
  value, inputs and dtypes that match what the stages read and write, and a buffer declaration for every
  output.
"""

from __future__ import annotations

import torch

from . import (
    BufferDecl,
    ComputedBuffer,
    Const,
    ExternKernel,
    GraphIR,
    IndexValue,
    Kernel,
    Layout,
    Load,
    Local,
    Op,
    Pointwise,
    Reduction,
    ScheduledGraph,
    TensorRef,
    step_reads,
    step_writes,
    walk,
)
from .ops import OPS
from .symbolic import bounds, variables

REDUCTIONS = frozenset({"sum", "prod", "max", "min", "argmax", "argmin", "any", "all"})
STAGE_KINDS = frozenset({"pointwise", "reduction", "outer"})


class IRError(AssertionError):
    """An IR that breaks the contract between stages: a bug in the stage that produced it."""


class _Check:
    """Collects violations; ``where`` prefixes each with the node it was found in."""

    def __init__(self, what: str) -> None:
        self.what = what
        self.errors: list[str] = []
        self.where = ""

    def fail(self, msg: str) -> None:
        self.errors.append(f"{self.where}: {msg}" if self.where else msg)

    def done(self) -> None:
        if self.errors:
            shown = "\n  ".join(self.errors[:20])
            more = f"\n  ... and {len(self.errors) - 20} more" if len(self.errors) > 20 else ""
            raise IRError(f"invalid {self.what} ({len(self.errors)} problem(s)):\n  {shown}{more}")

    # ------------------------------------------------------------------------------ pieces
    def layout(self, lay, name: str) -> None:
        if not isinstance(lay, Layout):
            self.fail(f"{name} has no Layout ({type(lay).__name__})")
            return
        if not isinstance(lay.dtype, torch.dtype):
            self.fail(f"{name}'s dtype {lay.dtype!r} is not a torch.dtype")
        if len(lay.size) != len(lay.stride) or any(s < 0 for s in lay.size) or lay.offset < 0:
            self.fail(f"{name}'s layout {lay} is malformed")

    def index(self, ix, size: tuple, what: str) -> None:
        """``ix`` is an integer expression over the variables of ``size``, never negative."""
        allowed = set(variables(len(size)))
        free = getattr(ix, "free_symbols", None)
        if free is None:
            self.fail(f"{what} index {ix!r} is not a sympy expression")
            return
        extra = free - allowed
        if extra:
            self.fail(f"{what} index {ix} uses {sorted(map(str, extra))}, not variables of size {list(size)}")
            return
        b = bounds(ix, dict(zip(variables(len(size)), size)))
        if b is not None and b[0] < 0 and all(s > 0 for s in size):
            self.fail(f"{what} index {ix} can be negative (down to {b[0]})")

    def expr(self, root, size: tuple, dtypes: dict, stages: dict | None = None) -> None:
        """Check every node of ``root``: ``dtypes`` maps the buffers it may load to their dtype; ``stages``
        (inside a kernel) maps the stages it may read as ``Local`` to theirs."""
        for e in walk(root):
            if not isinstance(getattr(e, "dtype", None), torch.dtype):
                self.fail(f"{type(e).__name__} {e} has no torch dtype")
            elif isinstance(e, Load):
                self.load(e, size, dtypes)
            elif isinstance(e, IndexValue):
                self.index(e.index, size, "index value")
            elif isinstance(e, Local):
                self.local(e, stages)
            elif isinstance(e, Op):
                self.op(e)
            elif not isinstance(e, Const):
                self.fail(f"{type(e).__name__} is not an IR expression node")

    def load(self, e: Load, size: tuple, dtypes: dict) -> None:
        if e.buf not in dtypes:
            self.fail(f"loads {e.buf}, which is not defined before it (or not a kernel input)")
        elif dtypes[e.buf] != e.dtype:
            self.fail(f"loads {e.buf} as {e.dtype}, the buffer holds {dtypes[e.buf]}")
        self.index(e.index, size, f"load of {e.buf}")

    def local(self, e: Local, stages: dict | None) -> None:
        if stages is None:
            self.fail(f"Local {e} outside a kernel")
        elif e.name not in stages:
            self.fail(f"reads %{e.name}, not an earlier stage of the kernel")
        elif stages[e.name] != e.dtype:
            self.fail(f"reads %{e.name} as {e.dtype}, the stage is {stages[e.name]}")

    def op(self, e: Op) -> None:
        info = OPS.get(e.op)
        if info is None:
            self.fail(f"op {e.op!r} is not in the op table")
        elif len(e.args) != info.arity:
            self.fail(f"op {e.op} takes {info.arity} argument(s), has {len(e.args)}")
        elif e.op == "where" and e.args[0].dtype != torch.bool:
            self.fail(f"where selects on a {e.args[0].dtype}, not a bool")


def verify_graph(g: GraphIR) -> None:
    """Check a lowered graph (the output of ``lowering``); raise :class:`IRError` if it breaks the contract."""
    c = _Check("GraphIR")
    dtypes: dict = {}
    layouts: dict = {}

    def define(name: str, lay) -> None:
        if name in dtypes:
            c.fail(f"{name} is defined twice")
        c.layout(lay, name)
        dtypes[name] = getattr(lay, "dtype", None)
        layouts[name] = lay

    positions = [i.index for i in g.inputs]
    if len(set(positions)) != len(positions):
        c.fail(f"input positions {positions} repeat")
    for buf in list(g.inputs) + list(g.constants):
        define(buf.name, buf.layout)
    for node in g.nodes:
        c.where = getattr(node, "name", type(node).__name__)
        if isinstance(node, ComputedBuffer):
            _computed(c, node, dtypes)
            define(node.name, node.layout)
        elif isinstance(node, ExternKernel):
            _extern(c, node, dtypes)
            for name, lay in zip(node.output_names(), node.out_layouts):
                define(name, lay)
        else:
            c.fail(f"{type(node).__name__} is not a graph node")
    c.where = "outputs"
    _outputs(c, g.outputs, dtypes)
    c.done()


def _computed(c: _Check, node: ComputedBuffer, dtypes: dict) -> None:
    body = node.body
    if isinstance(body, Pointwise):
        size = tuple(body.size)
    elif isinstance(body, Reduction):
        size = tuple(body.size)
        _rdims(c, body.rdims, len(size))
        if body.kind not in REDUCTIONS:
            c.fail(f"reduction kind {body.kind!r}")
    else:
        c.fail(f"body {type(body).__name__} is neither Pointwise nor Reduction")
        return
    out = body.out_size if isinstance(body, Reduction) else size
    if tuple(node.layout.size) != tuple(out) or not node.layout.is_dense():
        c.fail(f"buffer layout {node.layout} does not hold the dense result of size {list(out)}")
    c.expr(body.expr, size, dtypes)


def _rdims(c: _Check, rdims, ndim: int) -> None:
    if list(rdims) != sorted(set(rdims)) or any(not 0 <= d < ndim for d in rdims):
        c.fail(f"reduced dims {list(rdims)} are not distinct, sorted dims of a {ndim}-d space")


def _extern(c: _Check, node: ExternKernel, dtypes: dict) -> None:
    for name in node.input_names():
        if name not in dtypes:
            c.fail(f"ATen call reads {name}, which is not defined before it")
    if len(node.out_layouts) != len(node.output_names()):
        c.fail(f"{len(node.output_names())} outputs, {len(node.out_layouts)} layouts")


def _outputs(c: _Check, outputs, dtypes: dict) -> None:
    for o in outputs:
        if isinstance(o, TensorRef) and o.buf not in dtypes:
            c.fail(f"returns {o.buf}, which is never defined")


def verify_scheduled(sg: ScheduledGraph) -> None:
    """Check a scheduled graph (the output of ``schedule``, the input of the code generators); raise
    :class:`IRError` if it breaks the contract."""
    c = _Check("ScheduledGraph")
    dtypes: dict = {}
    for buf in list(sg.inputs) + list(sg.constants):
        c.layout(buf.layout, buf.name)
        dtypes[buf.name] = buf.layout.dtype
    decl: dict = {}
    for b in sg.buffers:
        if not isinstance(b, BufferDecl) or b.name in decl:
            c.fail(f"buffer declaration {b} is repeated or malformed")
        decl[b.name] = b.layout
    names = set()
    for step in sg.steps:
        c.where = getattr(step, "name", type(step).__name__)
        if step.name in names:
            c.fail("step name used twice")
        names.add(step.name)
        if isinstance(step, Kernel):
            _kernel(c, step, dtypes, decl)
            for o in step.outputs:
                if o in dtypes:
                    c.fail(f"writes {o}, which is already defined")
                dtypes[o] = step.dtype_of(o) if o in dict(step.dtypes) else None
        elif isinstance(step, ExternKernel):
            _extern(c, step, dtypes)
            for name, lay in zip(step.output_names(), step.out_layouts):
                dtypes[name] = lay.dtype
        else:
            c.fail(f"{type(step).__name__} is not a step")
    c.where = "once"
    _once(c, sg, names)
    c.where = "outputs"
    _outputs(c, sg.outputs, dtypes)
    c.done()


def _once(c: _Check, sg: ScheduledGraph, names: set) -> None:
    """Steps run at the first call only read what other such steps write, and hand nothing to the caller."""
    written: set = set()
    for step in sg.steps:
        if step.name not in sg.once:
            continue
        outside = [n for n in step_reads(step) if n not in written]
        if outside:
            c.fail(f"{step.name} runs once but reads {outside}, which are not computed once")
        written.update(step_writes(step))
    for name in set(sg.once) - names:
        c.fail(f"runs once a step that does not exist: {name}")
    returned = written & {o.buf for o in sg.outputs if isinstance(o, TensorRef)}
    if returned:
        c.fail(f"returns buffers computed once: {sorted(returned)}")


def _kernel(c: _Check, k: Kernel, defined: dict, decl: dict) -> None:
    _kernel_buffers(c, k, defined)
    size = tuple(k.size)
    inputs = {n: dict(k.dtypes).get(n) for n in k.inputs}
    rvars = {variables(len(size))[d] for d in k.rdims}
    stages: dict = {}
    read_locally: set = set()
    loaded: set = set()
    for st in k.stages:
        c.where = f"{k.name}.{st.name}"
        if st.name in stages:
            c.fail("stage name used twice")
        _stage_kind(c, k, st)
        c.expr(st.expr, size, inputs, stages)
        for e in walk(st.expr):
            if isinstance(e, Local):
                read_locally.add(e.name)
                if st.kind == "outer" and k.rdims and e.name in stages and _kind(k, e.name) == "pointwise":
                    c.fail(f"per-row stage reads the row values of %{e.name}")
            elif isinstance(e, Load):
                loaded.add(e.buf)
        if st.kind == "outer" and _free(st.expr) & rvars:
            c.fail("per-row stage depends on the reduced dims")
        _store(c, k, st, size, rvars, decl)
        stages[st.name] = st.dtype
    c.where = k.name
    for st in k.stages:
        if st.local_users != (st.name in read_locally):
            c.fail(f"stage {st.name}: local_users={st.local_users}, but it is "
                   f"{'' if st.name in read_locally else 'not '}read by a later stage")
    if set(k.inputs) != loaded:
        c.fail(f"inputs {list(k.inputs)}, the stages load {sorted(loaded)}")


def _kernel_buffers(c: _Check, k: Kernel, defined: dict) -> None:
    """The iteration space, and the buffers the kernel reads (defined before it) and writes."""
    _rdims(c, k.rdims, len(k.size))
    dtypes = dict(k.dtypes)
    if set(dtypes) != set(k.inputs) | set(k.outputs):
        c.fail(f"dtypes name {sorted(dtypes)}, the kernel reads {list(k.inputs)} and writes {list(k.outputs)}")
    for name in k.inputs:
        if name not in defined:
            c.fail(f"reads {name}, which is not defined before the kernel")
        elif name in dtypes and dtypes[name] != defined[name]:
            c.fail(f"reads {name} as {dtypes[name]}, the buffer holds {defined[name]}")


def _stage_kind(c: _Check, k: Kernel, st) -> None:
    if st.kind not in STAGE_KINDS:
        c.fail(f"stage kind {st.kind!r}")
    if (st.kind == "reduction") != (st.reduction is not None) or (
            st.reduction is not None and st.reduction not in REDUCTIONS):
        c.fail(f"{st.kind} stage with reduction {st.reduction!r}")
    if not k.rdims and st.kind != "pointwise":
        c.fail(f"{st.kind} stage in a kernel without reduced dims")


def _kind(k: Kernel, name: str) -> str:
    return next(s.kind for s in k.stages if s.name == name)


def _free(expr) -> set:
    out: set = set()
    for e in walk(expr):
        if isinstance(e, (Load, IndexValue)):
            out |= e.index.free_symbols
    return out


def _store(c: _Check, k: Kernel, st, size: tuple, rvars: set, decl: dict) -> None:
    writes = st.name in k.outputs
    if (st.store is not None) != writes:
        c.fail(f"store {st.store}, but the kernel's outputs are {list(k.outputs)}")
    if st.store is None:
        if st.store_index is not None:
            c.fail("a store index without a store")
        return
    if st.store.dtype != st.dtype:
        c.fail(f"stores a {st.dtype} value into a {st.store.dtype} buffer")
    if decl.get(st.name) != st.store:
        c.fail(f"buffer declaration {decl.get(st.name)} differs from the store layout {st.store}")
    if st.store_index is None:
        c.fail("a store without a store index")
        return
    c.index(st.store_index, size, "store")
    if st.kind != "pointwise" and st.store_index.free_symbols & rvars:
        c.fail(f"per-row value stored at {st.store_index}, which moves along the reduced dims")
    b = bounds(st.store_index, dict(zip(variables(len(size)), size)))
    if b is not None and all(s > 0 for s in size) and b[1] >= st.store.storage_span():
        c.fail(f"store index reaches {b[1]}, the buffer holds {st.store.storage_span()} elements")

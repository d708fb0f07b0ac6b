"""mend's loop IR: explicit, frozen, hashable and printable.

This module docstring is the contract between the stages: lowering (``lowering/``) produces a
:class:`GraphIR`, scheduling (``schedule/``) a :class:`ScheduledGraph`, and the code generators (C++ in
``codegen/cpp/``, Triton in ``codegen/triton/``) turn each of its :class:`Kernel` s into device code. A
generator never sees FX or ATen. Everything else (buffers, externs, output aliasing) is done by the shared
Python wrapper in ``mend.compiler.runtime.wrapper``. ``verify.py`` checks these invariants between the
stages (``MEND_COMPILER_VERIFY=1``); ``ops.py`` is the op table, ``symbolic.py`` the index expressions.

Values and expressions
----------------------
An element expression is a DAG of frozen nodes (hash-consed by value, so equal sub-expressions are equal
objects for CSE):

* ``Load(buf, index, dtype)``: element ``index`` (a sympy integer expression, in *elements*, already
  including the buffer view's offset and strides) of the storage of buffer ``buf``, whose element type is
  ``dtype``.
* ``Local(name, dtype)``: the value of the kernel stage ``name`` *at the current iteration point* (the
  scheduler proved the producer wrote exactly this element); a generator keeps it in a register (same
  iteration) or in row-local scratch (a row stage read by a later stage of the same row).
* ``Const(value, dtype)``, ``IndexValue(index, dtype)`` (the integer value of an index expression, e.g.
  ``arange``), ``Op(op, args, dtype)``: a pointwise operation from ``mend.compiler.ir.ops.OPS`` (name, arity,
  semantics); ``Op("cast", (a,), dtype)`` converts, ``Op("where", (c, a, b), dtype)`` selects.

``dtype`` is always the *storage* dtype of the value (``torch.float16`` for a half value). Generators
compute float16/bfloat16 in float32 and round only on ``cast`` to a half type and on stores; integers
compute in their own width; bool is a byte holding 0/1.

Index expressions use the canonical symbols ``x0 .. x{n-1}`` (``mend.compiler.ir.symbolic.var``), one per
dimension of the kernel's iteration space, each ranging over ``[0, size[i])``. They may contain
``FloorDiv``, ``IMod`` (print as ``//`` and ``%``: operands are never negative), ``Min`` and ``Max``.

Kernels
-------
A :class:`Kernel` has an iteration space ``size`` (a tuple of ints) and a tuple of reduced dimensions
``rdims`` (possibly empty). Its ``stages`` run in order for every *row*, a row being one point of the
non-reduced ("outer") dimensions:

* ``Stage(kind="pointwise")`` computes ``expr`` at every point of the row (every value of the ``rdims``
  variables); when ``rdims`` is empty, the whole kernel is one flat pointwise loop over ``size`` and every
  stage is computed at the same point.
* ``Stage(kind="reduction", reduction=R)`` folds ``expr`` over the row with ``R`` in ``sum``, ``prod``,
  ``max``, ``min``, ``argmax``, ``argmin``, ``any``, ``all`` (``max``/``min`` propagate NaN; ``argmax`` /
  ``argmin`` return the first index of the extreme value in row-major order over ``rdims``, as int64).
  Its value is one scalar per row.
* ``Stage(kind="outer")`` computes ``expr`` once per row; its expression does not depend on the ``rdims``
  variables.

A stage's ``store`` is the :class:`Layout` (size, stride, offset in elements, dtype) of the global buffer
``stage.name`` it writes, and ``store_index`` the element offset it writes at the current point, over the
kernel's variables (only outer variables for ``reduction``/``outer`` stages); ``store`` is None when the value
never leaves the kernel (the scheduler eliminated the buffer). ``Kernel.inputs`` /
``Kernel.outputs`` name the buffers it reads / writes; the wrapper passes their base data pointers in that
order (inputs then outputs).

The graph
---------
:class:`GraphIR` is the lowered graph (inputs, nodes in topological order, outputs). :class:`ScheduledGraph`
is what generators get: a list of steps, each a :class:`Kernel` or an :class:`ExternKernel` (an ATen call
on real tensors), plus buffer declarations; ``once`` names the steps that read no graph input, run at the
first call only (their buffers that later steps read are kept). Both print (``str()``) for debug dumps and
golden tests.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import sympy
import torch

from .ops import OPS
from .symbolic import contiguous_strides

# ----------------------------------------------------------------------------------------- layouts


@dataclass(frozen=True)
class Layout:
    """A strided view of a storage: size, stride and offset in elements, element dtype."""

    size: tuple[int, ...]
    stride: tuple[int, ...]
    offset: int
    dtype: torch.dtype

    @staticmethod
    def contiguous(size, dtype) -> "Layout":
        size = tuple(int(s) for s in size)
        return Layout(size, contiguous_strides(size), 0, dtype)

    def index(self, idx) -> sympy.Expr:
        e = sympy.Integer(self.offset)
        for i, st, s in zip(idx, self.stride, self.size):
            if s != 1 and st != 0:
                e = e + st * i
        return e

    @property
    def numel(self) -> int:
        n = 1
        for s in self.size:
            n *= s
        return n

    def is_contiguous(self) -> bool:
        return self.offset == 0 and all(
            s == 1 or st == c for s, st, c in zip(self.size, self.stride, contiguous_strides(self.size))
        )

    def is_dense(self) -> bool:
        """Offset 0 and no gaps or overlaps: some order of the dims is contiguous (a transposed, permuted or
        channels-last layout). An empty layout is dense whatever its strides."""
        if 0 in self.size:
            return self.offset == 0
        expected = 1
        for st, s in sorted((st, s) for s, st in zip(self.size, self.stride) if s != 1):
            if st != expected:
                return False
            expected *= s
        return self.offset == 0

    def storage_span(self) -> int:
        """Number of elements a storage must hold for this view."""
        if any(s == 0 for s in self.size):
            return 0
        return self.offset + sum((s - 1) * st for s, st in zip(self.size, self.stride)) + 1

    def __str__(self) -> str:
        off = f"+{self.offset}" if self.offset else ""
        return f"{dtype_name(self.dtype)}{list(self.size)}/{list(self.stride)}{off}"


def dtype_name(dt: torch.dtype) -> str:
    return str(dt).replace("torch.", "")


# ------------------------------------------------------------------------------------- expressions


class Expr:
    """Base of element expressions. Subclasses are frozen dataclasses; equality is by value. The hash is
    computed once per node (expressions are DAGs that get hashed many times during CSE and fusion)."""

    dtype: torch.dtype

    def children(self) -> tuple["Expr", ...]:
        return ()

    def __getstate__(self):
        # the cached hash depends on the process (string hashing is salted): never persist it
        return {k: v for k, v in self.__dict__.items() if k != "_h"}

    def __setstate__(self, state):
        for k, v in state.items():
            object.__setattr__(self, k, v)

    def __hash__(self) -> int:
        h = self.__dict__.get("_h")
        if h is None:
            h = hash((type(self).__name__,) + tuple(getattr(self, f) for f in self.__dataclass_fields__))
            object.__setattr__(self, "_h", h)
        return h


@dataclass(frozen=True, eq=True)
class Load(Expr):
    __hash__ = Expr.__hash__

    buf: str
    index: sympy.Expr
    dtype: torch.dtype

    def __str__(self) -> str:
        return f"{self.buf}[{self.index}]"


@dataclass(frozen=True, eq=True)
class Local(Expr):
    __hash__ = Expr.__hash__

    name: str
    dtype: torch.dtype

    def __str__(self) -> str:
        return f"%{self.name}"


@dataclass(frozen=True, eq=True)
class Const(Expr):
    __hash__ = Expr.__hash__

    value: Any
    dtype: torch.dtype

    def __str__(self) -> str:
        return f"{self.value!r}:{dtype_name(self.dtype)}"


@dataclass(frozen=True, eq=True)
class IndexValue(Expr):
    __hash__ = Expr.__hash__

    index: sympy.Expr
    dtype: torch.dtype

    def __str__(self) -> str:
        return f"idx({self.index}):{dtype_name(self.dtype)}"


@dataclass(frozen=True, eq=True)
class Op(Expr):
    __hash__ = Expr.__hash__

    op: str
    args: tuple
    dtype: torch.dtype

    def children(self):
        return self.args

    def __str__(self) -> str:
        return f"{self.op}({', '.join(str(a) for a in self.args)}):{dtype_name(self.dtype)}"


def walk(expr: Expr):
    """Post-order traversal of an expression DAG, each distinct node once."""
    seen = set()
    out = []
    stack = [(expr, False)]
    while stack:
        e, done = stack.pop()
        if done:
            out.append(e)
            continue
        if e in seen:
            continue
        seen.add(e)
        stack.append((e, True))
        for c in reversed(e.children()):
            if c not in seen:
                stack.append((c, False))
    return out


def loads(expr: Expr) -> list[Load]:
    return [e for e in walk(expr) if isinstance(e, Load)]


def map_expr(expr: Expr, fn) -> Expr:
    """Rebuild ``expr`` bottom-up; ``fn(node, new_children)`` returns the replacement or None (keep)."""
    memo: dict = {}
    for e in walk(expr):
        if isinstance(e, Op):
            args = tuple(memo[a] for a in e.args)
            new = Op(e.op, args, e.dtype) if args != e.args else e
        else:
            new = e
        r = fn(new)
        memo[e] = new if r is None else r
    return memo[expr]


def substitute(expr: Expr, mapping: dict, simplify=None) -> Expr:
    """Replace index variables in every Load/IndexValue index (simultaneous ``xreplace``)."""

    def fn(e):
        if isinstance(e, Load):
            ix = e.index.xreplace(mapping)
            return Load(e.buf, simplify(ix) if simplify else ix, e.dtype)
        if isinstance(e, IndexValue):
            ix = e.index.xreplace(mapping)
            return IndexValue(simplify(ix) if simplify else ix, e.dtype)
        return None

    return map_expr(expr, fn)


def op_count(expr: Expr) -> int:
    return sum(OPS[e.op].cost for e in walk(expr) if isinstance(e, Op) and e.op in OPS)


# ----------------------------------------------------------------------------------- graph nodes


@dataclass(frozen=True)
class Pointwise:
    """``expr`` (over ``x0..x{n-1}``) at every point of ``size``."""

    size: tuple[int, ...]
    expr: Expr

    def __str__(self) -> str:
        return f"pointwise{list(self.size)} {self.expr}"


@dataclass(frozen=True)
class Reduction:
    """Fold ``expr`` (over ``x0..x{n-1}`` of ``size``) along ``rdims`` with ``kind``.

    The result has the size of the non-reduced dimensions, in order (no keepdim; keepdim is a view)."""

    size: tuple[int, ...]
    rdims: tuple[int, ...]
    kind: str
    expr: Expr

    @property
    def out_size(self) -> tuple[int, ...]:
        return tuple(s for i, s in enumerate(self.size) if i not in self.rdims)

    def __str__(self) -> str:
        return f"reduce_{self.kind}{list(self.size)} over {list(self.rdims)} {self.expr}"


@dataclass(frozen=True)
class TensorRef:
    """A strided view (``layout``) of buffer ``buf``'s storage."""

    buf: str
    layout: Layout

    def __str__(self) -> str:
        return f"{self.buf}:{self.layout}"


@dataclass(frozen=True)
class InputBuffer:
    name: str
    layout: Layout
    index: int  # position among the graph's flat inputs

    def __str__(self) -> str:
        return f"{self.name} = input[{self.index}] {self.layout}"


@dataclass(frozen=True)
class ConstantBuffer:
    """A tensor captured by the graph (``get_attr``), passed to kernels like an input."""

    name: str
    layout: Layout
    attr: str

    def __str__(self) -> str:
        return f"{self.name} = constant {self.attr} {self.layout}"


@dataclass(frozen=True)
class ComputedBuffer:
    """A realized value: ``body`` stored in a buffer of dense ``layout`` (contiguous, or eager's order of
    the dims: a transposed, permuted or channels-last result keeps its strides)."""

    name: str
    layout: Layout
    body: Pointwise | Reduction
    origin: str = ""  # the FX node(s) it came from, for debug output

    def __str__(self) -> str:
        return f"{self.name}: {self.layout} = {self.body}"


@dataclass(frozen=True)
class ExternKernel:
    """An ATen call on real tensors. ``args``/``kwargs`` are trees whose leaves are :class:`TensorRef`
    (views of buffers) or Python constants; ``outputs`` are the buffer names of the result (a tree of the
    same shape as the op's return value: a name, None, or a tuple)."""

    name: str
    op: Any
    args: tuple
    kwargs: tuple  # sorted (key, value) pairs
    outputs: Any
    out_layouts: tuple  # Layout per output name, in flattened order
    origin: str = ""

    def output_names(self) -> list[str]:
        return [n for n in _flatten(self.outputs) if n is not None]

    def input_names(self) -> list[str]:
        return [x.buf for x in _flatten((self.args, self.kwargs)) if isinstance(x, TensorRef)]

    def __str__(self) -> str:
        def fmt(a):
            if isinstance(a, TensorRef):
                return str(a)
            if isinstance(a, (list, tuple)):
                return "[" + ", ".join(fmt(x) for x in a) + "]"
            return repr(a)

        args = ", ".join(fmt(a) for a in self.args)
        kw = "".join(f", {k}={fmt(v)}" for k, v in self.kwargs)
        return f"{self.outputs} = extern {self.op}({args}{kw})"


def _flatten(tree):
    if isinstance(tree, (list, tuple)):
        for t in tree:
            yield from _flatten(t)
    else:
        yield tree


@dataclass(frozen=True)
class GraphIR:
    inputs: tuple
    nodes: tuple  # ComputedBuffer | ExternKernel, topological order
    outputs: tuple  # TensorRef | Python constant, one per graph output
    constants: tuple = ()  # ConstantBuffer

    def __str__(self) -> str:
        lines = [str(i) for i in self.inputs] + [str(c) for c in self.constants]
        lines += [str(n) for n in self.nodes]
        lines.append("return " + ", ".join(str(o) for o in self.outputs))
        return "\n".join(lines)


# ---------------------------------------------------------------------------------- scheduled form


@dataclass(frozen=True)
class Stage:
    name: str
    kind: str  # "pointwise" | "reduction" | "outer"
    expr: Expr
    dtype: torch.dtype
    store: Layout | None
    reduction: str | None = None
    local_users: bool = False  # read (as Local) by a later stage of the same kernel
    store_index: sympy.Expr | None = None  # element offset written at the current point (kernel variables)

    def __str__(self) -> str:
        red = f"{self.reduction} " if self.reduction else ""
        dest = f" -> {self.store} @ {self.store_index}" if self.store is not None else " (kernel-local)"
        return f"  {self.name} = {self.kind} {red}{self.expr}{dest}"


@dataclass(frozen=True)
class Kernel:
    name: str
    size: tuple[int, ...]
    rdims: tuple[int, ...]
    stages: tuple[Stage, ...]
    inputs: tuple[str, ...]
    outputs: tuple[str, ...]
    dtypes: tuple = field(default=())  # (buffer name, dtype) for every input and output

    @property
    def numel(self) -> int:
        n = 1
        for s in self.size:
            n *= s
        return n

    @property
    def outer_dims(self) -> tuple[int, ...]:
        return tuple(i for i in range(len(self.size)) if i not in self.rdims)

    def dtype_of(self, buf: str) -> torch.dtype:
        return dict(self.dtypes)[buf]

    def __str__(self) -> str:
        head = f"kernel {self.name} size={list(self.size)} rdims={list(self.rdims)}"
        head += f" in={list(self.inputs)} out={list(self.outputs)}"
        return "\n".join([head] + [str(s) for s in self.stages])


@dataclass(frozen=True)
class BufferDecl:
    """A buffer the wrapper allocates (dense ``layout``) before the step that first writes it."""

    name: str
    layout: Layout


@dataclass(frozen=True)
class ScheduledGraph:
    inputs: tuple  # InputBuffer
    constants: tuple  # ConstantBuffer
    buffers: tuple  # BufferDecl for kernel outputs
    steps: tuple  # Kernel | ExternKernel in execution order
    outputs: tuple
    device: str = "cpu"
    once: tuple = ()  # names of the steps run at the first call only (``schedule/fold.py``)

    @property
    def kernels(self) -> list[Kernel]:
        return [s for s in self.steps if isinstance(s, Kernel)]

    def kept(self) -> list[str]:
        """The buffers that steps run once write and the other steps read (kept from the first call)."""
        written = [n for s in self.steps if s.name in self.once for n in step_writes(s)]
        read = {n for s in self.steps if s.name not in self.once for n in step_reads(s)}
        return [n for n in written if n in read]

    def __str__(self) -> str:
        lines = [str(i) for i in self.inputs] + [str(c) for c in self.constants]
        lines += [f"alloc {b.name}: {b.layout}" for b in self.buffers]
        lines += [("once " if s.name in self.once else "") + str(s) for s in self.steps]
        lines.append("return " + ", ".join(str(o) for o in self.outputs))
        return "\n".join(lines)


def step_reads(step) -> list[str]:
    """The buffers a step (a :class:`Kernel` or an :class:`ExternKernel`) reads."""
    return step.input_names() if isinstance(step, ExternKernel) else list(step.inputs)


def step_writes(step) -> list[str]:
    """The buffers a step writes."""
    return step.output_names() if isinstance(step, ExternKernel) else list(step.outputs)

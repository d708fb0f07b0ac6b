"""Steps computed once: what reads no graph input gives the same values at every call.

A model's graph builds some tensors from its static shapes alone: GPT-2's position ids (``arange``), the
causal mask transformers builds from the sequence length (``arange``, ``cumsum``, ``index``, a compare),
a rotary table's positions. They read no input, parameter or buffer, so every call computes the same
values; on a GPU each is a kernel launch or an ATen call of host time (GPT-2: 12 of the graph's 44 steps).
This stage marks such steps ``once`` (``ScheduledGraph.once``): the wrapper runs them at the first call,
keeps the buffers later steps read, and every later call starts from those.

A step is computed once when:

* every tensor it reads is written by a step computed once (graph inputs are read per call, and so are
  captured constants, which the program may change in place);
* it is an ATen call that draws no random numbers (``nondeterministic_seeded``) and writes none of its
  arguments (a random mask must differ from call to call);
* nothing it writes can reach the caller: not a graph output, nor read by an ATen call (computed per call)
  whose result is, or which writes its arguments (the result may be a view of it, which would hand the
  kept storage out and let the program change it);
* what is kept after the first call stays under :data:`MAX_KEPT_BYTES` (the steps' intermediate buffers
  are freed as before).

Kernels and ATen calls are deterministic on the same inputs, so the values the later steps read are those
they would have read: the output is unchanged, bit for bit.
"""

from __future__ import annotations

import dataclasses

import torch

from mend import settings

from .. import compat, ir

MAX_KEPT_BYTES = 64 << 20


def fold_once(sg: ir.ScheduledGraph) -> tuple[ir.ScheduledGraph, list[str]]:
    """``sg`` with the steps computed once in ``once``, and a note for ``fusion.txt``."""
    if not settings.FOLD.get():
        return sg, []
    escaping = _escaping(sg)
    folded: set[str] = set()  # buffers written by a step computed once
    once = []
    for step in sg.steps:
        reads = ir.step_reads(step)
        writes = ir.step_writes(step)
        if any(r not in folded for r in reads) or any(w in escaping for w in writes):
            continue
        if isinstance(step, ir.ExternKernel) and not _pure(step.op):
            continue
        once.append(step.name)
        folded.update(writes)
    if not once:
        return sg, []
    sg = dataclasses.replace(sg, once=tuple(once))
    layouts = {n: lay for step in sg.steps if step.name in sg.once for n, lay in _layouts(sg, step).items()}
    kept = sg.kept()
    nbytes = sum(_nbytes(layouts[n]) for n in kept)
    if nbytes > MAX_KEPT_BYTES:
        note = f"once: not folded ({len(once)} steps would keep {nbytes} bytes > {MAX_KEPT_BYTES})"
        return dataclasses.replace(sg, once=()), [note]
    note = f"once: {', '.join(once)} (first call only; keeps {', '.join(kept) or 'nothing'}, {nbytes} bytes)"
    return sg, [note]


def _layouts(sg, step) -> dict[str, ir.Layout]:
    if isinstance(step, ir.ExternKernel):
        return dict(zip(step.output_names(), step.out_layouts))
    decl = {b.name: b.layout for b in sg.buffers}
    return {o: decl[o] for o in step.outputs if o in decl}


def _nbytes(lay: ir.Layout) -> int:
    return lay.storage_span() * lay.dtype.itemsize


def _pure(op) -> bool:
    """An ATen call whose result depends on its arguments alone and which writes none of them."""
    schema = getattr(op, "_schema", None)
    if schema is None or schema.is_mutable or compat.is_effectful(op):
        return False
    return torch.Tag.nondeterministic_seeded not in getattr(op, "tags", ())


def _escaping(sg: ir.ScheduledGraph) -> set[str]:
    """Buffers the caller may get hold of: graph outputs, and what an ATen call reads whose result escapes
    (it may be a view) or which writes its arguments."""
    out = {o.buf for o in sg.outputs if isinstance(o, ir.TensorRef)}
    for step in reversed(sg.steps):
        if not isinstance(step, ir.ExternKernel):
            continue  # a kernel's outputs are new buffers
        schema = getattr(step.op, "_schema", None)
        if schema is None or schema.is_mutable or any(w in out for w in step.output_names()):
            out.update(step.input_names())
    return out

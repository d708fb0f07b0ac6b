"""Graphs with symbolic shapes: compiled once per concrete shape.

mend's lowering and code generators work on static shapes. When an input's shape changes, Dynamo
recompiles the frame with symbolic sizes (``automatic_dynamic_shapes``; also ``dynamic=True``), and the
graph mend receives has ``SymInt`` inputs and sizes. Rather than running such a graph eagerly, mend
specializes it at run time: the first call with a new combination of input shapes, strides, dtypes and
integer values retraces the ATen graph with those concrete inputs (``make_fx``, where every size becomes a
constant) and compiles the static graph; later calls with the same combination reuse it. After
``MEND_MAX_SPECIALIZATIONS`` combinations (default 8) further new ones run the graph eagerly (logged once),
as Dynamo does past its recompile limit.

Each specialization costs a retrace and a compile, so a workload with many distinct shapes (every
sequence length) compiles often: pad to a few bucket sizes, or mark the dimension static.
"""

from __future__ import annotations

import torch
from torch.fx.experimental.proxy_tensor import make_fx

from mend import settings

from ..debug import warn_once

STATS = {"dynamic_graphs": 0, "specializations": 0, "eager_calls": 0}



def max_specializations() -> int:
    return max(1, settings.MAX_SPECIALIZATIONS.get())


def _symbolic(x) -> bool:
    return isinstance(x, (torch.SymInt, torch.SymFloat, torch.SymBool))


def is_dynamic(example_inputs) -> bool:
    """Whether the graph's inputs carry symbolic values (sizes, strides, offsets or scalars)."""
    for a in example_inputs:
        if _symbolic(a):
            return True
        if isinstance(a, torch.Tensor):
            if any(_symbolic(s) for s in a.shape) or any(_symbolic(s) for s in a.stride()):
                return True
            if _symbolic(a.storage_offset()):
                return True
    return False


def _key(args) -> tuple:
    out = []
    for a in args:
        if isinstance(a, torch.Tensor):
            out.append((tuple(a.shape), a.stride(), a.dtype, a.device, a.requires_grad))
        elif isinstance(a, (int, float, bool)) or a is None:
            out.append((type(a).__name__, a))
        else:
            out.append((type(a).__name__, id(a)))
    return tuple(out)


class ShapeSpecialized:
    """A boxed callable: ``call(list_of_args)`` compiles (once) and runs the static graph for these args."""

    _boxed_call = True

    def __init__(self, gm: torch.fx.GraphModule, compile_static, name: str) -> None:
        self.gm = gm
        self.compile_static = compile_static  # (static_gm, example_inputs) -> boxed callable
        self.name = name
        self.cache: dict[tuple, object] = {}
        STATS["dynamic_graphs"] += 1

    def _build(self, args):
        with torch.no_grad():  # an ATen graph already: retracing records the same ops, no autograd
            static = make_fx(self.gm, tracing_mode="fake")(*args)
        STATS["specializations"] += 1
        return self.compile_static(static, list(args))

    def __call__(self, args):
        key = _key(args)
        fn = self.cache.get(key)
        if fn is None:
            if len(self.cache) >= max_specializations():
                STATS["eager_calls"] += 1
                warn_once(f"mend: {self.name} met more than {max_specializations()} input shapes "
                          "(MEND_MAX_SPECIALIZATIONS); new shapes run eagerly")
                return self.gm(*args)
            fn = self._build(args)
            self.cache[key] = fn
        return fn(args)

"""Stage 1, lowering: an ATen FX graph -> :class:`mend.compiler.ir.GraphIR`.

* ``decomps.py``: the decomposition table the ATen graph is traced with (composite ops such as layer_norm,
  softmax and gelu become pointwise ops and reductions; matmul-like ops stay whole).
* ``lowering.py``: :class:`Lowering`, the walk over the graph that keeps values lazy (pointwise expressions
  inlined into their consumers) or realizes them into buffers; an op without a lowering becomes an ATen call
  (:class:`mend.compiler.ir.ExternKernel`).
* ``registry.py``: the op registry, one lowering per ATen op.
* ``values.py``: :class:`~.values.Realized` and :class:`~.values.Lazy` values, dtypes, eager's strides, the
  graph's device, the arguments that need aligned layouts.
* ``views.py``: view ops as layout arithmetic (views never copy).

Output: a ``GraphIR`` (``print()``-able; ``ir.txt`` in a ``MEND_COMPILER_DEBUG`` dump), checked by
``mend.compiler.ir.verify.verify_graph`` under ``MEND_COMPILER_VERIFY=1``.
"""

from .lowering import Lowering, LoweringError, graph_device, log_once

__all__ = ["Lowering", "LoweringError", "graph_device", "log_once"]

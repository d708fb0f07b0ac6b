"""Stage 2, scheduling and fusion: :class:`mend.compiler.ir.GraphIR` -> :class:`mend.compiler.ir.ScheduledGraph`.

``split.py`` first cuts long reductions over few rows in two (partials, then a combine: GPU only);
``fusion.py`` groups the realized nodes into kernels (pointwise chains, row groups of a reduction with its
prologue and epilogue, sibling reductions) and orders them with the ATen calls into steps; a value read only
inside its kernel gets no buffer; ``fold.py`` marks the steps that read no graph input to run at the first
call only. Output: a ``ScheduledGraph`` (``scheduled.txt`` in a ``MEND_COMPILER_DEBUG``
dump, with the fusion decisions in ``fusion.txt``), checked by ``mend.compiler.ir.verify.verify_scheduled``
under ``MEND_COMPILER_VERIFY=1``.
"""

from .fusion import schedule

__all__ = ["schedule"]

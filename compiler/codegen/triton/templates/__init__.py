"""The Triton kernel templates, one per file (``plan.py`` chooses): ``pointwise``, ``persistent``,
``looped`` and ``split``. Each exposes ``render(src) -> str``, the text of the kernel's ``@triton.jit``
function(s), from its :class:`~mend.compiler.codegen.triton.kernel.KernelSource`.
"""

"""The CPU code generator: C++ with OpenMP and ``simd`` loops, one translation unit per graph.

* render: ``emit.py`` (expressions: the C++ table of the shared emitter), ``kernel.py`` (a kernel's
  signature and the choice of template), ``templates/`` (one file per loop template: ``pointwise``,
  ``rows``, ``columns``), ``prelude.h`` (inline math and half-precision helpers every unit starts with);
* build: ``build.py`` (``g++`` into the on-disk cache, loaded with ctypes);
* ``generator.py``: :class:`~mend.compiler.codegen.cpp.generator.CppGenerator`, the generator the backend
  picks for CPU graphs.
"""

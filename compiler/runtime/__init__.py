"""What runs a compiled graph, and what keeps it warm.

* ``wrapper.py``: the Python wrapper of a scheduled graph (allocate buffers, launch kernels, call ATen ops,
  free early, return outputs; ``wrapper.py`` in a ``MEND_COMPILER_DEBUG`` dump).
* ``interpret.py``: the reference interpreter of IR kernels (torch ops over the iteration grid): the
  kernel-level fallback and the oracle of the generator tests.
* ``cache.py`` (where the on-disk caches live) and ``graph_cache.py`` (scheduled graphs by ATen graph and
  input metadata: a warm process skips lowering and scheduling).
* ``tiered.py``: asynchronous compilation (the ATen graph runs until the kernels are built).
* ``cudagraphs.py``: capture and replay of a compiled graph as a CUDA graph.
* ``specialize.py``: graphs with symbolic shapes, compiled once per concrete shape.

Nothing here imports the code generators; this package's ``__init__`` imports nothing (``mend.compiler.wait``
reaches ``tiered`` without importing torch).
"""

"""The C++ loop templates, one per file; each renders a kernel's body from its stages.

* ``pointwise``: no reduced dims; the iteration space coalesced to as few loops as the indices allow, one
  flat ``parallel for simd`` loop for a contiguous chain.
* ``rows``: a parallel loop over rows; inside a row each stage is one ``simd`` pass (reductions with
  ``reduction`` clauses, pointwise passes into row-local scratch), so the row stays in cache across passes.
* ``columns``: reductions over leading dims, vectorized across the innermost (kept) dim in chunks.

Kernels under ``PARALLEL_THRESHOLD`` elements run single-threaded.
"""

PARALLEL_THRESHOLD = 32768

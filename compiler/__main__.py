"""``python -m mend.compiler HARNESS`` compiles a harness (``path.py:function`` returning
``(model_or_fn, args, kwargs)``) with the mend backend and reports what happened: graphs, kernels, ATen
calls, fallbacks, compile time and the largest difference from eager.

Exit codes: 0 compiled and matches eager, 1 a graph break (under ``--fullgraph``, the default) or a
mismatch, 2 bad usage or a harness that cannot be loaded.
"""

from __future__ import annotations

import argparse
import os
import sys
import time

import mend.compiler
from mend import settings
from mend.analyzers.runtime.harness import HarnessError, load


def _leaves(x):
    import torch.utils._pytree as pytree  # torch only once a harness runs (usage errors stay fast)

    return [t for t in pytree.tree_leaves(x) if hasattr(t, "dtype")]


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m mend.compiler", description=__doc__.splitlines()[0])
    ap.add_argument("harness", help="path.py:function returning (model_or_fn, args, kwargs)")
    ap.add_argument("--no-fullgraph", dest="fullgraph", action="store_false",
                    help="allow graph breaks (each captured graph is compiled separately)")
    ap.add_argument("--debug-dir", default=None, help="dump FX/IR/fusion/kernels here (MEND_COMPILER_DEBUG)")
    a = ap.parse_args(argv)
    if a.debug_dir:
        os.environ[settings.COMPILER_DEBUG.name] = a.debug_dir
    import torch

    from mend.compiler import backend

    try:
        h = load(a.harness)
    except HarnessError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    compiled = mend.compiler.compile(h.target, fullgraph=a.fullgraph)
    before = dict(backend.STATS)
    t0 = time.perf_counter()
    try:
        with torch.no_grad():
            got = compiled(*h.args, **h.kwargs)
    except mend.compiler.GraphBreakError as exc:
        print(str(exc), file=sys.stderr)
        return 1
    t1 = time.perf_counter()
    with torch.no_grad():
        want = h.target(*h.args, **h.kwargs)
    diff = 0.0
    for g, w in zip(_leaves(got), _leaves(want)):
        if g.dtype.is_floating_point:
            diff = max(diff, (g.double() - w.double()).abs().max().item() if g.numel() else 0.0)
        elif not torch.equal(g, w):
            diff = float("inf")
    d = {k: backend.STATS[k] - before[k] for k in before}
    print(f"{a.harness}: {d['graphs']} graph(s), {d['kernels']} kernel(s), {d['extern_calls']} ATen call(s), "
          f"{d['interpreted_kernels']} interpreted kernel(s), {d['fallback_graphs']} eager graph(s)")
    print(f"first call (trace + compile) {t1 - t0:.2f} s, of which mend {d['compile_seconds']:.2f} s; "
          f"max |mend - eager| = {diff:.3g}")
    ok = diff <= 1e-3
    if not ok:
        print("mismatch against eager", file=sys.stderr)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())

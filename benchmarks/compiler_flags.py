"""Side by side: g++ build time and kernel runtime of the bundled compiler with its flags (``FLAGS`` in
``compiler/codegen/cpp/build.py``) against the same flags with another optimization level.

    python benchmarks/compiler_flags.py [--other -O3] [--rounds R] [--cases a,b]

Uses the cases of ``benchmarks/compiler.py``. Build time: every graph's kernels are built with each flag set
in alternating order, cache disabled (median over rounds). Runtime: each case is compiled with both flag
sets in one process and the two compiled callables are timed interleaved (median of per-round medians).
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time

os.environ["MEND_CACHE_DIR"] = tempfile.mkdtemp(prefix="mend_flags_")
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import torch

import compiler as B
from mend.compiler import backend
from mend.compiler.codegen.cpp import build as cpp_build
from mend.compiler.codegen.cpp import generator as cpp_generator
from mend.compiler.debug import Dump


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--other", default="-O3", help="optimization flag replacing the current one")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--cases", default="pointwise,softmax,layernorm,residual_ln,gelu_mlp,block_fwd,block_fwd_bwd")
    a = ap.parse_args(argv)
    torch.set_num_threads(1)
    cur = list(cpp_build.FLAGS)
    other = [a.other if f.startswith("-O") else f for f in cur]
    variants = {"current": cur, "other": other}
    cs = B.cases("cpu", False)
    names = a.cases.split(",")
    graphs = []
    recording = [True]

    class Recording(cpp_generator.CppGenerator):
        def compile(self, kernels, dump):
            if recording[0]:
                graphs.append(list(kernels))
            return super().compile(kernels, dump)

    real = backend.generator_for
    backend.generator_for = lambda device_type: Recording() if device_type == "cpu" else real(device_type)
    runs: dict = {}
    for name in names:
        fn, args, train = cs[name]
        for tag, flags in variants.items():
            cpp_build.FLAGS[:] = flags
            recording[0] = tag == "current"
            torch._dynamo.reset()
            run = B.make_runner(torch.compile(fn, backend="mend"), args, train)
            run()
            run()
            runs[name, tag] = run
    backend.generator_for = real
    print(f"current: {' '.join(cur[:2])}   other: {' '.join(other[:2])}   load average "
          f"{os.getloadavg()[0]:.2f}")
    print(f"{'case':16}{'current ms':>12}{'other ms':>12}{'cur/other':>10}")
    for name in names:
        res = {"current": [], "other": []}
        for r in range(a.rounds):
            for tag in ("current", "other") if r % 2 == 0 else ("other", "current"):
                ts = []
                for _ in range(5):
                    t = time.perf_counter()
                    runs[name, tag]()
                    ts.append(time.perf_counter() - t)
                res[tag].append(statistics.median(ts))
        c, o = (statistics.median(res[t]) * 1e3 for t in ("current", "other"))
        print(f"{name:16}{c:>12.2f}{o:>12.2f}{c / o:>10.2f}", flush=True)
    os.environ["MEND_DISABLE_CACHE"] = "1"
    build = {"current": [], "other": []}
    for r in range(a.rounds):
        for tag in ("current", "other") if r % 2 == 0 else ("other", "current"):
            cpp_build.FLAGS[:] = variants[tag]
            t = time.perf_counter()
            for ks in graphs:
                cpp_generator.CppGenerator().compile(ks, Dump("x"))
            build[tag].append(time.perf_counter() - t)
    cpp_build.FLAGS[:] = cur
    c, o = (statistics.median(build[t]) for t in ("current", "other"))
    print(f"g++ build of {len(graphs)} graphs ({sum(map(len, graphs))} kernels): current {c:.2f} s, other {o:.2f} s, "
          f"current/other {c / o:.2f}")


if __name__ == "__main__":
    main()

"""Host (CPU) time per call of mend and Inductor on GPU zoo rows, and where each compiler's host time goes.

    python benchmarks/host_profile.py gpt2,phi,llama,bert [--dtype bf16] [--compilers inductor,mend,mend:MEND_FOLD=0]
    python benchmarks/host_profile.py --primitives                            (what the wrapper's calls cost)

For each row (a model of :mod:`compiler_gpu_zoo` at its real size), every compiler compiled first, then
timed in interleaved rounds of 20 warm calls: the median over rounds of the median host time of a call
(until the call returns, before synchronizing) and of its wall time (after synchronizing); then
``cProfile``'s functions by own time over 20 calls (``--top 0``: none). Where host time is close to wall time,
the GPU waits on Python: launch overhead, not kernels, decides the runtime. ``mend:VAR=VAL`` compiles with
that environment variable set (a switch of mend's, against the default in the same process).
``--primitives``: host microseconds of the calls a wrapper makes per step (allocation, views, an ATen call).
"""

from __future__ import annotations

import argparse
import contextlib
import cProfile
import io
import os
import pstats
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))


def main(argv=None) -> int:
    import compiler_gpu_zoo as Z
    import torch

    import mend.compiler.backend  # noqa: F401 - registers backend="mend"

    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("rows", nargs="?", default="", help="comma-separated GPU zoo rows")
    ap.add_argument("--dtype", default="bf16", choices=sorted(Z.DTYPES))
    ap.add_argument("--compilers", default="inductor,mend")
    ap.add_argument("--top", type=int, default=28)
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--primitives", action="store_true")
    a = ap.parse_args(argv)
    dev = "cuda" if torch.cuda.is_available() else "cpu"
    if a.primitives:
        primitives(dev)
    size = Z.SIZES["real" if dev == "cuda" else "tiny"]
    Z._set_cache_limits()
    for name in filter(None, a.rows.split(",")):
        model, inp = Z.build(name, size, dev, getattr(torch, Z.DTYPES[a.dtype]))
        print(f"===== {name} {a.dtype}", flush=True)
        torch._dynamo.reset()
        fns = {c: _compiled(model, inp, c) for c in a.compilers.split(",")}
        host, wall = {c: [] for c in fns}, {c: [] for c in fns}
        with torch.no_grad():
            for _ in range(a.rounds):  # interleaved: a slow spell of the machine hits every compiler alike
                for c, fn in fns.items():
                    h, w = [], []
                    for _ in range(20):
                        Z._sync(dev)
                        t0 = time.perf_counter()
                        fn(**inp)
                        t1 = time.perf_counter()
                        Z._sync(dev)
                        h.append(t1 - t0)
                        w.append(time.perf_counter() - t0)
                    host[c].append(statistics.median(h))
                    wall[c].append(statistics.median(w))
        for c in fns:
            print(f"{c:22} host {statistics.median(host[c]) * 1e3:.3f} ms  wall {statistics.median(wall[c]) * 1e3:.3f} ms"
                  f"  (rounds {' '.join(f'{x * 1e3:.2f}' for x in wall[c])})", flush=True)
        for c, fn in fns.items() if a.top else ():
            pr = cProfile.Profile()
            with torch.no_grad():
                pr.enable()
                for _ in range(20):
                    fn(**inp)
                pr.disable()
            Z._sync(dev)
            out = io.StringIO()
            pstats.Stats(pr, stream=out).sort_stats("tottime").print_stats(a.top)
            print(f"--- {c}")
            print("\n".join(line[:190] for line in out.getvalue().splitlines()[6:]), flush=True)
    return 0


def _compiled(model, inp, spec: str):
    """``model`` compiled by ``spec`` (``inductor``, ``mend`` or ``mend:VAR=VAL``), warm: called until its
    kernels are built and mend's background tuning is done. Each spec is its own backend object, so the
    compiled graphs of all specs stay in Dynamo's cache side by side."""
    import torch

    import mend.compiler
    from mend.compiler.backend import mend_backend

    name, _, env = spec.partition(":")
    if name == "mend":
        def backend(gm, example_inputs, **kwargs):
            with _env(env):
                return mend_backend(gm, example_inputs, **kwargs)
    else:
        backend = name
    fn = torch.compile(model, backend=backend)
    with torch.no_grad():
        for _ in range(3):
            fn(**inp)
        if name == "mend":
            mend.compiler.wait()
        for _ in range(5):
            fn(**inp)
    return fn


@contextlib.contextmanager
def _env(assignment: str):
    """``VAR=VAL`` set while the block runs (nothing for an empty string)."""
    if not assignment:
        yield
        return
    var, _, val = assignment.partition("=")
    old = os.environ.get(var)
    os.environ[var] = val
    try:
        yield
    finally:
        if old is None:
            os.environ.pop(var, None)
        else:
            os.environ[var] = old


def primitives(dev: str) -> None:
    """Median host microseconds of each call a wrapper makes, on ``dev``."""
    import timeit

    import torch
    from torch._C._dynamo import guards

    a = torch.randn(512, 768, device=dev, dtype=torch.bfloat16)
    w = torch.randn(768, 768, device=dev, dtype=torch.bfloat16)
    mm = torch.ops.aten.mm.default
    cases = {
        "torch.empty_strided(size, stride, dtype=, device=)":
            lambda: torch.empty_strided((512, 768), (768, 1), dtype=torch.bfloat16, device=a.device),
        f"guards._empty_strided_{dev}(size, stride, dtype)":
            lambda: getattr(guards, f"_empty_strided_{dev}")((512, 768), (768, 1), torch.bfloat16),
        "t.as_strided(size, stride, t.storage_offset() + off)":
            lambda: a.as_strided((256, 768), (768, 1), a.storage_offset() + 768),
        "guards._reinterpret_tensor(t, size, stride, off)":
            lambda: guards._reinterpret_tensor(a, (256, 768), (768, 1), 768),
        "aten.mm.default(a, w) (OpOverload)": lambda: mm(a, w),
        "aten.mm.default._op(a, w)": lambda: mm._op(a, w),
        "torch.mm(a, w)": lambda: torch.mm(a, w),
        "torch.addmm(b, a, w)": lambda: torch.addmm(w[0], a, w),
    }
    for name, f in cases.items():
        for _ in range(100):
            f()
        t = min(timeit.repeat(f, number=200, repeat=7)) / 200
        if dev == "cuda":
            torch.cuda.synchronize()
        print(f"{t * 1e6:8.2f} us  {name}", flush=True)


if __name__ == "__main__":
    sys.exit(main())

"""Where the first result of ``async_compile`` goes, per model (one process per model): the zoo's order of
compiles (Inductor cold, mend cold, then mend with ``async_compile``, under cProfile with ``--profile``) and
the garbage collector's time in each.

    python benchmarks/first_result_probe.py gpt2 [bf16] [--profile]
"""

from __future__ import annotations

import cProfile
import gc
import pstats
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
import compiler_gpu_zoo as z  # noqa: E402

_GC = {"s": 0.0, "n": 0, "t0": 0.0}


def _gc_cb(phase, info):
    if phase == "start":
        _GC["t0"] = time.perf_counter()
    else:
        _GC["s"] += time.perf_counter() - _GC["t0"]
        _GC["n"] += 1 if info.get("generation") == 2 else 0


def main() -> None:
    import torch

    import mend.compiler
    import mend.compiler.backend  # noqa: F401 - registers backend="mend"

    name = sys.argv[1]
    dtype = getattr(torch, z.DTYPES[sys.argv[2] if len(sys.argv) > 2 and not sys.argv[2].startswith("-") else "bf16"])
    device = "cuda" if torch.cuda.is_available() else "cpu"
    z._set_cache_limits()
    model, inp = z.build(name, z.SIZES["real" if device == "cuda" else "tiny"], device, dtype)
    z._warm_up(device, ("inductor", "mend"))
    z._runner(model, inp, False)()
    gc.callbacks.append(_gc_cb)

    def phase(label, backend, options=None, profile=False):
        z._fresh_caches(label)
        fn = torch.compile(model, backend=backend, options=options)
        if "--collect" in sys.argv:
            gc.collect()
        _GC.update(s=0.0, n=0)
        objs = len(gc.get_objects())
        pr = cProfile.Profile() if profile else None
        z._sync(device)
        t0 = time.perf_counter()
        if pr:
            pr.enable()
        z._runner(fn, inp, False)()
        z._sync(device)
        if pr:
            pr.disable()
        t = time.perf_counter() - t0
        print(f"{name} {label:14s} {t:7.3f} s   gc {_GC['s']:.3f} s ({_GC['n']} full)   objects before {objs}",
              flush=True)
        mend.compiler.wait()
        return pr

    phase("inductor", "inductor")
    phase("mend", "mend")
    pr = phase("mend-async", "mend", {"async_compile": True}, profile="--profile" in sys.argv)
    if pr is not None:
        st = pstats.Stats(pr)
        st.sort_stats("cumulative").print_stats(40)
        st.sort_stats("tottime").print_stats(25)

if __name__ == "__main__":
    main()

"""Host (CPU) time per call of mend and Inductor on GPU zoo rows, and where each compiler's host time goes.

    python benchmarks/host_profile.py gpt2,phi,llama,bert [--dtype bf16]     (on a GPU machine)

For each row (a model of :mod:`compiler_gpu_zoo` at its real size): the median host time of a call (until
the call returns, before synchronizing) and its wall time (after synchronizing) over 40 warm calls, then
``cProfile``'s functions by own time over 20 calls. Where host time is close to wall time, the GPU waits on
Python: launch overhead, not kernels, decides the runtime.
"""

from __future__ import annotations

import argparse
import cProfile
import io
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
    ap.add_argument("rows", help="comma-separated GPU zoo rows")
    ap.add_argument("--dtype", default="bf16", choices=sorted(Z.DTYPES))
    ap.add_argument("--top", type=int, default=28)
    a = ap.parse_args(argv)
    dev = "cuda" if torch.cuda.is_available() else "cpu"
    size = Z.SIZES["real" if dev == "cuda" else "tiny"]
    Z._set_cache_limits()
    for name in a.rows.split(","):
        model, inp = Z.build(name, size, dev, getattr(torch, Z.DTYPES[a.dtype]))
        print(f"===== {name} {a.dtype}", flush=True)
        for c in ("inductor", "mend"):
            torch._dynamo.reset()
            fn = torch.compile(model, backend=c)
            with torch.no_grad():
                for _ in range(3):
                    fn(**inp)
                if c == "mend":
                    import mend.compiler

                    mend.compiler.wait()
                for _ in range(5):
                    fn(**inp)
                host, wall = [], []
                for _ in range(40):
                    Z._sync(dev)
                    t0 = time.perf_counter()
                    fn(**inp)
                    t1 = time.perf_counter()
                    Z._sync(dev)
                    host.append(t1 - t0)
                    wall.append(time.perf_counter() - t0)
                print(f"{c:9} host {statistics.median(host) * 1e3:.3f} ms  wall {statistics.median(wall) * 1e3:.3f} ms",
                      flush=True)
                pr = cProfile.Profile()
                pr.enable()
                for _ in range(20):
                    fn(**inp)
                pr.disable()
                Z._sync(dev)
            out = io.StringIO()
            pstats.Stats(pr, stream=out).sort_stats("tottime").print_stats(a.top)
            print("\n".join(line[:190] for line in out.getvalue().splitlines()[6:]), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())

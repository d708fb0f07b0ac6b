"""Host work per call of the GPU zoo's models: the steps mend's wrapper runs each call (kernel launches and
ATen calls), and those it runs at the first call only (``schedule/fold.py``). On a GPU a warm call of these
models spends most of its host time dispatching them; this counts them without one.

    python benchmarks/dispatch_counts.py [--models gpt2,bert] [--dtype bf16|fp16|fp32]

Each model of :mod:`compiler_gpu_zoo` is built at its real width and depth with a short input (batch 1, 64
tokens, one image), traced by Dynamo and mend's ATen trace on the CPU, then lowered and scheduled as for a
GPU (``schedule(g, "cuda")``). Per model: graphs, per-call kernels and ATen calls, steps run once.
"""

from __future__ import annotations

import argparse
import collections
import dataclasses
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))


def counts(name: str, dtype: str) -> list[dict]:
    import compiler_gpu_zoo as Z
    import torch

    from mend.compiler import compat, ir
    from mend.compiler.lowering import Lowering
    from mend.compiler.lowering.decomps import decomposition_table
    from mend.compiler.schedule import schedule

    size = dataclasses.replace(Z.SIZES["real"], batch=1, seq=64, decoder_seq=16, images=1)
    model, inp = Z.build(name, size, "cpu", getattr(torch, Z.DTYPES[dtype]))
    rows = []

    def backend(gm, example_inputs):
        traced = compat.trace_inference(gm, example_inputs, decomposition_table())
        if traced is not None:
            sg, _ = schedule(Lowering(traced[0], list(traced[1])).run(), "cuda")
            c = collections.Counter("once" if s.name in sg.once else
                                    "kernels" if isinstance(s, ir.Kernel) else "aten" for s in sg.steps)
            rows.append(c)
        return gm.forward

    torch._dynamo.reset()
    with torch.no_grad():
        torch.compile(model, backend=backend)(**inp)
    return rows


def main(argv=None) -> int:
    import compiler_gpu_zoo as Z

    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--models", default=",".join(Z.INFERENCE))
    ap.add_argument("--dtype", default="bf16", choices=sorted(Z.DTYPES))
    a = ap.parse_args(argv)
    print(f"{'model':12} {'graphs':>6} {'kernels':>8} {'aten':>5} {'per call':>9} {'once':>5} {'once %':>7}")
    tot = collections.Counter()
    for name in a.models.split(","):
        rows = counts(name, a.dtype)
        c = sum(rows, collections.Counter())
        per = c["kernels"] + c["aten"]
        tot.update(c)
        share = c["once"] / max(per + c["once"], 1)
        print(f"{name:12} {len(rows):6} {c['kernels']:8} {c['aten']:5} {per:9} {c['once']:5} {share:7.0%}",
              flush=True)
    per = tot["kernels"] + tot["aten"]
    print(f"{'all':12} {'':6} {tot['kernels']:8} {tot['aten']:5} {per:9} {tot['once']:5} "
          f"{tot['once'] / max(per + tot['once'], 1):7.0%}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""Runtime and compile time of the bundled ``mend`` compiler against eager and Inductor, side by side.

    python benchmarks/compiler.py [--device cpu|cuda] [--threads N] [--rounds R] [--cases a,b] [--quick]
                                  [--compile-workers N] [--async-compile]

For each case, eager, Inductor (default mode) and mend run interleaved: every round times ``reps`` calls
of each variant in turn; the table reports the median of the per-round medians (and p10 across rounds),
the ratio mend/Inductor, and the compile time of the first call, cold (empty cache directories for both
compilers) and warm (``torch._dynamo.reset()`` then compile again in the same process: on-disk caches hot).
Two floors come next (the faster of two runs each): ``dynamo s`` (Dynamo's capture alone, the graph run as captured) and ``aot s``
(Dynamo plus aot_autograd with mend's decompositions, every graph run as traced). Any compiler behind
aot_autograd pays the second. The summary divides Inductor's cold time by each: by the first, the most
that any compiler could gain on compile time; by the second, the most that a compiler behind aot_autograd
could gain (mend's inference graphs skip aot_autograd: one direct trace). It then compares what each
compiler adds to Dynamo's capture.
The last column counts mend's graphs and kernels and flags any fallback (a graph run eagerly or a kernel
run in the reference interpreter), so a fast number can never hide one. The last line is the geometric
mean of mend/Inductor. On CUDA, both also run with CUDA graphs (``mode="reduce-overhead"``), columns
``ind-cg``/``mend-cg``.

With ``--async-compile`` mend compiles each graph in the background and runs its ATen graph meanwhile
(``mend.compiler.runtime.tiered``): its cold and warm columns are then the time to the first result, and
``mend ready s`` the time until its compiled graph has produced a result (the build done, then one call).
Without it, ``mend ready s`` is the time until mend runs with its tuned kernels: half-precision matrix
products start on cuBLAS while their fused kernels compile in the background, then one call times and
switches (``mend.compiler.wait()``); the runtime columns are measured after that.

Both compilers get the same number of compile workers (``--compile-workers N``, default 1: each compiles
in the calling process, Inductor with ``TORCHINDUCTOR_COMPILE_THREADS=1``, mend with
``MEND_COMPILE_WORKERS=0``; with N > 1, Inductor's N compile threads against mend's N worker processes).
Workers are idle while the timed rounds run.
"""

from __future__ import annotations

import argparse
import math
import os
import statistics
import sys
import tempfile
import time


def _early_workers(argv) -> int:
    """``--compile-workers`` must be known before torch is imported (Inductor reads it at import)."""
    for i, a in enumerate(argv):
        if a == "--compile-workers" and i + 1 < len(argv):
            return int(argv[i + 1])
        if a.startswith("--compile-workers="):
            return int(a.split("=", 1)[1])
    return 1


WORKERS = _early_workers(sys.argv[1:])
os.environ["TORCHINDUCTOR_COMPILE_THREADS"] = str(WORKERS)
os.environ["MEND_COMPILE_WORKERS"] = str(WORKERS if WORKERS > 1 else 0)
_TMP = tempfile.mkdtemp(prefix="mend_bench_")
os.environ["TORCHINDUCTOR_CACHE_DIR"] = os.path.join(_TMP, "inductor")
os.environ["MEND_CACHE_DIR"] = os.path.join(_TMP, "mend")
os.environ["TRITON_CACHE_DIR"] = os.path.join(_TMP, "triton")

import torch  # noqa: E402
import torch.nn as nn  # noqa: E402
import torch.nn.functional as F  # noqa: E402

from mend.compiler import backend as mend_backend  # noqa: E402  (registers backend "mend")


class Block(nn.Module):
    def __init__(self, d, heads):
        super().__init__()
        self.ln1, self.ln2 = nn.LayerNorm(d), nn.LayerNorm(d)
        self.qkv, self.proj = nn.Linear(d, 3 * d), nn.Linear(d, d)
        self.fc1, self.fc2 = nn.Linear(d, 4 * d), nn.Linear(4 * d, d)
        self.heads = heads

    def forward(self, x):
        b, t, c = x.shape
        q, k, v = self.qkv(self.ln1(x)).split(c, dim=-1)
        q, k, v = (z.view(b, t, self.heads, -1).transpose(1, 2) for z in (q, k, v))
        att = (q @ k.transpose(-2, -1)) * (c // self.heads) ** -0.5
        mask = torch.triu(torch.ones(t, t, dtype=torch.bool, device=x.device), 1)
        att = att.masked_fill(mask, float("-inf")).softmax(-1)
        x = x + self.proj((att @ v).transpose(1, 2).reshape(b, t, c))
        return x + self.fc2(F.gelu(self.fc1(self.ln2(x))))


def cases(device, quick):
    s = 4 if quick else 1
    dev = dict(device=device)
    out = {}
    n = (1 << 22) // s
    x, w, b = torch.randn(n // 1024, 1024, **dev), torch.randn(1024, **dev), torch.randn(1024, **dev)
    out["pointwise"] = (lambda x, w, b: torch.relu(x * w + b) * torch.sigmoid(x), (x, w, b), False)
    r = torch.randn(4096 // s, 1024, **dev)
    bias = torch.randn(1024, **dev)
    out["softmax"] = (lambda x, bias: torch.softmax(x * 0.125 + bias, -1), (r, bias), False)
    ln = nn.LayerNorm(1024).to(device)
    out["layernorm"] = (lambda x: ln(x), (r,), False)
    r2 = torch.randn_like(r)
    out["residual_ln"] = (lambda x, y: F.relu(ln(x + y)), (r, r2), False)
    # a column reduction over a tall input, broadcast back into a pointwise expression (split on a GPU)
    t, tb, tc = torch.randn(65536 // s, 1024, **dev), torch.randn(1024, **dev), torch.randn(1024, **dev)
    out["tall_colmean"] = (lambda x, b, c: F.gelu(x + b, approximate="tanh") * c - x.abs().mean(0), (t, tb, tc),
                           False)
    mlp = nn.Sequential(nn.Linear(512, 2048), nn.GELU(), nn.Linear(2048, 512)).to(device)
    out["gelu_mlp"] = (mlp, (torch.randn(512 // s, 512, **dev),), False)
    # a transformer MLP in bf16 at BERT's sizes: matmuls whose epilogues (bias, GELU) mend fuses on a GPU
    mlp16 = nn.Sequential(nn.Linear(768, 3072), nn.GELU(), nn.Linear(3072, 768)).to(device, torch.bfloat16)
    x16 = torch.randn(4096 // s, 768, **dev).to(torch.bfloat16)
    out["gelu_mlp_bf16"] = (lambda x: mlp16(x) + x, (x16,), False)
    blk = Block(256, 8).to(device)
    xb = torch.randn(4 // min(s, 2), 128, 256, **dev)
    out["block_fwd"] = (blk, (xb,), False)
    blk2 = Block(256, 8).to(device)
    out["block_fwd_bwd"] = (blk2, (xb.clone().requires_grad_(),), True)
    return out


def _sync(device):
    if device == "cuda":
        torch.cuda.synchronize()


def make_runner(fn, args, train):
    if train:
        def run():
            out = fn(*args)
            out.sum().backward()
        return run

    def run():
        with torch.no_grad():
            fn(*args)
    return run


def _dynamo_only(gm, example_inputs):
    return gm.forward


def _aot_only(gm, example_inputs):
    from mend.compiler import compat
    from mend.compiler.lowering.decomps import decomposition_table

    def nop(g, _):
        return compat.make_boxed_func(g.forward)

    return compat.aot_module_simplified(gm, example_inputs, fw_compiler=nop, bw_compiler=nop,
                                        inference_compiler=nop, decompositions=decomposition_table())


def compile_time(fn, args, backend, train, device, options=None):
    torch._dynamo.reset()
    c = torch.compile(fn, backend=backend, options=options)
    run = make_runner(c, args, train)
    t0 = time.perf_counter()
    run()
    _sync(device)
    return c, time.perf_counter() - t0


def async_compile_time(fn, args, train, device):
    """mend with ``async_compile``: (compiled, seconds to the first result, seconds until the compiled graph
    has produced a result: the background build done, then one call that switches to it)."""
    import mend.compiler

    c, first = compile_time(fn, args, "mend", train, device, options={"async_compile": True})
    t0 = time.perf_counter()
    mend.compiler.wait()
    make_runner(c, args, train)()
    _sync(device)
    return c, first, first + time.perf_counter() - t0


def settled(c, args, train, device) -> float:
    """Seconds until the compiled ``c`` runs with its tuned kernels: the matrix products tuning in the
    background built (``mend.compiler.wait()``), then one call, which times them and switches."""
    import mend.compiler

    t0 = time.perf_counter()
    mend.compiler.wait()
    make_runner(c, args, train)()
    _sync(device)
    return time.perf_counter() - t0


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--device", default="cpu", choices=["cpu", "cuda"])
    ap.add_argument("--threads", type=int, default=None, help="torch.set_num_threads (default: torch's)")
    ap.add_argument("--rounds", type=int, default=15)
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--cases", default=None, help="comma-separated subset")
    ap.add_argument("--quick", action="store_true", help="smaller shapes, fewer rounds")
    ap.add_argument("--compile-workers", type=int, default=1,
                    help="compile workers for both compilers (default 1: in the calling process)")
    ap.add_argument("--async-compile", action="store_true",
                    help="mend compiles in the background and runs the ATen graph meanwhile: its cold and warm "
                         "columns are the time to the first result, and 'mend ready s' the time until its "
                         "compiled graph has run")
    a = ap.parse_args(argv)
    if a.threads:
        torch.set_num_threads(a.threads)
    if a.quick:
        a.rounds = min(a.rounds, 5)
    torch.manual_seed(0)
    suite = cases(a.device, a.quick)
    if a.cases:
        suite = {k: v for k, v in suite.items() if k in a.cases.split(",")}
    print(f"torch {torch.__version__}, device {a.device}"
          + (f" ({torch.cuda.get_device_name()})" if a.device == "cuda" else "")
          + f", threads {torch.get_num_threads()}, compile workers {WORKERS}, rounds {a.rounds} x {a.reps} calls, "
          + f"load average {os.getloadavg()[0]:.2f}" if hasattr(os, "getloadavg") else "")
    cg = a.device == "cuda"  # also both compilers with CUDA graphs (mode="reduce-overhead")
    head = (f"{'case':<15}{'eager ms':>10}{'inductor ms':>13}{'mend ms':>10}{'mend/ind':>10}"
            + (f"{'ind-cg ms':>11}{'mend-cg ms':>11}{'cg m/i':>8}" if cg else "")
            + f"{'ind cold s':>12}{'mend cold s':>12}{'mend ready s':>13}"
            + f"{'ind warm s':>12}{'mend warm s':>12}"
            + f"{'dynamo s':>10}{'aot s':>8}  mend graphs/kernels")
    print(head)
    print("-" * len(head))
    ratios = []
    cold_ratios = []
    ready_ratios = []
    cg_ratios = []
    bounds, added = [], []
    for name, (fn, args, train) in suite.items():
        ind, ind_cold = compile_time(fn, args, "inductor", train, a.device)
        before = dict(mend_backend.STATS)
        if a.async_compile:
            mend, mend_cold, mend_ready = async_compile_time(fn, args, train, a.device)
            ready_ratios.append(ind_cold / mend_ready)
        else:
            mend, mend_cold = compile_time(fn, args, "mend", train, a.device)
            mend_ready = mend_cold + settled(mend, args, train, a.device)
        st = {k: mend_backend.STATS[k] - before[k] for k in ("graphs", "fallback_graphs", "kernels",
                                                             "interpreted_kernels")}
        _, ind_warm = compile_time(fn, args, "inductor", train, a.device)
        if a.async_compile:
            _, mend_warm, _ = async_compile_time(fn, args, train, a.device)
        else:
            _, mend_warm = compile_time(fn, args, "mend", train, a.device)
        # floors: the faster of two runs each (a floor must not be overstated)
        dyn_floor = min(compile_time(fn, args, _dynamo_only, train, a.device)[1] for _ in range(2))
        aot_floor = min(compile_time(fn, args, _aot_only, train, a.device)[1] for _ in range(2))
        bounds.append((ind_cold / aot_floor, ind_cold / dyn_floor))
        added.append((max(ind_cold - dyn_floor, 1e-3), max(mend_cold - dyn_floor, 1e-3)))
        runners = {"eager": make_runner(fn, args, train), "inductor": make_runner(ind, args, train),
                   "mend": make_runner(mend, args, train)}
        if cg:
            runners["ind-cg"] = make_runner(torch.compile(fn, mode="reduce-overhead"), args, train)
            runners["mend-cg"] = make_runner(torch.compile(fn, backend="mend", mode="reduce-overhead"), args, train)
        for _ in range(3 if cg else 1):  # warm-up (and recompile-free check; CUDA graphs capture here)
            for r in runners.values():
                r()
        rounds = {k: [] for k in runners}
        for _ in range(a.rounds):
            for k, r in runners.items():
                ts = []
                for _ in range(a.reps):
                    _sync(a.device)
                    t0 = time.perf_counter()
                    r()
                    _sync(a.device)
                    ts.append(time.perf_counter() - t0)
                rounds[k].append(statistics.median(ts))
        med = {k: statistics.median(v) * 1e3 for k, v in rounds.items()}
        ratio = med["mend"] / med["inductor"]
        ratios.append(ratio)
        cold_ratios.append(ind_cold / mend_cold)
        note = f"  {st['graphs']}g/{st['kernels']}k"
        if st["fallback_graphs"] or st["interpreted_kernels"]:
            note += f" FALLBACK: {st['fallback_graphs']} eager graphs, {st['interpreted_kernels']} interpreted"
        cgcols = ""
        if cg:
            cg_ratios.append(med["mend-cg"] / med["ind-cg"])
            cgcols = f"{med['ind-cg']:>11.3f}{med['mend-cg']:>11.3f}{cg_ratios[-1]:>7.2f}x"
        print(f"{name:<15}{med['eager']:>10.3f}{med['inductor']:>13.3f}{med['mend']:>10.3f}{ratio:>9.2f}x{cgcols}"
              f"{ind_cold:>12.2f}{mend_cold:>12.2f}{mend_ready:>13.2f}"
              + f"{ind_warm:>12.2f}{mend_warm:>12.2f}"
              f"{dyn_floor:>10.2f}{aot_floor:>8.2f}{note}")
        sys.stdout.flush()
    gm = math.exp(sum(math.log(r) for r in ratios) / len(ratios))
    gc = math.exp(sum(math.log(r) for r in cold_ratios) / len(cold_ratios))
    print("-" * len(head))
    if a.async_compile:
        gr = math.exp(sum(math.log(r) for r in ready_ratios) / len(ready_ratios))
        print(f"geomean mend/inductor runtime: {gm:.3f}x   cold compile inductor/mend (async_compile): "
              f"{gc:.1f}x faster to the first result, {gr:.1f}x faster until mend's compiled graph runs")
    else:
        print(f"geomean mend/inductor runtime: {gm:.3f}x   cold compile inductor/mend: {gc:.1f}x faster")
    gb = math.exp(sum(math.log(r) for r, _ in bounds) / len(bounds))
    gd = math.exp(sum(math.log(r) for _, r in bounds) / len(bounds))
    ai = math.exp(sum(math.log(i) for i, _ in added) / len(added))
    am = math.exp(sum(math.log(m) for _, m in added) / len(added))
    print(f"floor: inductor cold / Dynamo alone = {gd:.1f}x (geomean), the most any compiler could reach; "
          f"/ (Dynamo + aot_autograd) = {gb:.1f}x, the most a compiler behind aot_autograd could reach "
          f"(mend's inference graphs skip it)")
    print(f"time added to Dynamo's capture, geomean: inductor {ai:.2f} s, mend {am:.2f} s ({ai / am:.1f}x less)")
    if cg_ratios:
        gcg = math.exp(sum(math.log(r) for r in cg_ratios) / len(cg_ratios))
        print(f"geomean with CUDA graphs (mode='reduce-overhead'), mend/inductor runtime: {gcg:.3f}x")


if __name__ == "__main__":
    main()

"""Does mend's matmul tuning predict what its candidates cost inside the model? (GPU; one zoo row a process)

    python benchmarks/matmul_choice.py bert@8x512 [--dtype bf16] [--out DIR] [--extras 4]

For one row of :mod:`compiler_gpu_zoo`: Inductor and mend compiled; each of mend's matrix-product kernels
(``TritonMatmulLauncher``) caught at its tuning, with the tensors it tuned on. Then, for every candidate of
each such kernel (its fused tile configurations, ``cublas+epilogue``, and ``--extras`` further tile shapes
launched through Triton's JIT):

* ``rec``: what the tuning recorded (the choice mend made);
* ``tune``: the launcher's own timer again (a GPU sleep, 10 launches back to back, best of 3 runs);
* ``tune_med``: the same, the median of 5 runs; ``long``: 50 launches back to back, median of 3 runs;
* ``cold``: each launch alone between CUDA events, after a 256 MB write that evicts the L2 cache, median of
  20 (queued behind one long GPU sleep, so the GPU never waits on the host);
* ``model``: the model's GPU time per call (the sum of its kernels' durations under the profiler, 5 calls)
  with this candidate forced on that kernel and every other kernel at mend's choice.

Writes ``matmul_choice_<row>_<dtype>.json`` (raw) and prints a table per kernel.
"""

from __future__ import annotations

import argparse
import atexit
import json
import os
import re
import statistics
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve()
ROOT = HERE.parent.parent
sys.path.insert(0, str(HERE.parent))


def _links() -> None:
    """mend.<sub> importable from a checkout (as benchmarks/gpu_check.sh does): links removed at exit."""
    text = (ROOT / "pyproject.toml").read_text()
    section = text.split("[tool.setuptools.package-dir]", 1)[1].split("\n[", 1)[0]
    made = []
    for pkg, folder in re.findall(r'"([\w.]+)"\s*=\s*"([\w./-]+)"', section):
        link = ROOT / "mend" / pkg.split(".", 1)[-1]
        if pkg.count(".") == 1 and (ROOT / folder).is_dir() and not os.path.lexists(link):
            os.symlink(os.path.join("..", folder), link)
            made.append(link)
    atexit.register(lambda: [p.unlink() for p in made if p.is_symlink()])
    sys.path.insert(0, str(ROOT))


SLEEP = 2_000_000


def _timers(torch):
    flush = torch.empty(256 << 20, dtype=torch.int8, device="cuda")

    def tune(go, reps=10, runs=3):
        go()
        torch.cuda.synchronize()
        vals = []
        for _ in range(runs):
            s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            torch.cuda._sleep(SLEEP * max(1, reps // 10))
            s.record()
            for _ in range(reps):
                go()
            e.record()
            e.synchronize()
            vals.append(s.elapsed_time(e) / reps * 1e3)
        return vals

    def cold(go, n=20):
        go()
        torch.cuda.synchronize()
        ev = [(torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)) for _ in range(n)]
        torch.cuda._sleep(SLEEP * 8)
        for s, e in ev:
            flush.zero_()
            s.record()
            go()
            e.record()
        torch.cuda.synchronize()
        return [s.elapsed_time(e) * 1e3 for s, e in ev]

    return {
        "tune": lambda go: min(tune(go)),
        "tune_med": lambda go: statistics.median(tune(go, runs=5)),
        "long": lambda go: statistics.median(tune(go, reps=50, runs=3)),
        "cold": lambda go: statistics.median(cold(go)),
    }


def _profile(torch, run, calls=5) -> dict:
    from torch.profiler import ProfilerActivity, profile

    run()
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for _ in range(calls):
            run()
        torch.cuda.synchronize()
    kernels = {}
    for e in prof.key_averages():
        t = getattr(e, "device_time_total", None)
        if t is None:
            t = getattr(e, "cuda_time_total", 0)
        if t > 0 and getattr(e, "device_type", None) is not None and "cpu" in str(e.device_type).lower():
            continue
        if t > 0:
            kernels[e.key[:90]] = (round(t / calls, 2), e.count / calls)
    return {"total_us": round(sum(t for t, _ in kernels.values()), 1), "kernels": kernels}


def _name(fn) -> str:
    return getattr(fn, "__name__", None) or getattr(getattr(fn, "fn", None), "__name__", "?")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("row")
    ap.add_argument("--dtype", default="bf16")
    ap.add_argument("--out", type=Path, default=Path(os.environ.get("OUT", "/tmp")))
    ap.add_argument("--extras", type=int, default=4, help="further tile shapes tried on the largest kernels")
    ap.add_argument("--rounds", type=int, default=7)
    a = ap.parse_args(argv)
    _links()
    os.environ.setdefault("MEND_CACHE_DIR", tempfile.mkdtemp(prefix="mend_choice_"))
    import compiler_gpu_zoo as Z
    import torch

    import mend.compiler
    import mend.compiler.backend  # noqa: F401
    from mend.compiler.codegen.triton import launch as L
    from mend.compiler.codegen.triton.plan import Config

    t_start = time.perf_counter()
    caught = []
    orig = L.TritonLauncher._tune

    def tune(self, tensors, dev):
        if isinstance(self, L.TritonMatmulLauncher) and all(self is not c[0] for c in caught):
            caught.append((self, tuple(tensors)))
        return orig(self, tensors, dev)

    L.TritonLauncher._tune = tune

    name, size, _, _ = Z.parse_row(a.row, Z.SIZES["real"])
    dtype = getattr(torch, Z.DTYPES[a.dtype])
    Z._set_cache_limits()
    model, inp = Z.build(name, size, "cuda", dtype)
    out = {"row": a.row, "dtype": a.dtype, "gpu": torch.cuda.get_device_name(), "torch": torch.__version__}
    import triton
    out["triton"] = triton.__version__
    with torch.no_grad():
        want = Z.first_tensor(model(**inp))
        fns = {}
        for c in ("inductor", "mend"):
            fn = torch.compile(model, backend=c)
            got = Z.first_tensor(fn(**inp))
            if c == "mend":
                mend.compiler.wait()
                got = Z.first_tensor(fn(**inp))
            out[f"{c}_diff"] = (got.double() - want.double()).abs().max().item()
            fns[c] = fn
        runs = {c: (lambda fn=fn: fn(**inp)) for c, fn in fns.items()}
        # wall time, interleaved rounds
        per = {c: [] for c in runs}
        for r in runs.values():
            for _ in range(3):
                r()
        for _ in range(a.rounds):
            for c, r in runs.items():
                ts = []
                for _ in range(10):
                    torch.cuda.synchronize()
                    t0 = time.perf_counter()
                    r()
                    torch.cuda.synchronize()
                    ts.append((time.perf_counter() - t0) * 1e3)
                per[c].append(statistics.median(ts))
        out["wall_ms"] = per
        out["profile"] = {c: _profile(torch, r) for c, r in runs.items()}
        base = out["profile"]["mend"]["total_us"]
        timers = _timers(torch)
        out["kernels"] = []
        for lk, ts in caught:
            out["kernels"].append(_probe_kernel(torch, L, Config, lk, ts, timers, runs, base, a.extras))
        out["profile_mend_again"] = _profile(torch, runs["mend"])
    out["seconds"] = time.perf_counter() - t_start
    a.out.mkdir(parents=True, exist_ok=True)
    path = a.out / f"matmul_choice_{a.row.replace('@', '_')}_{a.dtype}.json"
    path.write_text(json.dumps(out, indent=1, default=str))
    _report(out)
    return 0


def _probe_kernel(torch, L, Config, lk, ts, timers, runs, base, extras) -> dict:
    """Every candidate of one matmul kernel, timed every way (see the module docstring)."""
    mm = lk.mm
    rec = L.read_tuned(L._tune_key(lk.kernel_text, ts[-1].device)) or {}
    chosen = lk.config
    n_in = len(lk.kernel.inputs)
    cands = list(lk.plan.configs) + [L.CUBLAS]
    flops = 2 * mm.m * mm.n * mm.k * max(1, _prod(mm.batch))
    if extras and flops >= 2 * 4096 * 768 * 3072 * 0.7:
        even_k = mm.k % max(c.RBLOCK for c in lk.plan.configs) == 0
        full_m = all(mm.m % c.XBLOCK == 0 for c in lk.plan.configs)
        full_n = all(mm.n % c.YBLOCK == 0 for c in lk.plan.configs)
        for bm, bk, w, bn, st in [(128, 64, 8, 256, 4), (256, 64, 8, 128, 3), (128, 64, 8, 128, 4),
                                  (128, 128, 8, 256, 2), (128, 32, 8, 256, 4), (64, 64, 4, 256, 4)][:extras]:
            c = Config(bm, bk, w, bn, st)
            if c in cands or (even_k and mm.k % bk) or (full_m and mm.m % bm) or (full_n and mm.n % bn):
                continue
            cands.append(c)
    kinfo = {"kernel": lk.kernel.name, "fn": _name(lk.fn), "epilogue_fn": _name(lk.epilogue.fn),
             "batch": list(mm.batch), "m": mm.m, "n": mm.n, "k": mm.k, "chosen": str(chosen),
             "record": rec.get("times_ms"), "cands": {}}
    ref = None
    for c in cands:
        def go(c=c):
            if c is L.CUBLAS or c in lk.plan.configs:
                lk.launch(c, ts)
            else:
                lk.fn[lk.plan.grid(c)](*ts, **c.constexprs(lk.template), **c.options())
        row = {"rec": (kinfo["record"] or {}).get(str(c))}
        try:
            for o in ts[n_in:]:
                o.fill_(float("nan")) if o.is_floating_point() else None
            go()
            torch.cuda.synchronize()
            outs = [o.clone() for o in ts[n_in:]]
            if ref is None:
                ref = outs
            row["err"] = max(float((x.double() - y.double()).abs().max()) for x, y in zip(outs, ref))
            row["nan"] = any(bool(torch.isnan(x).any()) for x in outs)
            for tname, tfn in timers.items():
                row[tname] = round(tfn(go), 2)
            # in the model: this candidate forced on this kernel
            saved = (lk.config, lk._fast, lk._fast_static)
            lk._fast = lk._fast_static = None
            lk.config = c
            if not (c is L.CUBLAS or c in lk.plan.configs):
                lk.launch = lambda cfg, tensors, go1=c: lk.fn[lk.plan.grid(go1)](
                    *tensors, **go1.constexprs(lk.template), **go1.options())
            try:
                p = _profile(torch, runs["mend"])
            finally:
                lk.__dict__.pop("launch", None)
                lk.config, lk._fast, lk._fast_static = saved
            row["model_total_us"] = p["total_us"]
            row["model_delta_us"] = round(p["total_us"] - base, 1)
            row["model_kernels"] = {k: v for k, v in p["kernels"].items()
                                    if k.startswith((kinfo["fn"], kinfo["epilogue_fn"])) or "nvjet" in k
                                    or "gemm" in k.lower()}
        except Exception as exc:  # noqa: BLE001
            row["error"] = f"{type(exc).__name__}: {str(exc)[:200]}"
        kinfo["cands"][str(c)] = row
    # cuBLAS alone: the product without and with a bias (cuBLASLt's bias epilogue), cold
    nb = len(mm.batch)
    ia, ib = lk._operands

    def view(op, t, rows, cols, shape):
        st = op.strides[:nb] + (op.strides[rows], op.strides[cols])
        return t.as_strided((*mm.batch, *shape), st, t.storage_offset() + op.offset)

    va = view(mm.a, ts[ia], nb, nb + 2, (mm.m, mm.k))
    vb = view(mm.b, ts[ib], nb + 2, nb + 1, (mm.k, mm.n))
    kinfo["mm_cold"] = round(timers["cold"](lambda: torch.matmul(va, vb)), 2)
    if not nb:
        bias = torch.randn(mm.n, device="cuda", dtype=va.dtype)
        kinfo["addmm_cold"] = round(timers["cold"](lambda: torch.addmm(bias, va, vb)), 2)
    return kinfo


def _prod(xs) -> int:
    p = 1
    for x in xs:
        p *= x
    return p


def _report(out: dict) -> None:
    w = out["wall_ms"]
    ratios = [m / i for m, i in zip(w["mend"], w["inductor"])]
    print(f"== {out['row']} {out['dtype']} on {out['gpu']}: wall mend/inductor median {statistics.median(ratios):.3f} "
          f"(rounds {min(ratios):.3f}-{max(ratios):.3f}); GPU us/call inductor {out['profile']['inductor']['total_us']}"
          f" mend {out['profile']['mend']['total_us']} (again {out['profile_mend_again']['total_us']}); diff ind "
          f"{out['inductor_diff']:.3g} mend {out['mend_diff']:.3g}; {out['seconds']:.0f} s")
    for k in out["kernels"]:
        print(f"-- {k['kernel']} b{k['batch']} m{k['m']} n{k['n']} k{k['k']} chosen {k['chosen']}; mm cold "
              f"{k['mm_cold']} addmm cold {k.get('addmm_cold')}")
        for c, r in k["cands"].items():
            c = c.replace("Config(", "(").replace("XBLOCK=", "").replace("RBLOCK=", "").replace("num_warps=", "")
            c = c.replace("YBLOCK=", "").replace("num_stages=", "")
            if "error" in r:
                print(f"   {c:<24} error {r['error'][:100]}")
                continue
            rec = r.get("rec")
            print(f"   {c:<24} rec {rec * 1e3 if isinstance(rec, float) else float('nan'):7.1f} tune {r['tune']:7.1f} "
                  f"med {r['tune_med']:7.1f} long {r['long']:7.1f} cold {r['cold']:7.1f} model {r['model_delta_us']:+8.1f}"
                  f" err {r['err']:.2g}{' NAN' if r['nan'] else ''}")


if __name__ == "__main__":
    raise SystemExit(main())

"""The bundled compiler over many real architectures: does ``backend="mend"`` give eager's answer?

    python benchmarks/compiler_zoo.py [--models a,b] [--jobs N]
    python benchmarks/compiler_zoo.py --device cuda --dtype bf16|fp16|fp32 ...   (the GPU zoo: compiler_gpu_zoo.py)

Transformers architectures built by the model zoo (``benchmarks.zoo``: small configs, random weights, no
downloads; :data:`MODELS` by default, any zoo row with ``--models``) run once eagerly and once under
``torch.compile(backend="mend")`` (graph breaks allowed), each model in its own process. The table shows the largest absolute difference of the first output, the
graphs, kernels and ATen calls mend compiled, what fell back (graphs run eagerly, kernels interpreted),
the first-call time, and how many graphs were traced directly instead of through aot_autograd. A row is
``ok`` when the difference is within 1e-4 of an output of scale ~1, ``DIFF`` otherwise, ``error`` when
the model or the compile failed.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

HERE = Path(__file__).resolve()
TOL = 1e-4


# the architectures of the earlier hand-picked survey, now built by the zoo
MODELS = ("longformer", "led", "bart", "bert", "gpt2", "t5", "big_bird", "bigbird_pegasus", "funnel", "deberta",
          "deberta-v2", "xlnet", "reformer", "xlm", "flaubert", "mpnet", "fsmt", "prophetnet", "switch_transformers",
          "nllb-moe", "m2m_100", "marian", "pegasus_x", "esm", "luke", "canine", "squeezebert", "mra", "yoso",
          "nystromformer", "ctrl", "tapas", "longt5", "electra", "roformer", "xglm", "opt", "bloom", "mixtral",
          "qwen2_moe", "rwkv", "mamba", "umt5", "plbart", "whisper", "detr")


def measure(name: str, device: str) -> dict:
    import torch

    from benchmarks.zoo import build_model, make_inputs, profile, spec_by_name
    from benchmarks.zoo.compare import flatten
    from mend.compiler import backend

    spec, p = spec_by_name(name), profile("tiny")
    model, config = build_model(spec, "fp32", p)
    model = model.to(device)
    inputs = {k: v.to(device) if hasattr(v, "to") else v for k, v in make_inputs(model, config, spec, p).items()}
    with torch.no_grad():
        want = flatten(model(**inputs))[0][1]
        before = dict(backend.STATS)
        t0 = time.perf_counter()
        got = flatten(torch.compile(model, backend="mend")(**inputs))[0][1]
        first = time.perf_counter() - t0
    st = {k: backend.STATS[k] - before[k] for k in ("graphs", "fallback_graphs", "kernels", "interpreted_kernels",
                                                     "extern_calls", "direct_inference_graphs")}
    diff = (got.double() - want.double()).abs().max().item() if got.numel() else 0.0
    scale = want.double().abs().max().item() if want.numel() else 0.0
    return {"diff": diff, "scale": scale, "first_call_s": first, **st}


def run(name: str, device: str, timeout: int) -> dict:
    # this folder (``import compiler_zoo``) and the repository root (``benchmarks.zoo``, not installed)
    code = (f"import json, sys; sys.path[:0] = [{str(HERE.parent)!r}, {str(HERE.parents[1])!r}]; "
            f"import compiler_zoo as z; "
            f"print('RESULT ' + json.dumps(z.measure({name!r}, {device!r})))")
    env = dict(os.environ, TRANSFORMERS_VERBOSITY="error", PYTHONWARNINGS="ignore")
    try:
        p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=timeout, env=env)
    except subprocess.TimeoutExpired:
        return {"error": f"timeout after {timeout} s"}
    for line in p.stdout.splitlines():
        if line.startswith("RESULT "):
            return json.loads(line[7:])
    tail = [ln for ln in p.stderr.strip().splitlines() if ln.strip()][-1:] or ["no output"]
    return {"error": tail[0][:160]}


def _on_gpu(argv) -> bool:
    return any(x == "--device=cuda" or (x == "--device" and argv[i + 1:i + 2] == ["cuda"]) for i, x in enumerate(argv))


def main(argv=None) -> int:
    sys.path.insert(0, str(HERE.parent))
    argv = sys.argv[1:] if argv is None else argv
    if _on_gpu(argv):
        import compiler_gpu_zoo  # real sizes, timings, CUDA graphs: the GPU zoo

        return compiler_gpu_zoo.main(argv)
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--models", default=None, help="comma-separated zoo rows (default: MODELS)")
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--jobs", type=int, default=1)
    ap.add_argument("--timeout", type=int, default=600)
    ap.add_argument("--json", type=Path, default=None)
    a = ap.parse_args(argv)
    names = a.models.split(",") if a.models else list(MODELS)
    with ThreadPoolExecutor(a.jobs) as ex:
        results = dict(zip(names, ex.map(lambda n: run(n, a.device, a.timeout), names)))
    print(f"{'model':<22}{'verdict':>8}{'max |diff|':>12}{'graphs':>8}{'kernels':>9}{'aten':>6}"
          f"{'eager gr':>10}{'interp k':>10}{'first s':>9}{'direct':>8}")
    bad = 0
    for n, r in results.items():
        if "error" in r:
            bad += 1
            print(f"{n:<22}{'error':>8}  {r['error']}")
            continue
        ok = r["diff"] <= TOL * max(1.0, r["scale"])
        bad += not ok
        print(f"{n:<22}{'ok' if ok else 'DIFF':>8}{r['diff']:>12.2e}{r['graphs']:>8}{r['kernels']:>9}"
              f"{r['extern_calls']:>6}{r['fallback_graphs']:>10}{r['interpreted_kernels']:>10}{r['first_call_s']:>9.1f}"
              f"{r.get('direct_inference_graphs', 0):>8}")
    print(f"{len(results) - bad}/{len(results)} ok")
    if a.json:
        a.json.write_text(json.dumps(results, indent=1))
    return 0 if bad == 0 else 1


if __name__ == "__main__":
    raise SystemExit(main())

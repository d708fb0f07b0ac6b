"""Import time through mend's import hook: plain import vs hook with a warm cache vs hook with an empty one.

    python benchmarks/import_hook.py [--model llama] [--runs 7] [--cold-runs 3]

Each measurement is a fresh interpreter that imports ``transformers`` and one model module
(``transformers.models.<model>.modeling_<model>``, which imports torch); the three variants run
interleaved, round by round, so that load on the machine falls on all of them alike:

* plain: ``import transformers; import transformers.models.llama.modeling_llama``;
* warm: ``mend.repair_imports(["transformers"])`` first (safe fixes, no config file), cache filled by an
  untimed run before the first round;
* cold: the same with an empty cache folder each run (the package's call graph is built and every
  imported module is checked and repaired).

"import" is the time inside the process from before the first import (the hook's own, for the hook
variants) to after the last; "process" is the whole interpreter's wall time as the parent sees it.
Printed: medians, the range, and the ratio of medians to plain. Goal: warm <= 1.1x plain.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

from mend.imports.settings import STARTUP_DIR

CHILD = """
import json, sys, time
t0 = time.perf_counter()
hook = None
if sys.argv[1] != "plain":
    import mend.imports
    hook = mend.imports.repair_imports(["transformers"], isolated=True, cache_dir=sys.argv[2], propagate=False)
import importlib
import transformers
importlib.import_module(sys.argv[3])
elapsed = time.perf_counter() - t0
print(json.dumps({"import_s": elapsed, "modules": len(hook.loaded) if hook else 0,
                  "repaired": len(hook.repaired()) if hook else 0, "errors": len(hook.errors) if hook else 0,
                  "first_error": hook.errors[0] if hook and hook.errors else None}))
"""


def measure(variant: str, cache_dir: str, module: str) -> dict:
    env = {k: v for k, v in os.environ.items() if k != "MEND_REPAIR"}
    # the program's own path, without the start-up folder a repairing parent would have put first
    env["PYTHONPATH"] = os.pathsep.join(p for p in env.get("PYTHONPATH", "").split(os.pathsep)
                                        if p and p != STARTUP_DIR)
    env["HF_HUB_OFFLINE"] = "1"
    t0 = time.perf_counter()
    proc = subprocess.run([sys.executable, "-c", CHILD, variant, cache_dir, module], env=env, capture_output=True,
                          text=True)
    wall = time.perf_counter() - t0
    if proc.returncode != 0:
        raise SystemExit(f"{variant} run failed:\n{proc.stderr[-2000:]}")
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    out["process_s"] = wall
    if out["errors"] or (variant != "plain" and not out["modules"]):
        # a hook that repaired nothing measures nothing: stop instead of printing its time
        raise SystemExit(f"{variant} run: {out['errors']} modules failed to repair (first: {out['first_error']}), "
                         f"{out['modules']} through the hook; no figure printed")
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--model", default="llama")
    ap.add_argument("--runs", type=int, default=7, help="rounds of plain and warm")
    ap.add_argument("--cold-runs", type=int, default=3, help="cold runs (the first rounds; each repairs from scratch)")
    a = ap.parse_args(argv)
    module = f"transformers.models.{a.model}.modeling_{a.model}"
    results: dict[str, list[dict]] = {"plain": [], "warm": [], "cold": []}
    with tempfile.TemporaryDirectory(prefix="mend-import-bench-") as tmp:
        warm_dir = os.path.join(tmp, "warm")
        first = measure("warm", warm_dir, module)  # fills the warm cache (untimed)
        print(f"filling the warm cache: {first['import_s']:.1f} s, {first['modules']} modules through the hook, "
              f"{first['repaired']} repaired", file=sys.stderr)
        for i in range(max(a.runs, a.cold_runs)):
            order = ["plain", "warm"] if i < a.runs else []
            if i < a.cold_runs:
                order.append("cold")
            for variant in order:
                cache = warm_dir if variant != "cold" else os.path.join(tmp, f"cold-{i}")
                results[variant].append(measure(variant, cache, module))
                r = results[variant][-1]
                print(f"round {i + 1} {variant:<5} import {r['import_s']:.2f} s, process {r['process_s']:.2f} s",
                      file=sys.stderr)
    base = {k: statistics.median(r[k] for r in results["plain"]) for k in ("import_s", "process_s")}
    print(f"import of transformers + {module.rsplit('.', 1)[-1]}: medians of fresh processes "
          f"(plain/warm: {a.runs} runs, cold: {a.cold_runs})")
    print(f"{'variant':<8} {'import s (min-max)':>22} {'x plain':>8} {'process s (min-max)':>22} {'x plain':>8}"
          f" {'modules':>8} {'repaired':>9} {'errors':>7}")
    for variant, runs in results.items():
        if not runs:
            continue
        cells = []
        for k in ("import_s", "process_s"):
            values = [r[k] for r in runs]
            med = statistics.median(values)
            cells.append(f"{med:>8.2f} ({min(values):.2f}-{max(values):.2f})".rjust(22) + f" {med / base[k]:>7.2f}x")
        print(f"{variant:<8} {cells[0]} {cells[1]} {runs[-1]['modules']:>8} {runs[-1]['repaired']:>9} "
              f"{runs[-1]['errors']:>7}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

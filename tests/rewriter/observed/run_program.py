"""Run one observed program: ``python -u run_program.py DIR MODULE BACKEND``.

Every message goes to one stream in order: stdout and stderr (the caller merges them), logging records
as ``LEVEL name message``, warnings as ``WARN Category: message``. A program with ``NO_GRAD`` is called under
``torch.no_grad()``, one with ``TRAIN`` steps backward after each call; one with ``RAISES`` (exception types)
reports such an exception from a call as ``raised Type: message`` and goes on; one with ``BETWEEN`` has
``BETWEEN(model, args)`` run eagerly (never compiled) after each call. BACKEND ``none`` runs eagerly; the
first line of each graph break's reason (and of each frame Dynamo gave up on) goes to
``DIR/<MODULE>.<BACKEND>.breaks`` as a JSON list."""

import contextlib
import importlib
import json
import logging
import sys
import warnings
from pathlib import Path

import torch

folder, name, backend = sys.argv[1:4]
sys.path.insert(0, folder)
logging.basicConfig(level=logging.INFO, stream=sys.stdout, format="%(levelname)s %(name)s %(message)s")
for noisy in ("mend", "torch"):  # the compilers' own notes are not the program's output
    logging.getLogger(noisy).setLevel(logging.ERROR)
warnings.simplefilter("always")
warnings.filterwarnings("ignore", module="torch")  # torch's own deprecation notes, raised while compiling
warnings.showwarning = lambda message, category, *rest: print(f"WARN {category.__name__}: {message}")

module = importlib.import_module(name)
torch.manual_seed(0)
model, inputs = module.make()
fn = model if backend == "none" else torch.compile(model, backend=backend)
raises = getattr(module, "RAISES", ())
for i, args in enumerate(inputs):
    print(f"--- call {i}")
    args = args if isinstance(args, tuple) else (args,)
    with torch.no_grad() if getattr(module, "NO_GRAD", False) else contextlib.nullcontext():
        try:
            out = fn(*args)
        except raises as exc:
            print(f"raised {type(exc).__name__}: {exc}")
    if getattr(module, "TRAIN", False):
        out.backward()
        print("grad", [round(float(p.grad.abs().sum()), 4) for p in fn.parameters()])
    if hasattr(module, "BETWEEN"):
        module.BETWEEN(model, args)
counters = torch._dynamo.utils.counters
# a break inside a loop makes Dynamo skip the whole frame: a frame not ok, its reason under "unimplemented"
reasons = [key.splitlines()[0] for key, n in counters["graph_break"].items() for _ in range(n)]
skipped = counters["frames"]["total"] - counters["frames"]["ok"]
reasons += [key.splitlines()[0] for key in counters["unimplemented"]][:skipped]
Path(folder, f"{name}.{backend}.breaks").write_text(json.dumps(reasons))

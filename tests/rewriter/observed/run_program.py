"""Run one observed program: ``python -u run_program.py DIR MODULE BACKEND``.

Every message goes to one stream in order: stdout and stderr (the caller merges them), logging records
as ``LEVEL name message``, warnings as ``WARN Category: message``. BACKEND ``none`` runs eagerly; the
graph breaks Dynamo counted are written to ``DIR/<MODULE>.<BACKEND>.breaks``."""

import importlib
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
fn, inputs = module.make()
if backend != "none":
    fn = torch.compile(fn, backend=backend)
for i, args in enumerate(inputs):
    print(f"--- call {i}")
    out = fn(*args) if isinstance(args, tuple) else fn(args)
    if getattr(module, "TRAIN", False):
        out.backward()
        print("grad", [round(float(p.grad.abs().sum()), 4) for p in fn.parameters()])
breaks = sum(torch._dynamo.utils.counters["graph_break"].values())
Path(folder, f"{name}.{backend}.breaks").write_text(str(breaks))

"""Run fixtures under torch.compile and record what Dynamo really does (used by the honesty tests).

Usage: ``python dynamo_probe.py OUT.json FIXTURE.py...``. For each fixture: a fresh Dynamo state,
import the file, call its ``drive()``, and record

* graph breaks from the graph-break artifact loggers (reference: dynamo.md section 8), each with the
  innermost line *inside the fixture file* (from the "User code traceback" when the innermost frame
  is in a library), the gb_type line and whether Dynamo skipped the whole frame;
* recompiles: compilation metrics of frames of the fixture file whose compile id is ``N/1`` or later.

Runs in its own process so that the test process never imports torch.
"""

from __future__ import annotations

import importlib.util
import json
import logging
import os
import re
import sys
import traceback
import warnings

import torch
import torch._dynamo
from torch._dynamo.utils import clear_compilation_metrics, counters, get_compilation_metrics

warnings.filterwarnings("ignore")

HEADER_RE = re.compile(r"in user code at (?P<file>.+?):(?P<line>\d+)")
FRAME_RE = re.compile(r'File "(?P<file>[^"]+)", line (?P<line>\d+)')
SKIP_MARKERS = ("Skipping the function", "skipping the frame", "Skipping frame", "falling back to eager")


class Capture(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.messages: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        try:
            self.messages.append(record.getMessage())
        except Exception:  # pragma: no cover
            self.messages.append(str(record.msg))


def attach() -> Capture:
    cap = Capture()
    for name in ("torch._dynamo.symbolic_convert.__graph_breaks", "torch._dynamo.exc.__graph_breaks"):
        lg = logging.getLogger(name)
        lg.setLevel(logging.DEBUG)
        lg.addHandler(cap)
        lg.propagate = False
    return cap


def parse_break(msg: str, path: str) -> dict | None:
    lines = []
    m = HEADER_RE.search(msg)
    if m and m.group("file") == path:
        lines.append(int(m.group("line")))
    for fm in FRAME_RE.finditer(msg):
        if fm.group("file") == path:
            lines.append(int(fm.group("line")))
    if not lines:
        return None
    gb = ""
    reason = msg.split("Graph Break Reason:", 1)[-1].strip().splitlines()
    for line in reason:
        line = line.strip()
        if line and not line.startswith(("Encountered graph break", "Failed to handle", "***")):
            gb = line
            break
    # innermost frame of the fixture: the header when it is in the file, else the last traceback frame
    line = lines[0] if (m and m.group("file") == path) else lines[-1]
    return {"line": line, "lines": sorted(set(lines)), "gb_type": gb,
            "skip": any(s.lower() in msg.lower() for s in SKIP_MARKERS)}


def run_one(path: str, cap: Capture) -> dict:
    torch._dynamo.reset()
    counters.clear()
    clear_compilation_metrics()
    cap.messages.clear()
    name = "mend_fixture_" + re.sub(r"\W", "_", path)
    spec = importlib.util.spec_from_file_location(name, path)
    mod = importlib.util.module_from_spec(spec)
    sys.modules[name] = mod
    error = None
    try:
        spec.loader.exec_module(mod)
        mod.drive()
    except Exception:
        error = traceback.format_exc(limit=5)
    breaks = [b for b in (parse_break(m, path) for m in cap.messages) if b]
    # Every recompile of the run counts: a compiled nn.Sequential recompiles torch's own forward frame.
    recompiles = 0
    for cm in get_compilation_metrics():
        cid = str(getattr(cm, "compile_id", "") or "")
        if re.match(r"^\d+/[1-9]\d*", cid):
            recompiles += 1
    return {"breaks": breaks, "recompiles": recompiles, "error": error,
            "frames": dict(counters["frames"])}


def main() -> None:
    os.environ["PYTHONBREAKPOINT"] = "0"  # breakpoint() must not stop the eager fallback
    out, paths = sys.argv[1], sys.argv[2:]
    cap = attach()
    results = {p: run_one(p, cap) for p in paths}
    with open(out, "w") as fh:
        json.dump({"torch": torch.__version__, "results": results}, fh, indent=1)


if __name__ == "__main__":
    main()

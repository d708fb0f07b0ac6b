"""The cost of recording: `mend run` against the same program run plainly, side by side.

Two measurements, each in interleaved rounds (plain, recorded, plain, recorded, ...), reported as
medians and the ratio recorded / plain:

1. process: ``python examples/run_all.py`` vs ``mend run examples/run_all.py`` (whole process wall
   time, torch import included; the examples compile with ``backend="eager"``);
2. in-process: compiling and calling every example (4 calls each) after ``torch._dynamo.reset()``,
   without and with ``mend.analyzers.runtime.record()``: the recorder's cost on compile-heavy work.

Usage: python benchmarks/run_overhead.py [--rounds N]      (target: ratio <= 1.10)
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
EXAMPLES = REPO / "examples"


def _process_round(recorded: bool, data_file: str) -> float:
    if recorded:
        cmd = [sys.executable, "-m", "mend.cli", "run", "-q", "--data-file", data_file, str(EXAMPLES / "run_all.py")]
    else:
        cmd = [sys.executable, str(EXAMPLES / "run_all.py")]
    t0 = time.perf_counter()
    subprocess.run(cmd, check=True, capture_output=True, cwd=REPO, env={**os.environ, "PYTHONWARNINGS": "ignore"})
    return time.perf_counter() - t0


def _in_process_round(recorded: bool) -> float:
    import torch

    from mend.analyzers.runtime import record

    sys.path.insert(0, str(EXAMPLES))
    import item_loss
    import step_counter
    import transformer_block
    import validated_model

    torch._dynamo.reset()
    work = []
    for module in (transformer_block, validated_model, step_counter, item_loss):
        target, args, kwargs = module.harness()
        work.append((torch.compile(target, backend="eager"), args, kwargs))

    def go() -> None:
        with torch.no_grad():
            for compiled, args, kwargs in work:
                for _ in range(4):
                    compiled(*args, **kwargs)

    import contextlib
    import io

    with contextlib.redirect_stdout(io.StringIO()):  # the examples print from inside forward
        t0 = time.perf_counter()
        if recorded:
            with record():
                go()
        else:
            go()
        return time.perf_counter() - t0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--skip-process", action="store_true")
    args = parser.parse_args()
    import logging
    import warnings

    warnings.filterwarnings("ignore")
    logging.getLogger("torch").setLevel(logging.ERROR)
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        data_file = str(Path(tmp) / "run.json")
        if not args.skip_process:
            plain, rec = [], []
            _process_round(False, data_file)  # warm the file cache
            for _ in range(args.rounds):
                plain.append(_process_round(False, data_file))
                rec.append(_process_round(True, data_file))
            rows.append(("process: python run_all.py vs mend run", plain, rec))
    _in_process_round(False)  # warm-up: first compiles in a process pay one-time costs
    plain, rec = [], []
    for _ in range(args.rounds):
        plain.append(_in_process_round(False))
        rec.append(_in_process_round(True))
    rows.append(("in-process: compile + 16 calls, record() vs none", plain, rec))

    print(f"{'measurement':52} {'plain s':>9} {'recorded s':>11} {'ratio':>7}   (median of {args.rounds} interleaved rounds)")
    for name, plain, rec in rows:
        p, r = statistics.median(plain), statistics.median(rec)
        print(f"{name:52} {p:9.3f} {r:11.3f} {r / p:7.3f}")
    print("target: ratio <= 1.10")


if __name__ == "__main__":
    main()

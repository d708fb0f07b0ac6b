"""How fast is `mend fix` on a large file, next to `mend check` on the same file?

    python benchmarks/fix_speed.py [--mb 5] [--repeat 3] [--skip-whole]

Writes one generated file of about ``--mb`` megabytes (a small model with five findings, then thousands of
generated lookup functions, as code generators write them) and times, side by side in this one run, each
command as its own process on a fresh copy of the file:

* ``mend check --no-cache`` (the baseline);
* ``mend fix`` as shipped: LibCST sees only the statements a repair can involve (``mend.rewriter.window``);
* ``mend fix`` on the whole file (the engine without the window, as before it existed), unless
  ``--skip-whole``.

Wall seconds and peak resident memory (the child's ``ru_maxrss``) are medians over ``--repeat`` runs,
with their ratio to ``mend check``. The two fixes must write the same bytes; the script checks that.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

HEAD = '''import logging

import torch

logger = logging.getLogger(__name__)


class Block(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.proj = torch.nn.Linear(8, 8)

    def forward(self, x):
        h = self.proj(x)
        print("h", h.shape)
        logger.debug("forward")
        if h.sum() > 0:
            h = torch.clamp(h, min=0.0)
        return h


@torch.compile
def step(x):
    print("step")
    return Block()(x)
'''
GENERATED = '''

def table_{i}(key):
    """Generated lookup {i}."""
    values = {{"a": {i}, "b": {i} + 1, "c": [{i}, {i} * 2, {i} * 3], "name": "entry_{i}"}}
    if key in values:
        return values[key]
    return None
'''
WHOLE = ("import sys; from mend.rewriter import api, registry; "
         "api.fix_windowed = registry.fix_source; "  # the same signature: the engine on the whole file
         "from mend.cli.app import main; sys.argv[0] = 'mend'; main()")


def generate(path: Path, megabytes: float) -> int:
    parts, size, i = [HEAD], len(HEAD), 0
    while size < megabytes * 1e6:
        text = GENERATED.format(i=i)
        parts.append(text)
        size += len(text)
        i += 1
    path.write_text("".join(parts))
    return i


def measure(cmd: list[str], cwd: Path) -> tuple[float, float, int]:
    """(wall seconds, peak MB, exit code) of one child process."""
    import subprocess

    with tempfile.TemporaryFile() as err:
        start = time.perf_counter()
        proc = subprocess.Popen(cmd, cwd=cwd, stdout=subprocess.DEVNULL, stderr=err)
        _, status, usage = os.wait4(proc.pid, 0)
        wall = time.perf_counter() - start
        proc.returncode = code = os.waitstatus_to_exitcode(status)
        if code not in (0, 1):
            err.seek(0)
            sys.exit(f"{' '.join(cmd)} exited {code}: {err.read().decode()[-2000:]}")
    return wall, usage.ru_maxrss / 1024, code


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--mb", type=float, default=5.0, help="size of the generated file (MB)")
    ap.add_argument("--repeat", type=int, default=3, help="runs of each command (median)")
    ap.add_argument("--skip-whole", action="store_true", help="do not time the fix without the window (slow)")
    args = ap.parse_args()
    mend = [sys.executable, "-m", "mend.cli"]
    commands = {"mend check --no-cache": [*mend, "check", "--no-cache", "--isolated", "-q"],
                "mend fix": [*mend, "fix", "--isolated", "-q"]}
    if not args.skip_whole:
        commands["mend fix, whole file (no window)"] = [sys.executable, "-c", WHOLE, "fix", "--isolated", "-q"]
    with tempfile.TemporaryDirectory(prefix="mend-fix-speed-") as tmp:
        folder = Path(tmp)
        original = folder / "original.py"
        functions = generate(original, args.mb)
        size = original.stat().st_size / 1e6
        print(f"file: {size:.1f} MB, {functions} generated functions, python {sys.version.split()[0]}, "
              f"{os.cpu_count()} cores")
        results: dict[str, list[tuple[float, float]]] = {name: [] for name in commands}
        outputs: dict[str, bytes] = {}
        for _ in range(args.repeat):
            for name, cmd in commands.items():
                work = folder / "work.py"
                shutil.copy(original, work)
                wall, peak, _ = measure([*cmd, "work.py"], folder)
                results[name].append((wall, peak))
                outputs[name] = work.read_bytes()
        fixes = [outputs[n] for n in commands if n.startswith("mend fix")]
        assert all(out == fixes[0] for out in fixes), "the fixes wrote different files"
        assert fixes[0] != original.read_bytes(), "nothing was fixed"
        base_s = statistics.median(w for w, _ in results["mend check --no-cache"])
        base_mb = statistics.median(m for _, m in results["mend check --no-cache"])
        print()
        print(f"| {'command':34s} | {'seconds':>8s} | {'x check':>8s} | {'peak MB':>8s} | {'x check':>8s} |")
        print(f"|{'-' * 36}|{'-' * 10}|{'-' * 10}|{'-' * 10}|{'-' * 10}|")
        for name, runs in results.items():
            secs = statistics.median(w for w, _ in runs)
            mb = statistics.median(m for _, m in runs)
            print(f"| {name:34s} | {secs:8.1f} | {secs / base_s:7.2f}x | {mb:8.0f} | {mb / base_mb:7.2f}x |")
        print(f"\nmedians of {args.repeat} run(s); runs: " + "; ".join(
            f"{name}: {', '.join(f'{w:.1f}' for w, _ in runs)} s" for name, runs in results.items()))


if __name__ == "__main__":
    main()

"""How long does `mend fix` take on a whole package, next to `mend check`, cold and warm, and on large files?

    python benchmarks/fix_scale.py [--tree DIR | --folders a,b,c] [--repeat 3] [--jobs N] [--curve] [--skip-package]

The package (default: the installed ``transformers``, copied into a temporary folder; ``--folders`` takes only
those model folders of it) is checked and fixed by each command as its own process, side by side in one run,
the variants interleaved repeat by repeat, each fix on a fresh copy of the tree:

* ``check cold``: ``mend check --no-cache``; ``check warm``: ``mend check`` again with the cache of a first run;
* ``fix cold``: ``mend fix --unsafe-fixes --no-cache`` (no cache read or written);
* ``fix cold, caching``: the same with an empty cache (what a first run on a checkout costs);
* ``fix again``: ``mend fix --unsafe-fixes`` on the tree that run repaired, with its cache (a second run);
* ``fix warm``: once more, nothing changed since (a pre-commit hook on an unchanged tree).

Every fix must write the same bytes (the script compares the trees) and the runs after the first must change
nothing. The table gives the medians, the spread (min-max) and each command's ratio to ``check cold``.

``--curve`` times check and fix on generated files of growing size, ordinary code (a small model and
generated lookup functions, as code generators write them) and code dense with findings (every function a
compiled one that prints), and says for each whether the file was repaired or skipped, and why. Peak memory is
that of the largest process (the command or one of its workers).
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

MEND = [sys.executable, "-m", "mend.cli"]
ORDINARY_HEAD = '''import torch


class Block(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.proj = torch.nn.Linear(8, 8)

    def forward(self, x):
        h = self.proj(x)
        print("h", h.shape)
        return h


@torch.compile
def step(x):
    return Block()(x)
'''
ORDINARY = '''

def table_{i}(key):
    """Generated lookup {i}."""
    values = {{"a": {i}, "b": {i} + 1, "c": [{i}, {i} * 2, {i} * 3], "name": "entry_{i}"}}
    if key in values:
        return values[key]
    return None
'''
DENSE = '''

@torch.compile
def step_{i}(x):
    y = x.sin() + {i}
    print("step {i}", y.shape)
    return y.cos()
'''


def run(cmd: list[str], cwd: Path, env: dict | None = None) -> tuple[float, float, int, str]:
    """(wall seconds, peak MB of the largest process, exit code, stdout+stderr tail) of one command."""
    with tempfile.TemporaryFile() as out:
        start = time.perf_counter()
        proc = subprocess.Popen(cmd, cwd=cwd, stdout=out, stderr=subprocess.STDOUT, env=env)
        _, status, usage = os.wait4(proc.pid, 0)
        wall = time.perf_counter() - start
        code = os.waitstatus_to_exitcode(status)
        out.seek(0)
        text = out.read().decode(errors="replace")
    if code not in (0, 1, 2):
        sys.exit(f"{' '.join(cmd)} exited {code}: {text[-2000:]}")
    return wall, usage.ru_maxrss / 1024, code, text


def files(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*.py"))}


def package(args: argparse.Namespace, folder: Path) -> Path:
    """A copy of the tree to measure, without caches and bytecode."""
    if args.tree:
        src = Path(args.tree)
    else:
        import transformers  # noqa: PLC0415  (only to locate the installed package)

        src = Path(transformers.__file__).parent
    dest = folder / "original" / src.name
    if args.folders:
        for name in args.folders.split(","):
            shutil.copytree(src / "models" / name, dest / name, ignore=shutil.ignore_patterns("__pycache__"))
    else:
        shutil.copytree(src, dest, ignore=shutil.ignore_patterns("__pycache__", "*.pyc", ".mend_cache"))
    return dest


def measure_package(args: argparse.Namespace, folder: Path) -> None:
    original = package(args, folder)
    count = len(files(original))
    lines = sum(p.read_text(errors="replace").count("\n") for p in original.rglob("*.py"))
    jobs = ["-j", str(args.jobs)] if args.jobs else []
    print(f"tree: {original.name} ({count} files, {lines} lines), python {sys.version.split()[0]}, "
          f"{os.cpu_count()} cores, jobs {args.jobs or 'all'}")
    rows = ["check cold", "check warm", "fix cold", "fix cold, caching", "fix again", "fix warm"]
    times: dict[str, list[float]] = {r: [] for r in rows}
    peaks: dict[str, list[float]] = {r: [] for r in rows}
    fixed: list[dict[str, bytes]] = []
    summary = ""
    for rep in range(args.repeat):
        work = folder / f"rep{rep}"
        check_dir, nocache_dir, cache_dir = work / "check", work / "nocache", work / "cache"
        for d in (check_dir, nocache_dir, cache_dir):
            shutil.copytree(original, d / original.name)

        def timed(row: str, cmd: list[str], cwd: Path) -> str:
            wall, peak, _, text = run(cmd, cwd)
            times[row].append(wall)
            peaks[row].append(peak)
            return text

        timed("check cold", [*MEND, "check", "--isolated", "--no-cache", "-q", *jobs, original.name], check_dir)
        run([*MEND, "check", "--isolated", "-q", *jobs, original.name], check_dir)  # fills the cache
        timed("check warm", [*MEND, "check", "--isolated", "-q", *jobs, original.name], check_dir)
        fix = [*MEND, "fix", "--isolated", "--unsafe-fixes", "-q", *jobs, original.name]
        text = timed("fix cold", [*fix[:-1], "--no-cache", original.name], nocache_dir)
        summary = text.strip().splitlines()[-1] if text.strip() else ""
        timed("fix cold, caching", fix, cache_dir)
        once = files(cache_dir)
        timed("fix again", fix, cache_dir)
        timed("fix warm", fix, cache_dir)
        if files(nocache_dir) != once:
            sys.exit("the fixes with and without the cache wrote different files")
        if files(cache_dir) != once:
            sys.exit("fixing the repaired tree again changed it")
        fixed.append(once)
        shutil.rmtree(work)
    if any(f != fixed[0] for f in fixed):
        sys.exit("the repeats wrote different files")
    changed = sum(1 for k, v in fixed[0].items() if not (original.parent / k).is_file()
                  or (original.parent / k).read_bytes() != v)
    print(f"fix: {summary} ({changed} files written, the same bytes in every run)\n")
    base = statistics.median(times["check cold"])
    print(f"| {'command':20s} | {'seconds':>8s} | {'spread':>13s} | {'x check cold':>12s} | {'peak MB':>8s} |")
    print(f"|{'-' * 22}|{'-' * 10}|{'-' * 15}|{'-' * 14}|{'-' * 10}|")
    for row in rows:
        t = times[row]
        print(f"| {row:20s} | {statistics.median(t):8.2f} | {min(t):5.2f}-{max(t):6.2f} | "
              f"{statistics.median(t) / base:11.2f}x | {statistics.median(peaks[row]):8.0f} |")
    print(f"\nmedians of {args.repeat} run(s), interleaved")


def generate(path: Path, megabytes: float, dense: bool) -> int:
    parts = ["import torch\n"] if dense else [ORDINARY_HEAD]
    size, i = len(parts[0]), 0
    template = DENSE if dense else ORDINARY
    while size < megabytes * 1e6:
        text = template.format(i=i)
        parts.append(text)
        size += len(text)
        i += 1
    path.write_text("".join(parts))
    return i


def measure_curve(args: argparse.Namespace, folder: Path) -> None:
    sizes = [float(s) for s in args.sizes.split(",")]
    print(f"\n| {'file':16s} | {'MB':>4s} | {'check s':>8s} | {'fix s':>7s} | {'fix peak MB':>11s} | outcome")
    print(f"|{'-' * 18}|{'-' * 6}|{'-' * 10}|{'-' * 9}|{'-' * 13}|{'-' * 40}")
    for dense in (False, True):
        for mb in sizes:
            work = folder / f"curve-{dense}-{mb}"
            work.mkdir()
            functions = generate(work / "gen.py", mb, dense)
            check_s, _, _, _ = run([*MEND, "check", "--isolated", "--no-cache", "-q", "gen.py"], work)
            fix_s, peak, code, text = run([*MEND, "fix", "--isolated", "--no-cache", "-q", "gen.py"], work)
            outcome = next((line.split(": ", 2)[-1] for line in text.splitlines() if line.startswith("error:")),
                           text.strip().splitlines()[-1] if text.strip() else f"exit {code}")
            kind = f"{'dense' if dense else 'ordinary'} {functions}f"
            print(f"| {kind:16s} | {mb:4.1f} | {check_s:8.1f} | {fix_s:7.1f} | {peak:11.0f} | {outcome[:90]}")
            shutil.rmtree(work)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--tree", help="the package to measure (default: the installed transformers)")
    ap.add_argument("--folders", help="only these model folders of transformers (comma-separated)")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--jobs", type=int, default=0, help="-j for check and fix (default: every core)")
    ap.add_argument("--curve", action="store_true", help="also time generated files of growing size")
    ap.add_argument("--sizes", default="0.5,1,2,5", help="the curve's file sizes in MB")
    ap.add_argument("--skip-package", action="store_true", help="only the curve")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="mend-fix-scale-") as tmp:
        if not args.skip_package:
            measure_package(args, Path(tmp))
        if args.curve:
            measure_curve(args, Path(tmp))


if __name__ == "__main__":
    main()

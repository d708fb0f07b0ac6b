"""How fast is `mend check`? Cold and warm (cached) runs side by side with TorchFix and Fixit.

    python benchmarks/check_speed.py [--tree DIR | --files N | --package] [--repeat 3] [--torchfix PATH] [--fixit PATH]
                                     [--against PYTHON | --baseline-ref GITREF]

By default the tree is a fixed subset: the first N (150) `modeling_*.py` files of the installed
`transformers` package in sorted path order, copied into a temporary folder so that every tool sees
the same files and nothing is written next to the package. Every tool runs as a subprocess on the same
folder, in the same session:

* mend cold: `mend check --no-cache`-equivalent (a fresh, empty cache directory each run);
* mend warm: the same command again with the cache of the previous run (the tree is unchanged);
* TorchFix: `torchfix --select ALL -j <cores> DIR` (LibCST + metadata);
* Fixit: `fixit lint DIR`.

TorchFix and Fixit pin LibCST versions of their own, so they live in a separate virtual environment,
by default `benchmarks/.tools-venv` (`python -m venv benchmarks/.tools-venv &&
benchmarks/.tools-venv/bin/pip install torchfix fixit`); pass `--torchfix`/`--fixit` to use others.
Medians over `--repeat` runs for mend; TorchFix and Fixit take minutes per run and run once unless
`--tool-repeat` says otherwise. The table reports wall seconds, files/s, lines/s and each tool's time
relative to mend cold. ``--baseline-ref REF`` times mend as of commit ``REF`` alongside (a temporary git
worktree, this environment's python and dependencies), alternating run by run, and prints the ratios.
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

HERE = Path(__file__).resolve().parent


def find_tool(name: str, given: str | None) -> str | None:
    if given:
        return given
    cand = HERE / ".tools-venv" / "bin" / name
    if cand.exists():
        return str(cand)
    return shutil.which(name)


def default_tree(n: int, dest: Path) -> Path:
    import transformers  # noqa: PLC0415  (only to locate the installed package)

    models = Path(transformers.__file__).parent / "models"
    files = sorted(models.rglob("modeling_*.py"))[:n]
    out = dest / "tree"
    for f in files:
        target = out / f.relative_to(models)
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(f, target)
    return out


def timed(cmd: list[str], cwd: Path, ok_codes=(0, 1)) -> tuple[float, int, str]:
    t0 = time.perf_counter()
    proc = subprocess.run(cmd, cwd=cwd, capture_output=True, text=True)
    dt = time.perf_counter() - t0
    if proc.returncode not in ok_codes:
        sys.stderr.write(f"warning: {' '.join(cmd[:3])} exited {proc.returncode}: {proc.stderr[-500:]}\n")
    return dt, proc.returncode, proc.stdout


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--tree", type=Path, help="folder to check (default: a transformers subset)")
    ap.add_argument("--files", type=int, default=150, help="size of the default subset")
    ap.add_argument("--repeat", type=int, default=3, help="runs of mend cold/warm (median)")
    ap.add_argument("--tool-repeat", type=int, default=1, help="runs of TorchFix/Fixit (median)")
    ap.add_argument("--torchfix", help="path of the torchfix executable")
    ap.add_argument("--fixit", help="path of the fixit executable")
    ap.add_argument("--skip-tools", action="store_true", help="time mend only")
    ap.add_argument("--package", action="store_true", help="check the whole installed transformers package")
    ap.add_argument("--against", metavar="PYTHON",
                    help="also time the mend of another environment (its python), alternating run by run")
    ap.add_argument("--baseline-ref", metavar="GITREF",
                    help="also time mend as of this commit of the repository (a temporary git worktree run "
                         "with this environment's python), alternating run by run")
    args = ap.parse_args()
    if args.baseline_ref:
        with tempfile.TemporaryDirectory(prefix="mend-baseline-") as tmp:
            args.against = baseline_python(args.baseline_ref, Path(tmp))
            try:
                run(args)
            finally:
                subprocess.run(["git", "-C", str(HERE.parent), "worktree", "remove", "--force", str(Path(tmp) / "mend")],
                               capture_output=True)
        return
    run(args)


# A python whose `mend` is another checkout: the editable install's import hook is dropped and the checkout
# (a worktree in a folder named `mend`) comes first on the path.
_BASELINE_PYTHON = """#!{python}
import runpy, sys
sys.meta_path[:] = [f for f in sys.meta_path if "editable" not in repr(f).lower()]
sys.path.insert(0, {shim!r})
assert sys.argv[1] == "-m", sys.argv
sys.argv = sys.argv[2:]
runpy.run_module(sys.argv[0], run_name="__main__", alter_sys=True)
"""


def baseline_python(ref: str, tmp: Path) -> str:
    """A python script that runs ``-m mend.cli`` from a worktree of ``ref`` (at ``tmp/mend``)."""
    subprocess.run(["git", "-C", str(HERE.parent), "worktree", "add", "--detach", str(tmp / "mend"), ref],
                   check=True, capture_output=True)
    wrapper = tmp / "python"
    wrapper.write_text(_BASELINE_PYTHON.format(python=sys.executable, shim=str(tmp)))
    wrapper.chmod(0o755)
    return str(wrapper)


def run(args: argparse.Namespace) -> None:
    if args.package:
        import importlib.util

        spec = importlib.util.find_spec("transformers")
        args.tree = Path(next(iter(spec.submodule_search_locations)))

    cores = os.cpu_count() or 1
    with tempfile.TemporaryDirectory(prefix="mend-bench-") as tmp:
        tmpdir = Path(tmp)
        tree = args.tree.resolve() if args.tree else default_tree(args.files, tmpdir)
        files = sorted(tree.rglob("*.py"))
        lines = sum(len(f.read_bytes().splitlines()) for f in files)
        print(f"tree: {tree} ({len(files)} files, {lines} lines), {cores} cores, python {sys.version.split()[0]}")
        if args.against:
            print(f"baseline: {args.baseline_ref or args.against}")
        pythons = [("mend", sys.executable)] + ([("baseline", args.against)] if args.against else [])
        times: dict[str, tuple[list[float], list[float]]] = {name: ([], []) for name, _ in pythons}
        outs: dict[str, str] = {}
        for i in range(args.repeat):
            for name, python in pythons:  # alternating, so both see the same load
                cold, warm = times[name]
                mend = [python, "-m", "mend.cli", "check", "--exit-zero", "--isolated", "-q"]
                cache = tmpdir / f"cache-{name}-{i}"
                dt, _, out = timed([*mend, "--cache-dir", str(cache), str(tree)], tmpdir)
                cold.append(dt)
                dt, _, out2 = timed([*mend, "--cache-dir", str(cache), str(tree)], tmpdir)
                warm.append(dt)
                assert out == out2, "a warm run must report exactly what the cold run reported"
                outs[name] = out
        cold, warm = times["mend"]
        rows = []
        for name, _ in pythons:
            findings = len(outs[name].splitlines())
            rows += [(f"{name} (cold)", statistics.median(times[name][0]), f"{findings} findings"),
                     (f"{name} (warm, cached)", statistics.median(times[name][1]), "same findings")]

        if not args.skip_tools:
            tf = find_tool("torchfix", args.torchfix)
            fx = find_tool("fixit", args.fixit)
            for label, exe, cmd in (
                ("TorchFix --select ALL", tf, lambda e: [e, "--select", "ALL", "-j", str(cores), str(tree)]),
                ("Fixit lint", fx, lambda e: [e, "lint", str(tree)]),
            ):
                if exe is None:
                    rows.append((label, float("nan"), "not installed (see --help)"))
                    continue
                times = [timed(cmd(exe), tmpdir, ok_codes=(0, 1, 2, 3, 4, 5, 6, 7))[0] for _ in range(args.tool_repeat)]
                rows.append((label, statistics.median(times), ""))

        base = rows[0][1]
        print()
        print(f"| {'tool':24s} | {'seconds':>9s} | {'files/s':>9s} | {'lines/s':>10s} | {'x mend cold':>11s} | note")
        print(f"|{'-' * 26}|{'-' * 11}|{'-' * 11}|{'-' * 12}|{'-' * 13}|------")
        for label, secs, note in rows:
            if secs != secs:  # NaN
                print(f"| {label:24s} | {'-':>9s} | {'-':>9s} | {'-':>10s} | {'-':>11s} | {note}")
                continue
            print(f"| {label:24s} | {secs:9.2f} | {len(files) / secs:9.1f} | {lines / secs:10.0f} | "
                  f"{secs / base:10.2f}x | {note}")
        print()
        for name, _ in pythons:
            cold, warm = times[name]
            print(f"{name} cold runs: {', '.join(f'{t:.2f}' for t in cold)} s; warm runs: "
                  f"{', '.join(f'{t:.2f}' for t in warm)} s (median of {args.repeat})")
        if args.against:
            for i, what in enumerate(("cold", "warm")):
                ratio = statistics.median(times["mend"][i]) / statistics.median(times["baseline"][i])
                print(f"mend / baseline, {what}: {ratio:.2f}x")


if __name__ == "__main__":
    main()

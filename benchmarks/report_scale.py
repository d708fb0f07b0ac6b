"""How does `mend report --format html` scale with the number of recorded sites?

    python benchmarks/report_scale.py [--sites 1000,2000,4000,8000] [--per-file 100] [--no-static]

For each count, writes a project into a temporary folder (files of ``--per-file`` compiled functions, each
breaking the graph at a ``print`` or a data-dependent ``if``) and a data file recording one break site per
function (plus a recompile and a region per file), then times ``mend report --format html -o report.html``
on it as its own process, as a user runs it (the static analysis of the files included, unless
``--no-static``). Prints one row per count: sites, seconds, seconds per 1,000 sites, the page's size.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from mend.analyzers.runtime import data as rd

FUNCTION = '''

@torch.compile
def step_{i}(x):
    y = x * {i}
    {line}
    return y + 1
'''
KINDS = [  # the break line, its gb_type, registry id and message
    ('print("step", y.shape)', "Failed to trace builtin operator", "GB0059",
     "Dynamo does not know how to trace builtin operator `print` with argument types ['str']"),
    ("if y.sum() > 0: y = y - 1", "Data-dependent branching", "GB0170", "Detected data-dependent branching"),
]


def project(root: Path, sites: int, per_file: int) -> Path:
    """A project of ``sites`` break sites under ``root`` and its data file (``.mend/run.json``)."""
    data = rd.RunData(root=str(root), runs=[rd.RunInfo(argv=["train.py"], exit_code=0, torch="2.13.0")])
    for f in range((sites + per_file - 1) // per_file):
        name = f"pkg/module_{f}.py"
        parts = ["import torch\n"]
        for i in range(min(per_file, sites - f * per_file)):
            text, gb_type, registry, message = KINDS[i % len(KINDS)]
            parts.append(FUNCTION.format(i=i, line=text))
            line = 7 * i + 7  # after `import torch`, 7 lines a function: the break is its sixth
            data.breaks.append(rd.BreakSite(name, line, f"step_{i}", gb_type, registry, message, count=1 + i % 3,
                                            source_line=text.strip(), regions=[f"{name}:{line - 3}:step_{i}"]))
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("".join(parts))
        data.recompiles.append(rd.RecompileSite(name, 6, "step_0", "int-attribute", count=2, guard="self.n == 1"))
        data.regions.append(rd.Region(f"{name}:4:step_0", name, 4, "step_0", graphs=2, compiles=3, breaks=1))
    out = root / ".mend" / "run.json"
    rd.save(data, out)
    return out


def time_report(root: Path, data_file: Path, static: bool) -> tuple[float, int]:
    """Seconds ``mend report --format html`` takes on ``data_file`` (its own process), and the page's bytes."""
    page = root / "report.html"
    cmd = [sys.executable, "-m", "mend.cli", "report", "--data-file", str(data_file), "--format", "html",
           "-o", str(page), *([] if static else ["--no-static"])]
    t0 = time.perf_counter()
    subprocess.run(cmd, cwd=root, check=True, capture_output=True)
    return time.perf_counter() - t0, page.stat().st_size


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sites", default="1000,2000,4000,8000")
    parser.add_argument("--per-file", type=int, default=100)
    parser.add_argument("--no-static", action="store_true")
    args = parser.parse_args()
    print(f"{'sites':>6} {'seconds':>8} {'s/1k':>6} {'page KB':>8}")
    for n in [int(s) for s in args.sites.split(",")]:
        with tempfile.TemporaryDirectory() as tmp:
            root = Path(tmp)
            seconds, size = time_report(root, project(root, n, args.per_file), not args.no_static)
        print(f"{n:>6} {seconds:>8.2f} {seconds / n * 1000:>6.2f} {size / 1024:>8.0f}", flush=True)


if __name__ == "__main__":
    main()

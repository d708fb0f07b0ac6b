"""The import hook against the repaired copy, row by row, on the model zoo.

    python -m benchmarks.zoo --subset breaking --sources original,safe,hook --jobs 1 --json zoo.json
    python benchmarks/zoo_hook.py zoo.json [--reference safe --candidate hook]

Source ``safe`` is a copy of transformers repaired by ``mend fix``; source ``hook`` is the installed package
repaired as it is imported (``mend.repair_imports(["transformers"])``). For every row both ran, this prints
whether they agree on the status, the graphs, every break site (file, line, Dynamo reason, occurrences),
the recompiles, and the eager and compiled outputs (bit for bit, from the ``.pt`` files the zoo saved).
Exit code 1 when any row differs.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # benchmarks.zoo: the harness is not installed


def _sites(rec) -> list[tuple]:
    return sorted((b.path, b.line, b.gb_type, b.count, b.frame_skip) for b in rec.breaks)


def _recompiles(rec) -> list[tuple]:
    return sorted((r.path, r.line, r.kind, r.count) for r in rec.recompiles)


def _outputs(a, b) -> tuple[str, str]:
    """(eager, compiled): 'same' (bit for bit), 'differs', or '-' when a side has no outputs."""
    import torch

    from benchmarks.zoo.compare import compare

    if not (a.outputs and b.outputs and Path(a.outputs).exists() and Path(b.outputs).exists()):
        return "-", "-"
    x, y = torch.load(a.outputs, weights_only=True), torch.load(b.outputs, weights_only=True)
    out = []
    for part in ("eager", "compiled"):
        if x[part] is None or y[part] is None:
            out.append("-" if x[part] is None and y[part] is None else "differs")
        else:
            out.append("same" if compare(x[part], y[part]).same else "differs")
    return out[0], out[1]


def main(argv: list[str] | None = None) -> int:
    from benchmarks.zoo import records as R

    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("json", type=Path, help="a zoo result (python -m benchmarks.zoo --json) with both sources")
    ap.add_argument("--reference", default="safe")
    ap.add_argument("--candidate", default="hook")
    a = ap.parse_args(argv)
    results = R.load(a.json)
    ref, cand = results.by(a.reference), results.by(a.candidate)
    rows = [n for n in ref if n in cand]
    if not rows:
        print(f"no row ran in both {a.reference} and {a.candidate}", file=sys.stderr)
        return 2
    header = ["row", "status", "graphs", "break sites", "same sites", "recompiles", "eager", "compiled"]
    table, differ = [header], 0
    for name in rows:
        r, c = ref[name], cand[name]
        eager, compiled = _outputs(r, c)
        same = (r.status == c.status and r.graphs == c.graphs and _sites(r) == _sites(c)
                and _recompiles(r) == _recompiles(c) and eager != "differs" and compiled != "differs")
        differ += not same
        table.append([name, r.status if r.status == c.status else f"{r.status} / {c.status}",
                      str(r.graphs) if r.graphs == c.graphs else f"{r.graphs} / {c.graphs}",
                      str(len(r.breaks)) if len(r.breaks) == len(c.breaks) else f"{len(r.breaks)} / {len(c.breaks)}",
                      "yes" if _sites(r) == _sites(c) else "NO",
                      "same" if _recompiles(r) == _recompiles(c) else "differ", eager, compiled])
    widths = [max(len(row[i]) for row in table) for i in range(len(header))]
    print(f"{a.candidate} vs {a.reference} ({results.versions.get('transformers', '?')}); "
          f"'a / b' = {a.reference} / {a.candidate}")
    for row in table:
        print("  ".join(cell.ljust(w) for cell, w in zip(row, widths)))
    print(f"{len(rows) - differ} of {len(rows)} rows identical (status, graphs, break sites with line and "
          f"count, recompiles, eager and compiled outputs bit for bit)")
    return 1 if differ else 0


if __name__ == "__main__":
    raise SystemExit(main())

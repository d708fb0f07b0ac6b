"""``python -m benchmarks.zoo`` (from the repository root): run the model zoo and print its table.

    python -m benchmarks.zoo --jobs 2 --json zoo.json                  # every type, 3 sources, fp32
    python -m benchmarks.zoo --models sam,phi3:longrope --sources original,safe
    python -m benchmarks.zoo --subset breaking --sources original,safe  # the rows that break (checked-in list)
    python -m benchmarks.zoo --subset breaking --from-json zoo.json     # ... as found by a previous run
    python -m benchmarks.zoo --show zoo.json [--markdown]               # print a previous result
    python -m benchmarks.zoo --modes eval,train --subset breaking       # training steps beside eval
    python -m benchmarks.zoo --suite timm --modes eval,train            # a library's model zoo (corpus.md)

Exit code 1 when a safe fix changed an eager output (or made a row fail that ran before).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from benchmarks.zoo import records as R
from benchmarks.zoo.runner import Settings, run_zoo
from benchmarks.zoo.sources import SOURCES
from benchmarks.zoo.specs import ModelSpec, specs
from benchmarks.zoo.suites import MODES, SUITES
from benchmarks.zoo.suites import rows as suite_rows
from benchmarks.zoo.table import render_results, summarize

BREAKING = Path(__file__).resolve().parent / "breaking.json"


def _breaking(results: R.Results) -> list[str]:
    return [r.name for r in results.records if r.source == "original" and r.status == R.OK and r.breaks]


def breaking_rows(from_json: Path | None = None) -> list[str]:
    """Rows that break in the original source: from a previous result, else the checked-in list."""
    if from_json is not None:
        return _breaking(R.load(from_json))
    return list(json.loads(BREAKING.read_text())["rows"])


def ci_rows() -> list[str]:
    """The part of the checked-in breaking rows that CI runs: those the safe repair reaches (see write_breaking)."""
    return list(json.loads(BREAKING.read_text())["ci"])


def write_breaking(results: R.Results, path: Path) -> list[str]:
    """Write the rows that break (original source) and, as ``ci``, those of them the safe repair reaches: their
    break sites change, their eager output changes or they stop running (where a fix can go wrong)."""
    rows = _breaking(results)
    original, safe = results.by("original"), results.by("safe")
    ci = [n for n in rows if n in safe and (safe[n].status != R.OK or safe[n].eager_same is False
                                          or len(safe[n].breaks) != len(original[n].breaks))]
    path.write_text(json.dumps({
        "about": "zoo rows whose original source breaks the graph (fp32, tiny profile); ci: those of them whose "
                 "break sites or eager output the safe fix changes", "command": " ".join(results.command),
        "versions": results.versions, "created": results.created, "rows": rows, "ci": ci}, indent=1) + "\n")
    return rows


def select(a: argparse.Namespace) -> list[ModelSpec] | list[str]:
    if a.models and a.subset:
        raise SystemExit("--models and --subset exclude each other")
    if a.suite != "transformers":
        every = suite_rows(a.suite)
        if a.subset:
            return breaking_rows(a.from_json) if a.from_json else every
        if not a.models:
            return every
        names = [n.strip() for n in a.models.split(",") if n.strip()]
        unknown = [n for n in names if n not in every]
        if unknown:
            raise SystemExit(f"unknown row(s) of suite {a.suite}: {', '.join(unknown)}")
        return names
    if a.subset == "breaking":
        return specs(breaking_rows(a.from_json), variants=False)
    names = [n.strip() for n in a.models.split(",") if n.strip()] if a.models else None
    return specs(names, variants=a.variants)


def parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(prog="python -m benchmarks.zoo", description=__doc__.splitlines()[0])
    ap.add_argument("--models", help="comma-separated types or rows (type:variant); default: every type")
    ap.add_argument("--variants", action=argparse.BooleanOptionalAction, default=True,
                    help="add each type's variants after its base row (default: on)")
    ap.add_argument("--subset", choices=["breaking"], help="only the rows that break (checked-in list or --from-json)")
    ap.add_argument("--from-json", type=Path, help="a previous result to take --subset from")
    ap.add_argument("--sources", default="original,safe,unsafe", help=f"comma-separated of {', '.join(SOURCES)}")
    ap.add_argument("--suite", default="transformers", choices=SUITES,
                    help="what runs: the transformers zoo, a library's model zoo, or repos (see docs/corpus.md)")
    ap.add_argument("--checkouts", type=Path, help="repos: the folder the manifest's repositories are checked out in")
    ap.add_argument("--modes", "--mode", default="eval",
                    help="comma-separated of eval (forward, no_grad) and train (train(), loss, backward)")
    ap.add_argument("--dtype", default="fp32", choices=["fp32", "fp16", "bf16"])
    ap.add_argument("--profile", default="tiny", choices=["tiny", "real"])
    ap.add_argument("--backend", default="eager", help="torch.compile backend (breaks are Dynamo's either way)")
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--dynamo-capture", action="store_true",
                    help="switch Dynamo's scalar and dynamic-shape capture on globally in every worker (a baseline)")
    ap.add_argument("--jobs", type=int, default=1, help="worker processes at a time")
    ap.add_argument("--timeout", type=float, default=300.0, help="seconds per row")
    ap.add_argument("--json", type=Path, help="write every record here (versioned schema)")
    ap.add_argument("--out", type=Path, help="folder for outputs (.pt) and worker logs (default: a temp folder)")
    ap.add_argument("--cache-dir", type=Path, help="repaired copies (default: $MEND_ZOO_CACHE or ~/.cache/mend/zoo)")
    ap.add_argument("--scope", help="what mend fix repairs: comma-separated package paths, or 'traced' (the files "
                    "Dynamo traced for the selected rows; the original source runs first); default: the whole package")
    ap.add_argument("--no-second-fix", action="store_true", help="skip the check that a second mend fix changes nothing")
    ap.add_argument("--write-breaking", type=Path, help="write the rows that break (original) as a subset list")
    ap.add_argument("--markdown", action="store_true", help="print the tables as Markdown")
    ap.add_argument("--show", type=Path, help="print the table of a previous --json result; run nothing")
    ap.add_argument("-q", "--quiet", action="store_true", help="no progress lines")
    return ap


def main(argv: list[str] | None = None) -> int:
    a = parser().parse_args(argv)
    if a.show:
        results = R.load(a.show)
    else:
        sources = [s.strip() for s in a.sources.split(",") if s.strip()]
        bad = [s for s in sources if s not in SOURCES]
        if bad:
            raise SystemExit(f"unknown source(s) {', '.join(bad)}; choose from {', '.join(SOURCES)}")
        modes = [m.strip() for m in a.modes.split(",") if m.strip()]
        if not modes or any(m not in MODES for m in modes):
            raise SystemExit(f"--modes: choose from {', '.join(MODES)}")
        if a.suite == "repos" and a.checkouts is None:
            raise SystemExit("--suite repos needs --checkouts DIR (docs/corpus.md says how to make it)")
        rows = select(a)
        total = len(rows) * len(sources) * len(modes)
        done = [0]

        seen: list[R.Record] = []

        def progress(r: R.Record) -> None:
            done[0] += 1
            seen.append(r)
            if a.json and done[0] % 10 == 0:  # a run cut short still leaves its records (not compared yet)
                R.save(R.Results(records=list(seen), command=list(sys.argv), settings={"suite": a.suite}),
                       a.json.with_name(a.json.name + ".partial"))
            if not a.quiet:
                what = (f"graphs {r.graphs} breaks {len(r.breaks)}" if r.status == R.OK else r.error[:100])
                print(f"[{done[0]}/{total}] {r.source:<8} {r.mode:<5} {r.name:<32} {r.status:<14} {what} "
                      f"({r.seconds.get('total', 0):.1f} s)", file=sys.stderr, flush=True)

        settings = Settings(dtype=a.dtype, profile=a.profile, backend=a.backend, device=a.device,
                            timeout=a.timeout, jobs=a.jobs, capture=a.dynamo_capture, suite=a.suite)
        scope = a.scope if a.scope in (None, "traced") else [s for s in a.scope.split(",") if s]
        if a.suite == "repos" and scope is None:  # what a user fixes: the files that hold each model
            from benchmarks.zoo.repos import model_files

            scope = model_files(rows)
        results = run_zoo(rows, sources, settings, out_dir=a.out, cache_dir=a.cache_dir, scope=scope,
                          check_idempotent=not a.no_second_fix, progress=progress,
                          log=lambda m: print(m, file=sys.stderr, flush=True), modes=modes,
                          folder=a.checkouts)
        if a.json:
            R.save(results, a.json)
        if a.write_breaking:
            write_breaking(results, a.write_breaking)
    print(render_results(results, markdown=a.markdown))
    summaries = [summarize(results, m) for m in results.modes]
    safe_changes = [c for s in summaries for c in s.changed + s.rng_changed if c.source == "safe"]
    return 1 if safe_changes else 0


if __name__ == "__main__":
    raise SystemExit(main())

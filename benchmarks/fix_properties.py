"""Differential property test of ``mend fix``, long profile: generated programs, original vs rewritten.

Generates ``--examples`` programs (``tests/rewriter/propgen.py``), rewrites each with the safe and the
unsafe fixes, and runs original and rewritten side by side (``tests/rewriter/differential.py``:
eager on the full input grid; compiled with ``backend="eager"`` on every ``--compiled-every``-th
program). Prints, per fix family:

* per rule: sites the analyzer found, repaired by the safe run, repaired only by the unsafe run,
  left (declined), and programs whose rewrite failed a check;
* per repair kind: how often applied (safe / unsafe), documented differences used, failing programs;
* declines by reason;
* every failure class (stage, fix run, what differs, repairs applied), and per repair with failing
  programs a minimal example that fails with that repair applied alone: the generator searches
  again among programs of the blocks of the smallest failing program seen, and Hypothesis shrinks
  the first failure it finds.

    python benchmarks/fix_properties.py --examples 2000
    python benchmarks/fix_properties.py --examples 300 --compiled-every 1 --seed 1
    python benchmarks/fix_properties.py --examples 300 --policies   # also --side-effects defer / drop
    nice python benchmarks/fix_properties.py --examples 2000 --minutes 15   # as many as 15 minutes allow
"""

from __future__ import annotations

import argparse
import re
import sys
import time
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from hypothesis import HealthCheck, Phase, given, seed, settings

from tests.rewriter.differential import Report, check_program, explain, fix_kind
from tests.rewriter.propgen import BLOCKS, Program, programs


@dataclass
class Tally:
    runs: tuple[str, ...]  # the fix runs compared (keys of differential.OPTIONS), "safe" and "unsafe" first
    programs: int = 0
    seconds: list[float] = field(default_factory=list)
    blocks: Counter = field(default_factory=Counter)  # generated block kinds
    sites: Counter = field(default_factory=Counter)  # rule -> findings in the originals
    fixed: dict[str, Counter] = field(default_factory=lambda: defaultdict(Counter))  # run -> rule -> repaired
    left: Counter = field(default_factory=Counter)  # rule -> findings the unsafe run leaves
    failing_rules: Counter = field(default_factory=Counter)  # rule -> programs with a failing run
    kinds: dict[str, Counter] = field(default_factory=lambda: defaultdict(Counter))  # run -> repair kind -> n
    failing_kinds: Counter = field(default_factory=Counter)  # repair kind -> failing programs applying it
    failing_alone: Counter = field(default_factory=Counter)  # ... where the failing run applied it alone
    example: dict = field(default_factory=dict)  # repair kind -> (alone?, compiled-only?, smallest program)
    allowed: Counter = field(default_factory=Counter)
    declines: Counter = field(default_factory=Counter)  # (rule, reason) -> sites
    classes: Counter = field(default_factory=Counter)  # failure class -> programs
    first: dict = field(default_factory=dict)  # failure class -> the smallest failing program seen
    torch_differences: int = 0
    with_failure: int = 0

    def add(self, report: Report, seconds: float) -> None:
        self.programs += 1
        self.seconds.append(seconds)
        self.blocks.update(report.program.blocks)
        self.torch_differences += report.torch_differences
        self.allowed += report.allowed
        self.sites += Counter(d.code for d in report.diagnostics)
        for run_, rw in report.rewrites.items():
            self.fixed[run_] += Counter(a.code for a in rw.result.applied)
            self.kinds[run_] += Counter(fix_kind(a.message) for a in rw.result.applied)
        for r in report.rewrites["unsafe"].result.remaining:
            self.left[r.diagnostic.code] += 1
            self.declines[(r.diagnostic.code, _reason(r.reason))] += 1
        self.with_failure += bool(report.failures)
        for run_ in {f.options for f in report.failures}:
            rw = report.rewrites[run_]
            self.failing_rules.update({a.code for a in rw.result.applied})
            self.failing_kinds.update(set(rw.kinds))
            alone = len(rw.kinds) == 1
            self.failing_alone.update(set(rw.kinds) if alone else ())
            compiled_only = all(f.stage == "compiled" for f in report.failures if f.options == run_)
            for kind in rw.kinds:
                best = self.example.get(kind)
                if best is None or (alone, -len(report.program.source)) > (best[0], -len(best[2].source)):
                    self.example[kind] = (alone, compiled_only, report.program)
        for key in {failure_class(report, f) for f in report.failures}:
            self.classes[key] += 1
            best = self.first.get(key)
            if best is None or len(report.program.source) < len(best.source):
                self.first[key] = report.program


def failure_class(report: Report, f) -> tuple[str, str, str, str]:
    kinds = ",".join(sorted(report.rewrites[f.options].kinds)) or "-"
    return (f.stage, f.options, f.kind, kinds)


def _reason(text: str) -> str:
    """A decline reason with the quoted code elided, so equal reasons group."""
    text = re.sub(r"`[^`]*`", "`…`", text)
    return text if len(text) <= 110 else text[:107] + "..."


class _OutOfTime(Exception):
    pass


def run(examples: int, compiled_every: int, seed_: int, runs: tuple[str, ...], minutes: float = 0,
        blocks: tuple[str, ...] = tuple(BLOCKS)) -> Tally:
    """Check ``examples`` generated programs of ``blocks``, or as many as ``minutes`` of wall time allow (0: no
    limit)."""
    tally = Tally(runs)
    deadline = time.monotonic() + minutes * 60 if minutes else float("inf")

    @seed(seed_)
    @settings(max_examples=examples, database=None, deadline=None, phases=[Phase.generate],
              suppress_health_check=list(HealthCheck))
    @given(programs(blocks=blocks))
    def each(program: Program) -> None:
        if time.monotonic() > deadline:
            raise _OutOfTime
        start = time.perf_counter()
        compiled = compiled_every > 0 and tally.programs % compiled_every == 0
        report = check_program(program, compiled=compiled, options=runs)
        tally.add(report, time.perf_counter() - start)

    try:
        each()
    except _OutOfTime:
        print(f"time budget of {minutes:g} min spent: {tally.programs} of {examples} programs checked")
    return tally


class _Found(Exception):
    pass


def minimal_example(kind: str, first: Program, compiled: bool, budget: int, seed_: int,
                    runs: tuple[str, ...]) -> Report | None:
    """A small program that fails with repair ``kind`` applied alone: the generator searches programs
    of the blocks of ``first`` (the smallest failing program seen with that repair) and Hypothesis
    shrinks the first that fails. None when the budget finds none."""
    blocks = tuple(sorted({_block_of(b) for b in first.blocks}))
    found: list[Report] = []

    @seed(seed_)
    @settings(max_examples=budget, database=None, deadline=None, report_multiple_bugs=False,
              phases=[Phase.generate, Phase.shrink], suppress_health_check=list(HealthCheck))
    @given(programs(blocks=blocks, max_blocks=len(first.blocks)))
    def search(program: Program) -> None:
        report = check_program(program, eager=not compiled, compiled=compiled, options=runs)
        if any(set(report.rewrites[f.options].kinds) == {kind} for f in report.failures):
            found[:] = [report]
            raise _Found

    try:
        search()
    except _Found:
        return found[0]
    return None


def _block_of(kind: str) -> str:
    return {"float": "scalars", "tolist": "scalars", "masked": "scalars", "deepcopy": "scalars",
            "capture-scoped": "sizes"}.get(kind, kind)


def table(rows: list[list], header: list[str]) -> str:
    widths = [max(len(str(r[i])) for r in rows + [header]) for i in range(len(header))]
    line = lambda r: "  ".join(str(c).ljust(w) if i == 0 else str(c).rjust(w) for i, (c, w) in enumerate(zip(r, widths)))  # noqa: E731
    return "\n".join([line(header), line(["-" * w for w in widths])] + [line(r) for r in rows])


def print_tally(t: Tally) -> None:
    secs = sorted(t.seconds)
    print(f"programs: {t.programs}  with a failure: {t.with_failure}  "
          f"median {secs[len(secs) // 2]:.2f} s/program, total {sum(secs):.0f} s  "
          f"(compiled differences the original shows too, torch's own: {t.torch_differences})")
    print("blocks generated: " + ", ".join(f"{k} {n}" for k, n in t.blocks.most_common()) + "\n")
    rules = sorted(set(t.sites) | {r for c in t.fixed.values() for r in c})
    print(table([[r, t.sites[r], t.fixed["safe"][r], max(t.fixed["unsafe"][r] - t.fixed["safe"][r], 0), t.left[r],
                  t.failing_rules[r]] for r in rules],
                ["rule", "found", "fixed safe", "fixed unsafe (more)", "declined", "failing programs"]))
    print()
    kinds = sorted({k for c in t.kinds.values() for k in c})
    print(table([[k] + [t.kinds[r][k] for r in t.runs]
                 + [sum(v for a, v in t.allowed.items() if a.startswith(k + ":")), t.failing_kinds[k],
                    t.failing_alone[k]] for k in kinds],
                ["repair"] + [f"applied ({r})" for r in t.runs]
                + ["documented differences", "failing programs", "... applying it alone"]))
    print()
    print(table([[f"{rule} {reason}", n] for (rule, reason), n in t.declines.most_common()],
                ["declined by the unsafe run: rule and reason", "sites"]))
    print()
    if t.classes:
        print(table([[" / ".join(k), n] for k, n in t.classes.most_common()],
                    ["failure class: stage / run / what differs / repairs applied", "programs"]))
    else:
        print("no failures")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--examples", type=int, default=500, help="programs to generate (default 500)")
    ap.add_argument("--compiled-every", type=int, default=10,
                    help="also run every N-th program compiled (0: never; default 10)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--policies", action="store_true",
                    help="also compare the unsafe side-effect policies (--side-effects defer, drop)")
    ap.add_argument("--shrink-budget", type=int, default=150,
                    help="programs searched per failure class for a minimal example (0: no search)")
    ap.add_argument("--minutes", type=float, default=0,
                    help="stop generating programs after this much wall time (0: no limit); a shared machine's "
                         "load decides how many fit")
    ap.add_argument("--blocks", default=",".join(BLOCKS),
                    help=f"the generator's blocks to draw from (default all: {','.join(BLOCKS)})")
    args = ap.parse_args(argv)
    blocks = tuple(b for b in args.blocks.split(",") if b)
    unknown = [b for b in blocks if b not in BLOCKS]
    if unknown or not blocks:
        ap.error(f"unknown blocks: {', '.join(unknown) or '(none given)'}")
    runs = ("safe", "unsafe", "defer", "drop") if args.policies else ("safe", "unsafe")
    tally = run(args.examples, args.compiled_every, args.seed, runs, args.minutes, blocks)
    print_tally(tally)
    if tally.example:
        print("\nminimal examples, per repair with failing programs")
        for kind, _ in tally.failing_kinds.most_common():
            alone, compiled, first = tally.example[kind]
            report = None
            if args.shrink_budget:
                report = minimal_example(kind, first, compiled, args.shrink_budget, args.seed, runs)
            note = "shrunk"
            if report is None:
                report = check_program(first, eager=not compiled, compiled=compiled, options=runs)
                note = "the smallest seen" if alone else "no failing program applies it alone; the smallest seen"
            print(f"\n=== {kind} ({note})")
            print(explain(report))
    return 1 if tally.classes else 0


if __name__ == "__main__":
    sys.exit(main())

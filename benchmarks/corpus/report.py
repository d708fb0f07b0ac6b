"""The corpus report: what a zoo result (any suite) says about mend, row by row and in total.

    python -m benchmarks.corpus.report RESULT.json [--markdown] [--json OUT] [--limit N]

From a result of ``python -m benchmarks.zoo`` (original, safe and unsafe sources; eval and/or train) and the
original source's files on disk (the package, or the folder of checkouts):

* per row (and per repository): recorded break sites, how many ``mend check`` finds, break sites and graphs
  original -> safe -> unsafe, eager outputs/gradients changed, messages lost/added/reordered;
* ``mend check`` recall and precision against the recorded sites, per mode (a finding "(only when
  self.training)" is judged on training rows only; the scoring is :mod:`benchmarks.zoo.score`'s: a finding
  matches a site whose line lies in its span, a finding is judged when a line it names ran);
* rows that end with more break sites or graphs after a fix than before (each listed);
* fixability: for every finding in the fixed scope, what ``mend check`` promised (a safe or unsafe fix, none)
  against what ``mend fix`` did with the same options (applied, or declined with its reason);
* the classes of code the recorded sites are (LayerDrop, boolean-mask stores, comprehensions over tensors,
  unique/nonzero, detection post-processing, ...), counted, with examples;
* every figure for the rows used to build repairs and for the held-out third apart: the repositories'
  split is the manifest's, timm's and diffusers' ``benchmarks/corpus/held_out.json``
  (:func:`benchmarks.zoo.suites.held_out_rows`); the missed sites and the classes of code list the rows used for
  building only.

Nothing is run but ``mend check`` and ``mend fix --diff`` (no torch import).
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from benchmarks.zoo import records as R
from benchmarks.zoo import score as S
from benchmarks.zoo.runner import traced_files
from benchmarks.zoo.suites import held_out_rows
from benchmarks.zoo.table import worse_rows
from mend.rewriter.results import line_map, original_line

SOURCES = ("original", "safe", "unsafe")


# ---- classes of code the recorded sites are (ordered: the first match wins)

CODE_CLASSES: list[tuple[str, str]] = [
    ("LayerDrop / random layer or path skip",
     r"layerdrop|layer_drop|dropout_probability|drop_path|random\(\)\s*<|rand\([^)]*\)\s*<|to_drop|layer_dropout"),
    ("logging, print, warnings", r"\blogger\.|\blogging\.|\bprint\(|warnings\.warn|\.warn\(|warning_once|tqdm"),
    ("unique / nonzero feeding pad_sequence or a loop", r"pad_sequence|unique|nonzero|unique_consecutive"),
    ("detection post-processing (NMS, RoI, boxes, top-k by score)",
     r"\bnms\b|batched_nms|roi|box|anchor|keep\b|scores?\b.*(>|topk)|topk|postprocess|degenerate|matcher|"
     r"linear_sum_assignment"),
    ("boolean-mask store or update (x[mask] = v, x[mask] += v)", r"\w\[[^\]]*\]\s*(\+|-|\*|/)?=(?!=)"),
    ("comprehension or filter over tensors", r"\bfor\b.+\bin\b"),
    ("slice bound or size from a tensor", r"\[[^\]]*:[^\]]*\]|\.size\(|\.shape|range\(|arange|split\(|view\(|reshape"),
    ("tensor used as a Python number (.item(), int(), tolist)", r"\.item\(\)|\bint\(|\bfloat\(|tolist\(|\bbool\("),
    ("branch or assertion on a tensor", r"^\s*(if|elif|while|assert)\b|\bif\b.+\belse\b"),
]
_CODE = [(name, re.compile(p)) for name, p in CODE_CLASSES]
OTHER = "other"


def code_class(site: Any) -> str:
    text = (getattr(site, "source_line", "") or "").strip()
    if getattr(site, "reason_class", "") == "side effects":
        return CODE_CLASSES[1][0]
    for name, pat in _CODE:
        if pat.search(text):
            return name
    return OTHER


# ---- per row


@dataclass
class RowReport:
    name: str
    mode: str
    group: str  # the repository (rows of one driver) or the row
    held_out: bool = False
    status: dict[str, str] = field(default_factory=dict)
    breaks: dict[str, int | None] = field(default_factory=dict)
    graphs: dict[str, int | None] = field(default_factory=dict)
    sites: int = 0
    found: int = 0
    eager_changed: list[str] = field(default_factory=list)  # sources whose eager step differs from the original's
    rng_changed: list[str] = field(default_factory=list)
    messages_failing: list[str] = field(default_factory=list)  # "safe compiled: lost 1 ..."


def _group(name: str, suite: str) -> str:
    return name.partition(":")[0] if suite == "repos" else name


def row_reports(results: R.Results, scores: dict[str, S.ZooScore], held: set[str]) -> list[RowReport]:
    suite = results.settings.get("suite", "transformers")
    out = []
    for mode in results.modes:
        by = {s: results.by(s, mode) for s in SOURCES if s in {r.source for r in results.records}}
        found = {(s.path, s.line) for s in scores[mode].found}
        for name, rec in by["original"].items():
            rr = RowReport(name, mode, _group(name, suite), _group(name, suite) in held)
            for src, recs in by.items():
                r = recs.get(name)
                if r is None:
                    continue
                rr.status[src] = r.status
                rr.breaks[src] = len(r.breaks) if r.status == R.OK else None
                rr.graphs[src] = r.graphs if r.status == R.OK else None
                if src != "original":
                    if r.eager_same is False or (rec.runs and not r.runs):
                        rr.eager_changed.append(src)
                    if r.rng_same is False:
                        rr.rng_changed.append(src)
                    for phase, d in (r.messages_diff or {}).items():
                        if d["lost"] or d["added"] or d["reordered"]:
                            rr.messages_failing.append(f"{src} {phase}: lost {d['lost']}, added {d['added']}, "
                                                       f"reordered {d['reordered']} of {d['reference']}")
            sites = {(b.path, b.line) for b in rec.breaks if S.in_package(b.path)} if rec.status == R.OK else set()
            rr.sites, rr.found = len(sites), len(sites & found)
            out.append(rr)
    return out


# ---- fixability: check's promise against fix's deed


@dataclass
class Fixability:
    promised: Counter = field(default_factory=Counter)  # (cold mark, decided mark, safe, unsafe outcome) -> findings
    mismatches: list[tuple[str, str, str, str]] = field(default_factory=list)  # (site, code, mark, outcome)
    declined: Counter = field(default_factory=Counter)  # (code, reason) -> findings a rule has a fix for, left


def _outcomes(run: Any, root: Path) -> dict[tuple[str, str, int], str]:
    """What ``mend fix`` did, keyed by (file, code, line in the user's file): applied, or declined with the
    reason. A finding of a file that ran with neither is gone: another repair removed it."""
    out: dict[tuple[str, str, int], str] = {}
    for f in run.files:
        rel = S._relative(f.path, str(root))  # noqa: SLF001 - one helper for the relative form
        for r in f.remaining:  # left in the repaired text: not fixed, whatever repair touched its line
            out.setdefault((rel, r.diagnostic.code, r.diagnostic.line), "declined: " + (r.reason or "no reason given"))
        for a in f.applied:
            out.setdefault((rel, a.code, a.line), f"applied ({a.applicability})")
        out[(rel, "", 0)] = "ran"
    return out


def mark_name(d: Any) -> str:
    """The mark ``mend check`` shows a finding with: ``[*]`` (a safe fix ``mend fix`` applies), ``hidden`` (a fix
    only ``--unsafe-fixes`` applies), ``[?]``/``[?] unsafe`` (a fix not decided yet for these bytes), ``declined``
    (the rule has a fix, ``mend fix`` left it: check gives the reason), ``none`` (no fix)."""
    if d.fix is None:
        return "declined" if d.data.get("not_fixed") else "none"
    safe = d.fix.applicability.value == "safe"
    if d.fix.decided:
        return "[*]" if safe else "hidden"
    return "[?]" if safe else "[?] unsafe"


def agrees(mark: str, safe: str, unsafe: str) -> bool:
    """Whether check's decided mark says what ``mend fix`` did: ``[*]`` gone after a safe run, ``hidden`` gone only
    after ``--unsafe-fixes``, ``declined``/``none`` not repaired by a fix of its own (another repair may still
    remove it: a call to a function whose break was repaired)."""
    gone = (safe.startswith(("applied", "gone")), unsafe.startswith(("applied", "gone")))
    own = safe.startswith("applied") or unsafe.startswith("applied")
    return {"[*]": gone[0], "hidden": not gone[0] and gone[1], "declined": not own, "none": not own}.get(mark, False)


def fix_runs(targets: list[Path]) -> dict[str, Any]:
    """``mend fix --diff`` and ``mend fix --unsafe-fixes --diff`` over ``targets`` (nothing written)."""
    from mend.rewriter.api import fix_paths
    from mend.rewriter.engine import FixOptions

    return {k: fix_paths(targets, FixOptions(unsafe=k == "unsafe"), isolated=True, write=False, record=False)
            for k in ("safe", "unsafe")}


def fixability(root: Path, runs: dict[str, Any], diagnostics: list[Any]) -> Fixability:
    """Each finding's mark in ``mend check`` before anything is decided (cold) and after ``mend fix --diff`` and
    ``mend fix --unsafe-fixes --diff`` decided (check's own marking, from the decisions those runs record),
    against what the two runs (:func:`fix_runs`) did with it."""
    import tempfile

    from mend.analyzers.static import fixability as F
    from mend.analyzers.static import target_torch

    deeds = {k: _outcomes(run, root) for k, run in runs.items()}
    with tempfile.TemporaryDirectory(prefix="mend-report-") as tmp:
        for run in runs.values():
            F.record(Path(tmp), run.decisions)
        digests = {d.path: F.digest(Path(d.path).read_bytes()) for d in diagnostics}
        decided = F.mark(diagnostics, digests, Path(tmp), None, target_torch({}))  # as the runs decided
    result = Fixability()
    for cold, d in zip(diagnostics, decided):
        if d.code.startswith(S.NON_BREAK_PREFIXES):
            continue
        rel = S._relative(d.path, str(root))  # noqa: SLF001
        got = {k: deeds[k].get((rel, d.code, d.line), "gone (another repair)" if (rel, "", 0) in deeds[k]
                               else "file not fixed") for k in deeds}
        mark = mark_name(d)
        result.promised[(mark_name(cold), mark, _short(got["safe"]), _short(got["unsafe"]))] += 1
        if not agrees(mark, got["safe"], got["unsafe"]):
            result.mismatches.append((f"{rel}:{d.line}", d.code, mark, f"{got['safe']} | {got['unsafe']}"))
        if mark == "declined":
            result.declined[(d.code, str(d.data["not_fixed"])[:140])] += 1
    return result


def kept_breaks(results: R.Results, runs: dict[str, Any], root: Path) -> tuple[list[str], list[str]]:
    """Repairs that left a break at their own site: an applied fix whose line Dynamo recorded a break at in the
    original and, in the repaired source of the same mode, still at that line (the repaired file's lines mapped
    back to the user's), with the strategy that made the repair. Two lists: the repairs that failed (issue: "no
    row where a repair left as many or more breaks at its site"), and those whose plan said the break stays
    under a configuration the repair cannot see (:attr:`mend.rewriter.plan.Plan.keeps_break`: the LayerDrop
    guard in training where the probability is above 0; the recorded break shows that configuration ran). Meaningful
    when the result was made with the mend that runs the report (its repaired copies are the same text)."""
    failed, by_design = [], []
    for source, run in runs.items():
        if source not in {r.source for r in results.records}:
            continue
        maps = {S._relative(f.path, str(root)): line_map(f.original, f.fixed) for f in run.files  # noqa: SLF001
                if f.applied}
        applied = {(S._relative(f.path, str(root)), a.line): a for f in run.files for a in f.applied}  # noqa: SLF001
        for mode in results.modes:
            left = (_recorded(results, "original", mode, {}) & _recorded(results, source, mode, maps)
                    & set(applied))
            for p, line in sorted(left):
                a = applied[(p, line)]
                where = a.keeps_break
                what = f"{a.code} ({a.strategy})" if a.strategy else a.code
                (by_design if where else failed).append(
                    f"{source} {mode}: {p}:{line} {what}" + (f": stays {where}" if where else ""))
    return failed, by_design


def _recorded(results: R.Results, source: str, mode: str, maps: dict[str, list[int]]) -> set[tuple[str, int]]:
    """The break sites ``source`` recorded in ``mode``, at their lines in the user's files (through ``maps``, the
    repaired files' line maps)."""
    return {(b.path, original_line(maps[b.path], b.line) if b.path in maps else b.line)
            for r in results.records if r.source == source and r.mode == mode and r.status == R.OK
            for b in r.breaks if S.in_package(b.path)}


def _short(outcome: str) -> str:
    return outcome.split(":")[0] if outcome.startswith("declined") else outcome


# ---- the whole report


def _scope(results: R.Results, root: Path) -> list[Path]:
    """The files the original rows traced or broke in (the zoo's ``--scope traced``), with what mend fix
    repaired (the safe or unsafe source's scope: a run before the break files joined the scope lacks them); a
    result without either is checked on the whole source."""
    files = set(traced_files([r for r in results.records if r.source == "original"]))
    for name in ("safe", "unsafe"):
        info = results.sources.get(name)
        if info is not None and info.fix is not None and info.fix.scope:
            files |= set(info.fix.scope)
    found = sorted(p for p in files if (root / p).is_file())
    return [root / p for p in found] if found else [root]


def build(results: R.Results) -> dict[str, Any]:
    from mend.analyzers.static import check_paths, load_config

    root = Path(results.sources["original"].path)
    targets = _scope(results, root)
    config = load_config([str(t) for t in targets], isolated=True)
    checked = check_paths([str(t) for t in targets], config, use_cache=False)
    findings = S.findings_of(checked.diagnostics, root)
    suite = str(results.settings.get("suite", "transformers"))
    held, dirs = held_out_rows(suite), {}
    if suite == "repos":
        from benchmarks.zoo.repos import entries, held_out

        held, dirs = held_out(), {e["dir"]: e["name"] for e in entries()}
    dtype = str(results.settings.get("dtype", "fp32"))
    report: dict[str, Any] = {"root": str(root), "findings": len(findings), "modes": {}, "held_out": sorted(held)}
    scores = {}
    for mode in results.modes:
        recs = [r for r in results.records if r.source == "original" and r.mode == mode]
        parts = {"all": (recs, findings)}
        if held:
            def side(keep: bool, recs: list = recs) -> tuple[list, list]:
                rows = [r for r in recs if (_group(r.name, suite) in held) == keep]
                # a repository's findings are its own; a library's files serve every row
                fs = [f for f in findings if not dirs or (dirs.get(f.path.split("/")[0], "") in held) == keep]
                return rows, fs

            parts["build"], parts["held-out"] = side(False), side(True)
        scores[mode] = S.score(recs, findings, dtype=dtype, run_mode=mode)
        report["modes"][mode] = {k: _figures(S.score(rs, fs, dtype=dtype, run_mode=mode), results, mode,
                                             {r.name for r in rs})
                                 for k, (rs, fs) in parts.items()}
    report["rows"] = [vars(r) for r in row_reports(results, scores, held)]
    runs = fix_runs(targets)
    fx = fixability(root, runs, checked.diagnostics)
    report["kept_breaks"], report["kept_by_design"] = kept_breaks(results, runs, root)
    report["fixability"] = {"table": [[*k, n] for k, n in sorted(fx.promised.items())],
                            "declined": [[*k, n] for k, n in fx.declined.most_common()],
                            "mismatches": fx.mismatches}
    report["classes"] = _classes(results, held, suite)
    return report


def _figures(sc: S.ZooScore, results: R.Results, mode: str, names: set[str]) -> dict[str, Any]:
    by = {s: {n: r for n, r in results.by(s, mode).items() if n in names} for s in SOURCES
          if s in {r.source for r in results.records}}
    common = [n for n in by["original"] if all(n in by[s] and by[s][n].status == R.OK for s in by)]
    total = {s: sum(len(by[s][n].breaks) for n in common) for s in by}
    graphs = {s: sum(by[s][n].graphs or 0 for n in common) for s in by}
    worse = worse_rows(by, list(by))
    changed = sorted({f"{s}: {n}" for s in by if s != "original" for n, r in by[s].items()
                      if r.eager_same is False or (by["original"].get(n) and by["original"][n].runs and not r.runs)})
    return {"rows": len(by["original"]), "rows_compiled_everywhere": len(common),
            # nothing recorded (nothing judged): no figure, where the score's ratio of nothing would say 1.0
            "recorded_sites": len(sc.sites), "sites_found": len(sc.found),
            "recall": round(sc.recall, 3) if sc.sites else None,
            "judged_findings": len(sc.judged), "confirmed": len(sc.confirmed),
            "precision": round(sc.precision, 3) if sc.judged else None,
            "breaks": total, "graphs": graphs,
            "removed_by_unsafe": (round(1 - total["unsafe"] / total["original"], 3)
                                  if "unsafe" in total and total["original"] else None),
            "eager_changed": changed, "worse": [f"{c.source}: {c.name}: {c.what}" for c in worse],
            "missed": [f"{s.path}:{s.line} [{s.reason_class}] {s.source_line.strip()[:90]}" for s in sc.missed],
            "unconfirmed": [f"{f.path}:{f.line} {f.code}" for f in sc.unconfirmed]}


def _classes(results: R.Results, held: set[str], suite: str) -> dict[str, Any]:
    """Recorded sites of the original source (both modes) in the rows not held out, by code class, with
    examples (what repairs are built from)."""
    seen: dict[tuple[str, int], tuple[Any, set[str]]] = {}
    for r in results.records:
        if r.source != "original" or r.status != R.OK or _group(r.name, suite) in held:
            continue
        for b in r.breaks:
            if S.in_package(b.path):
                seen.setdefault((b.path, b.line), (b, set()))[1].add(r.mode)
    out: dict[str, Any] = {}
    for (path, line), (b, modes) in sorted(seen.items()):
        cls = code_class(b)
        entry = out.setdefault(cls, {"sites": 0, "train_only": 0, "examples": []})
        entry["sites"] += 1
        entry["train_only"] += modes == {"train"}
        entry["examples"].append(f"{path}:{line} ({'/'.join(sorted(modes))}; {b.reason_class}) {b.source_line.strip()[:100]}")
    return dict(sorted(out.items(), key=lambda kv: -kv[1]["sites"]))


# ---- text


def render(report: dict[str, Any], results: R.Results, limit: int = 3) -> str:
    out = [f"corpus report: suite {results.settings.get('suite', 'transformers')}, {report['root']}; "
           f"{report['findings']} findings of mend check in the fixed scope"]
    for mode, parts in report["modes"].items():
        out.append(f"\n[{mode}]")
        head = ["", *parts]
        keys = [("rows", "rows"), ("rows compiled in every source", "rows_compiled_everywhere"),
                ("recorded break sites", "recorded_sites"), ("sites mend check finds", "sites_found"),
                ("recall", "recall"), ("judged findings", "judged_findings"), ("confirmed", "confirmed"),
                ("precision", "precision")]
        rows = [[label, *["-" if p[k] is None else str(p[k]) for p in parts.values()]] for label, k in keys]
        rows.append(["break sites original -> safe -> unsafe",
                     *[" -> ".join(str(v) for v in p["breaks"].values()) for p in parts.values()]])
        rows.append(["graphs original -> safe -> unsafe",
                     *[" -> ".join(str(v) for v in p["graphs"].values()) for p in parts.values()]])
        rows.append(["break sites removed by --unsafe-fixes", *[_pct(p["removed_by_unsafe"]) for p in parts.values()]])
        rows.append(["eager outputs/gradients changed", *[str(len(p["eager_changed"])) for p in parts.values()]])
        rows.append(["rows worse after a fix", *[str(len(p["worse"])) for p in parts.values()]])
        out += _table(head, rows)
        allp = parts["all"]
        for label, key in (("rows worse after a fix", "worse"), ("eager changed", "eager_changed")):
            if allp[key]:
                out.append(f"  {label}: " + "; ".join(allp[key]))
        if "build" in parts:  # the held-out rows' sites stay unseen while repairs are built: counted above only
            allp = parts["build"]
            out.append("  (sites and findings below: the rows used for building)")
        if allp["missed"]:
            out.append(f"  missed sites ({len(allp['missed'])}): " + "; ".join(allp["missed"][:limit * 4]))
        if allp["unconfirmed"]:
            out.append(f"  judged findings with no recorded site ({len(allp['unconfirmed'])}): "
                       + "; ".join(allp["unconfirmed"][:limit * 4]))
    out.append("\nper row (break sites original -> safe -> unsafe; recorded sites found by mend check):")
    head = ["row", "mode", "split", "breaks", "graphs", "found", "eager changed", "messages differ"]
    rows = []
    for r in report["rows"]:
        rows.append([r["name"], r["mode"], "held-out" if r["held_out"] else "",
                     " -> ".join("-" if v is None else str(v) for v in r["breaks"].values()),
                     " -> ".join("-" if v is None else str(v) for v in r["graphs"].values()),
                     f"{r['found']}/{r['sites']}", ",".join(r["eager_changed"]) or "0",
                     "; ".join(r["messages_failing"])[:120] or "0"])
    out += _table(head, rows)
    fx = report["fixability"]
    out.append("\nfixability: mend check's mark cold and once mend fix --diff decided, against what mend fix did "
               f"(safe run, unsafe run); marks that disagree with the deed: {len(fx['mismatches'])}")
    out += _table(["check, cold", "check, decided", "mend fix", "mend fix --unsafe-fixes", "findings"],
                  [[*map(str, r)] for r in fx["table"]])
    out += [f"  disagrees: {site} {code} {mark}: {deed[:150]}" for site, code, mark, deed in fx["mismatches"][:limit * 4]]
    out.append(f"repairs that left a break at their own site (recorded before and after): {len(report['kept_breaks'])}")
    out += [f"  {x}" for x in report["kept_breaks"][:limit * 8]]
    by_design = report.get("kept_by_design", [])
    out.append(f"repairs whose break stays by design where the row's configuration keeps it: {len(by_design)}")
    out += [f"  {x}" for x in by_design[:limit * 8]]
    if fx["declined"]:
        out.append("left by mend fix (check shows no mark, with the reason), by reason:")
        out += [f"  {n} x {code}: {reason}" for code, reason, n in fx["declined"][:15]]
    out.append("\nclasses of code at the recorded sites (original source, both modes, rows not held out):")
    for cls, e in report["classes"].items():
        out.append(f"  {cls}: {e['sites']} sites ({e['train_only']} only in training)")
        out += [f"      {x}" for x in e["examples"][:limit]]
    return "\n".join(out)


def _pct(v: float | None) -> str:
    return "-" if v is None else f"{100 * v:.0f}%"


def _table(head: list[str], rows: list[list[str]]) -> list[str]:
    widths = [max(len(str(r[i])) for r in [head, *rows]) for i in range(len(head))]
    return ["  ".join(str(c).ljust(w) for c, w in zip(r, widths)).rstrip() for r in [head, *rows]]


def merge(parts: list[R.Results]) -> R.Results:
    """One result from several runs of one suite on the same original source: a (row, mode, source) of a later
    file replaces the same of an earlier one."""
    first = parts[0]
    suites = {p.settings.get("suite", "transformers") for p in parts}
    origins = {p.sources["original"].path for p in parts if "original" in p.sources}
    if len(suites) > 1 or len(origins) > 1:
        raise ValueError(f"results of different suites or sources cannot be merged: {suites} {origins}")
    keyed: dict[tuple[str, str, str], R.Record] = {}
    for p in parts:
        for r in p.records:
            keyed[(r.name, r.mode, r.source)] = r
    return R.Results(records=list(keyed.values()), sources=first.sources, settings=first.settings,
                     versions=first.versions, command=first.command, created=first.created,
                     wall_s=sum(p.wall_s for p in parts))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("result", type=Path, nargs="+",
                    help="result files of python -m benchmarks.zoo (--json); several of one suite are merged "
                         "(rows rerun apart replace the same rows of earlier files)")
    ap.add_argument("--json", type=Path, help="write the report as JSON too")
    ap.add_argument("--limit", type=int, default=3, help="examples per class and list")
    ap.add_argument("--root", type=Path,
                    help="the original source's folder on this machine, where the result was made on another (its "
                         "recorded path is not here) or cut short (a --json PATH.partial records no sources)")
    a = ap.parse_args(argv)
    try:
        results = merge([R.load(p) for p in a.result])
    except (R.ResultFileError, ValueError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    if a.root is not None:
        if not a.root.is_dir():
            print(f"error: --root {a.root} is not a folder", file=sys.stderr)
            return 2
        results.sources["original"] = R.SourceInfo(name="original", path=str(a.root.resolve()))
    if "original" not in results.sources:
        print("error: the result has no original source", file=sys.stderr)
        return 2
    report = build(results)
    print(render(report, results, a.limit))
    if a.json:
        a.json.write_text(json.dumps(report, indent=1, default=str))
    worse = any(p["worse"] or p["eager_changed"] for parts in report["modes"].values() for p in parts.values())
    return 1 if worse else 0


if __name__ == "__main__":
    raise SystemExit(main())

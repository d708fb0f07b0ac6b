"""The zoo's report: what builds and runs, breaks before -> after per reason class, every changed eager output.

``summarize(results)`` computes the numbers (plain data, no torch); ``render(summary)`` prints them as text
(or Markdown, for the README). Breaks are distinct break sites (file:line and reason; frame skips
included), summed over rows; "before -> after" columns count only the rows that ran compiled in every
source, so a row that fails in one source does not move the totals.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from benchmarks.zoo import records as R
from benchmarks.zoo.reasons import CLASSES
from benchmarks.zoo.records import Record, Results


@dataclass
class Changed:
    name: str
    source: str
    what: str  # "raises now: ..." / "max |diff| 1e-3" / ...


@dataclass
class Summary:
    sources: list[str]
    rows: int
    types: int
    runs: dict[str, int]  # rows whose eager forward ran
    types_run: dict[str, int]  # model types with at least one row that ran (original source)
    compiled: dict[str, int]  # rows whose compiled forward ran too
    common: int  # rows that ran compiled in every source
    breaking: dict[str, int]  # common rows with at least one break
    breaks: dict[str, int]  # break sites over common rows
    occurrences: dict[str, int]  # how often Dynamo hit those sites (per layer, per compiled version)
    graph_breaks: dict[str, int]  # graphs - 1 per row, summed over common rows
    graphs: dict[str, int]
    recompiles: dict[str, int]
    by_class: dict[str, dict[str, int]]  # class -> source -> break sites
    by_class_hits: dict[str, dict[str, int]]  # class -> source -> occurrences
    compiled_mismatch: dict[str, list[str]]  # rows whose compiled output is off eager's
    changed: list[Changed]  # repaired rows whose eager output differs from the original's (or that fail now)
    nondeterministic: list[str]
    failures: dict[str, list[tuple[str, str, str]]]  # source -> (row, status, error): rows that do not run
    compile_errors: dict[str, list[tuple[str, str]]]  # source -> (row, error): eager runs, torch.compile raised
    statuses: dict[str, dict[str, int]]
    fix: dict[str, Any] = field(default_factory=dict)
    settings: dict[str, Any] = field(default_factory=dict)
    versions: dict[str, str] = field(default_factory=dict)
    wall_s: float = 0.0
    mode: str = "eval"
    backward_graphs: dict[str, int] = field(default_factory=dict)  # training: over common rows
    grads_mismatch: dict[str, list[str]] = field(default_factory=dict)  # training: compiled gradients off eager
    rng_changed: list[Changed] = field(default_factory=list)  # repaired rows that drew other random numbers
    # source -> phase -> {"rows": compared, "failing": rows with a message lost/added/reordered, "kept", ...}
    messages: dict[str, dict[str, dict[str, int]]] = field(default_factory=dict)
    message_failures: list[Changed] = field(default_factory=list)  # (row, source, "phase: lost ...")
    # rows whose messages differed in the shared workers and were the same in fresh processes (runner.recheck_messages)
    messages_rechecked: list[Changed] = field(default_factory=list)
    worse: list[Changed] = field(default_factory=list)  # repaired rows with more break sites or graphs than the original


def _changed(rec: Record, base: Record) -> str | None:
    if base.runs and not rec.runs:
        return f"fails now ({rec.status}): {rec.error}"
    if rec.eager_same is False:
        return f"max |diff| {rec.eager_max_abs_diff:.3g}" + (f" ({rec.eager_note})" if rec.eager_note else "")
    return None


def _messages(by: dict[str, dict[str, Record]], sources: list[str]) -> tuple[dict, list[Changed]]:
    totals: dict[str, dict[str, dict[str, int]]] = {}
    failures = []
    for s in sources[1:]:
        for name, r in by[s].items():
            for phase, d in (r.messages_diff or {}).items():
                t = totals.setdefault(s, {}).setdefault(phase, dict.fromkeys(
                    ("rows", "failing", "reference", "kept", "lost", "added", "reordered"), 0))
                t["rows"] += 1
                for k in ("reference", "kept", "lost", "added", "reordered"):
                    t[k] += d[k]
                if d["lost"] or d["added"] or d["reordered"]:
                    t["failing"] += 1
                    failures.append(Changed(name, s, f"{phase}: lost {d['lost']}, added {d['added']}, reordered "
                                                     f"{d['reordered']} of {d['reference']}; " + "; ".join(d["first"])))
    return totals, failures


def worse_rows(by: dict[str, dict[str, Record]], sources: list[str]) -> list[Changed]:
    """Repaired rows that end with more break sites or more graphs than the original (both compiled)."""
    out = []
    first = by[sources[0]]
    for s in sources[1:]:
        for name, r in by[s].items():
            base = first.get(name)
            if base is None or base.status != R.OK or r.status != R.OK:
                continue
            if len(r.breaks) > len(base.breaks) or (r.graphs or 0) > (base.graphs or 0):
                out.append(Changed(name, s, f"break sites {len(base.breaks)} -> {len(r.breaks)}, graphs "
                                            f"{base.graphs} -> {r.graphs}"))
    return out


def summarize(results: Results, mode: str | None = None) -> Summary:
    mode = mode or (results.modes[0] if results.modes else "eval")
    records = [r for r in results.records if r.mode == mode]
    sources = list(dict.fromkeys(r.source for r in records))
    by = {s: results.by(s, mode) for s in sources}
    names = list(dict.fromkeys(r.name for r in records))
    first = by[sources[0]]
    common = [n for n in names if all(n in by[s] and by[s][n].status == R.OK for s in sources)]
    count = lambda s, fn: sum(fn(by[s][n]) for n in common)  # noqa: E731
    by_class: dict[str, dict[str, int]] = {c: {s: 0 for s in sources} for c in CLASSES}
    by_class_hits: dict[str, dict[str, int]] = {c: {s: 0 for s in sources} for c in CLASSES}
    for s in sources:
        for n in common:
            for b in by[s][n].breaks:
                by_class[b.reason_class][s] += 1
                by_class_hits[b.reason_class][s] += b.count
    changed, rng = [], []
    for s in sources[1:]:
        for n in names:
            if n in by[s] and n in first and (what := _changed(by[s][n], first[n])):
                changed.append(Changed(n, s, what))
            if n in by[s] and by[s][n].rng_same is False:
                rng.append(Changed(n, s, "the random-number state after the eager step differs from the original's"))
    messages, message_failures = _messages(by, sources)
    return Summary(
        mode=mode, backward_graphs={s: count(s, lambda r: r.backward_graphs or 0) for s in sources},
        grads_mismatch={s: [r.name for r in by[s].values() if r.compiled_grads_match is False] for s in sources},
        rng_changed=rng, messages=messages, message_failures=message_failures, worse=worse_rows(by, sources),
        messages_rechecked=[Changed(r.name, x, "differed in a shared worker, the same in fresh processes")
                            for x in sources[1:] for r in by[x].values()
                            if r.messages_shared_diff and r.messages_ok],
        sources=sources, rows=len(names), types=len({r.model_type for r in records}),
        runs={s: sum(r.runs for r in by[s].values()) for s in sources},
        types_run={s: len({r.model_type for r in by[s].values() if r.runs}) for s in sources},
        compiled={s: sum(r.status == R.OK for r in by[s].values()) for s in sources},
        common=len(common),
        breaking={s: count(s, lambda r: r.break_count > 0) for s in sources},
        breaks={s: count(s, lambda r: r.break_count) for s in sources},
        occurrences={s: count(s, lambda r: sum(b.count for b in r.breaks)) for s in sources},
        graph_breaks={s: count(s, lambda r: max(0, (r.graphs or 0) - 1)) for s in sources},
        graphs={s: count(s, lambda r: r.graphs or 0) for s in sources},
        recompiles={s: count(s, lambda r: sum(x.count for x in r.recompiles)) for s in sources},
        by_class=by_class, by_class_hits=by_class_hits,
        compiled_mismatch={s: [r.name for r in by[s].values() if r.compiled_matches is False] for s in sources},
        changed=changed,
        nondeterministic=[r.name for r in first.values() if r.eager_deterministic is False],
        failures={s: [(r.name, r.status, r.error) for r in by[s].values() if not r.runs] for s in sources},
        compile_errors={s: [(r.name, r.error) for r in by[s].values() if r.status == R.COMPILE_ERROR] for s in sources},
        statuses={s: dict(Counter(r.status for r in by[s].values())) for s in sources},
        fix={k: v.fix for k, v in results.sources.items() if v.fix is not None},
        settings=results.settings, versions=results.versions, wall_s=results.wall_s,
    )


def _arrow(values: dict[str, int], sources: list[str]) -> str:
    return " -> ".join(str(values[s]) for s in sources)


def render_results(results: Results, markdown: bool = False) -> str:
    """Every mode's report, then break sites by class side by side across modes (when there are several)."""
    summaries = [summarize(results, m) for m in results.modes] or [summarize(results)]
    parts = [render(s, markdown) for s in summaries]
    if len(summaries) > 1:
        parts.append(render_modes(summaries, markdown))
    return "\n\n".join(parts)


def render_modes(summaries: list[Summary], markdown: bool = False) -> str:
    """Break sites (occurrences) by reason class, every mode's sources side by side."""
    head = ["reason class"] + [f"{s.mode} {x}" for s in summaries for x in s.sources]
    rows = [[c] + [f"{s.by_class[c][x]} ({s.by_class_hits[c][x]})" for s in summaries for x in s.sources]
            for c in CLASSES]
    rows.append(["all"] + [f"{s.breaks[x]} ({s.occurrences[x]})" for s in summaries for x in s.sources])
    rows.append(["graph breaks"] + [str(s.graph_breaks[x]) for s in summaries for x in s.sources])
    rows.append(["rows that break"] + [f"{s.breaking[x]} of {s.common}" for s in summaries for x in s.sources])
    return "\n".join(["break sites (occurrences) by Dynamo reason class, the modes side by side:",
                      *_table(head, rows, markdown)])


def render(s: Summary, markdown: bool = False) -> str:
    """The report as text (or Markdown tables)."""
    out: list[str] = []
    v, st = s.versions, s.settings
    suite = st.get("suite", "transformers")
    libs = ", ".join(f"{k} {v[k]}" for k in ("torchvision", "timm", "diffusers", "torch_geometric") if v.get(k))
    out.append(f"[{s.mode}] suite {suite}; transformers {v.get('transformers', '?')}, torch {v.get('torch', '?')}"
               f"{', ' + libs if libs and suite != 'transformers' else ''}, dtype {st.get('dtype')}, "
               f"profile {st.get('profile')}, backend {st.get('backend')}"
               f"{', Dynamo capture on globally' if st.get('capture') else ''}; sources: {' -> '.join(s.sources)}; "
               f"wall {s.wall_s:.0f} s")
    head = ["", *s.sources]
    rows = [
        ["rows (types + variants)", *[str(s.rows)] * len(s.sources)],
        ["rows that build and run (eager)", *[f"{s.runs[x]} ({100 * s.runs[x] / max(1, s.rows):.1f}%)" for x in s.sources]],
        ["model types that build and run", *[f"{s.types_run[x]} of {s.types}" for x in s.sources]],
        ["rows that also run compiled", *[str(s.compiled[x]) for x in s.sources]],
        [f"rows that break (of {s.common} compiled in every source)", *[str(s.breaking[x]) for x in s.sources]],
        ["break sites (distinct per row)", *[str(s.breaks[x]) for x in s.sources]],
        ["break occurrences", *[str(s.occurrences[x]) for x in s.sources]],
        ["graph breaks (graphs - 1 per row)", *[str(s.graph_breaks[x]) for x in s.sources]],
        ["graphs", *[str(s.graphs[x]) for x in s.sources]],
        ["recompiles", *[str(s.recompiles[x]) for x in s.sources]],
        ["compiled output off eager", *[str(len(s.compiled_mismatch[x])) for x in s.sources]],
        ["eager output changed vs original" + (" (outputs, loss, gradients)" if s.mode == "train" else ""), "-",
         *[str(sum(c.source == x for c in s.changed)) for x in s.sources[1:]]],
        ["rows with more break sites or graphs than the original", "-",
         *[str(sum(c.source == x for c in s.worse)) for x in s.sources[1:]]],
    ]
    if s.mode == "train":
        rows += [
            ["backward graphs", *[str(s.backward_graphs[x]) for x in s.sources]],
            ["compiled gradients off eager", *[str(len(s.grads_mismatch[x])) for x in s.sources]],
            ["random-number state changed vs original", "-",
             *[str(sum(c.source == x for c in s.rng_changed)) for x in s.sources[1:]]],
        ]
    for phase in ("eager", "compiled"):
        cells = []
        for x in s.sources[1:]:
            t = s.messages.get(x, {}).get(phase)
            cells.append(f"{t['failing']} of {t['rows']}" if t else "-")
        rows.append([f"rows whose messages differ ({phase}: lost, added or reordered)", "-", *cells])
    out_messages = []
    for x in s.sources[1:]:
        for phase, t in sorted(s.messages.get(x, {}).items()):
            out_messages.append(f"  {x} {phase}: {t['reference']} messages in the original, kept {t['kept']}, "
                                f"lost {t['lost']}, added {t['added']}, reordered {t['reordered']}")
    out += _table(head, rows, markdown)
    out.append("")
    out.append("break sites (occurrences) by Dynamo reason class (" + " -> ".join(s.sources) + "):")
    cell = lambda c, x: f"{s.by_class[c][x]} ({s.by_class_hits[c][x]})"  # noqa: E731
    out += _table(["reason class", *s.sources], [[c, *[cell(c, x) for x in s.sources]] for c in CLASSES] +
                  [["all", *[f"{s.breaks[x]} ({s.occurrences[x]})" for x in s.sources]]], markdown)
    for name, fix in s.fix.items():
        again = ("not checked" if fix.second_run_changed is None else
                 "changes nothing" if not fix.second_run_changed else f"CHANGES {len(fix.second_run_changed)} files")
        out.append(f"\nmend fix ({name}): {fix.seconds:.0f} s over {fix.files} files; {fix.changed} changed, "
                   f"{fix.applied} fixes applied, {fix.remaining} findings left; {len(fix.errors)} file errors; "
                   f"{len(fix.unparsable)} unparsable outputs; a second run {again}")
        out += [f"  error: {p}: {m}" for p, m in fix.errors]
        out += [f"  unparsable: {p}" for p in fix.unparsable]
    out.append("\neager output changed by the repair (" + (", ".join(s.sources[1:]) or "no repaired source") + "):")
    out += [f"  {c.source}: {c.name}: {c.what}" for c in s.changed] or ["  none"]
    if s.mode == "train":
        out.append("\nrandom-number state changed by the repair:")
        out += [f"  {c.source}: {c.name}" for c in s.rng_changed] or ["  none"]
    out.append("\nrows that end with more break sites or graphs after the repair:")
    out += [f"  {c.source}: {c.name}: {c.what}" for c in s.worse] or ["  none"]
    if out_messages:
        out.append("\nmessages observed (stdout, stderr, logging, warnings), repaired against the original, same phase:")
        out += out_messages
        out += [f"  {c.source}: {c.name}: {c.what}" for c in s.message_failures[:40]]
        if len(s.message_failures) > 40:
            out.append(f"  ... and {len(s.message_failures) - 40} more rows")
        out += [f"  {c.source}: {c.name}: {c.what}" for c in s.messages_rechecked]
    for x in s.sources:
        if s.grads_mismatch.get(x):
            out.append(f"\ncompiled gradients off eager ({x}): {', '.join(s.grads_mismatch[x])}")
    for x in s.sources:
        if s.compiled_mismatch[x]:
            out.append(f"\ncompiled output off eager ({x}): {', '.join(s.compiled_mismatch[x])}")
    if s.nondeterministic:
        out.append(f"\neager output not deterministic (two runs differ): {', '.join(s.nondeterministic)}")
    for x in s.sources:
        if s.compile_errors[x]:
            out.append(f"\nrows whose eager forward runs but torch.compile raises ({x}):")
            out += [f"  {n}: {err[:160]}" for n, err in s.compile_errors[x]]
    for x in s.sources:
        fails = s.failures[x]
        if fails:
            counts = ", ".join(f"{k} {n}" for k, n in sorted(s.statuses[x].items()) if k not in R.RUNS)
            out.append(f"\nrows that do not run ({x}): {counts}")
            out += [f"  {n}: {status}: {err[:160]}" for n, status, err in fails]
    return "\n".join(out)


def _table(head: list[str], rows: list[list[str]], markdown: bool) -> list[str]:
    if markdown:
        lines = ["| " + " | ".join(head) + " |", "|" + "|".join("---" if i == 0 else "---:" for i in range(len(head))) + "|"]
        return lines + ["| " + " | ".join(r) + " |" for r in rows]
    widths = [max(len(str(r[i])) for r in [head, *rows]) for i in range(len(head))]
    fmt = lambda r: "  ".join(str(c).ljust(w) if i == 0 else str(c).rjust(w) for i, (c, w) in enumerate(zip(r, widths)))  # noqa: E731
    return [fmt(head), *[fmt(r) for r in rows]]

"""Output formats of ``mend check``: concise, full, json, github, sarif, junit; and ``--statistics``."""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterable
from pathlib import Path
from xml.sax.saxutils import escape, quoteattr

from mend.analyzers.diagnostic import Applicability, Diagnostic
from mend.analyzers.static.rules import RULES
from mend.version import __version__

FORMATS = ("concise", "full", "json", "github", "sarif", "junit")


def rule_url(code: str) -> str | None:
    """The rule's primary reference (the Dynamo graph-break page it predicts), if it has one."""
    rule = RULES.get(code)
    refs = rule.all_references if rule else ()
    return refs[0] if refs else None
SARIF_SCHEMA = "https://json.schemastore.org/sarif-2.1.0.json"


def safe_fix(d: Diagnostic) -> bool:
    """A safe fix ``mend fix`` decided to apply to these bytes (``[*]``; see :mod:`.fixability`)."""
    return d.fix is not None and d.fix.applicability is Applicability.SAFE and d.fix.decided


def undecided_fix(d: Diagnostic) -> bool:
    """A safe fix the rule has, not yet decided for these bytes by ``mend fix`` (``[?]``)."""
    return d.fix is not None and d.fix.applicability is Applicability.SAFE and not d.fix.decided


def fix_mark(d: Diagnostic) -> str:
    return "[*] " if safe_fix(d) else "[?] " if undecided_fix(d) else ""


def concise(diags: Iterable[Diagnostic]) -> str:
    lines = []
    for d in diags:
        mark = fix_mark(d)
        lines.append(f"{d.path}:{d.line}:{d.col}: {d.code} {mark}{d.message}")
    return "\n".join(lines) + ("\n" if lines else "")


def full(diags: Iterable[Diagnostic], read_lines=None) -> str:
    out = []
    cache: dict[str, list[str]] = {}
    for d in diags:
        mark = fix_mark(d)
        out.append(f"{d.path}:{d.line}:{d.col}: {d.code} {mark}{d.message}")
        if d.path not in cache:
            try:
                cache[d.path] = (read_lines(d.path) if read_lines else
                                 Path(d.path).read_text(encoding="utf-8", errors="replace").splitlines())
            except OSError:
                cache[d.path] = []
        src = cache[d.path]
        if 1 <= d.line <= len(src):
            text = src[d.line - 1]
            width = len(str(d.line))
            end = d.end_col if (d.end_line == d.line and d.end_col and d.end_col > d.col) else len(text) + 1
            carets = "^" * max(1, min(end, len(text) + 1) - d.col)
            out.append(f"{' ' * width} |")
            out.append(f"{d.line} | {text}")
            out.append(f"{' ' * width} | {' ' * (d.col - 1)}{carets} {d.code}")
            out.append(f"{' ' * width} |")
        rule = RULES.get(d.code)
        if d.fix is not None:
            decided = "" if d.fix.decided else "; `mend fix --diff` decides whether it applies here"
            out.append(f"  = help: {d.fix.message} ({d.fix.applicability.value} fix: mend fix{decided})")
        elif d.data.get("not_fixed"):
            out.append(f"  = note: mend fix does not fix this: {d.data['not_fixed']}")
        if rule and rule.registry_ids and rule.registry_ids[0].startswith("GB"):
            out.append(f"  = note: predicts Dynamo {', '.join(rule.registry_ids)}; see `mend rule {d.code}`")
        out.append("")
    return "\n".join(out) + ("\n" if out else "")


def json_output(diags: Iterable[Diagnostic]) -> str:
    items = []
    for d in diags:
        item = d.to_dict()
        item["url"] = rule_url(d.code)
        items.append(item)
    return json.dumps(items, indent=2) + "\n"


def _gh_escape(s: str, prop: bool = False) -> str:
    s = s.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")
    if prop:
        s = s.replace(":", "%3A").replace(",", "%2C")
    return s


def github(diags: Iterable[Diagnostic]) -> str:
    lines = []
    for d in diags:
        level = "error" if d.severity.value == "error" else "warning"
        props = f"title={_gh_escape(f'mend ({d.code})', True)},file={_gh_escape(d.path, True)},line={d.line},col={d.col}"
        if d.end_line:
            props += f",endLine={d.end_line}"
        if d.end_col and d.end_line == d.line:
            props += f",endColumn={d.end_col}"
        lines.append(f"::{level} {props}::{_gh_escape(f'{d.path}:{d.line}:{d.col}: {d.code} {d.message}')}")
    return "\n".join(lines) + ("\n" if lines else "")


def sarif(diags: list[Diagnostic]) -> str:
    codes = sorted({d.code for d in diags} | set(RULES))
    index = {c: i for i, c in enumerate(codes)}
    rules = []
    for c in codes:
        r = RULES[c]
        rules.append({
            "id": c,
            "name": r.name,
            "shortDescription": {"text": r.summary},
            "fullDescription": {"text": f"{r.what}\n\n{r.why}"},
            "help": {"text": f"mend rule {c} (docs/rules/{c}.md)\n\n{r.use_instead or r.what}",
                     "markdown": f"`mend rule {c}` (docs/rules/{c}.md)\n\n{r.use_instead or r.what}"},
            "defaultConfiguration": {"level": "error" if r.severity.value == "error" else "warning"},
            "properties": {"category": r.category, "registryIds": list(r.registry_ids), "kind": r.kind},
        })
        url = rule_url(c)
        if url:
            rules[-1]["helpUri"] = url
    results = []
    for d in diags:
        region = {"startLine": d.line, "startColumn": d.col}
        if d.end_line:
            region["endLine"] = d.end_line
        if d.end_col:
            region["endColumn"] = d.end_col
        res = {
            "ruleId": d.code,
            "ruleIndex": index[d.code],
            "level": "error" if d.severity.value == "error" else "warning",
            "message": {"text": d.message},
            "locations": [{"physicalLocation": {"artifactLocation": {"uri": Path(d.path).as_posix()},
                                                "region": region}}],
        }
        if d.fix is not None:
            res["properties"] = {"fix": d.fix.message, "fixApplicability": d.fix.applicability.value}
        results.append(res)
    doc = {
        "$schema": SARIF_SCHEMA,
        "version": "2.1.0",
        "runs": [{
            "tool": {"driver": {"name": "mend", "version": __version__, "rules": rules}},
            "results": results,
        }],
    }
    return json.dumps(doc, indent=2) + "\n"


def junit(diags: list[Diagnostic], files: Iterable[str] = ()) -> str:
    by_file: dict[str, list[Diagnostic]] = {}
    for f in files:
        by_file.setdefault(f, [])
    for d in diags:
        by_file.setdefault(d.path, []).append(d)
    out = ['<?xml version="1.0" encoding="UTF-8"?>',
           f'<testsuites name="mend" tests="{max(len(diags), 1)}" failures="{len(diags)}" errors="0">']
    for path, ds in by_file.items():
        tests = max(len(ds), 1)
        out.append(f'  <testsuite name={quoteattr(path)} tests="{tests}" failures="{len(ds)}" errors="0">')
        if not ds:
            out.append(f'    <testcase name={quoteattr(path)} classname={quoteattr(path)}/>')
        for d in ds:
            name = f"{d.code} {d.name}"
            out.append(f'    <testcase name={quoteattr(name)} classname={quoteattr(path)} line="{d.line}">')
            out.append(f'      <failure message={quoteattr(d.message)}>'
                       f'{escape(f"{d.path}:{d.line}:{d.col}: {d.code} {d.message}")}</failure>')
            out.append("    </testcase>")
        out.append("  </testsuite>")
    out.append("</testsuites>")
    return "\n".join(out) + "\n"


def render(fmt: str, diags: list[Diagnostic], files: Iterable[str] = ()) -> str:
    if fmt == "concise":
        return concise(diags)
    if fmt == "full":
        return full(diags)
    if fmt == "json":
        return json_output(diags)
    if fmt == "github":
        return github(diags)
    if fmt == "sarif":
        return sarif(diags)
    if fmt == "junit":
        return junit(diags, files)
    raise ValueError(f"unknown output format {fmt!r}")


def statistics(diags: list[Diagnostic], fmt: str = "concise") -> str:
    counts = Counter(d.code for d in diags)
    fixable = {d.code for d in diags if safe_fix(d)}
    undecided = {d.code for d in diags if undecided_fix(d)} - fixable
    rows = sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))
    if fmt == "json":
        return json.dumps([{"code": c, "name": RULES[c].name, "count": n, "fixable": c in fixable,
                            "undecided": c in undecided} for c, n in rows], indent=2) + "\n"
    width = max((len(str(n)) for _, n in rows), default=1)
    marks = {c: "[*] " if c in fixable else "[?] " if c in undecided else "    " for c, _ in rows}
    return "".join(f"{n:>{width}}\t{c}\t{marks[c]}{RULES[c].name}\n" for c, n in rows)


def summary_line(diags: list[Diagnostic]) -> str:
    n = len(diags)
    if n == 0:
        return "All checks passed!\n"
    fixable = sum(1 for d in diags if safe_fix(d))
    undecided = sum(1 for d in diags if undecided_fix(d))
    unsafe = [d for d in diags if d.fix is not None and d.fix.applicability is Applicability.UNSAFE]
    hidden_n = sum(1 for d in unsafe if d.fix.decided)  # what `--unsafe-fixes` was seen to apply to these bytes
    open_n = len(unsafe) - hidden_n  # not yet decided in unsafe mode (never fixed, or bytes a safe fix wrote)
    text = f"Found {n} error{'s' if n != 1 else ''}.\n"
    hidden = (f" ({hidden_n} hidden fix{'es' if hidden_n != 1 else ''} can be enabled with `--unsafe-fixes`)"
              if hidden_n else "")
    if fixable:
        text += f"[*] {fixable} fixable with `mend fix`{hidden}.\n"
    if undecided:
        more = f" ({open_n} more with `--unsafe-fixes`)" if open_n else ""
        text += (f"[?] {undecided} with a fix that `mend fix` may apply{more}{'' if fixable else hidden}; `mend fix "
                 "--diff` decides, and check marks them after it.\n")
    elif open_n:
        text += (f"[?] {open_n} with a fix that `mend fix --unsafe-fixes` may apply{'' if fixable else hidden}; "
                 "`mend fix --unsafe-fixes --diff` decides, and check marks them after it.\n")
    if not fixable and not undecided and not open_n and hidden_n:
        text += f"No fixes available{hidden}.\n"
    return text

"""Render a runtime data file: rich table, json, sarif, github, junit, html (no torch import)."""

from __future__ import annotations

import html
import json
import os
import urllib.parse
from collections.abc import Sequence
from pathlib import Path
from typing import Any
from xml.etree import ElementTree as ET

from mend.analyzers.runtime.data import RunData, resolve
from mend.analyzers.runtime.mapping import Finding
from mend.safeio import MAX_SOURCE_BYTES, read_file
from mend.version import __version__

FORMATS = ("table", "json", "sarif", "github", "junit", "html")
DOCS_URL = "https://github.com/mend-project/mend/blob/main/docs/runtime.md"


def summary_line(data: RunData) -> str:
    skips = sum(1 for b in data.breaks if b.frame_skip)
    return (
        f"{data.graph_break_count} graph break site(s) ({sum(b.count for b in data.breaks)} occurrence(s), "
        f"{skips} whole-frame skip(s)), {data.recompile_count} recompile(s), {data.graph_count} graph(s) "
        f"in {len(data.regions)} compiled region(s), compile time {data.compile_time_s:.2f} s"
    )


def _short(text: str, width: int = 110) -> str:
    text = " ".join(text.split())
    return text if len(text) <= width else text[: width - 1] + "…"


# --------------------------------------------------------------------------------------------------
def render_table(data: RunData, found: Sequence[Finding], console: Any = None) -> None:
    from rich.console import Console
    from rich.table import Table

    if console is None:
        console = Console()
        if not console.is_terminal:
            console = Console(width=max(console.width, 150))
    if found:
        table = Table(title="Recorded graph breaks and recompiles (grouped by source site)", title_justify="left")
        for col, kw in (
            ("Location", {"no_wrap": True}),
            ("Kind", {"no_wrap": True}),
            ("Rule", {"max_width": 30}),
            ("Count", {"justify": "right"}),
            ("Reason", {"min_width": 40, "ratio": 1}),
            ("mend fix", {"no_wrap": True}),
        ):
            table.add_column(col, **kw)
        for f in found:
            kind = {"break": "[red]break[/]", "frame-skip": "[bold red]frame skip[/]", "recompile": "[yellow]recompile[/]"}[f.kind]
            rule = f"{f.code} {f.name}" + (" [dim](static)[/]" if f.static_match else "")
            reg = f"[{f.registry_id}] " if f.registry_id else ""
            fix = f.fix.label.replace(" (sometimes)", "*")
            fix = f"[green]{fix}[/]" if fix.startswith("safe") else (f"[yellow]{fix}[/]" if fix != "no" else "[dim]no[/]")
            lib = " [dim](library)[/]" if f.site.in_library else ""
            table.add_row(f"{f.path}:{f.line}{lib}", kind, rule, str(f.count), _escape(reg + _short(f.reason, 90)), fix)
        console.print(table)
        if any(f.fix.available == "sometimes" for f in found):
            console.print("[dim]* `mend fix` has not decided whether it applies here (`mend fix --diff` decides; "
                          "see `mend rule CODE`)[/]")
    else:
        console.print("[green]No graph breaks or recompiles were recorded.[/]")
    if data.regions:
        regions = Table(title="Compiled regions", title_justify="left")
        for col in ("Region", "Graphs", "Compiles", "Recompiles", "Frame skips", "Compile s"):
            regions.add_column(col, justify="left" if col == "Region" else "right")
        for r in sorted(data.regions, key=lambda r: (r.path, r.line)):
            regions.add_row(
                f"{r.path}:{r.line} {r.function}" + (" (library)" if r.in_library else ""),
                str(r.graphs),
                str(r.compiles),
                str(r.recompiles),
                str(r.frame_skips),
                f"{r.compile_time_s:.3f}",
            )
        console.print(regions)
    console.print(summary_line(data))


def _escape(text: str) -> str:
    from rich.markup import escape

    return escape(text)


# --------------------------------------------------------------------------------------------------
def render_json(data: RunData, found: Sequence[Finding]) -> str:
    payload = {
        "version": 1,
        "summary": data.to_dict()["summary"],
        "findings": [f.to_diagnostic().to_dict() for f in found],
        "regions": [vars(r) for r in data.regions],
    }
    return json.dumps(payload, indent=2)


def render_github(data: RunData, found: Sequence[Finding]) -> str:
    lines = []
    for f in found:
        level = "warning" if f.kind == "recompile" else "error"
        d = f.to_diagnostic()
        msg = d.message.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")
        lines.append(f"::{level} title={f.code} {f.name},file={f.path},line={f.line},col=1::{msg}")
    return "\n".join(lines)


def render_sarif(data: RunData, found: Sequence[Finding]) -> str:
    rules: dict[str, dict[str, Any]] = {}
    results = []
    for f in found:
        if f.code not in rules:
            rules[f.code] = {
                "id": f.code,
                "name": f.name or f.code,
                "shortDescription": {"text": f.name or f.code},
                "helpUri": DOCS_URL,
            }
        d = f.to_diagnostic()
        results.append(
            {
                "ruleId": f.code,
                "ruleIndex": list(rules).index(f.code),
                "level": "warning" if f.kind == "recompile" else "error",
                "message": {"text": d.message},
                "locations": [
                    {
                        "physicalLocation": {
                            "artifactLocation": _artifact(f.path),
                            "region": {"startLine": max(1, f.line), "startColumn": 1},
                        }
                    }
                ],
                "properties": {k: v for k, v in d.data.items() if isinstance(v, (str, int, float, bool, list))},
            }
        )
    doc = {
        "$schema": "https://json.schemastore.org/sarif-2.1.0.json",
        "version": "2.1.0",
        "runs": [
            {
                "tool": {
                    "driver": {
                        "name": "mend",
                        "informationUri": DOCS_URL,
                        "version": __version__,
                        "rules": list(rules.values()),
                    }
                },
                "originalUriBaseIds": {"%SRCROOT%": {"uri": _file_uri(data.root)}},
                "results": results,
            }
        ],
    }
    return json.dumps(doc, indent=2)


def _artifact(path: str) -> dict[str, str]:
    """A SARIF artifact location: a percent-encoded URI (spaces, ``#``, ``%``, non-ASCII), relative to
    ``%SRCROOT%`` for a path relative to the run's root, a ``file:`` URI for an absolute one."""
    if Path(path).is_absolute():
        try:
            return {"uri": Path(path).as_uri()}
        except ValueError:
            pass
    return {"uri": urllib.parse.quote(Path(path).as_posix(), safe="/"), "uriBaseId": "%SRCROOT%"}


def _file_uri(root: str) -> str:
    try:
        return Path(root or ".").resolve().as_uri() + "/"
    except ValueError:
        return "file:///"


def render_junit(data: RunData, found: Sequence[Finding]) -> str:
    suites = ET.Element("testsuites", name="mend run", tests=str(len(found)), failures=str(len(found)))
    by_file: dict[str, list[Finding]] = {}
    for f in found:
        by_file.setdefault(f.path, []).append(f)
    for path, items in sorted(by_file.items()):
        suite = ET.SubElement(suites, "testsuite", name=path, tests=str(len(items)), failures=str(len(items)), errors="0", skipped="0")
        for f in items:
            case = ET.SubElement(suite, "testcase", name=f"{f.code} {f.kind} at {path}:{f.line}", classname=f"mend.{f.code}", file=path, line=str(f.line))
            d = f.to_diagnostic()
            failure = ET.SubElement(case, "failure", message=d.message, type=f.code)
            failure.text = f"{path}:{f.line}: {d.message}"
    if not found:
        suite = ET.SubElement(suites, "testsuite", name="mend run", tests="1", failures="0", errors="0", skipped="0")
        ET.SubElement(suite, "testcase", name="no graph breaks or recompiles", classname="mend")
    return '<?xml version="1.0" encoding="UTF-8"?>\n' + ET.tostring(suites, encoding="unicode")


# --------------------------------------------------------------------------------------------------
_CSS = """
:root{--bg:#fff;--fg:#1f2328;--muted:#656d76;--line:#d0d7de;--red:#cf222e;--orange:#bc4c00;--yellow:#9a6700;
--green:#1a7f37;--code:#f6f8fa;--hl:#fff8c5}
*{box-sizing:border-box}body{font:14px/1.5 -apple-system,"Segoe UI",Helvetica,Arial,sans-serif;color:var(--fg);
background:var(--bg);margin:0;padding:24px 32px;max-width:1200px}
h1{font-size:22px;margin:0 0 4px}h2{font-size:17px;margin:28px 0 8px;border-bottom:1px solid var(--line);padding-bottom:4px}
.sub{color:var(--muted);margin:0 0 16px}
.cards{display:flex;gap:12px;flex-wrap:wrap;margin:12px 0}
.card{border:1px solid var(--line);border-radius:8px;padding:10px 16px;min-width:150px}
.card b{display:block;font-size:24px}.card span{color:var(--muted);font-size:12px;text-transform:uppercase}
table{border-collapse:collapse;width:100%;font-size:13px}th,td{border-bottom:1px solid var(--line);padding:6px 8px;
text-align:left;vertical-align:top}th{background:var(--code);font-weight:600}td.num{text-align:right;font-variant-numeric:tabular-nums}
.kind{font-weight:600;white-space:nowrap}.k-break{color:var(--red)}.k-frame-skip{color:#fff;background:var(--red);
border-radius:4px;padding:0 6px}.k-recompile{color:var(--yellow)}
.site{border:1px solid var(--line);border-radius:8px;margin:14px 0;overflow:hidden}
.site header{background:var(--code);padding:8px 12px;display:flex;gap:12px;flex-wrap:wrap;align-items:baseline}
.site header code{font-weight:600}.site .body{padding:8px 12px}
.fix-safe{color:var(--green);font-weight:600}.fix-unsafe{color:var(--orange);font-weight:600}.fix-no{color:var(--muted)}
pre.src{margin:8px 0;background:var(--code);border-radius:6px;padding:6px 0;overflow-x:auto;font:12px/1.45 ui-monospace,Menlo,Consolas,monospace}
pre.src span{display:block;padding:0 12px;white-space:pre}pre.src span.hit{background:var(--hl);border-left:3px solid var(--red);padding-left:9px}
pre.src i{color:var(--muted);font-style:normal;display:inline-block;width:4em;user-select:none}
ul.hints{margin:4px 0 0 18px;padding:0;color:var(--muted)}code{font:12px ui-monospace,Menlo,Consolas,monospace}
footer{margin-top:32px;color:var(--muted);font-size:12px}
"""


def _snippet(data: RunData, path: str, line: int, context: int = 2, files: dict[str, list[str]] | None = None) -> str:
    lines = _source_lines(data, path, {} if files is None else files)
    rows = []
    for n in range(max(1, line - context), line + context + 1):
        text = lines[n - 1] if 0 < n <= len(lines) else ""
        if not text and n > line:
            break
        cls = ' class="hit"' if n == line else ""
        rows.append(f"<span{cls}><i>{n}</i>{html.escape(text.rstrip())}</span>")
    if not rows or not lines:
        return ""
    return '<pre class="src">' + "".join(rows) + "</pre>"


def _source_lines(data: RunData, path: str, files: dict[str, list[str]]) -> list[str]:
    """The lines of a recorded site's file, for the HTML report; [] unless it is a Python source file (a
    regular ``.py`` file) whose real path lies under the run's root, which is not the file system's root:
    a crafted data file (``root: "/"``, a path through ``..`` or a link) never brings another file into
    the report."""
    if path in files:
        return files[path]
    lines: list[str] = []
    try:
        root = os.path.realpath(data.root or ".")
        real = os.path.realpath(resolve(data, path))
        if (Path(real).suffix in (".py", ".pyw") and os.path.dirname(root) != root
                and os.path.commonpath([root, real]) == root):
            lines = read_file(real, MAX_SOURCE_BYTES)[0].decode("utf-8", "replace").splitlines()
    except (OSError, ValueError):
        lines = []
    files[path] = lines
    return lines


def render_html(data: RunData, found: Sequence[Finding]) -> str:
    e = html.escape
    sources: dict[str, list[str]] = {}  # each file read once
    breaks = [f for f in found if f.kind != "recompile"]
    recompiles = [f for f in found if f.kind == "recompile"]
    cards = [
        ("graph break sites", data.graph_break_count),
        ("whole-frame skips", sum(1 for b in data.breaks if b.frame_skip)),
        ("recompiles", data.recompile_count),
        ("graphs", data.graph_count),
        ("compiled regions", len(data.regions)),
        ("compile time", f"{data.compile_time_s:.2f} s"),
    ]
    out = [
        "<!DOCTYPE html>",
        '<html lang="en"><head><meta charset="utf-8">',
        '<meta name="viewport" content="width=device-width, initial-scale=1">',
        "<title>mend run report</title>",
        f"<style>{_CSS}</style></head><body>",
        "<h1>mend run report</h1>",
        f'<p class="sub">{e(summary_line(data))}</p>',
        '<div class="cards" id="summary">'
        + "".join(f'<div class="card"><b>{e(str(v))}</b><span>{e(k)}</span></div>' for k, v in cards)
        + "</div>",
    ]
    anchors = {id(f): i for i, f in enumerate(found)}  # each site's row links to its section, site-<i>
    out.append("<h2>Sites</h2>")
    if found:
        out.append('<table id="sites"><thead><tr><th>Location</th><th>Kind</th><th>Rule</th><th>Count</th>'
                   "<th>Reason</th><th>mend fix</th></tr></thead><tbody>")
        for i, f in enumerate(found):
            out.append(
                f'<tr><td><a href="#site-{i}"><code>{e(f.path)}:{f.line}</code></a></td>'
                f'<td><span class="kind k-{f.kind}">{e(f.kind)}</span></td>'
                f"<td><code>{e(f.code)}</code> {e(f.name)}</td><td class=\"num\">{f.count}</td>"
                f"<td>{e(('[' + f.registry_id + '] ') if f.registry_id else '')}{e(_short(f.reason, 140))}</td>"
                f"<td>{_fix_html(f)}</td></tr>"
            )
        out.append("</tbody></table>")
    else:
        out.append("<p>No graph breaks or recompiles were recorded.</p>")
    for title, group in (("Graph breaks", breaks), ("Recompiles", recompiles)):
        if not group:
            continue
        out.append(f"<h2>{title}</h2>")
        for f in group:
            i = anchors[id(f)]
            site = f.site
            out.append(f'<section class="site" id="site-{i}"><header><code>{e(f.path)}:{f.line}</code>'
                       f'<span class="kind k-{f.kind}">{e(f.kind)}</span><span>in <code>{e(site.function)}</code></span>'
                       f"<span><code>{e(f.code)}</code> {e(f.name)}</span><span>{f.count}×</span>{_fix_html(f)}</header>"
                       '<div class="body">')
            if f.kind == "recompile":
                out.append(f"<div>Guard that failed: <code>{e(site.guard)}</code> (trigger: {e(site.kind)}"
                           f"{', recompile limit hit: the frame now runs eagerly' if site.limit_hit else ''})</div>")
                out.append(f"<div><code>{e(_short(site.reason, 400))}</code></div>")
            else:
                reg = f"{site.registry_id} " if site.registry_id else ""
                outer = f" (inside: {e(site.outer_gb_type)})" if site.outer_gb_type else ""
                out.append(f"<div><b>{e(reg + site.gb_type)}</b>{outer}: {e(site.message)}</div>")
                if site.hints:
                    out.append('<ul class="hints">' + "".join(f"<li>{e(h)}</li>" for h in site.hints[:4]) + "</ul>")
            out.append(_snippet(data, f.path, f.line, files=sources))
            out.append("</div></section>")
    out.append("<h2>Compiled regions</h2>")
    if data.regions:
        out.append('<table id="regions"><thead><tr><th>Region</th><th>Graphs</th><th>Compiles</th><th>Recompiles</th>'
                   "<th>Frame skips</th><th>Breaks</th><th>Compile s</th></tr></thead><tbody>")
        for r in sorted(data.regions, key=lambda r: (r.path, r.line)):
            out.append(f"<tr><td><code>{e(r.path)}:{r.line}</code> {e(r.function)}</td><td class=\"num\">{r.graphs}</td>"
                       f'<td class="num">{r.compiles}</td><td class="num">{r.recompiles}</td>'
                       f'<td class="num">{r.frame_skips}</td><td class="num">{r.breaks}</td>'
                       f'<td class="num">{r.compile_time_s:.3f}</td></tr>')
        out.append("</tbody></table>")
    else:
        out.append("<p>No compiled regions.</p>")
    runs = ", ".join(" ".join(r.argv) for r in data.runs) or "–"
    torch_versions = ", ".join(sorted({r.torch for r in data.runs if r.torch})) or "?"
    out.append(f"<footer>mend {e(__version__)} · torch {e(torch_versions)} · runs: {e(runs)}</footer>")
    out.append("</body></html>")
    return "\n".join(out)


def _fix_html(f: Finding) -> str:
    label = f.fix.label
    cls = "fix-safe" if label.startswith("safe") else ("fix-no" if label == "no" else "fix-unsafe")
    text = "no fix" if label == "no" else f"mend fix: {label}"
    return f'<span class="{cls}">{html.escape(text)}</span>'


def render(data: RunData, found: Sequence[Finding], fmt: str) -> str:
    if fmt == "json":
        return render_json(data, found)
    if fmt == "sarif":
        return render_sarif(data, found)
    if fmt == "github":
        return render_github(data, found)
    if fmt == "junit":
        return render_junit(data, found)
    if fmt == "html":
        return render_html(data, found)
    raise ValueError(f"unknown format {fmt!r}; choose one of {', '.join(FORMATS)}")

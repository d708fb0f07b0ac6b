"""Charts of a ``mend bench`` result: a self-contained HTML page (inline SVG) and, with matplotlib, a PNG.

Two panels, bars grouped by backend with one bar per variant (original, repaired):

* warm latency: median of round medians, with a p10-p90 whisker;
* cold start: time of the first call (compile included), with the compile part drawn darker.
"""

from __future__ import annotations

import html
import io
import math
from pathlib import Path
from typing import Any

from rich.console import Console

from mend.bench.report import results_table, write_file

COLORS = {"original": "#d1495b", "repaired": "#2e86ab"}
DARK = {"original": "#8c2f3c", "repaired": "#1d5670"}


class ChartUnavailable(Exception):
    """The PNG needs matplotlib; the message says how to get it."""


def _panels(doc: dict[str, Any]) -> tuple[list[str], list[str], dict[tuple[str, str], dict[str, Any]]]:
    rows = {(r["variant"], r["backend"]): r for r in doc["results"] if r["status"] == "ok"}
    backends = [b for b in doc["settings"]["backends"] if any(k[1] == b for k in rows)]
    variants = [v for v in ("original", "repaired") if any(k[0] == v for k in rows)]
    return backends, variants, rows


def _nice_max(v: float) -> float:
    if v <= 0:
        return 1.0
    exp = 10 ** math.floor(math.log10(v))
    for m in (1, 2, 2.5, 5, 10):
        if v <= m * exp:
            return m * exp
    return 10 * exp


def _svg_panel(doc: dict[str, Any], metric: str, title: str, unit: str) -> str:
    backends, variants, rows = _panels(doc)
    w, h, left, right, top, bottom = 560, 300, 60, 20, 40, 50
    pw, ph = w - left - right, h - top - bottom

    def values(r: dict[str, Any]) -> tuple[float, float | None, float | None, float | None]:
        if metric == "latency":
            lat = r["latency_ms"]
            return lat["median"], lat["p10"], lat["p90"], None
        return r["first_call_s"], None, None, r["compile_s"]

    vmax = 0.0
    for r in rows.values():
        v, _, hi, _ = values(r)
        vmax = max(vmax, hi if hi is not None else v)
    ymax = _nice_max(vmax * 1.05)
    out = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{w}" height="{h}" viewBox="0 0 {w} {h}" '
        'font-family="sans-serif" font-size="12">',
        f'<text x="{w / 2}" y="20" text-anchor="middle" font-size="14" font-weight="bold">{html.escape(title)}</text>',
    ]
    for i in range(5):
        y = top + ph - ph * i / 4
        out.append(f'<line x1="{left}" y1="{y:.1f}" x2="{w - right}" y2="{y:.1f}" stroke="#ddd"/>')
        out.append(f'<text x="{left - 6}" y="{y + 4:.1f}" text-anchor="end">{ymax * i / 4:.3g}</text>')
    out.append(
        f'<text x="14" y="{top + ph / 2}" transform="rotate(-90 14 {top + ph / 2})" text-anchor="middle">{unit}</text>'
    )
    if backends:
        gw = pw / len(backends)
        bw = min(48.0, gw * 0.7 / max(1, len(variants)))
        for gi, b in enumerate(backends):
            gx = left + gi * gw + (gw - bw * len(variants)) / 2
            for vi, v in enumerate(variants):
                r = rows.get((v, b))
                if r is None:
                    continue
                val, lo, hi, part = values(r)
                x = gx + vi * bw
                bh = ph * val / ymax
                out.append(
                    f'<rect x="{x:.1f}" y="{top + ph - bh:.1f}" width="{bw - 2:.1f}" height="{bh:.1f}" '
                    f'fill="{COLORS[v]}"><title>{v} / {html.escape(b)}: {val:.4g} {unit}</title></rect>'
                )
                if part:
                    ch = ph * min(part, val) / ymax
                    out.append(
                        f'<rect x="{x:.1f}" y="{top + ph - ch:.1f}" width="{bw - 2:.1f}" height="{ch:.1f}" '
                        f'fill="{DARK[v]}"><title>compile {part:.4g} s</title></rect>'
                    )
                if lo is not None and hi is not None:
                    cx = x + (bw - 2) / 2
                    y1, y2 = top + ph - ph * lo / ymax, top + ph - ph * hi / ymax
                    out.append(f'<line x1="{cx:.1f}" y1="{y1:.1f}" x2="{cx:.1f}" y2="{y2:.1f}" stroke="#333"/>')
                    for yy in (y1, y2):
                        out.append(f'<line x1="{cx - 4:.1f}" y1="{yy:.1f}" x2="{cx + 4:.1f}" y2="{yy:.1f}" stroke="#333"/>')
            out.append(
                f'<text x="{left + gi * gw + gw / 2:.1f}" y="{top + ph + 18}" text-anchor="middle">{html.escape(b)}</text>'
            )
    lx = left
    for v in variants:
        out.append(f'<rect x="{lx}" y="{h - 18}" width="12" height="12" fill="{COLORS[v]}"/>')
        out.append(f'<text x="{lx + 16}" y="{h - 8}">{v}</text>')
        lx += 90
    if metric == "cold":
        out.append(f'<text x="{lx}" y="{h - 8}" fill="#555">darker part: compile</text>')
    else:
        out.append(f'<text x="{lx}" y="{h - 8}" fill="#555">whisker: p10-p90</text>')
    out.append("</svg>")
    return "\n".join(out)


def svg_latency(doc: dict[str, Any]) -> str:
    return _svg_panel(doc, "latency", "warm latency (median of round medians)", "ms")


def svg_cold(doc: dict[str, Any]) -> str:
    return _svg_panel(doc, "cold", "cold start: first call, compile included", "s")


def html_page(doc: dict[str, Any]) -> str:
    """One self-contained page: no script, no external file, charts as inline SVG."""
    console = Console(record=True, width=170, file=io.StringIO(), color_system=None)
    console.print(results_table(doc))
    table_text = console.export_text()
    dev = doc["device"]
    notes = "".join(f"<li>{html.escape(n)}</li>" for n in doc.get("notes") or [])
    return f"""<!doctype html>
<html lang="en"><head><meta charset="utf-8">
<title>mend bench: {html.escape(doc['harness'])}</title>
<style>body{{font-family:sans-serif;margin:2em;max-width:1200px}} pre{{font-size:12px;background:#f6f6f6;padding:1em;overflow-x:auto}}
.charts{{display:flex;flex-wrap:wrap;gap:1em}}</style></head>
<body>
<h1>mend bench</h1>
<p><b>harness</b> {html.escape(doc['harness'])}{' &middot; <b>repaired</b> ' + html.escape(str(doc['fixed'])) if doc.get('fixed') else ''}<br>
<b>device</b> {html.escape(dev['type'])}: {html.escape(dev['name'])} &middot; <b>torch</b> {html.escape(doc['torch_version'])}
&middot; <b>mend</b> {html.escape(doc['mend_version'])} &middot; {html.escape(doc['created'])}</p>
<div class="charts">
{svg_latency(doc)}
{svg_cold(doc)}
</div>
<pre>{html.escape(table_text)}</pre>
<p><i>{html.escape(doc['note'])}</i></p>
<ul>{notes}</ul>
</body></html>
"""


def write_html(doc: dict[str, Any], path: str | Path) -> Path:
    return write_file(path, html_page(doc))


def write_png(doc: dict[str, Any], path: str | Path) -> Path:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError as exc:
        raise ChartUnavailable(
            "the PNG chart needs matplotlib, which is not installed: pip install 'torch-mend[bench]' "
            "(or pip install matplotlib); --html writes the same charts without it"
        ) from exc
    backends, variants, rows = _panels(doc)
    fig, axes = plt.subplots(1, 2, figsize=(11, 4))
    width = 0.8 / max(1, len(variants))
    for ax, metric in zip(axes, ("latency", "cold")):
        for vi, v in enumerate(variants):
            xs, vals, errs_lo, errs_hi, parts = [], [], [], [], []
            for bi, b in enumerate(backends):
                r = rows.get((v, b))
                if r is None:
                    continue
                xs.append(bi + (vi - (len(variants) - 1) / 2) * width)
                if metric == "latency":
                    lat = r["latency_ms"]
                    vals.append(lat["median"])
                    errs_lo.append(lat["median"] - lat["p10"])
                    errs_hi.append(lat["p90"] - lat["median"])
                else:
                    vals.append(r["first_call_s"])
                    parts.append(min(r["compile_s"], r["first_call_s"]))
            if metric == "latency":
                ax.bar(xs, vals, width, color=COLORS[v], label=v, yerr=[errs_lo, errs_hi], capsize=3)
            else:
                ax.bar(xs, vals, width, color=COLORS[v], label=v)
                ax.bar(xs, parts, width, color=DARK[v], label=f"{v}: compile")
        ax.set_xticks(range(len(backends)), backends)
        ax.set_title("warm latency (median, p10-p90)" if metric == "latency" else "cold start: first call")
        ax.set_ylabel("ms" if metric == "latency" else "s")
        ax.legend(fontsize=8)
    dev = doc["device"]
    fig.suptitle(f"mend bench {doc['harness']} ({dev['type']}, torch {doc['torch_version']})", fontsize=10)
    fig.tight_layout()
    p = Path(path)
    fig.savefig(p, dpi=110)
    plt.close(fig)
    return p

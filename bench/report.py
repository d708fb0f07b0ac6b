"""Render a ``mend bench`` result: rich tables, and the change against an older result."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path
from typing import Any

from rich.console import Console, Group
from rich.table import Table
from rich.text import Text

MIB = 1024 * 1024


def _f(value: float | None, fmt: str = "{:.2f}", none: str = "-") -> str:
    return none if value is None else fmt.format(value)


def _ratio_text(r: float | None, lower_is_better: bool = True) -> Text:
    """A time ratio shown as 'x0.42', green when it is faster by more than 3 %, red when slower."""
    if r is None:
        return Text("-", style="dim")
    style = ""
    if r < 0.97:
        style = "green" if lower_is_better else "red"
    elif r > 1.03:
        style = "red" if lower_is_better else "green"
    return Text(f"x{r:.2f}", style=style)


def _speedup_text(s: float | None) -> Text:
    if s is None:
        return Text("-", style="dim")
    style = "green" if s > 1.03 else "red" if s < 0.97 else ""
    return Text(f"{s:.2f}x", style=style)


def _spread_text(row: dict[str, Any]) -> str:
    text = f"{row['latency_ms'].get('spread', 0.0):.1%}"
    if len(row.get("processes") or []) > 1:
        text += f" / {row['process_spread']:.1%}"
    return text


VERDICT_STYLE = {"faster": "green", "slower": "red", "within noise": "dim"}


def verdict_text(verdict: str, interval: list[float]) -> Text:
    """'faster (0.78-0.83x)': the verdict with the 95% interval of the ratio it is about."""
    lo, hi = interval
    return Text(f"{verdict} ({lo:.2f}-{hi:.2f}x)", style=VERDICT_STYLE.get(verdict, ""))


def _mem(row: dict[str, Any]) -> str:
    mem = row.get("peak_memory")
    if not mem:
        return "-"
    if mem["kind"] == "rss_high_water":
        return f"{mem['bytes'] / MIB:.0f} (+{(mem['bytes'] - mem['baseline_bytes']) / MIB:.0f})"
    return f"{mem['bytes'] / MIB:.1f}"


def make_console(stderr: bool = False) -> Console:
    """A console that keeps the table readable when the output is not a terminal (logs, CI)."""
    probe = Console(stderr=stderr)
    return probe if probe.is_terminal else Console(stderr=stderr, width=150)


def results_table(doc: dict[str, Any]) -> Table:
    dev = doc["device"]
    mem_kind = next((r["peak_memory"]["kind"] for r in doc["results"] if r.get("peak_memory")), None)
    mem_head = {"rss_high_water": "peak RSS MiB", "cuda_max_memory_allocated": "peak CUDA MiB"}.get(mem_kind or "", "peak MiB")
    t = Table(
        title=f"mend bench {doc['harness']} ({dev['type']}: {dev['name']}, torch {doc['torch_version']})",
        title_justify="left",
        caption="graphs/breaks/recompiles from Dynamo; spread: range of the round medians over their median (and "
        "between processes, with --processes); x eager, x original: time ratios within this run (below 1 is "
        "faster); output: first call compared with the reference row (max abs diff)",
        caption_justify="left",
    )
    for col, just in (
        ("variant", "left"), ("backend", "left"), ("graphs/brk/recomp", "right"), ("compile s", "right"),
        ("1st call s", "right"), ("warm ms (p10-p90)", "right"), ("spread", "right"), ("x eager", "right"),
        ("x original", "right"),
        ("items/s", "right"), (mem_head, "right"), ("output", "left"),
    ):
        t.add_column(col, justify=just, no_wrap=True)  # type: ignore[arg-type]
    last_variant = None
    for r in doc["results"]:
        if last_variant is not None and r["variant"] != last_variant:
            t.add_section()
        last_variant = r["variant"]
        if r["status"] != "ok":
            style = "yellow" if r["status"] == "unavailable" else "red"
            t.add_row(r["variant"], r["backend"], Text(r["status"], style=style), *[""] * 9)
            continue
        lat = r["latency_ms"]
        ratios = r.get("ratios") or {}
        compiled = r.get("graphs") is not None
        t.add_row(
            r["variant"],
            r["backend"],
            f"{r['graphs']}/{r['breaks']}/{r['recompiles']}" if compiled else "-",
            _f(r["compile_s"], "{:.2f}") if compiled else "-",
            _f(r["first_call_s"], "{:.3f}"),
            f"{_num(lat['median'])} ({_num(lat['p10'])}-{_num(lat['p90'])})",
            _spread_text(r),
            _ratio_text(ratios.get("latency_vs_eager")),
            _ratio_text(ratios.get("latency_vs_original")),
            f"{r['throughput']['items_per_s']:,.0f}",
            _mem(r),
            _output_text(r),
        )
    return t


def _output_text(row: dict[str, Any]) -> Text:
    check = row.get("output_check")
    if check is None:
        return Text("reference", style="dim")
    if check["matches"]:
        return Text(f"ok ({check['max_abs_diff']:.0e})" if check["max_abs_diff"] else "ok (equal)", style="green")
    return Text("DIFFERS", style="bold red")


def _num(ms: float) -> str:
    return f"{ms:.3f}" if ms < 10 else f"{ms:.2f}" if ms < 100 else f"{ms:.1f}"


def comparisons_table(doc: dict[str, Any]) -> Table | None:
    rows = doc.get("comparisons") or []
    if not rows:
        return None
    t = Table(title="what the repair bought (original -> repaired; speedups above 1 are better)", title_justify="left")
    for col in ("backend", "graphs", "breaks", "recompiles", "cold-start speedup", "compile speedup", "warm speedup",
                "warm verdict (95% interval)"):
        t.add_column(col, justify="left" if col == "backend" else "right")

    def arrow(pair: list[Any]) -> str:
        a, b = pair
        return f"{_f(a, '{}')} -> {_f(b, '{}')}"

    for c in rows:
        t.add_row(
            c["backend"], arrow(c["graphs"]), arrow(c["breaks"]), arrow(c["recompiles"]),
            _speedup_text(c["cold_speedup"]), _speedup_text(c["compile_speedup"]), _speedup_text(c["warm_speedup"]),
            verdict_text(c["warm_verdict"], c["warm_speedup_interval"]) if c.get("warm_verdict") else "-",
        )
    return t


def versus_table(doc: dict[str, Any]) -> Table | None:
    """The cells of ``--cells`` / ``--repair-value`` against the first: one line each, with the verdict."""
    rows = doc.get("versus") or []
    cells = (doc.get("settings") or {}).get("cells") or []
    if not rows or not cells:
        return None
    base = next((r for r in doc["results"] if f"{r['variant']}/{r['backend']}" == cells[0]), None)
    if base is None or base["status"] != "ok":
        return None
    t = Table(
        title=f"against {cells[0]} (time ratios: below 1 is faster; verdict from the per-round ratios, "
        f"95% bootstrap interval, noise = max(2%, spread between processes))",
        title_justify="left",
    )
    for col in ("cell", "graphs/brk", "1st call s", "x cold", "warm ms", "x warm", "verdict (95% interval)"):
        t.add_column(col, justify="left" if col in ("cell", "verdict (95% interval)") else "right", no_wrap=True)
    by_cell = {f"{r['variant']}/{r['backend']}": r for r in doc["results"]}

    def graphs(r: dict[str, Any]) -> str:
        return f"{r['graphs']}/{r['breaks']}" if r.get("graphs") is not None else "-"

    t.add_row(cells[0], graphs(base), _f(base["first_call_s"], "{:.2f}"), "1.00x",
              _num(base["latency_ms"]["median"]), "1.00x", Text("baseline", style="dim"))
    for v in rows:
        r = by_cell[v["cell"]]
        w = v["warm"]
        t.add_row(v["cell"], graphs(r), _f(r["first_call_s"], "{:.2f}"), _f(v["first_call_ratio"], "{:.2f}x"),
                  _num(r["latency_ms"]["median"]), f"{w['ratio']:.2f}x", verdict_text(w["verdict"], w["interval"]))
    for c in cells[1:]:
        r = by_cell.get(c)
        if r is not None and r["status"] != "ok":
            t.add_row(c, Text(r["status"], style="red"), *[""] * 5)
    return t


def break_sites_table(doc: dict[str, Any]) -> Table | None:
    """Where the graph breaks were, per variant (from the first compiled backend that ran)."""
    seen: dict[str, dict[str, Any]] = {}
    for r in doc["results"]:
        if r["status"] == "ok" and r.get("graphs") is not None and r["variant"] not in seen:
            seen[r["variant"]] = r
    if not any(r.get("break_sites") for r in seen.values()):
        return None
    t = Table(title="graph breaks", title_justify="left")
    for col in ("variant", "location", "break", "times"):
        t.add_column(col, justify="right" if col == "times" else "left")
    for variant, r in seen.items():
        for s in r.get("break_sites") or []:
            where = f"{_rel(s['file'])}:{s['line']}"
            reason = s["reason"] + (f" ({s['registry_id']})" if s.get("registry_id") else "")
            t.add_row(variant, where, reason, str(s["count"]))
    return t


def _rel(path: str) -> str:
    try:
        rel = os.path.relpath(path)
    except ValueError:
        return path
    return path if rel.startswith("..") else rel


def render(doc: dict[str, Any], console: Console, verbose: bool = False) -> None:
    parts: list[Any] = [results_table(doc)]
    for extra in (comparisons_table(doc), versus_table(doc)):
        if extra is not None:
            parts.append(extra)
    if verbose:
        sites = break_sites_table(doc)
        if sites is not None:
            parts.append(sites)
    console.print(Group(*parts))
    s = doc["settings"]
    console.print(
        f"[dim]{s['rounds']} interleaved rounds x {s['calls_per_round']} calls"
        + (f" in {s['processes']} processes per row" if s.get("processes", 1) > 1 else "")
        + f" after {s['warmup']} warm-up calls"
        + (" and a warm-up until stable" if s.get("warmup_max_s") else "")
        + "; warm = median of round medians. Peak memory: "
        + ("CUDA max_memory_allocated." if doc["device"]["type"] == "cuda"
           else "RSS high-water mark of the worker process (in parentheses: growth after loading).")
        + "[/dim]"
    )
    console.print(f"[dim]{doc['note']}[/dim]")
    for n in doc.get("notes") or []:
        console.print(f"[yellow]note:[/yellow] {n}")
    for r in doc["results"]:
        if r["status"] != "ok":
            colour = "yellow" if r["status"] == "unavailable" else "red"
            console.print(f"[{colour}]{r['status']}:[/{colour}] {r['variant']} / {r['backend']}: {r.get('reason')}")
    for r in doc["results"]:
        if r["status"] == "error" and r.get("log_tail") and verbose:
            console.print(f"[red]{r['variant']} / {r['backend']} log:[/red]\n{r['log_tail']}")


# ------------------------------------------------------------------------------------------------
# --compare OLD.json


def compare(old: dict[str, Any], new: dict[str, Any]) -> dict[str, Any]:
    """Per (variant, backend) present in both: old and new warm median, change, and the ratios to eager.

    Times of two runs are only comparable on the same machine; the ratios to eager (measured within each
    run) travel better, so both are given, plus whether the machine or torch version changed.
    """
    def key(r: dict[str, Any]) -> tuple[str, str]:
        return r["variant"], r["backend"]

    old_rows = {key(r): r for r in old["results"] if r["status"] == "ok"}
    rows = []
    for r in new["results"]:
        o = old_rows.get(key(r))
        if r["status"] != "ok" or o is None:
            continue
        om, nm = o["latency_ms"]["median"], r["latency_ms"]["median"]
        rows.append(
            {
                "variant": r["variant"],
                "backend": r["backend"],
                "old_median_ms": om,
                "new_median_ms": nm,
                "change": nm / om - 1.0 if om > 0 else None,
                "old_vs_eager": (o.get("ratios") or {}).get("latency_vs_eager"),
                "new_vs_eager": (r.get("ratios") or {}).get("latency_vs_eager"),
                "old_breaks": o.get("breaks"),
                "new_breaks": r.get("breaks"),
                "old_first_call_s": o["first_call_s"],
                "new_first_call_s": r["first_call_s"],
            }
        )
    same_machine = (old["device"] == new["device"] and old.get("platform") == new.get("platform")
                    and old.get("cpu_count") == new.get("cpu_count"))
    return {
        "old_created": old.get("created"),
        "new_created": new.get("created"),
        "same_machine": same_machine,
        "same_torch": old.get("torch_version") == new.get("torch_version"),
        "rows": rows,
    }


def comparison_table(cmp: dict[str, Any]) -> Table:
    t = Table(
        title=f"change since {cmp['old_created']} (time ratios new/old; below 1 is faster)",
        title_justify="left",
    )
    for col in ("variant", "backend", "breaks", "old ms", "new ms", "change", "x eager old", "x eager new", "1st call s"):
        t.add_column(col, justify="left" if col in ("variant", "backend") else "right")
    for r in cmp["rows"]:
        ch = r["change"]
        t.add_row(
            r["variant"], r["backend"],
            f"{_f(r['old_breaks'], '{}')} -> {_f(r['new_breaks'], '{}')}",
            f"{r['old_median_ms']:.3f}", f"{r['new_median_ms']:.3f}",
            _ratio_text(None if ch is None else ch + 1.0),
            _f(r["old_vs_eager"], "x{:.2f}"), _f(r["new_vs_eager"], "x{:.2f}"),
            f"{r['old_first_call_s']:.3f} -> {r['new_first_call_s']:.3f}",
        )
    return t


def render_compare(cmp: dict[str, Any], console: Console) -> None:
    console.print(comparison_table(cmp))
    if not cmp["rows"]:
        console.print("[yellow]note:[/yellow] no (variant, backend) pair ran in both results")
    if not cmp["same_machine"]:
        console.print(
            "[yellow]note:[/yellow] the two results come from different machines: compare the 'x eager' "
            "ratios, not the times"
        )
    if not cmp["same_torch"]:
        console.print("[yellow]note:[/yellow] the two results used different torch versions")


def write_file(path: str | Path, text: str) -> Path:
    """Write an output the user named (``--json``, ``--html``): its folder is made, and the file is replaced
    whole (a temporary file in that folder, then ``os.replace``), so an interrupt leaves the old file or none."""
    p = Path(path)
    p.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{p.name}.", suffix=".tmp", dir=p.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(text)
        os.replace(tmp, p)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return p

"""``mend bench``: time a harness before and after its repair, on several backends."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Optional

import typer
from rich.console import Console

HELP = """Time HARNESS (path.py:function returning (model_or_fn, args, kwargs)) before and after its repair.

For each variant (original, repaired) and backend (eager, inductor, inductor-reduce-overhead on CUDA,
mend, mend-reduce-overhead on CUDA) it measures graphs, breaks, recompiles, cold compile and first-call time, warm latency (median,
p10, p90 and spread over interleaved rounds, after a warm-up until stable), throughput and peak memory,
each variant in its own process with fresh compile caches, and says of each comparison whether the
difference is beyond noise. --repair-value: original on Inductor, repaired on Inductor, repaired on mend,
one table. Exit codes: 0 measured, 1 a variant failed, 2 bad input."""


def register(app: typer.Typer) -> None:
    app.command("bench", help=HELP, no_args_is_help=True)(bench)


def bench(
    harness: str = typer.Argument(..., metavar="HARNESS", help="path.py:function returning (model_or_fn, args, kwargs)."),
    fixed: Optional[Path] = typer.Option(
        None, "--fixed", metavar="DIR",
        help="Repaired source: a folder whose modules shadow the originals (or holding a repaired copy of the "
        "harness file). Without it, mend runs `mend fix` on a copy of the harness folder.",
    ),
    repair: bool = typer.Option(True, "--repair/--no-repair", help="Without --fixed, repair a copy with `mend fix`."),
    unsafe_fixes: bool = typer.Option(
        False, "--unsafe-fixes", help="Without --fixed, repair the copy with `mend fix --unsafe-fixes`."
    ),
    backend: Optional[list[str]] = typer.Option(
        None, "--backend", "-b",
        help="Backend to run (repeatable): eager, dynamo-eager, aot_eager, inductor, inductor-reduce-overhead, "
        "inductor-max-autotune, mend, mend-reduce-overhead, or any registered Dynamo backend. Default: eager, "
        "inductor, inductor-reduce-overhead (CUDA only), mend, mend-reduce-overhead (CUDA only).",
    ),
    cells: Optional[str] = typer.Option(
        None, "--cells", metavar="V/B,...",
        help="Run only these variant/backend cells (e.g. original/inductor,repaired/mend); every other cell is "
        "compared with the first, with a verdict.",
    ),
    repair_value: bool = typer.Option(
        False, "--repair-value",
        help="What the repair is worth: --cells original/inductor,repaired/inductor,repaired/mend.",
    ),
    processes: int = typer.Option(
        1, "--processes", min=1,
        help="Processes per cell; their disagreement is the noise floor of the verdicts (2 on a GPU host "
        "whose speed varies from process to process).",
    ),
    device: str = typer.Option("auto", "--device", help="cpu, cuda or auto."),
    rounds: int = typer.Option(10, "--rounds", min=1, help="Interleaved timed rounds."),
    calls: int = typer.Option(10, "--calls", min=1, help="Timed calls per round."),
    warmup: int = typer.Option(3, "--warmup", min=0, help="Untimed calls after the first call, before the warm-up until stable."),
    stable_tol: float = typer.Option(
        0.03, "--stable-tol", help="Warm up until two batches of 5 calls have medians within this fraction."
    ),
    warmup_max_s: float = typer.Option(
        60.0, "--warmup-max-s", min=0.0, help="Seconds the warm-up until stable may take (0: none; a note names "
        "rows that did not settle)."
    ),
    batch: Optional[int] = typer.Option(
        None, "--batch", min=1, help="Items per call for throughput (default: first dimension of the first tensor argument)."
    ),
    threads: Optional[int] = typer.Option(None, "--threads", min=1, help="torch.set_num_threads in each worker."),
    compile_threads: Optional[int] = typer.Option(
        None, "--compile-threads", min=1,
        help="TORCHINDUCTOR_COMPILE_THREADS for each worker. Default: 1 on CPU (no compile-worker pool to "
        "disturb the timings), Inductor's own default on CUDA (parallel Triton compiles).",
    ),
    dtype: Optional[str] = typer.Option(None, "--dtype", help="Cast the model and floating inputs: float32, float16, bfloat16."),
    grad: bool = typer.Option(False, "--grad/--no-grad", help="Run calls with autograd on (needed when the harness calls backward)."),
    json_out: Optional[str] = typer.Option(None, "--json", metavar="FILE", help="Write the result as JSON (- for stdout)."),
    html_out: Optional[Path] = typer.Option(None, "--html", metavar="FILE", help="Write a self-contained HTML page with charts."),
    png_out: Optional[Path] = typer.Option(None, "--png", metavar="FILE", help="Write the charts as PNG (needs matplotlib)."),
    compare_with: Optional[Path] = typer.Option(None, "--compare", metavar="OLD.json", help="Show the change against an older --json result."),
    timeout: float = typer.Option(1800.0, "--timeout", help="Seconds one phase of one worker may take."),
    verbose: bool = typer.Option(False, "--verbose", "-v", help="Also list break sites and failing workers' logs."),
) -> None:
    from mend.bench import BenchError, Settings, chart, load_result, report, run

    to_stdout = json_out == "-"
    console = report.make_console(stderr=to_stdout)
    err = report.make_console(stderr=True)
    old = None
    if compare_with is not None:
        try:
            old = load_result(compare_with)
        except BenchError as exc:
            err.print(f"[red]error:[/red] --compare: {exc}")
            raise typer.Exit(2) from None
    if png_out is not None:
        try:
            import matplotlib  # noqa: F401
        except ImportError:
            err.print("[red]error:[/red] --png needs matplotlib: pip install 'torch-mend[bench]' (or use --html)")
            raise typer.Exit(2) from None
    if repair_value and cells:
        err.print("[red]error:[/red] --repair-value names its cells: drop --cells")
        raise typer.Exit(2)
    from mend.bench.runner import REPAIR_VALUE

    cell_list = REPAIR_VALUE if repair_value else [c.strip() for c in cells.split(",") if c.strip()] if cells else None
    settings = Settings(
        harness=harness, fixed=str(fixed) if fixed else None, repair=repair, unsafe_fixes=unsafe_fixes, backends=backend or None,
        device=device, rounds=rounds, calls=calls, warmup=warmup, batch=batch, threads=threads,
        compile_threads=compile_threads, dtype=dtype, grad=grad, timeout_s=timeout, cells=cell_list,
        processes=processes, stable_tol=stable_tol, warmup_max_s=warmup_max_s,
    )
    try:
        doc = _run_with_progress(run, settings, err)
    except BenchError as exc:
        err.print(f"[red]error:[/red] {exc}")
        raise typer.Exit(2) from None

    report.render(doc, console, verbose=verbose)
    if old is not None:
        report.render_compare(report.compare(old, doc), console)
    if json_out:
        text = json.dumps(doc, indent=2)
        if to_stdout:
            sys.stdout.write(text + "\n")
        else:
            report.write_file(json_out, text + "\n")
            console.print(f"wrote {json_out}")
    if html_out:
        chart.write_html(doc, html_out)
        console.print(f"wrote {html_out}")
    if png_out:
        chart.write_png(doc, png_out)
        console.print(f"wrote {png_out}")
    failed = [r for r in doc["results"] if r["status"] == "error"]
    if failed:
        for r in failed:
            err.print(f"[red]failed:[/red] {r['variant']} / {r['backend']}: {r['reason']}")
        if any("does not require grad" in (r.get("reason") or "") for r in failed) and not grad:
            err.print("hint: the harness calls backward(); run with --grad")
        raise typer.Exit(1)


def _run_with_progress(run, settings, err: Console):  # type: ignore[no-untyped-def]
    if not sys.stderr.isatty():
        return run(settings)
    from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn

    with Progress(
        TextColumn("{task.description}"), BarColumn(), TextColumn("{task.completed}/{task.total}"),
        TimeElapsedColumn(), console=err, transient=True,
    ) as bar:
        task = bar.add_task("mend bench", total=None)

        def step(desc: str, n: int, total: int | None = None) -> None:
            if total is not None:
                bar.update(task, total=total)
            if desc:
                bar.update(task, description=desc)
            if n:
                bar.advance(task, n)

        return run(settings, progress=step)

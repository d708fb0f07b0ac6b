"""Drive the benchmark: worker processes per (variant, backend), interleaved timed rounds, verdicts.

Method (see ``docs/bench.md``):

1. Every worker starts at once, imports torch and loads the harness (not timed).
2. One at a time, each worker compiles and makes its first call (cold: fresh Inductor, Triton and mend
   caches in a private temporary folder), then warms up until its call times are stable.
3. Timed rounds are interleaved: in round r every worker makes ``calls`` timed calls, in an order
   rotated by r (:func:`stats.round_order`), so that drift in machine load spreads over all variants alike.
4. Each worker reports its counts and peak memory and exits.

The warm latency is the median of the round medians; p10 and p90 are over all timed calls. With
``processes`` > 1 each (variant, backend) runs in that many processes and a round's value is their median;
how far those processes lie apart is the noise floor of every verdict. A comparison of two rows is the
median of their per-round time ratios with a bootstrap interval, and a verdict: faster, slower or within
noise (:func:`stats.compare`).
"""

from __future__ import annotations

import json
import os
import platform
import queue
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from mend.analyzers.runtime.harness import HarnessError, parse_spec
from mend.bench import stats
from mend.bench import variants as variants_mod
from mend.bench.worker import BACKENDS
from mend.settings import CACHE_DIR
from mend.version import __version__

SCHEMA_NAME = "mend-bench"
SCHEMA_VERSION = 1
NOTE = (
    "Numbers are comparable only within one run: every variant ran in its own process on this machine, "
    "interleaved, in this run. Compare runs from different machines or times by their ratios, not their times."
)


SETTLE_S = 3.0  # seconds to wait after a cold start that used Inductor's compile-worker pool
UNSTEADY = 1.5  # a row whose slowest round median exceeds its fastest by this factor gets a note


class BenchError(Exception):
    """Bad settings or input; nothing was measured."""


@dataclass
class Settings:
    harness: str
    fixed: str | None = None
    repair: bool = True  # without --fixed, try `mend fix` on a copy
    unsafe_fixes: bool = False  # ... with --unsafe-fixes
    backends: list[str] | None = None  # None: eager, inductor, mend (+ reduce-overhead on CUDA)
    device: str = "auto"
    rounds: int = 10
    calls: int = 10
    warmup: int = 3
    batch: int | None = None
    threads: int | None = None
    compile_threads: int | None = None  # None: 1 on CPU, Inductor's own default on CUDA
    dtype: str | None = None
    grad: bool = False
    seed: int = 0
    timeout_s: float = 1800.0  # per phase of one worker
    cells: list[str] | None = None  # "variant/backend" to run, the first the baseline of every verdict
    processes: int = 1  # processes per (variant, backend)
    stable_tol: float = 0.03  # warm-up ends when two batches of calls agree within this fraction
    warmup_max_s: float = 60.0  # ... or after this many seconds (0: no warm-up until stable)
    keep_temp: bool = False
    extra_notes: list[str] = field(default_factory=list)


Progress = Callable[..., None]  # (description, steps done since last call, total=None)


REPAIR_VALUE = ["original/inductor", "repaired/inductor", "repaired/mend"]  # --repair-value
percentile = stats.percentile
latency_stats = stats.latency_stats


# ------------------------------------------------------------------------------------------------
# workers


class _Worker:
    def __init__(
        self, variant: variants_mod.Variant, backend: str, cfg: dict[str, Any], tmp: Path, unavailable: str | None = None
    ) -> None:
        self.variant = variant
        self.backend = backend
        self.tmp = tmp
        self.row: dict[str, Any] = {
            "variant": variant.name,
            "backend": backend,
            "status": "ok",
            "reason": None,
            "source": variant.source,
        }
        self.cfg = cfg
        self.times: list[list[float]] = []
        self.cold: dict[str, Any] | None = None  # the ``ready`` event
        self.harness_error: str | None = None
        self.alive = False
        self._log = None
        if unavailable is not None:  # known before starting anything: no process
            self.row["status"], self.row["reason"] = "unavailable", unavailable
            return
        tmp.mkdir(parents=True, exist_ok=True)
        env = dict(os.environ)
        env.update(
            {
                "TORCHINDUCTOR_CACHE_DIR": str(tmp / "inductor"),
                "TRITON_CACHE_DIR": str(tmp / "triton"),
                CACHE_DIR.name: str(tmp / "mend"),
                "PYTHONUNBUFFERED": "1",
                "PYTHONDONTWRITEBYTECODE": "1",
            }
        )
        if cfg["compile_threads"] is not None:
            env["TORCHINDUCTOR_COMPILE_THREADS"] = str(cfg["compile_threads"])
        env.pop("TORCH_LOGS", None)  # torch's own log handlers would duplicate our capture on stderr
        self.log_path = tmp / "worker.log"
        self._log = open(self.log_path, "wb")
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "mend.bench.worker"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=self._log,
            env=env,
            cwd=os.getcwd(),
        )
        self.alive = True
        self._q: queue.Queue[dict[str, Any] | None] = queue.Queue()
        threading.Thread(target=self._read, daemon=True).start()
        self._send(cfg)

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            try:
                self._q.put(json.loads(line))
            except ValueError:
                continue
        self._q.put(None)

    def _send(self, msg: dict[str, Any]) -> None:
        assert self.proc.stdin is not None
        try:
            self.proc.stdin.write((json.dumps(msg) + "\n").encode())
            self.proc.stdin.flush()
        except (BrokenPipeError, OSError):
            pass  # the reader sees the end of the stream and reports the failure

    def command(self, msg: dict[str, Any] | None, expect: str, timeout: float) -> dict[str, Any] | None:
        """Send a command and wait for the expected event; on failure mark the row and stop the worker."""
        if not self.alive:
            return None
        if msg is not None:
            self._send(msg)
        try:
            event = self._q.get(timeout=timeout)
        except queue.Empty:
            self._fail("error", f"no answer within {timeout:.0f} s (phase {expect})")
            return None
        if event is None:
            self.proc.wait(timeout=30)
            self._fail("error", f"the worker process exited with code {self.proc.returncode} ({expect})")
            return None
        if event.get("event") in ("error", "unavailable"):
            status = event["event"]
            reason = event.get("error", "")
            if event.get("harness_error"):
                self.harness_error = reason
            if status == "error":
                reason = f"{event.get('phase', '?')}: {reason}"
            self._fail(status, reason)
            return None
        if event.get("event") != expect:
            self._fail("error", f"unexpected answer {event.get('event')!r} while waiting for {expect!r}")
            return None
        return event

    def _fail(self, status: str, reason: str) -> None:
        self.row["status"] = status
        self.row["reason"] = reason
        self.stop()
        if status == "error":
            try:
                tail = self.log_path.read_text(errors="replace").strip().splitlines()[-15:]
            except OSError:
                tail = []
            self.row["log_tail"] = "\n".join(tail)

    def stop(self) -> None:
        if self.alive:
            self.alive = False
            try:
                if self.proc.stdin:
                    self.proc.stdin.close()
            except OSError:
                pass
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        if self._log is not None:
            self._log.close()


# ------------------------------------------------------------------------------------------------


def resolve_device(device: str) -> str:
    if device not in ("auto", "cpu", "cuda") and not device.startswith("cuda:"):
        raise BenchError(f"--device must be cpu, cuda or auto, not {device!r}")
    if device == "cpu":
        return "cpu"
    import torch

    if device == "auto":
        return "cuda" if torch.cuda.is_available() else "cpu"
    if not torch.cuda.is_available():
        raise BenchError("--device cuda: torch sees no CUDA device here (torch.cuda.is_available() is False)")
    return device


def default_backends(device: str) -> list[str]:
    names = ["eager", "inductor"]
    if device.startswith("cuda"):
        names.append("inductor-reduce-overhead")
    names.append("mend")
    if device.startswith("cuda"):
        names.append("mend-reduce-overhead")
    return names


def _check_backends(names: list[str]) -> None:
    if not names:
        raise BenchError("no backend to run")
    if len(set(names)) != len(names):
        raise BenchError(f"a backend is named twice: {', '.join(names)}")
    unknown = [n for n in names if n not in BACKENDS]
    if unknown:
        import torch._dynamo

        known = set(torch._dynamo.list_backends(exclude_tags=()))
        bad = [n for n in unknown if n not in known]
        if bad:
            raise BenchError(
                f"unknown backend {', '.join(bad)}; use {', '.join(BACKENDS)} or a registered Dynamo backend"
            )


def parse_cells(cells: list[str], variants: list[str]) -> list[tuple[str, str]]:
    """``variant/backend`` strings -> pairs, checked: known variants, no pair twice."""
    out: list[tuple[str, str]] = []
    for c in cells:
        variant, sep, backend = c.partition("/")
        if not sep or not variant or not backend:
            raise BenchError(f"--cells: {c!r} is not VARIANT/BACKEND (e.g. original/inductor)")
        if variant not in ("original", "repaired"):
            raise BenchError(f"--cells: unknown variant {variant!r} in {c!r}; use original or repaired")
        if variant not in variants:
            raise BenchError(f"--cells: {c!r} needs the repaired variant, and there is none (see the notes: "
                             "pass --fixed DIR)")
        if (variant, backend) in out:
            raise BenchError(f"--cells: {c!r} is named twice")
        out.append((variant, backend))
    return out


def _validate(settings: Settings) -> None:
    if settings.rounds < 1 or settings.calls < 1 or settings.warmup < 0:
        raise BenchError("--rounds and --calls must be at least 1 and --warmup at least 0")
    if settings.processes < 1:
        raise BenchError("--processes must be at least 1")
    if not 0 < settings.stable_tol < 1 or settings.warmup_max_s < 0:
        raise BenchError("--stable-tol must be between 0 and 1 and --warmup-max-s at least 0")
    if settings.dtype not in (None, "float32", "float16", "bfloat16"):
        raise BenchError(f"--dtype must be float32, float16 or bfloat16, not {settings.dtype!r}")
    if settings.cells is not None and settings.backends:
        raise BenchError("--cells (or --repair-value) names the backends itself: drop --backend")


def run(settings: Settings, progress: Progress | None = None) -> dict[str, Any]:
    """Run the benchmark and return the result document (schema ``mend-bench`` version 1)."""
    step = progress or (lambda desc, n, total=None: None)
    _validate(settings)
    try:
        spec = parse_spec(settings.harness)
    except HarnessError as exc:
        raise BenchError(str(exc)) from exc
    variant_list = [variants_mod.original(spec)]
    if settings.fixed:
        try:
            variant_list.append(variants_mod.from_fixed_dir(spec, settings.fixed))
        except HarnessError as exc:
            raise BenchError(str(exc)) from exc
    device = resolve_device(settings.device)
    if settings.cells is not None:
        backends = list(dict.fromkeys(c.partition("/")[2] for c in settings.cells))
    else:
        backends = list(settings.backends or default_backends(device))
    _check_backends(backends)

    notes = list(settings.extra_notes)
    work = Path(tempfile.mkdtemp(prefix="mend-bench-"))
    try:
        if not settings.fixed and settings.repair:
            step("repairing a copy with mend fix", 0)
            try:
                v, more = variants_mod.auto_repair(spec, work, unsafe_fixes=settings.unsafe_fixes)
                variant_list.append(v)
                notes.extend(more)
            except variants_mod.RepairUnavailable as exc:
                notes.append(f"no repaired variant: {exc}")
        if settings.cells is not None:
            cells = parse_cells(settings.cells, [v.name for v in variant_list])
        else:
            cells = [(v.name, b) for v in variant_list for b in backends]
        result = _measure(settings, device, backends, variant_list, cells, work, step)
    finally:
        if not settings.keep_temp:
            shutil.rmtree(work, ignore_errors=True)
    result["notes"] = notes + result["notes"]
    return result


def _same_modules(workers: list[_Worker], loaded: dict[int, dict[str, Any]]) -> None:
    """Both variants import the same modules of the repaired folder (the original from outside it, the
    repaired from it: each worker checked its own side); raise :class:`BenchError` where they differ."""
    names = {w.variant.name: set(loaded[i].get("tree") or {}) for i, w in enumerate(workers) if i in loaded}
    original, repaired = names.get("original"), names.get("repaired")
    if original is None or repaired is None or original == repaired:
        return
    only = sorted(repaired - original)
    if only:
        raise BenchError(f"the original variant did not import {', '.join(only)}, which the repaired variant "
                         "imported from the repaired folder: the two variants do not run the same code")
    raise BenchError(f"the repaired variant did not import {', '.join(sorted(original - repaired))}, which "
                     "the original variant imported: the two variants do not run the same code")


def _worker_cfg(settings: Settings, v: variants_mod.Variant, b: str, device: str, folder: Path,
                compile_threads: int | None, tree: str | None) -> dict[str, Any]:
    return {
        "output_path": str(folder / "output.pt"),
        "harness": v.harness,
        "search": v.search,
        "fixed": v.fixed,
        "tree": tree,
        "backend": b,
        "device": device,
        "dtype": settings.dtype,
        "warmup": settings.warmup,
        "stable_tol": settings.stable_tol,
        "warmup_max_s": settings.warmup_max_s,
        "batch": settings.batch,
        "threads": settings.threads,
        "grad": settings.grad,
        "seed": settings.seed,
        "compile_threads": compile_threads,
    }


def _measure(
    settings: Settings,
    device: str,
    backends: list[str],
    variant_list: list[variants_mod.Variant],
    cells: list[tuple[str, str]],
    work: Path,
    step: Progress,
) -> dict[str, Any]:
    load_start = _loadavg()
    started = datetime.now(timezone.utc)
    workers: list[_Worker] = []
    notes: list[str] = []
    compile_threads = settings.compile_threads
    if compile_threads is None and not device.startswith("cuda"):
        compile_threads = 1
    step("starting workers", 0, total=len(cells) * settings.processes * (3 + settings.rounds))
    try:
        _start_workers(workers, settings, device, variant_list, cells, work, compile_threads)
        loaded: dict[int, dict[str, Any]] = {}
        for i, w in enumerate(workers):
            step(f"loading {w.variant.name} / {w.backend}", 0)
            ev = w.command(None, "loaded", settings.timeout_s)
            if ev:
                loaded[i] = ev
                w.row["batch"] = ev["batch"]
                if w.variant.fixed:
                    w.row["shadowed"] = ev["shadowed"]
            step("", 1)
        bad = next((w for w in workers if w.harness_error), None)
        if bad is not None:
            where = f" (repaired variant from {bad.variant.fixed})" if bad.variant.fixed else ""
            raise BenchError(f"the harness cannot be loaded{where}: {bad.harness_error}")
        _same_modules(workers, loaded)
        _cold_starts(workers, settings, compile_threads, step)
        for r in range(settings.rounds):
            active = [w for w in workers if w.alive]
            for k in stats.round_order(len(active), r):
                w = active[k]
                step(f"round {r + 1}/{settings.rounds}: {w.variant.name} / {w.backend}", 0)
                ev = w.command({"cmd": "round", "calls": settings.calls}, "round", settings.timeout_s)
                if ev:
                    w.times.append(ev["times"])
                step("", 1)
            # workers that failed mid-run still count their planned steps
            step("", len(workers) - len(active))
        _finish_workers(workers, settings, step)
    finally:
        for w in workers:
            w.stop()
    load_end = _loadavg()
    first = next(iter(loaded.values()), {})
    if first.get("unwrapped"):
        notes.append("the harness returned an already compiled object; each backend compiled its original")
    cpus = os.cpu_count() or 1
    rows = [_finish_row([w for w in workers if (w.variant.name, w.backend) == c]) for c in cells]
    notes.extend(timing_notes(rows, load_start, cpus, device, settings.threads))
    _add_ratios(rows)
    baseline = cells[0] if settings.cells is not None else None
    return {
        "schema": SCHEMA_NAME,
        "version": SCHEMA_VERSION,
        "created": started.isoformat(timespec="seconds"),
        "duration_s": (datetime.now(timezone.utc) - started).total_seconds(),
        "mend_version": __version__,
        "torch_version": first.get("torch_version") or _torch_version(),
        "python_version": platform.python_version(),
        "platform": platform.platform(),
        "device": {"type": "cuda" if device.startswith("cuda") else "cpu", "name": first.get("device_name", "")},
        "cpu_count": cpus,
        "load_average": {"start": load_start, "end": load_end},
        "harness": settings.harness,
        "fixed": settings.fixed,
        "settings": {
            "backends": backends,
            "cells": [f"{v}/{b}" for v, b in cells],
            "processes": settings.processes,
            "rounds": settings.rounds,
            "calls_per_round": settings.calls,
            "warmup": settings.warmup,
            "stable_tol": settings.stable_tol,
            "warmup_max_s": settings.warmup_max_s,
            "batch": settings.batch,
            "threads": settings.threads,
            "compile_threads": compile_threads,
            "dtype": settings.dtype,
            "grad": settings.grad,
            "seed": settings.seed,
        },
        "note": NOTE,
        "notes": notes,
        "results": rows,
        "comparisons": _comparisons(rows, backends),
        "versus": _versus(rows, baseline) if baseline else [],
    }


def _start_workers(workers: list[_Worker], settings: Settings, device: str, variant_list: list[variants_mod.Variant],
                   cells: list[tuple[str, str]], work: Path, compile_threads: int | None) -> None:
    """Start ``settings.processes`` worker processes per cell, in the cells' order, into ``workers`` (the
    caller stops every one started, also when a later start fails)."""
    by_name = {v.name: v for v in variant_list}
    tree = next((v.fixed for v in variant_list if v.fixed), None)  # both variants check what they import from it
    n = settings.processes
    for vname, b in cells:
        v = by_name[vname]
        why = None
        if b.endswith("-reduce-overhead") and not device.startswith("cuda"):
            why = "CUDA graphs (mode='reduce-overhead') need a CUDA device"
        for i in range(n):
            folder = work / (f"{v.name}-{b}" + (f"-p{i}" if n > 1 else ""))
            cfg = _worker_cfg(settings, v, b, device, folder, compile_threads, tree)
            workers.append(_Worker(v, b, cfg, folder, unavailable=why))


def _finish_workers(workers: list[_Worker], settings: Settings, step: Progress) -> None:
    """Each worker's final counts and peak memory, then it exits."""
    for w in workers:
        ev = w.command({"cmd": "finish"}, "finished", settings.timeout_s)
        if ev:
            for key in ("counted_by", "graphs", "breaks", "break_events", "frames_skipped", "recompiles", "break_sites",
                        "recompile_reasons", "compile_total_s", "peak_memory"):
                w.row[key] = ev[key]
            w.stop()
        step("", 1)


def _cold_starts(workers: list[_Worker], settings: Settings, compile_threads: int | None, step: Progress) -> None:
    """Compile and first call, one worker at a time; the first ``original`` worker's output is the reference."""
    reference: _Worker | None = None
    for w in workers:
        step(f"compiling {w.variant.name} / {w.backend} (cold)", 0)
        ref_path = reference.cfg["output_path"] if reference is not None else None
        ev = w.command({"cmd": "cold", "reference": ref_path}, "ready", settings.timeout_s)
        if ev:
            w.cold = ev
            check = ev.get("output_check")
            if check is not None and reference is not None:
                w.row["output_check"] = {"reference": f"{reference.variant.name} / {reference.backend}", **check}
            if reference is None and w.variant.name == "original":
                reference = w  # the first original row that ran is the reference for all others
            if compile_threads != 1 and w.backend != "eager":
                time.sleep(SETTLE_S)  # let Inductor's compile-worker pool go quiet before the next one
        step("", 1)


def timing_notes(
    rows: list[dict[str, Any]], load_start: list[float] | None, cpus: int, device: str, threads: int | None
) -> list[str]:
    """What the reader must know about the quality of the timings: a busy machine, unsteady rounds, a warm-up
    that never settled, processes of the same row that disagree."""
    notes = []
    if load_start and load_start[0] > 0.5 * cpus:
        hint = ""
        if not device.startswith("cuda") and threads != 1:
            hint = " (multi-threaded CPU timings suffer most: --threads 1 gives steadier numbers)"
        notes.append(
            f"load average {load_start[0]:.2f} on {cpus} CPUs when the run started: other work on this "
            f"machine may have distorted the timings{hint}"
        )
    differ = [
        f"{r['variant']} / {r['backend']} ({r['output_check']['detail']})"
        for r in rows
        if r["status"] == "ok" and r.get("output_check") and not r["output_check"]["matches"]
    ]
    if differ:
        ref = next(r["output_check"]["reference"] for r in rows if r.get("output_check"))
        notes.append(
            f"OUTPUT MISMATCH against {ref}: {'; '.join(differ)}. A speedup of a variant whose output changed "
            "is not a like-for-like comparison"
        )
    ok = [r for r in rows if r["status"] == "ok"]
    unsteady = [
        f"{r['variant']} / {r['backend']}"
        for r in ok
        if len(r["latency_ms"]["round_medians"]) > 1
        and max(r["latency_ms"]["round_medians"]) > UNSTEADY * min(r["latency_ms"]["round_medians"])
    ]
    if unsteady:
        notes.append(
            f"round medians varied by more than {UNSTEADY:.1f}x for {', '.join(unsteady)}: run more rounds, "
            "or on a quieter machine, before trusting small differences"
        )
    unsettled = [f"{r['variant']} / {r['backend']}" for r in ok
                 if any(p["stable"] is False for p in r.get("processes") or [])]
    if unsettled:
        notes.append(
            f"the warm-up of {', '.join(unsettled)} did not settle (two batches of calls within the tolerance) "
            "before --warmup-max-s: its first rounds may still be warming up"
        )
    apart = [f"{r['variant']} / {r['backend']} ({r['process_spread']:.0%})" for r in ok
             if r.get("process_spread", 0.0) > 0.05]
    if apart:
        notes.append(
            f"separate processes of the same measurement differ by more than 5%: {', '.join(apart)}; verdicts "
            "count such a difference as noise"
        )
    return notes


def _finish_row(group: list[_Worker]) -> dict[str, Any]:
    """One row of results from the processes of one (variant, backend): the first process's row, with the
    latency over all of them (a round's value is the median of the processes' round medians)."""
    row = group[0].row
    failed = next((w for w in group if w.row["status"] != "ok"), None)
    if failed is not None and failed is not group[0]:  # one failed process fails the row
        row.update(status=failed.row["status"], reason=f"process {group.index(failed) + 1}: {failed.row['reason']}")
        if failed.row.get("log_tail"):
            row["log_tail"] = failed.row["log_tail"]
    if row["status"] == "ok" and all(w.times for w in group):
        per = [[statistics.median(r) * 1e3 for r in w.times] for w in group]
        lat = latency_stats([t for w in group for t in w.times])  # p10/p90/min/max over every call
        rounds = stats.combine_replicas(per)
        med = statistics.median(rounds)
        lat.update(median=med, round_medians=rounds, rounds=len(rounds),
                   spread=(max(rounds) - min(rounds)) / med if med > 0 else 0.0)
        row["latency_ms"] = lat
        batch = int(row.get("batch") or 1)
        row["throughput"] = {"batch": batch, "items_per_s": batch / (lat["median"] / 1e3)}
        cold = [w.cold or {} for w in group]
        row["first_call_s"], row["compile_s"] = cold[0]["first_call_s"], cold[0]["compile_s"]
        row["processes"] = [
            {"median_ms": statistics.median(p), "first_call_s": c["first_call_s"],
             "warmup_calls": c["warmup"]["calls"], "stable": c["warmup"]["stable"]}
            for c, p in zip(cold, per)
        ]
        row["process_spread"] = stats.process_spread([p["median_ms"] for p in row["processes"]])
    elif row["status"] == "ok":
        row["status"] = "error"
        row["reason"] = "no timed calls completed"
    return row


def _get(rows: list[dict[str, Any]], variant: str, backend: str) -> dict[str, Any] | None:
    for r in rows:
        if r["variant"] == variant and r["backend"] == backend and r["status"] == "ok":
            return r
    return None


def _ratio(a: float | None, b: float | None) -> float | None:
    if a is None or b is None or b <= 0:
        return None
    return a / b


def _add_ratios(rows: list[dict[str, Any]]) -> None:
    """Time ratios (below 1 is faster), always between rows of this run."""
    for r in rows:
        if r["status"] != "ok":
            continue
        eager = _get(rows, r["variant"], "eager")
        orig = _get(rows, "original", r["backend"]) if r["variant"] != "original" else None
        med = r["latency_ms"]["median"]
        r["ratios"] = {
            "latency_vs_eager": _ratio(med, eager["latency_ms"]["median"]) if eager else None,
            "first_call_vs_eager": _ratio(r["first_call_s"], eager["first_call_s"]) if eager else None,
            "latency_vs_original": _ratio(med, orig["latency_ms"]["median"]) if orig else None,
            "first_call_vs_original": _ratio(r["first_call_s"], orig["first_call_s"]) if orig else None,
            "compile_vs_original": _ratio(r["compile_s"], orig["compile_s"]) if orig else None,
        }


def _noise(*rows: dict[str, Any]) -> float:
    return max([stats.MIN_EFFECT, *(r.get("process_spread", 0.0) for r in rows)])


def _comparisons(rows: list[dict[str, Any]], backends: list[str]) -> list[dict[str, Any]]:
    """Per backend: the original against the repaired variant (speedups above 1 are better), with the
    verdict on the warm time."""
    out = []
    for b in backends:
        o = _get(rows, "original", b)
        p = _get(rows, "repaired", b)
        if not o or not p:
            continue
        warm = stats.compare(o["latency_ms"]["round_medians"], p["latency_ms"]["round_medians"], _noise(o, p))
        lo, hi = warm["interval"]
        out.append(
            {
                "backend": b,
                "graphs": [o["graphs"], p["graphs"]],
                "breaks": [o["breaks"], p["breaks"]],
                "recompiles": [o["recompiles"], p["recompiles"]],
                "warm_speedup": _ratio(o["latency_ms"]["median"], p["latency_ms"]["median"]),
                "warm_speedup_interval": [1.0 / hi, 1.0 / lo],
                "warm_verdict": warm["verdict"],
                "cold_speedup": _ratio(o["first_call_s"], p["first_call_s"]),
                "compile_speedup": _ratio(o["compile_s"], p["compile_s"]),
            }
        )
    return out


def _versus(rows: list[dict[str, Any]], baseline: tuple[str, str]) -> list[dict[str, Any]]:
    """Every row against the baseline cell (``--cells``' first): warm time ratio (below 1 is faster) with its
    interval and verdict, cold-start and compile ratios."""
    base = _get(rows, *baseline)
    if base is None:
        return []
    out = []
    for r in rows:
        if r is base or r["status"] != "ok":
            continue
        warm = stats.compare(base["latency_ms"]["round_medians"], r["latency_ms"]["round_medians"], _noise(base, r))
        out.append({
            "baseline": f"{base['variant']}/{base['backend']}",
            "cell": f"{r['variant']}/{r['backend']}",
            "warm": warm,
            "first_call_ratio": _ratio(r["first_call_s"], base["first_call_s"]),
            "compile_ratio": _ratio(r["compile_s"], base["compile_s"]),
        })
    return out


def _loadavg() -> list[float] | None:
    try:
        return [round(x, 2) for x in os.getloadavg()]
    except OSError:
        return None


def _torch_version() -> str:
    try:
        import torch

        return str(torch.__version__)
    except ImportError:
        return ""

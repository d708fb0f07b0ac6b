"""Run the zoo: rows x sources over a pool of worker processes, with a timeout per row.

Each worker serves one source (its ``PYTHONPATH``) and many rows in sequence; a worker that crashes or
runs past a row's timeout is killed and the next row of that source gets a fresh one. ``jobs`` workers
run at a time; a free slot takes the next row of the source its worker already serves, else the next row
of any source (then it starts a worker for that source). When every row has run, the parent compares
each repaired source's eager outputs with the original's (bitwise and max |diff|).
"""

from __future__ import annotations

import datetime
import json
import os
import platform
import select
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from benchmarks.zoo import records as R
from benchmarks.zoo.records import Record, Results, SourceInfo
from benchmarks.zoo.sources import prepare
from benchmarks.zoo.specs import ModelSpec

STARTUP_TIMEOUT = 300.0  # importing torch and transformers on a loaded machine
# the repository root: workers import this harness as ``benchmarks.zoo`` (it is not part of the installed mend)
REPO = Path(__file__).resolve().parents[2]


@dataclass(frozen=True)
class Settings:
    dtype: str = "fp32"
    profile: str = "tiny"
    backend: str = "eager"
    device: str = "cpu"
    timeout: float = 300.0
    jobs: int = 1
    threads: int = 1  # torch threads per worker
    capture: bool = False  # Dynamo's scalar and dynamic-shape capture switched on globally in the workers


class WorkerDied(Exception):
    """The worker exited, timed out or answered nonsense; the message says which."""

    def __init__(self, status: str, message: str) -> None:
        super().__init__(message)
        self.status = status


def _readline(fd: int, buf: bytearray, deadline: float) -> bytes | None:
    """One line from ``fd`` before ``deadline`` (None on timeout); b"" at end of file."""
    while b"\n" not in buf:
        left = deadline - time.monotonic()
        if left <= 0:
            return None
        ready, _, _ = select.select([fd], [], [], left)
        if not ready:
            continue
        chunk = os.read(fd, 65536)
        if not chunk:
            return b""
        buf += chunk
    line, _, rest = bytes(buf).partition(b"\n")
    buf[:] = rest
    return line


class Worker:
    """One ``python -m benchmarks.zoo.worker`` process serving rows of one source."""

    def __init__(self, source: SourceInfo, settings: Settings, out: Path, log: Path) -> None:
        env = dict(os.environ, HF_HUB_OFFLINE="1")
        # the source's copy first (it must win over the installed package), then the harness
        env["PYTHONPATH"] = os.pathsep.join(p for p in (source.pythonpath, str(REPO), env.get("PYTHONPATH")) if p)
        cmd = [sys.executable, "-m", "benchmarks.zoo.worker", "--source", source.name, "--out", str(out),
               "--dtype", settings.dtype, "--profile", settings.profile, "--backend", settings.backend,
               "--device", settings.device, "--threads", str(settings.threads)] + (["--capture"] if settings.capture else [])
        self.source = source
        self.log = log
        self._err = open(log, "ab")
        self.proc = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self._err,
                                     env=env, start_new_session=True)
        self._buf = bytearray()
        ready = self._reply(STARTUP_TIMEOUT)
        if ready.get("ready") and Path(ready["ready"]).resolve() != Path(source.path).resolve():
            self.close()
            raise WorkerDied(R.WRONG_SOURCE, f"the worker imported {ready['ready']}, not {source.path}")

    def _reply(self, timeout: float) -> dict[str, Any]:
        assert self.proc.stdout is not None
        line = _readline(self.proc.stdout.fileno(), self._buf, time.monotonic() + timeout)
        if line is None:
            self.close()
            raise WorkerDied(R.TIMEOUT, f"no result within {timeout:.0f} s")
        if not line:
            code = self.proc.wait()
            self.close()
            raise WorkerDied(R.CRASH, f"worker exited with {code}: {self.tail()}")
        return json.loads(line)

    def tail(self) -> str:
        try:
            lines = [ln for ln in self.log.read_text(errors="replace").splitlines() if ln.strip()]
        except OSError:
            return ""
        return lines[-1][:300] if lines else ""

    def ask(self, name: str, timeout: float) -> Record:
        assert self.proc.stdin is not None
        try:
            self.proc.stdin.write((name + "\n").encode())
            self.proc.stdin.flush()
        except BrokenPipeError:
            self.close()
            raise WorkerDied(R.CRASH, f"worker gone: {self.tail()}") from None
        return Record.from_dict(self._reply(timeout))

    def close(self) -> None:
        if self.proc.poll() is None:
            try:
                os.killpg(self.proc.pid, signal.SIGKILL)  # the worker and anything it started
            except ProcessLookupError:
                pass
            self.proc.wait()
        self._err.close()


class _Queue:
    """Rows to run; a slot prefers rows of the source its worker serves."""

    def __init__(self, tasks: list[tuple[ModelSpec, str]]) -> None:
        self.tasks = list(tasks)
        self.lock = threading.Lock()

    def take(self, prefer: str | None) -> tuple[ModelSpec, str] | None:
        with self.lock:
            if not self.tasks:
                return None
            i = next((i for i, (_, s) in enumerate(self.tasks) if s == prefer), 0)
            return self.tasks.pop(i)


def _failed(spec: ModelSpec, source: str, settings: Settings, status: str, error: str) -> Record:
    return Record(name=spec.name, model_type=spec.model_type, variant=spec.variant, source=source,
                  dtype=settings.dtype, profile=settings.profile, status=status, error=error)


def _device_broken(rec: Record) -> bool:
    """The row failed with a CUDA error, after which the worker's device context is unusable."""
    return bool(rec.error) and ("CUDA error" in rec.error or rec.error.startswith("AcceleratorError"))


def _slot(queue: _Queue, sources: dict[str, SourceInfo], settings: Settings, out: Path, results: list[Record],
          progress: Callable[[Record], None], slot: int) -> None:
    worker: Worker | None = None
    started = 0
    while (task := queue.take(worker.source.name if worker else None)) is not None:
        spec, source = task
        try:
            if worker is None or worker.source.name != source:
                if worker is not None:
                    worker.close()
                started += 1
                worker = None
                worker = Worker(sources[source], settings, out, out / f"worker-{slot}-{source}-{started}.log")
            rec = worker.ask(spec.name, settings.timeout)
            if _device_broken(rec):  # a CUDA error sticks to the process: the next row gets a fresh one
                worker.close()
                worker = None
        except WorkerDied as exc:
            worker = None
            rec = _failed(spec, source, settings, exc.status, str(exc))
        results.append(rec)
        progress(rec)
    if worker is not None:
        worker.close()


def compare_sources(records: list[Record], reference: str = "original") -> None:
    """Fill ``eager_same``/``eager_max_abs_diff`` of every repaired record against the reference source."""
    import torch

    from benchmarks.zoo.compare import compare

    ref = {r.name: r for r in records if r.source == reference}
    for r in records:
        base = ref.get(r.name)
        if r.source == reference or base is None:
            continue
        if not (base.outputs and r.outputs):
            r.eager_note = "not compared: " + ("the original did not run" if not base.outputs else "it did not run")
            continue
        a = torch.load(base.outputs, weights_only=True)["eager"]
        b = torch.load(r.outputs, weights_only=True)["eager"]
        diff = compare(a, b)
        r.eager_same, r.eager_max_abs_diff, r.eager_note = diff.same, diff.max_abs_diff, diff.note
        if not diff.same and base.eager_deterministic is False:
            r.eager_note = "the original's eager output is not deterministic; " + diff.note


def _versions() -> dict[str, str]:
    import importlib.metadata as md

    out = {"python": platform.python_version()}
    for pkg in ("transformers", "torch", "mend"):
        try:
            out[pkg] = md.version(pkg)
        except md.PackageNotFoundError:
            out[pkg] = ""
    return out


TRACED = "traced"  # scope: the package files Dynamo traced for the rows in the original source


def traced_files(records: Sequence[Record]) -> list[str]:
    """Package-relative files Dynamo traced in any of the records."""
    return sorted({t[0] for r in records for t in r.traced})


def _run_tasks(specs: Sequence[ModelSpec], sources: Sequence[str], infos: dict[str, SourceInfo], settings: Settings,
               out: Path, progress: Callable[[Record], None]) -> list[Record]:
    queue, records = _Queue([(spec, src) for src in sources for spec in specs]), []  # type: ignore[var-annotated]
    slots = [threading.Thread(target=_slot, args=(queue, infos, settings, out, records, progress, i), daemon=True)
             for i in range(max(1, settings.jobs))]
    for t in slots:
        t.start()
    for t in slots:
        t.join()
    return records


def run_zoo(specs: Sequence[ModelSpec], sources: Sequence[str] = ("original", "safe", "unsafe"),
            settings: Settings | None = None, out_dir: str | Path | None = None, cache_dir: str | Path | None = None,
            scope: Sequence[str] | str | None = None, check_idempotent: bool = True,
            progress: Callable[[Record], None] | None = None, log: Callable[[str], None] = print) -> Results:
    """Run every spec in every source; the records come back in (spec, source) order.

    ``scope``: the package paths ``mend fix`` repairs (None: all of it); ``"traced"``: the files Dynamo traced
    for these specs in the original source, which then runs first.
    """
    settings = settings or Settings()
    progress = progress or (lambda r: None)
    t0 = time.perf_counter()
    out = Path(out_dir) if out_dir else Path(tempfile.mkdtemp(prefix="mend-zoo-"))
    out.mkdir(parents=True, exist_ok=True)
    cache = Path(cache_dir) if cache_dir else None
    records: list[Record] = []
    if scope == TRACED:
        if "original" not in sources:
            raise ValueError("scope 'traced' needs the original source (its run says which files are traced)")
        first = {"original": prepare("original", log=log)}
        records += _run_tasks(specs, ["original"], first, settings, out, progress)
        scope = traced_files(records)
        log(f"scope: {len(scope)} files Dynamo traced")
        rest = [s for s in sources if s != "original"]
        infos = {**first, **{s: prepare(s, cache, scope, check_idempotent, log) for s in rest}}
        records += _run_tasks(specs, rest, infos, settings, out, progress)
    else:
        infos = {s: prepare(s, cache, scope, check_idempotent, log) for s in sources}
        records += _run_tasks(specs, sources, infos, settings, out, progress)
    order = {(s.name, src): i for i, (s, src) in enumerate((s, src) for s in specs for src in sources)}
    records.sort(key=lambda r: order.get((r.name, r.source), len(order)))
    if "original" in sources:
        compare_sources(records)
    return Results(records=records, sources=infos, versions=_versions(), command=list(sys.argv),
                   settings={"dtype": settings.dtype, "profile": settings.profile, "backend": settings.backend,
                             "device": settings.device, "timeout": settings.timeout, "jobs": settings.jobs,
                             "capture": settings.capture,
                             "scope": scope if scope is None or isinstance(scope, str) else "paths",
                             "outputs": str(out)},
                   created=datetime.datetime.now().astimezone().isoformat(timespec="seconds"),
                   wall_s=round(time.perf_counter() - t0, 1))

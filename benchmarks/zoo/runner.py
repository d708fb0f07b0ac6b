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
from benchmarks.zoo.sources import PACKAGE, prepare
from benchmarks.zoo.specs import ModelSpec
from benchmarks.zoo.suites import package_of

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
    suite: str = "transformers"  # benchmarks.zoo.suites: transformers, a library's model zoo, or repos


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
               "--device", settings.device, "--threads", str(settings.threads), "--suite", settings.suite]
        cmd += ["--capture"] if settings.capture else []
        cmd += ["--root", source.path] if settings.suite == "repos" else []
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

    def ask(self, name: str, timeout: float, mode: str = "eval") -> Record:
        assert self.proc.stdin is not None
        try:
            self.proc.stdin.write(f"{mode}\t{name}\n".encode())
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


Task = tuple[str, str, str]  # (row, source, mode)


class _Queue:
    """Rows to run; a slot prefers rows of the source its worker serves."""

    def __init__(self, tasks: list[Task]) -> None:
        self.tasks = list(tasks)
        self.lock = threading.Lock()

    def take(self, prefer: str | None) -> Task | None:
        with self.lock:
            if not self.tasks:
                return None
            i = next((i for i, (_, s, _m) in enumerate(self.tasks) if s == prefer), 0)
            return self.tasks.pop(i)


def _failed(name: str, source: str, mode: str, settings: Settings, status: str, error: str) -> Record:
    return Record(name=name, model_type=name.partition(":")[0], variant=name.partition(":")[2], source=source,
                  dtype=settings.dtype, profile=settings.profile, status=status, error=error, mode=mode)


def _device_broken(rec: Record) -> bool:
    """The row failed with a CUDA error, after which the worker's device context is unusable."""
    return bool(rec.error) and ("CUDA error" in rec.error or rec.error.startswith("AcceleratorError"))


def _slot(queue: _Queue, sources: dict[str, SourceInfo], settings: Settings, out: Path, results: list[Record],
          progress: Callable[[Record], None], slot: int) -> None:
    worker: Worker | None = None
    started = 0
    while (task := queue.take(worker.source.name if worker else None)) is not None:
        name, source, mode = task
        try:
            if worker is None or worker.source.name != source:
                if worker is not None:
                    worker.close()
                started += 1
                worker = None
                worker = Worker(sources[source], settings, out, out / f"worker-{slot}-{source}-{started}.log")
            rec = worker.ask(name, settings.timeout, mode)
            if _device_broken(rec):  # a CUDA error sticks to the process: the next row gets a fresh one
                worker.close()
                worker = None
        except WorkerDied as exc:
            worker = None
            rec = _failed(name, source, mode, settings, exc.status, str(exc))
        results.append(rec)
        progress(rec)
    if worker is not None:
        worker.close()


def compare_sources(records: list[Record], reference: str = "original") -> None:
    """Fill, for every repaired record, the comparison with the reference source's record of the same row and
    mode: eager outputs (training: outputs, loss and gradients) bitwise and max |diff|, the random-number
    state after the step, and the messages of each phase (:func:`benchmarks.zoo.observe.compare`)."""
    import torch

    from benchmarks.zoo.compare import compare
    from benchmarks.zoo.observe import compare as compare_messages

    ref = {r.key: r for r in records if r.source == reference}
    for r in records:
        base = ref.get(r.key)
        if r.source == reference or base is None:
            continue
        if base.rng and r.rng:
            r.rng_same = base.rng == r.rng
        if base.messages and r.messages:
            r.messages_diff = {phase: compare_messages(base.messages[phase], r.messages[phase]).to_dict()
                               for phase in base.messages if phase in r.messages}
        if not (base.outputs and r.outputs):
            r.eager_note = "not compared: " + ("the original did not run" if not base.outputs else "it did not run")
            continue
        a = torch.load(base.outputs, weights_only=True)["eager"]
        b = torch.load(r.outputs, weights_only=True)["eager"]
        diff = compare(a, b)
        r.eager_same, r.eager_max_abs_diff, r.eager_note = diff.same, diff.max_abs_diff, diff.note
        if not diff.same and base.eager_deterministic is False:
            r.eager_note = "the original's eager output is not deterministic; " + diff.note


def _messages_differ(r: Record) -> bool:
    return any(d["lost"] or d["added"] or d["reordered"] for d in (r.messages_diff or {}).values())


def recheck_messages(records: list[Record], infos: dict[str, SourceInfo], settings: Settings, out: Path,
                     log: Callable[[str], None] = print, reference: str = "original") -> None:
    """Run again each repaired row whose messages differ from the reference's, the reference and the repaired
    source each in a fresh process, and compare those: a worker serves several rows, and a message a process
    gives once (torch's ``TORCH_WARN_ONCE``, a library's import-time notice) shows only in the first row that
    meets it, so a difference between shared workers may be the workers' history, not the repair. The fresh
    comparison becomes ``messages_diff``; the shared one is kept in ``messages_shared_diff``. A row whose fresh
    run fails keeps the shared diff (nothing observed to replace it)."""
    from benchmarks.zoo.observe import compare as compare_messages

    where = out / "fresh"  # their outputs apart: the records' own files stay as compared
    for r in [r for r in records if r.source != reference and _messages_differ(r)]:
        fresh: dict[str, Record] = {}
        where.mkdir(parents=True, exist_ok=True)
        for src in (reference, r.source):
            try:
                worker = Worker(infos[src], settings, where, where / f"{src}-{r.mode}-{r.name.replace(':', '--')}.log")
                try:
                    fresh[src] = worker.ask(r.name, settings.timeout, r.mode)
                finally:
                    worker.close()
            except WorkerDied as exc:
                log(f"messages of {r.name} ({r.mode}, {src}) not rechecked: {exc}")
        base, again = fresh.get(reference), fresh.get(r.source)
        if not (base and again and base.messages and again.messages):
            continue
        r.messages_shared_diff = r.messages_diff
        r.messages_diff = {phase: compare_messages(base.messages[phase], again.messages[phase]).to_dict()
                           for phase in base.messages if phase in again.messages}
        log(f"messages of {r.name} ({r.mode}, {r.source}) rechecked in fresh processes: "
            + ("the same" if not _messages_differ(r) else "they differ"))


def _versions() -> dict[str, str]:
    import importlib.metadata as md

    out = {"python": platform.python_version()}
    for pkg in ("transformers", "torch", "mend", "torchvision", "timm", "diffusers", "torch_geometric"):
        try:
            out[pkg] = md.version(pkg)
        except md.PackageNotFoundError:
            if pkg in ("transformers", "torch", "mend"):
                out[pkg] = ""
    return out


TRACED = "traced"  # scope: the package files Dynamo traced for the rows in the original source


def traced_files(records: Sequence[Record]) -> list[str]:
    """Package-relative files Dynamo traced in any of the records, and those it broke in: a function whose
    inlining breaks before any operation (``deprecate()``'s ``warnings.warn``) adds nothing to a graph, and
    its file is where the break is found and repaired."""
    return sorted({t[0] for r in records for t in r.traced}
                  | {b.path for r in records for b in r.breaks if R.in_package(b.path)})


def _run_tasks(names: Sequence[str], sources: Sequence[str], infos: dict[str, SourceInfo], settings: Settings,
               out: Path, progress: Callable[[Record], None], modes: Sequence[str] = ("eval",)) -> list[Record]:
    tasks = [(n, src, m) for src in sources for m in modes for n in names]
    queue, records = _Queue(tasks), []  # type: ignore[var-annotated]
    slots = [threading.Thread(target=_slot, args=(queue, infos, settings, out, records, progress, i), daemon=True)
             for i in range(max(1, settings.jobs))]
    for t in slots:
        t.start()
    for t in slots:
        t.join()
    return records


def run_zoo(specs: Sequence[ModelSpec | str], sources: Sequence[str] = ("original", "safe", "unsafe"),
            settings: Settings | None = None, out_dir: str | Path | None = None, cache_dir: str | Path | None = None,
            scope: Sequence[str] | str | None = None, check_idempotent: bool = True,
            progress: Callable[[Record], None] | None = None, log: Callable[[str], None] = print,
            modes: Sequence[str] = ("eval",), folder: Path | None = None) -> Results:
    """Run every row (a spec or a row name of the settings' suite) in every source and mode; the records come
    back in (row, mode, source) order.

    ``scope``: the package paths ``mend fix`` repairs (None: all of it); ``"traced"``: the files Dynamo traced
    for these rows in the original source, which then runs first. ``folder``: the checkouts of the ``repos``
    suite.
    """
    settings = settings or Settings()
    names = [getattr(s, "name", s) for s in specs]
    package = package_of(settings.suite)
    where = {"package": package or PACKAGE, "folder": folder}
    if package is None and folder is None:
        raise ValueError("the repos suite needs the folder of checkouts")
    progress = progress or (lambda r: None)
    t0 = time.perf_counter()
    out = Path(out_dir) if out_dir else Path(tempfile.mkdtemp(prefix="mend-zoo-"))
    out.mkdir(parents=True, exist_ok=True)
    cache = Path(cache_dir) if cache_dir else None
    records: list[Record] = []
    if scope == TRACED:
        if "original" not in sources:
            raise ValueError("scope 'traced' needs the original source (its run says which files are traced)")
        first = {"original": prepare("original", log=log, **where)}
        records += _run_tasks(names, ["original"], first, settings, out, progress, modes)
        scope = traced_files(records)
        log(f"scope: {len(scope)} files Dynamo traced")
        rest = [s for s in sources if s != "original"]
        infos = {**first, **{s: prepare(s, cache, scope, check_idempotent, log, **where) for s in rest}}
        records += _run_tasks(names, rest, infos, settings, out, progress, modes)
    else:
        infos = {s: prepare(s, cache, scope, check_idempotent, log, **where) for s in sources}
        records += _run_tasks(names, sources, infos, settings, out, progress, modes)
    order = {(n, m, src): i for i, (n, m, src) in enumerate((n, m, src) for n in names for m in modes for src in sources)}
    records.sort(key=lambda r: order.get((r.name, r.mode, r.source), len(order)))
    if "original" in sources:
        compare_sources(records)
        recheck_messages(records, infos, settings, out, log)
    return Results(records=records, sources=infos, versions=_versions(), command=list(sys.argv),
                   settings={"dtype": settings.dtype, "profile": settings.profile, "backend": settings.backend,
                             "device": settings.device, "timeout": settings.timeout, "jobs": settings.jobs,
                             "capture": settings.capture, "suite": settings.suite, "modes": list(modes),
                             "scope": scope if scope is None or isinstance(scope, str) else "paths",
                             "outputs": str(out)},
                   created=datetime.datetime.now().astimezone().isoformat(timespec="seconds"),
                   wall_s=round(time.perf_counter() - t0, 1))

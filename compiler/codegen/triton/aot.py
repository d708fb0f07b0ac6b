"""Ahead-of-time, parallel compilation of generated Triton kernels, and launches without Triton's launcher.

Triton compiles a kernel on its first launch, in the calling process, one kernel after another; on a
fresh machine each distinct kernel signature also builds a C launcher with the host compiler. For a graph
of many kernels that is most of mend's cold compile time on a GPU. Here instead:

* As soon as a graph's kernels are generated, every launch configuration a kernel may use (the heuristic
  one, or all candidates when it will be autotuned) is submitted to a pool of compile workers
  (:mod:`mend.compiler.codegen.triton.worker`: separate processes that import Triton only, started when the first
  CUDA graph reaches the backend, so their start-up overlaps tracing). A worker that has no job yet once
  Triton is imported compiles a tiny kernel for the GPU's target into a throwaway cache: Triton's first
  compile in a process costs about 0.3 s more than the next (its compiler pipeline is set up), and that
  would otherwise land on the first kernel each worker gets. The workers compile for the GPU's explicit
  target and write the binaries into Triton's cache; the main thread goes on with the graph.
* A launcher waits for its own kernel only when it first runs, loads the cubin and launches it through
  PyTorch's static CUDA launcher (no per-signature C launcher to build). Kernels are specialized on
  16-byte aligned pointers; a launch with an unaligned tensor takes Triton's own JIT path.
* Jobs nothing waits for yet (the fused configurations of a half-precision matrix product, timed after the
  graph already runs: ``launch.TritonMatmulLauncher``) go in through :func:`submit_background`, which lets
  at most half the workers take them at once.
* Everything degrades to Triton's JIT path, logged once: no worker pool, a worker that dies or fails to
  compile, a PyTorch without the static launcher, a kernel that needs scratch memory.

``MEND_COMPILE_WORKERS=N`` sets the pool size (default: the CPUs available, at most 16); ``0`` compiles
in the calling thread, still ahead of the first launch and without Triton's launcher. Workers (about
100-150 MB each) exit after ``MEND_COMPILE_WORKERS_IDLE_S`` seconds without work (default 60) and start
again when needed. ``MEND_TRITON_AOT=0``
turns all of this off (Triton's JIT compiles and launches every kernel).
"""

from __future__ import annotations

import atexit
import os
import queue
import struct
import subprocess
import sys
import threading
import time
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path

import torch

from mend import settings

from ... import compat
from ...debug import warn_once
from ...runtime import cache
from .worker import compile_job, decode_frame, encode_frame

WORKER = Path(__file__).with_name("worker.py")
STATS = {"submitted": 0, "compiled": 0, "failed": 0, "static_loaded": 0, "workers_started": 0}
_lock = threading.RLock()
_pool: "CompilePool | None" = None



def enabled() -> bool:
    return settings.TRITON_AOT.get()


def worker_count() -> int:
    n = settings.COMPILE_WORKERS.get()
    if n is not None:
        return max(0, n)
    try:
        n = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        n = os.cpu_count() or 1
    return max(1, min(16, n))


# ------------------------------------------------------------------------------------------ workers


class _Worker:
    """One worker process and its two pipes; used by one dispatch thread at a time."""

    def __init__(self, target: "tuple | None" = None) -> None:
        code = ("import sys, runpy; sys.path[:1] = []; "
                f"runpy.run_path({str(WORKER)!r}, run_name='__main__')")
        warm = [":".join(str(t) for t in target)] if target else []
        debug = settings.COMPILER_DEBUG.get()
        self.proc = subprocess.Popen(
            [sys.executable, "-c", code, *warm], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
            stderr=None if debug else subprocess.DEVNULL, close_fds=True, env=_worker_env())
        STATS["workers_started"] += 1
        self.ready = False

    def _read(self):
        head = self.proc.stdout.read(4)
        if len(head) < 4:
            raise RuntimeError("compile worker exited")
        (n,) = struct.unpack("<I", head)
        return decode_frame(self.proc.stdout.read(n))

    def call(self, job: dict) -> dict:
        data = encode_frame(job)
        # the job goes into the pipe before the worker says it is ready: a worker that finds a job
        # waiting once Triton is imported compiles it instead of warming up
        self.proc.stdin.write(struct.pack("<I", len(data)) + data)
        self.proc.stdin.flush()
        if not self.ready:
            self._read()  # {"ready": pid}: Triton imported
            self.ready = True
        return self._read()

    def close(self) -> None:
        try:
            self.proc.stdin.close()
        except OSError:
            pass
        try:
            self.proc.wait(timeout=2)
        except subprocess.TimeoutExpired:
            self.proc.kill()


def _worker_env() -> dict:
    """The workers' environment: ours, plus where they remember Triton's own cache key
    (``worker.remembered_triton_key``) unless mend's cache is disabled."""
    env = dict(os.environ)
    if cache.enabled() and settings.TRITON_KEY_FILE.name not in env:
        env[settings.TRITON_KEY_FILE.name] = str(cache.cache_root() / "triton_key.json")
    return env


def idle_seconds() -> float:
    return settings.COMPILE_WORKERS_IDLE_S.get()


class CompilePool:
    """``submit(job) -> Future[result dict]``; ``n`` worker processes, started at construction."""

    def __init__(self, n: int, target: "tuple | None" = None) -> None:
        self.n = n
        self.target = target  # workers warm up for it (``worker.warm_up``)
        self.idle: "queue.Queue[_Worker]" = queue.Queue()
        for _ in range(n):
            self.idle.put(_Worker(target))
        self.threads = ThreadPoolExecutor(max_workers=n, thread_name_prefix="mend-triton-compile")
        self.closed = False
        self.pending = 0  # submitted and not finished (changed under the module lock)
        self.last = time.monotonic()
        threading.Thread(target=self._reap, name="mend-triton-compile-reaper", daemon=True).start()

    def _run(self, job: dict) -> dict:
        w = self.idle.get()
        try:
            res = w.call(job)
        except Exception as exc:  # noqa: BLE001 - a dead worker is replaced; the job falls back
            w.close()
            self.idle.put(_Worker(self.target))
            res = {"error": f"compile worker failed: {type(exc).__name__}: {exc}"}
        else:
            self.idle.put(w)
        with _lock:
            self.pending -= 1
            self.last = time.monotonic()
        return res

    def submit(self, job: dict) -> Future:
        self.pending += 1
        return self.threads.submit(self._run, job)

    def _reap(self) -> None:
        """Close the workers once they have been idle for ``MEND_COMPILE_WORKERS_IDLE_S`` seconds."""
        limit = idle_seconds()
        while not self.closed:
            time.sleep(max(0.05, min(5.0, limit / 4)))
            with _lock:
                if self.closed:
                    return
                if self.pending == 0 and time.monotonic() - self.last >= limit:
                    global _pool
                    if _pool is self:
                        _pool = None
                    self.close()
                    return

    def close(self) -> None:
        if self.closed:
            return
        self.closed = True
        self.threads.shutdown(wait=False, cancel_futures=True)
        while True:
            try:
                self.idle.get_nowait().close()
            except queue.Empty:
                break


def pool(target: "tuple | None" = None) -> "CompilePool | None":
    """The process-wide pool (started on first use; its workers warm up for ``target`` when given), or
    None when ``MEND_COMPILE_WORKERS=0``."""
    global _pool
    with _lock:
        if _pool is None or _pool.closed:
            n = worker_count()
            if n == 0:
                return None
            _pool = CompilePool(n, target)
            atexit.register(_pool.close)
        return _pool


def warm(device=None) -> None:
    """Start the compile workers now (called when a CUDA graph reaches the backend, before tracing); with
    ``device``, each worker that gets no job at once compiles a tiny kernel for its target meanwhile."""
    if enabled() and compat.triton_available():
        target = None
        if device is not None:
            try:
                target = target_for(device)
            except Exception:  # noqa: BLE001 - no usable device: the workers start cold
                pass
        try:
            pool(target)
        except OSError as exc:
            warn_once(f"mend: could not start Triton compile workers ({exc}); kernels compile in-process")


def shutdown() -> None:
    global _pool
    with _lock:
        if _pool is not None:
            _pool.close()
            _pool = None


def _run_inline(job: dict) -> dict:
    try:
        return compile_job(job)
    except Exception as exc:  # noqa: BLE001
        return {"error": f"{type(exc).__name__}: {exc}"[:500]}


def submit(job: dict) -> Future:
    """Compile ``job`` (see :func:`mend.compiler.codegen.triton.worker.compile_job`) in the pool, or lazily in the
    calling thread when there is no pool; the future's result is the worker's result dict."""
    STATS["submitted"] += 1
    try:
        with _lock:  # the pool cannot be reaped between taking it and submitting to it
            p = pool(job.get("target"))
            if p is not None:
                return p.submit(job)
    except OSError as exc:
        warn_once(f"mend: could not start Triton compile workers ({exc}); kernels compile in-process")
    return _LazyFuture(job)


_background: "queue.Queue | None" = None  # jobs for the threads that hand them to the pool, a few at a time


def submit_background(job: dict) -> "Future | None":
    """Compile ``job`` in the pool at low priority: at most half the workers take such jobs at once, so the
    kernels a graph waits for never queue behind them for long. None without a pool (the caller compiles
    what it needs now instead). The threads are daemons: a process that exits does not wait for jobs
    nothing waits for."""
    global _background
    try:
        with _lock:
            if pool(job.get("target")) is None:
                return None
            if _background is None:
                _background = queue.Queue()
                for _ in range(max(1, worker_count() // 2)):
                    threading.Thread(target=_background_loop, args=(_background,), name="mend-tune",
                                     daemon=True).start()
    except OSError:
        return None
    STATS["submitted"] += 1
    fut: Future = Future()
    _background.put((fut, job))
    return fut


def _background_loop(jobs: "queue.Queue") -> None:
    while True:
        fut, job = jobs.get()
        if fut.set_running_or_notify_cancel():
            try:
                fut.set_result(_run_in_pool(job))
            except BaseException as exc:  # noqa: BLE001 - the waiting launcher sees it
                fut.set_exception(exc)


def _run_in_pool(job: dict) -> dict:
    with _lock:  # the pool cannot be reaped between taking it and submitting to it
        p = pool(job.get("target"))
        fut = p.submit(job) if p is not None else None
    return fut.result() if fut is not None else _run_inline(job)


class _LazyFuture:
    """A future that compiles in the calling thread when its result is first asked for."""

    def __init__(self, job: dict) -> None:
        self.job = job
        self._res = None

    def result(self, timeout=None) -> dict:
        if self._res is None:
            self._res = _run_inline(self.job)
        return self._res

    def done(self) -> bool:
        return self._res is not None


# ------------------------------------------------------------------------------------ static launch


class StaticKernel:
    """A compiled cubin loaded into the current CUDA context and launched by PyTorch's static launcher."""

    __slots__ = ("name", "function", "module", "num_warps", "shared", "arg_tys", "n_extra", "_impl", "_stream")

    def __init__(self, res: dict, device_index: int) -> None:
        impl = compat.static_cuda_launcher()
        if impl is None:
            raise NotImplementedError("this PyTorch has no static CUDA launcher")
        for key in ("global_scratch_size", "profile_scratch_size"):
            if (res.get(key) or 0) > 0:
                raise NotImplementedError(f"kernel needs {key}")
        if res.get("num_ctas", 1) != 1 or res.get("launch_pdl") or res.get("launch_cooperative_grid"):
            raise NotImplementedError("kernel needs a launch feature of Triton's launcher")
        path = res.get("cubin_path")
        if not path or not os.path.exists(path):
            raise FileNotFoundError(f"cubin of {res.get('name')} not found")
        tys = "".join("O" if t.startswith("*") else _SCALAR.get(t, "?") for t in res["arg_types"])
        if "?" in tys:
            raise NotImplementedError(f"argument types {res['arg_types']}")
        # scratch arguments the kernel declares (size 0): passed as null pointers
        self.n_extra = sum(res.get(k) is not None for k in ("global_scratch_size", "profile_scratch_size"))
        self.arg_tys = tys + "O" * self.n_extra
        self.name = res["name"]
        self.num_warps = res["num_warps"]
        self.shared = res["shared"]
        self._impl = impl
        loaded = impl._load_kernel(path, self.name, self.shared, device_index)
        # (module, function, n_regs, n_spills) on torch 2.13; (function, n_regs, n_spills) on 2.11
        self.module, self.function = (loaded[0], loaded[1]) if len(loaded) == 4 else (None, loaded[0])
        self._stream = compat.raw_stream_getter()
        STATS["static_loaded"] += 1

    def launch(self, grid, tensors, device_index: int) -> None:
        args = tuple(tensors) + (None,) * self.n_extra
        self._impl._launch_kernel(self.function, grid[0], grid[1] if len(grid) > 1 else 1, 1, self.num_warps,
                                  self.shared, self.arg_tys, args, self._stream(device_index))


_SCALAR = {"i1": "i", "i8": "b", "i16": "h", "i32": "i", "i64": "l", "u1": "I", "u8": "B", "u16": "H",
           "u32": "I", "u64": "K", "fp16": "f", "bf16": "f", "fp32": "f", "f32": "f", "fp64": "d"}


def target_for(device) -> tuple:
    """(backend, arch, warp_size) of ``device`` for ``triton.compile``, from PyTorch (so the main process
    never has to build Triton's own CUDA driver utilities)."""
    major, minor = torch.cuda.get_device_capability(device)
    return ("cuda", major * 10 + minor, 32)


def job_for(module, fn_name: str, signature: dict, constexprs: dict, options: dict, target: tuple) -> dict:
    """A compile job: ``options`` are Triton's compile options of the configuration (``num_warps``, and
    ``num_stages`` where set)."""
    return {"path": module.__file__, "module": module.__name__, "fn": fn_name, "signature": dict(signature),
            "constexprs": dict(constexprs), "options": dict(options), "target": tuple(target)}


def load(future, device_index: int, what: str):
    """Wait for a submitted job and load its kernel: a :class:`StaticKernel`, or None (the caller uses
    Triton's JIT path; the reason is logged once)."""
    res = future.result()
    if "error" in res:
        STATS["failed"] += 1
        warn_once(f"mend: ahead-of-time compile of {what} failed ({res['error']}); Triton's JIT compiles it")
        return None
    STATS["compiled"] += 1
    try:
        return StaticKernel(res, device_index)
    except Exception as exc:  # noqa: BLE001 - the JIT path is always there
        warn_once(f"mend: {what} is launched by Triton ({type(exc).__name__}: {exc})")
        return None

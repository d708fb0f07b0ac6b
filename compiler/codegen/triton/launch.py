"""Launch generated Triton kernels.

* :class:`TritonLauncher` is the callable the wrapper gets for each kernel (style ``"tensor"``): it computes
  the grid, picks a launch configuration and launches. On a GPU, kernels with several candidate
  configurations are timed once (2-3 configs, CUDA events) and the winner is recorded on disk, keyed by the
  kernel source, the GPU name and the Triton version, so later processes skip the tuning.
  ``MEND_TRITON_AUTOTUNE=0`` always takes the first (heuristic) configuration.
* A kernel that Triton fails to compile on its first launch is logged once and runs in the reference
  interpreter from then on (kernel-level fallback); it never produces a wrong result.
* ``TRITON_INTERPRET=1`` (CPU-only machines) runs the same kernels in Triton's interpreter on CPU tensors.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import threading
import time
import weakref
from concurrent.futures import TimeoutError as _Timeout
from pathlib import Path

import torch
import triton
import triton.language.standard as std
from triton.runtime.driver import driver
from triton.runtime.jit import JITFunction

from mend import settings

from ...debug import warn_once
from ...runtime import cache
from ...runtime.interpret import run_kernel
from . import aot
from .build import interpret_mode, triton_version

STATS = {"kernels_built": 0, "launch_fallbacks": 0, "autotuned": 0,
         "autotune_hits": 0, "tuned_in_background": 0}
_TUNING: "weakref.WeakSet" = weakref.WeakSet()  # matmul launchers whose candidates compile in the background
_lock = threading.RLock()  # one interpreted launch at a time (it patches Triton's library while it runs)

AUTOTUNE_MIN_NUMEL = 1 << 18  # smaller kernels are launch-bound: the heuristic config is as good
# GPU clock cycles of the sleep that each timing run of an autotune queues first (about 1 ms at an H100's or
# H200's clock; 6 ms when idle-clocked): long enough for the host to queue every timed launch behind it
SLEEP_CYCLES = 2_000_000


@contextlib.contextmanager
def _interpreter_runs_jit_functions():
    """Let the interpreter call ``@triton.jit`` library functions (``tl.sum``, ``tl.sigmoid``, ...).

    Triton's standard library is decorated when ``triton`` is imported; if that happened before
    ``TRITON_INTERPRET=1`` was set, its functions are compiled-mode ``JITFunction`` objects that refuse to
    be called from Python, so interpreted kernels calling them fail. While an interpreted kernel runs, such
    calls are routed through the interpreter instead (what they would have been with the variable set
    first)."""
    from triton.runtime import interpreter  # 0.1 s (numpy): only interpreted launches import it

    orig = JITFunction.__call__
    wrapped: dict[int, object] = {}

    def call(self, *args, **kwargs):
        f = wrapped.get(id(self))
        if f is None:
            f = wrapped[id(self)] = interpreter.InterpretedFunction(self.fn)
        return f.rewrite()(*args, **kwargs)

    # patch triton.language.core (the library's namespace) once for the launch and undo it afterwards
    # (InterpretedFunction.__call__ patches per call and never restores, which would break compiled-mode
    # use of triton later in the same process)
    scope = interpreter._patch_lang(std.max.fn)
    JITFunction.__call__ = call
    try:
        yield
    finally:
        JITFunction.__call__ = orig
        if scope is not None:
            scope.restore()


# ------------------------------------------------------------------------------------- autotune cache


def gpu_name(device: torch.device) -> str:
    try:
        return torch.cuda.get_device_name(device)
    except Exception:  # noqa: BLE001 - no CUDA: interpreter runs
        return "cpu"


def _tune_path(key: str) -> Path:
    return cache.cache_root() / "v1" / "triton" / "tune" / key[:2] / f"{key}.json"


def _tune_key(kernel_source: str, device) -> str:
    h = hashlib.sha256()
    for part in (kernel_source, gpu_name(device), triton_version()):
        h.update(part.encode())
        h.update(b"\0")
    return h.hexdigest()


def read_tuned(key: str):
    if not cache.enabled():
        return None
    try:
        return json.loads(_tune_path(key).read_text())
    except (OSError, ValueError):
        return None


def write_tuned(key: str, data: dict) -> None:
    if not cache.enabled():
        return
    p = _tune_path(key)
    try:
        p.parent.mkdir(parents=True, exist_ok=True)
        tmp = p.with_suffix(f".{os.getpid()}.tmp")
        tmp.write_text(json.dumps(data))
        os.replace(tmp, p)
    except OSError:
        pass


def autotune_enabled() -> bool:
    return settings.TRITON_AUTOTUNE.get()


# ---------------------------------------------------------------------------------------- launcher


def _hooked(hook) -> bool:
    """Whether a Triton launch hook (None, a function, or an empty/non-empty HookChain) is installed."""
    if hook is None:
        return False
    calls = getattr(hook, "calls", None)
    return bool(calls) if calls is not None else True


# the current CUDA device without torch.cuda.current_device()'s lazy-initialisation checks (the fast launch
# path asks once per launch; CUDA is initialised by then)
_current_device = getattr(torch._C, "_cuda_getDevice", torch.cuda.current_device)


def _device_index(tensors) -> int:
    for t in reversed(tensors):
        if isinstance(t, torch.Tensor) and t.device.type == "cuda":
            return t.device.index if t.device.index is not None else torch.cuda.current_device()
    return torch.cuda.current_device()


def _device_of(tensors) -> torch.device:
    return next((t.device for t in reversed(tensors) if isinstance(t, torch.Tensor)), torch.device("cpu"))


def _capturing() -> bool:
    return torch.cuda.is_available() and torch.cuda.is_current_stream_capturing()


def _launch_static(launcher, i: int, grid, tensors):
    """Launch config ``i`` of ``launcher`` with its ahead-of-time compiled kernel; returns the kernel, or
    None when the JIT path must run (no such kernel, an unaligned tensor, or its first launch failed)."""
    if any(t.data_ptr() & 15 for t in tensors):
        return None
    index = _device_index(tensors)
    k = launcher._static_kernel(i, index)
    if k is None:
        return None
    try:
        k.launch(grid, tensors, index)
    except Exception as exc:  # noqa: BLE001 - Triton's own launcher takes over this configuration
        if isinstance(exc, torch.cuda.OutOfMemoryError):
            raise
        launcher.static[i] = None
        warn_once(f"mend: static launch of {launcher.kernel.name} failed ({type(exc).__name__}: {exc}); "
                  "Triton launches it")
        return None
    return k


class TritonLauncher:
    """``launcher(*tensors)``: run one kernel (inputs then outputs, as the wrapper passes them)."""

    def __init__(self, kernel, fn, source):
        self.kernel = kernel  # ir.Kernel
        self.fn = fn  # the @triton.jit function
        self.source = source  # kernel.KernelSource
        self.plan = source.plan
        self.template = self.plan.template
        self.xnumel = self.plan.xnumel
        self.config = None
        self.fallback = None
        self.kernel_text = source.render()
        self.interpreted = type(fn).__name__ == "InterpretedFunction"
        self.aot: dict[int, object] = {}  # config index -> future of its ahead-of-time compile
        self.static: dict[int, object] = {}  # config index -> aot.StaticKernel, or None (JIT path)

    def __repr__(self) -> str:
        return f"<triton kernel {self.kernel.name} {self.template} xnumel={self.xnumel}>"

    # ---------------------------------------------------------------------- ahead-of-time compilation

    def candidates(self, dev) -> list[int]:
        """Indices of the configurations this kernel may launch with on ``dev``: the heuristic one, the
        recorded autotune winner, or every candidate when it will be autotuned."""
        configs = list(self.plan.configs)
        numel = self.xnumel * max(self.plan.rnumel, 1)
        if len(configs) == 1 or not autotune_enabled() or numel < AUTOTUNE_MIN_NUMEL:
            return [0]
        hit = read_tuned(_tune_key(self.kernel_text, dev))
        if hit is not None:
            for i, c in enumerate(configs):
                if c.key() == hit.get("config"):
                    return [i]
        return list(range(len(configs)))

    def precompile(self, module, target, dev) -> None:
        """Submit the kernel's candidate configurations to the compile workers (returns at once)."""
        (name, sig, launches), = self.source.compile_units()
        for i in self.candidates(dev):
            constexprs, options = launches[i]
            self.aot[i] = aot.submit(aot.job_for(module, name, sig, constexprs, options, target))

    def _static_kernel(self, i: int, index: int):
        if i in self.static:
            return self.static[i]
        fut = self.aot.get(i)
        k = None
        if fut is not None:
            k = aot.load(fut, index, f"Triton kernel {self.kernel.name}")
        self.static[i] = k
        return k

    def launch(self, cfg, tensors):
        grid = self.plan.grid(cfg)
        if self.interpreted:
            with _lock, _interpreter_runs_jit_functions():
                self.fn[grid](*tensors, **cfg.constexprs(self.template))
            return None
        if self.aot:
            k = _launch_static(self, self.plan.configs.index(cfg), grid, tensors)
            if k is not None:
                return k
        return self.fn[grid](*tensors, **cfg.constexprs(self.template), **cfg.options())

    def __call__(self, *tensors) -> None:
        st = self._fast_static
        if st is not None:
            k, g0, g1, index, launch, function, num_warps, shared, tys, extra, stream, getdev = st
            if getdev() == index and not any(t.data_ptr() & 15 for t in tensors):
                launch(function, g0, g1, 1, num_warps, shared, tys, tensors + extra, stream(index))
                return None
            self.launch(self.config, tensors)
            return None
        fast = self._fast
        if fast is not None:
            ck, aligned, grid0, grid1, extra, device, get_device, get_stream, enter, leave = fast
            if get_device() == device and tuple(t.data_ptr() % 16 == 0 for t in tensors) == aligned:
                ck.run(grid0, grid1, 1, get_stream(device), ck.function, ck.packed_metadata, None, enter, leave,
                       *tensors, *extra)
                return None
            self.launch(self.config, tensors)  # another specialization: Triton's own launch path
            return None
        if self.fallback is not None:
            return self.fallback(*tensors)
        if self.xnumel == 0:  # no rows (a reduction over an empty row still writes its identity)
            return None
        if self.config is not None:
            self.launch(self.config, tensors)
            return None
        try:
            self.config = self._choose(tensors)
            ck = self.launch(self.config, tensors)
            STATS["kernels_built"] += 1
        except Exception as exc:  # noqa: BLE001 - a kernel Triton cannot build runs interpreted
            if isinstance(exc, torch.cuda.OutOfMemoryError):
                raise
            STATS["launch_fallbacks"] += 1
            warn_once(f"mend: Triton kernel {self.kernel.name} failed to build ({type(exc).__name__}: "
                      f"{str(exc).strip().splitlines()[0] if str(exc).strip() else ''}); it runs in the "
                      "reference interpreter")
            self.fallback = lambda *ts: run_kernel(self.kernel, *ts)
            self.config = None
            return self.fallback(*tensors)
        self._arm_fast_launch(ck, tensors)
        return None

    _fast = None
    _fast_static = None

    def _arm_fast_launch(self, ck, tensors) -> None:
        """Later calls launch the compiled kernel directly (Triton's per-call argument binding, cache-key
        hashing and grid handling cost ~20 us per launch, more than many kernels run). Only when the
        pointers have the same 16-byte alignment as at compile time (Triton specializes on it), on the same
        device, and no launch hooks (profilers) are installed; otherwise Triton's own path runs."""
        if self.interpreted or not settings.TRITON_FAST_LAUNCH.get() or ck is None:
            return
        if isinstance(ck, aot.StaticKernel):
            index = _device_index(tensors)
            g = self.plan.grid(self.config) + (1,)
            self._fast_static = (ck, g[0], g[1], index, ck._impl._launch_kernel, ck.function, ck.num_warps,
                                 ck.shared, ck.arg_tys, (None,) * ck.n_extra, ck._stream, _current_device)
            return
        try:
            knobs = getattr(triton, "knobs", None)
            enter = getattr(knobs.runtime, "launch_enter_hook", None) if knobs is not None else None
            leave = getattr(knobs.runtime, "launch_exit_hook", None) if knobs is not None else None
            if _hooked(enter) or _hooked(leave):
                return
            if not all(hasattr(ck, a) for a in ("run", "function", "packed_metadata")):
                return
            active = driver.active
            cfg = self.config
            g = self.plan.grid(cfg) + (1,)
            extra = tuple(cfg.constexprs(self.template).values())
            aligned = tuple(t.data_ptr() % 16 == 0 for t in tensors)
            self._fast = (ck, aligned, g[0], g[1], extra, active.get_current_device(), active.get_current_device,
                          active.get_current_stream, enter, leave)
        except Exception:  # noqa: BLE001 - keep Triton's launch path
            self._fast = None

    def _autotuned(self, dev) -> bool:
        """Whether the configuration is chosen by timing the candidates on ``dev`` (else the first, the
        heuristic one)."""
        numel = self.xnumel * max(self.plan.rnumel, 1)
        return (len(self.plan.configs) > 1 and dev.type == "cuda" and not interpret_mode() and autotune_enabled()
                and numel >= AUTOTUNE_MIN_NUMEL)

    def _choose(self, tensors):
        dev = _device_of(tensors)
        if not self._autotuned(dev):
            return self.plan.configs[0]
        hit = self._recorded(dev)
        if hit is not None:
            STATS["autotune_hits"] += 1
            return hit
        return self._tune(tensors, dev)

    def _recorded(self, dev):
        """The configuration an earlier autotune of this kernel on this GPU chose (recorded on disk), or None."""
        hit = read_tuned(_tune_key(self.kernel_text, dev))
        if hit is not None:
            for c in self._candidates_to_time():
                if c.key() == hit.get("config"):
                    return c
        return None

    def _tune(self, tensors, dev):
        """Time every candidate once on ``tensors`` and record the fastest on disk."""
        configs = list(self.plan.configs)
        best, best_t, times = None, float("inf"), {}
        for c in self._candidates_to_time():
            try:
                t = self._time(c, tensors)
            except Exception as exc:  # noqa: BLE001 - a config that does not build (resources) is skipped
                if c is configs[0]:
                    raise
                times[str(c)] = f"failed: {type(exc).__name__}"
                continue
            times[str(c)] = t
            if t < best_t:
                best, best_t = c, t
        STATS["autotuned"] += 1
        write_tuned(_tune_key(self.kernel_text, dev), {"config": best.key(), "times_ms": times,
                                                       "kernel": self.kernel.name})
        return best

    def _candidates_to_time(self) -> list:
        return list(self.plan.configs)

    def _time(self, cfg, tensors, reps: int = 10) -> float:
        """GPU milliseconds of one launch of ``cfg``: the best of 3 runs of ``reps`` launches between CUDA
        events, queued behind a GPU sleep so that the events time the GPU alone. Without it, a candidate
        whose launch costs more host time than its kernels run (cuBLAS's product through torch, then the
        epilogue) was timed at its host speed: on an H200, BERT's [4096, 768] x [768, 3072] product with its
        GELU measured 55 us as cuBLAS + epilogue against 51 us fused, and the fused kernel was chosen, where
        in the model Inductor's cuBLAS product and GELU kernel ran 30 + 17 us and the fused kernel 58 us."""
        self.launch(cfg, tensors)  # compiles
        torch.cuda.synchronize()
        best = float("inf")
        for _ in range(3):
            start = torch.cuda.Event(enable_timing=True)
            end = torch.cuda.Event(enable_timing=True)
            torch.cuda._sleep(SLEEP_CYCLES)
            start.record()
            for _ in range(reps):
                self.launch(cfg, tensors)
            end.record()
            end.synchronize()
            best = min(best, start.elapsed_time(end) / reps)
        return best


class _Cublas:
    """The candidate of a matmul kernel that is cuBLAS's product followed by the epilogue kernel."""

    def key(self) -> list:
        return ["cublas"]

    def __repr__(self) -> str:
        return "cublas+epilogue"


CUBLAS = _Cublas()


def lazy_tuning() -> bool:
    """``MEND_MATMUL_LAZY_TUNE=0`` makes a matmul kernel's first launch wait for all its candidates."""
    return settings.MATMUL_LAZY_TUNE.get()


class TritonMatmulLauncher(TritonLauncher):
    """Launcher of the ``matmul`` template. Its candidates are the fused kernel's tile configurations and
    cuBLAS's product (``torch.matmul`` on views of the operands) followed by the epilogue kernel, timed once
    on a GPU (like any autotuned kernel); the fastest is recorded on disk. A float32 product stays with
    cuBLAS anyway (``schedule/matmul.py``).

    The fused kernels take long to compile (a GELU epilogue in a 128 x 256 tile: several seconds each), so
    with no record the first launch does not wait for them: cuBLAS and the epilogue kernel (a quick
    compile) run while the fused configurations compile in the background (``aot.submit_background``), and
    the first call that finds them all built times the candidates and switches to the fastest. Before a CUDA
    graph is captured, :meth:`settle` makes the next call finish that tuning (waiting for the compiles): a
    captured graph keeps the configurations it recorded. Without compile workers, or under
    ``MEND_MATMUL_LAZY_TUNE=0``, the first launch waits and tunes as other kernels do."""

    def __init__(self, kernel, fn, epilogue_fn, source):
        super().__init__(kernel, fn, source)
        self.epilogue = TritonLauncher(source.epilogue.k, epilogue_fn, source.epilogue)
        self.mm = self.plan.mm
        names = list(kernel.inputs) + list(kernel.outputs)
        ek = source.epilogue.k
        tmp = ek.inputs[0]
        self._slots = [names.index(n) if n != tmp else None for n in list(ek.inputs) + list(ek.outputs)]
        self._operands = (names.index(self.mm.a.buf), names.index(self.mm.b.buf))
        self._compile = None  # (module, target): what background compiles need
        self._background = None  # futures of the fused configurations compiling in the background
        self._settle = False

    def candidates(self, dev) -> list[int]:
        hit = read_tuned(_tune_key(self.kernel_text, dev)) if autotune_enabled() else None
        if hit is not None and hit.get("config") == CUBLAS.key():
            return []
        return super().candidates(dev)

    def precompile(self, module, target, dev) -> None:
        """Submit what the first launch runs: the recorded winner; with no record, the epilogue kernel only
        (the fused configurations follow in the background) or, when the first launch tunes, every one."""
        (name, sig, launches), *_ = self.source.compile_units()
        cands = self.candidates(dev)
        self._compile = (module, target)
        if len(cands) > 1 and lazy_tuning():
            cands = []
        for i in cands:
            self.aot[i] = aot.submit(aot.job_for(module, name, sig, launches[i][0], launches[i][1], target))
        self.epilogue.precompile(module, target, dev)

    def _choose(self, tensors):
        dev = _device_of(tensors)
        if self._autotuned(dev) and self._recorded(dev) is None and self._start_background():
            return CUBLAS  # until the fused configurations are built and timed
        return super()._choose(tensors)

    def _start_background(self) -> bool:
        """Submit the fused configurations not compiled yet at low priority; False when they cannot be
        (no compile workers, or lazy tuning off)."""
        if self._background is not None:
            return True
        if self._compile is None or not lazy_tuning():
            return False
        module, target = self._compile
        (name, sig, launches), *_ = self.source.compile_units()
        futures = {}
        for i, (constexprs, options) in enumerate(launches):
            if i in self.aot:
                continue
            f = aot.submit_background(aot.job_for(module, name, sig, constexprs, options, target))
            if f is None:
                return False
            futures[i] = f
        self.aot.update(futures)
        self._background = list(self.aot.values())
        _TUNING.add(self)
        return True

    def settle(self) -> None:
        """The next call finishes a background tuning, waiting for its compiles if needed."""
        self._settle = True

    def tuning_done(self, timeout=None) -> bool:
        """Wait until the background compiles are built (True) or ``timeout`` seconds pass (False)."""
        try:
            for f in self._background or ():
                f.result(timeout)
        except _Timeout:
            return False
        return True

    def __call__(self, *tensors) -> None:
        if (self._background is not None and (self._settle or all(f.done() for f in self._background))
                and not _capturing()):
            self._background = None
            _TUNING.discard(self)
            try:
                self.config = self._tune(tensors, _device_of(tensors))
                STATS["tuned_in_background"] += 1
            except Exception as exc:  # noqa: BLE001 - cuBLAS and the epilogue go on
                if isinstance(exc, torch.cuda.OutOfMemoryError):
                    raise
                warn_once(f"mend: autotuning {self.kernel.name} failed ({type(exc).__name__}: {exc}); "
                          "it stays with cuBLAS and its epilogue")
                self.config = CUBLAS
            ck = self.launch(self.config, tensors)
            self._arm_fast_launch(ck, tensors)
            return None
        return super().__call__(*tensors)

    def _candidates_to_time(self) -> list:
        return list(self.plan.configs) + [CUBLAS]

    def launch(self, cfg, tensors):
        if cfg is CUBLAS:
            return self.cublas(tensors)
        return super().launch(cfg, tensors)

    def cublas(self, tensors) -> None:
        """The product by ``torch.matmul`` (cuBLAS on a GPU) in the operands' dtype, then the epilogue."""
        mm = self.mm
        nb = len(mm.batch)

        def view(op, t, rows, cols, shape):
            st = op.strides[:nb] + (op.strides[rows], op.strides[cols])
            return t.as_strided((*mm.batch, *shape), st, t.storage_offset() + op.offset)

        ia, ib = self._operands
        prod = torch.matmul(view(mm.a, tensors[ia], nb, nb + 2, (mm.m, mm.k)),
                            view(mm.b, tensors[ib], nb + 2, nb + 1, (mm.k, mm.n)))
        self.epilogue(*[prod if i is None else tensors[i] for i in self._slots])
        return None


def wait_tuning(timeout: "float | None" = None) -> bool:
    """Block until the background compiles of every matmul kernel tuning lazily are built (True; each
    switches at its next call), or ``timeout`` seconds pass (False)."""
    end = None if timeout is None else time.monotonic() + timeout
    for launcher in list(_TUNING):
        if not launcher.tuning_done(None if end is None else max(0.0, end - time.monotonic())):
            return False
    return True


class TritonSplitLauncher:
    """Launcher of the ``split`` template: the partial-reduction kernel over a 2-D grid (row blocks x
    chunks) into fresh workspace buffers, then the combine kernel. The first configuration is used (no
    autotune); a build failure falls back to the reference interpreter like :class:`TritonLauncher`."""

    template = "split"

    def __init__(self, kernel, part_fn, done_fn, source):
        self.kernel = kernel
        self.part = part_fn
        self.done = done_fn
        self.source = source
        self.plan = source.plan
        self.xnumel = self.plan.xnumel
        self.config = self.plan.configs[0]
        self.fallback = None
        self.workspaces = list(source.workspaces)
        self.kernel_text = source.render()
        self.interpreted = type(part_fn).__name__ == "InterpretedFunction"
        self._built = False
        self.aot: dict[int, object] = {}  # 0: the partial kernel, 1: the combine kernel
        self.static: dict[int, object] = {}

    def precompile(self, module, target, dev) -> None:
        for i, (name, sig, launches) in enumerate(self.source.compile_units()):
            constexprs, options = launches[0]
            self.aot[i] = aot.submit(aot.job_for(module, name, sig, constexprs, options, target))

    _static_kernel = TritonLauncher._static_kernel

    def __repr__(self) -> str:
        return f"<triton kernel {self.kernel.name} split x{self.plan.nsplit} xnumel={self.xnumel}>"

    def _launch(self, tensors) -> None:
        p, c, d = self.plan, self.config, self.plan.done_config
        dev = tensors[-1].device if tensors else torch.device("cuda")  # an output: the graph's device
        ws = [torch.empty(p.nsplit * p.xnumel, dtype=dt, device=dev) for _, dt in self.workspaces]
        args = list(tensors) + ws
        g1 = ((p.xnumel + c.XBLOCK - 1) // c.XBLOCK, p.nsplit)
        g2 = ((p.xnumel + d.XBLOCK - 1) // d.XBLOCK,)
        if self.interpreted:
            with _lock, _interpreter_runs_jit_functions():
                self.part[g1](*args, XBLOCK=c.XBLOCK, RBLOCK=c.RBLOCK)
                self.done[g2](*args, XBLOCK=d.XBLOCK, SBLOCK=d.RBLOCK)
            return
        args = tuple(args)
        if not (self.aot and _launch_static(self, 0, g1, args)):
            self.part[g1](*args, XBLOCK=c.XBLOCK, RBLOCK=c.RBLOCK, num_warps=c.num_warps)
        if not (self.aot and _launch_static(self, 1, g2, args)):
            self.done[g2](*args, XBLOCK=d.XBLOCK, SBLOCK=d.RBLOCK, num_warps=d.num_warps)

    def __call__(self, *tensors) -> None:
        if self.fallback is not None:
            return self.fallback(*tensors)
        if self._built:
            return self._launch(tensors)
        try:
            self._launch(tensors)
            self._built = True
            STATS["kernels_built"] += 1
        except Exception as exc:  # noqa: BLE001 - a kernel Triton cannot build runs interpreted
            if isinstance(exc, torch.cuda.OutOfMemoryError):
                raise
            STATS["launch_fallbacks"] += 1
            warn_once(f"mend: Triton kernel {self.kernel.name} failed to build ({type(exc).__name__}); it runs "
                      "in the reference interpreter")
            self.fallback = lambda *ts: run_kernel(self.kernel, *ts)
            return self.fallback(*tensors)
        return None


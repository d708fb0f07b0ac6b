"""Asynchronous compilation: the graph runs through ATen while its kernels are built.

``torch.compile(model, backend="mend", options={"async_compile": True})``, ``mend.compiler.compile(model,
async_compile=True)`` or ``MEND_ASYNC_COMPILE=1`` (``0`` turns it off everywhere). Lowering, fusion and
code generation still run when the graph is compiled (they are quick, and a graph that cannot be lowered is
known at once), but nothing waits for a kernel build: Triton kernels compile in the workers of
``codegen/triton/aot.py`` as always, and the C++ translation unit is built by ``g++`` on a background thread. Until
every build of a graph is done, each call of the graph runs the ATen graph that aot_autograd traced, op by
op, as eager PyTorch would; the first call that finds them done switches to the compiled graph, for good.
The first call then waits only for Dynamo, aot_autograd and the front end; for an inference graph (the
direct trace, ``backend._direct_inference``) only for Dynamo: its first call runs Dynamo's own graph, and
its trace to ATen and front end run at its second call (:class:`DeferredGraph`), then its kernels build as
above. That second step stays on the calling thread: tracing with FX sets process-wide state
(``is_fx_tracing``, a patched ``nn.Module.__call__``) that every compiled call of the program would see
while a trace ran on another thread (Dynamo then refuses to run: "using FX to symbolically trace a
dynamo-optimized function").

The background work is a compiler process or a thread blocked on one, never Python lowering: a thread that
held the GIL would slow every ATen op of the main thread (each op releases and re-takes the GIL). The one
exception: with no Triton worker pool (``MEND_COMPILE_WORKERS=0``) Triton kernels compile on the background
thread, front end included, since the alternative is compiling them in the first call.

What it costs, and why it is off by default:

* Until the switch, calls run at eager speed, not compiled speed.
* The ATen graph and the compiled kernels agree to floating-point rounding, not bit for bit (like eager
  and any compiled graph), and when the switch happens depends on timing. A training run is therefore not
  bitwise reproducible from one run to the next.
* A graph whose build fails runs eagerly (the graph-level fallback, logged once), as without this mode.

A forward and its backward may switch at different calls: each is a function of its inputs only (the
tensors saved for the backward are outputs of the forward graph either way), so any mix is correct.

:func:`wait` blocks until every graph compiled so far is built (before timing or serving, say);
:func:`pending` counts those still building.
"""

from __future__ import annotations

import queue
import threading
import time
import weakref
from concurrent.futures import Future
from concurrent.futures import TimeoutError as _Timeout

from mend import settings

STATS = {"graphs": 0, "aten_calls": 0, "switched": 0, "deferred": 0}
_lock = threading.Lock()
_executor: "_Background | None" = None
_graphs: "weakref.WeakSet[TieredGraph | DeferredGraph]" = weakref.WeakSet()


def requested(kwargs: dict) -> bool:
    """Whether a backend call asks for asynchronous compilation: ``options={"async_compile": True}`` or
    ``MEND_ASYNC_COMPILE=1`` (the variable, when set, wins either way)."""
    env = settings.ASYNC_COMPILE.get()
    if env is not None:
        return env
    opts = kwargs.get("options") or {}
    return bool(opts.get("async_compile", False))


class _Background:
    """One daemon thread running submitted builds in order: graphs build one after another, in the order
    they were compiled (the first graph a program runs is built first), and one ``g++`` at a time leaves
    the other cores to the program. A daemon, so that a program that ends never waits for a build it will
    not use (a library is published by an atomic rename: a build cut short never leaves a partial one in
    the cache, at most a temporary file)."""

    def __init__(self) -> None:
        self._jobs: "queue.SimpleQueue" = queue.SimpleQueue()
        threading.Thread(target=self._run, name="mend-async-build", daemon=True).start()

    def submit(self, fn) -> Future:
        f: Future = Future()
        self._jobs.put((f, fn))
        return f

    def _run(self) -> None:
        while True:
            f, fn = self._jobs.get()
            if not f.set_running_or_notify_cancel():
                continue
            try:
                f.set_result(fn())
            except BaseException as exc:  # noqa: BLE001 - delivered to whoever asks for the result
                f.set_exception(exc)


def _pool() -> _Background:
    global _executor
    with _lock:
        if _executor is None:
            _executor = _Background()
        return _executor


def run_in_background(fn) -> Future:
    """``fn()`` on the background build thread, after the builds submitted before it."""
    return _pool().submit(fn)


def kernels_ready(fn) -> bool:
    """Whether every build the compiled graph ``fn`` is waiting for (``fn.mend_pending``) is done."""
    return all(f.done() for f in getattr(fn, "mend_pending", ()))


class Deferred:
    """A compiled graph whose blocking kernel build (``build()``, returning the graph's callable) runs on
    the background thread. Calling it before the build is done waits for it; a build that raises gives
    ``on_error(exc)``, the graph-level fallback."""

    _boxed_call = True

    def __init__(self, build, graph, extern_ops, on_error) -> None:
        self.mend_graph = graph
        self.mend_extern_ops = list(extern_ops)
        self._future: Future = _pool().submit(build)
        self.mend_pending = [self._future]
        self._on_error = on_error
        self._call = None

    def _resolve(self):
        try:
            call = self._future.result()
        except Exception as exc:  # noqa: BLE001 - the graph-level fallback (or MEND_STRICT raises)
            call = self._on_error(exc)
        self.mend_interpreted = list(getattr(call, "mend_interpreted", []))
        self._call = call
        return call

    def __call__(self, args):
        call = self._call
        if call is None:
            call = self._resolve()
        return call(args)

    def __getattr__(self, name):
        if name == "mend_interpreted" and self.__dict__.get("_future") is not None and self._future.done():
            self._resolve()  # known once the build is done (asking never waits for it)
            return self.mend_interpreted
        raise AttributeError(name)


class TieredGraph:
    """A boxed callable: the ATen graph ``gm`` until every build the compiled graph ``fn`` waits for is
    done, then ``fn``."""

    _boxed_call = True

    def __init__(self, gm, fn, name: str) -> None:
        self.name = name
        self._aten = gm.forward
        self._compiled = fn
        self._fn = None
        STATS["graphs"] += 1
        _graphs.add(self)

    @property
    def compiled(self):
        """The compiled graph once it runs (None before the switch)."""
        return self._fn

    def ready(self) -> bool:
        """Whether the next call runs the compiled graph."""
        return self._fn is not None or kernels_ready(self._compiled)

    def wait(self, timeout: "float | None" = None) -> bool:
        """Block until :meth:`ready` (True) or ``timeout`` seconds pass (False)."""
        end = None if timeout is None else time.monotonic() + timeout
        for f in getattr(self._compiled, "mend_pending", ()):
            left = None if end is None else max(0.0, end - time.monotonic())
            try:
                f.result(left)
            except _Timeout:
                return False
            except Exception:  # noqa: BLE001 - a failed build is handled (fallback, logged) at the switch
                pass
        return True

    def __call__(self, args):
        fn = self._fn
        if fn is None:
            if not self.ready():
                STATS["aten_calls"] += 1
                return self._aten(*args)
            fn = self._fn = self._compiled
            self._aten = None
            STATS["switched"] += 1
        return fn(args)

    def __getattr__(self, name):
        if name.startswith("mend_") and "_compiled" in self.__dict__:  # the compiled graph's inspection
            return getattr(self._compiled, name)
        raise AttributeError(name)


class DeferredGraph:
    """A boxed callable compiled at its second call: the first runs ``reference`` (Dynamo's graph) and
    nothing else; the second, or :meth:`wait`, runs ``compile()`` on the calling thread, whose result (the
    graph's asynchronous form, kernels building in the background) takes every call from then on."""

    _boxed_call = True

    def __init__(self, reference, compile, name: str) -> None:
        self.name = name
        self._reference = reference
        self._compile = compile
        self._graph = None
        self._called = False
        STATS["deferred"] += 1
        _graphs.add(self)

    def _compiled(self):
        if self._graph is None:
            self._graph = self._compile()
            self._reference = self._compile = None
        return self._graph

    def ready(self) -> bool:
        """Whether the next call runs the compiled graph."""
        return self._graph is not None and getattr(self._graph, "ready", lambda: True)()

    def wait(self, timeout: "float | None" = None) -> bool:
        """Compile now (on this thread) if the second call has not, then wait for the kernels."""
        graph = self._compiled()
        return getattr(graph, "wait", lambda t: True)(timeout)

    def __call__(self, args):
        if self._graph is None and not self._called:
            self._called = True
            STATS["aten_calls"] += 1
            return self._reference(*args)
        return self._compiled()(args)


def pending() -> int:
    """How many graphs compiled asynchronously are not yet ready to switch."""
    return sum(not g.ready() for g in list(_graphs))


def wait(timeout: "float | None" = None) -> bool:
    """Block until every graph compiled asynchronously so far is built (True), or ``timeout`` seconds pass
    (False). The switch itself happens at each graph's next call."""
    end = None if timeout is None else time.monotonic() + timeout
    done: set[int] = set()
    while todo := [g for g in list(_graphs) if id(g) not in done]:  # a deferred graph adds its compiled form
        for g in todo:
            left = None if end is None else max(0.0, end - time.monotonic())
            if not g.wait(left):
                return False
            done.add(id(g))
    return True

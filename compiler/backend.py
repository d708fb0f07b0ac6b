"""The ``mend`` torch.compile backend.

``torch.compile(model, backend="mend")`` (registered here and through the ``torch_dynamo_backends`` entry
point) runs Dynamo's graph through aot_autograd with mend's decomposition table (an inference graph that
needs none of aot_autograd's handling is traced once, directly: :func:`_direct_inference`); the forward,
backward and inference ATen graphs each go through :func:`compile_graph`: lowering (``lowering/``) -> IR
(``ir/``, verified under ``MEND_COMPILER_VERIFY``) -> scheduling/fusion (``schedule/``) -> code generation
(``codegen/cpp/`` for CPU tensors, ``codegen/triton/`` for CUDA; chosen in ``codegen.generator_for``) -> a
Python wrapper (``runtime/wrapper.py``). Fallbacks, each logged once: an op without lowering becomes an ATen call (op level); a
kernel that cannot be generated or built runs in the reference interpreter (kernel level); a graph that
cannot be lowered runs eagerly (graph level); a compiled graph that fails when it runs is run again, and
from then on, as its ATen graph (run time, ``runtime/guard.py``).
"""

from __future__ import annotations

import copy
import hashlib
import logging
import time
from concurrent.futures import Future

import torch
import torch.utils._pytree

from mend import settings

from . import compat, debug
from .codegen import KernelCompileError, NoGenerator, generator_for
from .codegen.triton import aot as triton_aot
from .ir import ExternKernel
from .ir.verify import verify_graph, verify_scheduled
from .lowering import Lowering, graph_device, log_once
from .lowering.decomps import decomposition_table
from .mode import ASYNC, SYNC, Mode
from .runtime import cache, graph_cache, guard, specialize, tiered, wrapper
from .runtime import cudagraphs as cuda_graphs
from .runtime.interpret import run_kernel
from .schedule import schedule

log = logging.getLogger("mend.compiler")

STATS = {"graphs": 0, "fallback_graphs": 0, "kernels": 0, "interpreted_kernels": 0, "extern_calls": 0,
         "compile_seconds": 0.0, "graph_cache_hits": 0,
         "direct_inference_graphs": 0, "dynamo_cache_hits": 0}


class GraphFallback(RuntimeError):
    pass


def _device_of(example_inputs, gm) -> torch.device:
    return graph_device(gm, example_inputs)


def compile_graph(gm: torch.fx.GraphModule, example_inputs, mode: Mode = SYNC, *, kind: str = "inference",
                  preloaded=None):
    """Compile one ATen graph; returns a boxed callable ``fn(list_of_args) -> tuple``. ``mode``: whether it
    returns at once and builds in the background, running the ATen graph meanwhile
    (``mend.compiler.runtime.tiered``), and whether it replays a CUDA graph of the compiled graph after its
    first call (``mend.compiler.runtime.cudagraphs``). ``preloaded``: the graph cache's (scheduled graph,
    extern ops) of ``gm``, found by the caller under another key (``gm`` is then only run as the reference)."""
    if specialize.is_dynamic(example_inputs):  # symbolic shapes: one static compile per concrete shape
        return specialize.ShapeSpecialized(gm, lambda g, ex: compile_graph(g, ex, mode, kind=kind), f"{kind} graph")
    if mode.async_compile:
        return tiered.TieredGraph(gm, _build(gm, example_inputs, kind, mode, preloaded), f"{kind} graph")
    return _build(gm, example_inputs, kind, mode, preloaded)


def _build(gm, example_inputs, kind: str, mode: Mode, preloaded=None):
    """The compiled graph, or the graph-level fallback. With asynchronous compilation a build that would
    block (``g++``) runs on a background thread and the result says so through ``mend_pending``."""
    t0 = time.perf_counter()
    code = gm.code
    tag = hashlib.sha256(code.encode()).hexdigest()[:10]
    dump = debug.Dump(f"{kind}_{tag}")
    dump.write("fx_graph.py", code)
    STATS["graphs"] += 1
    try:
        if settings.COMPILER_FALLBACK.get() == "eager":
            raise GraphFallback(f"{settings.COMPILER_FALLBACK.name}=eager")
        fn = _compile(gm, example_inputs, dump, mode.async_compile, preloaded)
        if mode.cudagraphs and _device_of(example_inputs, gm).type == "cuda":
            fn = _carry_inspection(fn, cuda_graphs.wrap(fn, gm, fn.mend_graph, example_inputs, f"{kind} graph {tag}"))
        fn = guard.GuardedGraph(fn, compat.make_boxed_func(gm.forward), f"{kind} graph {tag}")
    except Exception as exc:  # graph-level fallback
        fn = _fallback(gm, dump, exc)
    STATS["compile_seconds"] += time.perf_counter() - t0
    return fn


def _fallback(gm, dump, exc: Exception):
    """The graph-level fallback: ``gm`` runs eagerly (logged once); ``MEND_STRICT=1`` raises."""
    STATS["fallback_graphs"] += 1
    log_once(f"mend: graph runs eagerly ({type(exc).__name__}: {exc})")
    if debug.strict():
        raise exc
    dump.write("fallback.txt", f"{type(exc).__name__}: {exc}")
    return compat.make_boxed_func(gm.forward)


def _bake_scalars(gm, example_inputs):
    """Non-tensor graph inputs (the sizes of a graph specialized to one shape, ``specialize.py``; the
    ``None`` that aot_autograd passes for an effect token at run time) become constants of a copy of the
    graph. Returns (graph, tensor inputs, {input index: value}) ."""
    scalars = {i: a for i, a in enumerate(example_inputs) if not isinstance(a, torch.Tensor)}
    if not scalars:
        return gm, example_inputs, {}
    bad = {i: type(a).__name__ for i, a in scalars.items() if not isinstance(a, (int, float, bool, type(None)))}
    if bad:
        raise GraphFallback(f"graph inputs that are neither tensors nor numbers: {bad}")
    graph = copy.deepcopy(gm.graph)
    placeholders = [n for n in graph.nodes if n.op == "placeholder"]
    for i, value in scalars.items():
        node = placeholders[i]
        for user in list(node.users):
            user.args = torch.fx.node.map_arg(user.args, lambda n, node=node, value=value: value if n is node else n)
            user.kwargs = torch.fx.node.map_arg(user.kwargs, lambda n, node=node, value=value: value if n is node else n)
        graph.erase_node(node)
    baked = torch.fx.GraphModule(gm, graph)
    return baked, [a for i, a in enumerate(example_inputs) if i not in scalars], scalars


def _drop_scalars(call, scalars):
    """The compiled graph of :func:`_bake_scalars` called with the original argument list: the baked values
    are checked (a graph compiled for one value never runs with another) and dropped."""
    items = sorted(scalars.items())

    def run(args):
        for i, v in items:
            if args[i] != v:
                raise RuntimeError(f"mend: graph compiled for input {i} == {v!r} called with {args[i]!r}")
        tensors = [a for i, a in enumerate(args) if i not in scalars]
        args.clear()
        return call(tensors)

    run._boxed_call = True
    return _carry_inspection(call, run)


def _carry_inspection(call, wrapper):
    """``wrapper`` (a callable around the compiled graph ``call``) keeps its inspection attributes."""
    for attr in ("mend_graph", "mend_interpreted", "mend_extern_ops", "mend_pending", "mend_settle"):
        if hasattr(call, attr):
            setattr(wrapper, attr, getattr(call, attr))
    return wrapper


def _compile(gm, example_inputs, dump, defer: bool = False, preloaded=None):
    gm, example_inputs, scalars = _bake_scalars(gm, example_inputs)
    call = _compile_tensors(gm, example_inputs, dump, defer, preloaded)
    return _drop_scalars(call, scalars) if scalars else call


def _compile_tensors(gm, example_inputs, dump, defer: bool = False, preloaded=None):
    device = _device_of(example_inputs, gm)
    if preloaded is not None:
        key, cached = None, preloaded
    else:
        key = graph_cache.graph_key(gm, example_inputs)
        cached = None if dump else graph_cache.load(key)  # a debug dump wants every stage: lower again
    if cached is not None:
        STATS["graph_cache_hits"] += 1
        sg, extern_ops = cached
        if debug.verify_enabled():
            verify_scheduled(sg)
    else:
        sg, extern_ops = _front_end(gm, example_inputs, device, dump)
        graph_cache.store(key, (sg, extern_ops))
    STATS["extern_calls"] += len(extern_ops)
    if dump:
        dump.write("scheduled.txt", str(sg))
    try:
        gen = generator_for(device.type)
    except NoGenerator as exc:
        raise GraphFallback(str(exc)) from exc
    if hasattr(gen, "device"):
        gen.device = device
    if defer and getattr(gen, "blocking_build", False):
        return tiered.Deferred(lambda: _build_kernels(gm, dump, device, gen, sg, extern_ops),
                               sg, extern_ops, lambda exc: _fallback(gm, dump, exc))
    return _build_kernels(gm, dump, device, gen, sg, extern_ops, defer)


def _front_end(gm, example_inputs, device, dump):
    """Lowering, then scheduling and fusion, each stage's output checked by the IR verifier when it is on
    (``MEND_COMPILER_VERIFY``); returns (scheduled graph, ops that became ATen calls)."""
    lowering = Lowering(gm, example_inputs, device)
    g = lowering.run()
    if dump:
        dump.write("ir.txt", str(g))
    if debug.verify_enabled():
        verify_graph(g)
    sg, decisions = schedule(g, device.type)
    if dump:
        dump.write("fusion.txt", "\n".join(decisions))
    if debug.verify_enabled():
        verify_scheduled(sg)
    return sg, [str(s.op) for s in sg.steps if isinstance(s, ExternKernel)]


def _build_kernels(gm, dump, device, gen, sg, extern_ops, defer: bool = False):
    """Code generation and the kernel builds of the scheduled graph ``sg``, then its Python wrapper."""
    kernels = sg.kernels
    disabled = debug.disabled_kernels()
    to_build = [k for k in kernels if k.name not in disabled and "all" not in disabled]
    try:
        fns = gen.compile(to_build, dump)
    except KernelCompileError as exc:
        log_once(f"mend: kernels {exc.failed} run in the reference interpreter ({exc})")
        fns = dict(getattr(exc, "partial", {}))

    # interpreted = the kernels the generator did not return (disabled or failed), by identity: the style
    # says how a kernel is called, not what runs it (every Triton launcher is called with tensors too)
    interpreted = [k.name for k in kernels if k.name not in fns]
    for k in kernels:
        if k.name in interpreted:
            STATS["interpreted_kernels"] += 1
            fns[k.name] = (lambda *ts, _k=k: run_kernel(_k, *ts), "tensor")
    STATS["kernels"] += len(kernels)
    constants = {c.name: getattr(gm, c.attr) for c in sg.constants}
    call, src = wrapper.build(sg, fns, constants, device)
    dump.write("wrapper.py", src)
    if settings.COMPILER_CHECK.get():
        call = _self_checking(call, gm, dump)
    call.mend_graph = sg  # for inspection (tests, explain): kernels, steps, buffers
    call.mend_wrapper_source = src
    call.mend_interpreted = interpreted
    call.mend_extern_ops = list(extern_ops)
    call.mend_pending = _kernel_futures(fns, defer)
    call.mend_settle = _settler(fns)
    return call


def _settler(fns):
    """What a CUDA graph capture calls first: kernels still tuning in the background finish at the next call."""
    tuning = [fn for fn, _ in fns.values() if hasattr(fn, "settle")]

    def settle():
        for fn in tuning:
            fn.settle()

    return settle


def _kernel_futures(fns, defer: bool = False) -> list:
    """The kernel compiles still running in workers for this graph's launchers (asynchronous compilation
    switches to the graph once they are done). Without a worker pool a kernel compiles in the calling
    thread at its first launch; with ``defer`` (asynchronous compilation) those compiles run on the
    background thread instead, and are waited for like the workers' (the first call must not compile)."""
    futures = []
    launchers = [fn for fn, _ in fns.values()]
    launchers += [fn.epilogue for fn in launchers if getattr(fn, "epilogue", None) is not None]  # matmul
    for fn in launchers:
        for f in getattr(fn, "aot", {}).values():
            if isinstance(f, Future):
                futures.append(f)
            elif defer and hasattr(f, "result") and not f.done():
                futures.append(tiered.run_in_background(f.result))
    return futures


def _self_checking(call, gm, dump):
    """Debug mode (``MEND_COMPILER_CHECK=1``): on the first call also run the FX graph eagerly and report
    every output that differs."""
    state = {"checked": False}

    def checked(args):
        if state["checked"]:
            return call(args)
        state["checked"] = True
        ref_args = [a.clone() if isinstance(a, torch.Tensor) else a for a in args]
        out = call(list(args))
        ref = torch.utils._pytree.tree_leaves(gm(*ref_args))
        bad = []
        for i, (a, b) in enumerate(zip(out, ref)):
            if isinstance(a, torch.Tensor) and isinstance(b, torch.Tensor):
                if a.shape != b.shape or not torch.allclose(a.double(), b.double(), rtol=1e-3, atol=1e-3,
                                                            equal_nan=True):
                    bad.append(i)
        if bad:
            msg = f"mend self-check: outputs {bad} differ from eager"
            log.warning(msg)
            dump.write("selfcheck.txt", msg)
        return out

    checked._boxed_call = True
    return checked


def _compiler(kind: str, mode: Mode):
    def compile_one(gm, example_inputs):
        return compile_graph(gm, example_inputs, mode, kind=kind)

    return compile_one


def mend_backend(gm: torch.fx.GraphModule, example_inputs, **kwargs):
    """The Dynamo backend: ``torch.compile(fn, backend=mend_backend)`` or ``backend="mend"``.

    ``mode="reduce-overhead"`` or ``options={"cudagraphs": True}`` replays CUDA graphs of the compiled
    graphs (CUDA tensors only; see ``mend.compiler.runtime.cudagraphs``). ``options={"async_compile": True}`` runs
    each graph through ATen while it compiles in the background (``mend.compiler.runtime.tiered``)."""
    cuda = next((t.device for t in example_inputs if isinstance(t, torch.Tensor) and t.device.type == "cuda"),
                None)
    mode = Mode.requested(kwargs, on_cuda=cuda is not None)
    if cuda is not None:
        triton_aot.warm(cuda)  # the compile workers start (and warm up) while aot_autograd traces
    direct = _direct_inference(gm, example_inputs, mode)
    if direct is not None:
        return direct
    return _through_aot(gm, example_inputs, mode)


def _through_aot(gm, example_inputs, mode: Mode):
    """``gm`` through aot_autograd, each graph it traces compiled by mend; called with the arguments spread."""
    return compat.aot_module_simplified(
        gm,
        example_inputs,
        fw_compiler=_compiler("forward", mode),
        bw_compiler=_compiler("backward", mode),
        inference_compiler=_compiler("inference", mode),
        decompositions=decomposition_table(),
        eager_backward=mode.eager_backward,
    )


def _direct_inference(gm, example_inputs, mode: Mode):
    """An inference graph without aot_autograd (``compat.trace_inference``: the same ATen graph from one
    trace instead of two), or None. A warm process skips the trace as well: Dynamo's graph, keyed by
    ``graph_cache.dynamo_key``, names the cache entry of the ATen graph it traced to, and that scheduled
    graph is built with Dynamo's graph standing in for the ATen one (the reference run of asynchronous
    compilation, the graph-level fallback and the self-check; a graph with constants is not taken this
    way)."""
    if not compat.inference_eligible(gm, example_inputs):
        return None
    dkey = graph_cache.dynamo_key(gm, example_inputs) if cache.enabled() and not debug.debug_dir() else None
    if dkey is not None:
        record = graph_cache.load(dkey)  # (the ATen graph's key, its device)
        ok = isinstance(record, tuple) and record[1] == str(_device_of(example_inputs, gm))
        cached = graph_cache.load(record[0]) if ok else None
        if cached is not None and not cached[0].constants:
            STATS["direct_inference_graphs"] += 1
            STATS["dynamo_cache_hits"] += 1
            return _boxed_to_plain(compile_graph(gm, example_inputs, mode, kind="inference", preloaded=cached))
    fakes = compat.fake_inputs(example_inputs) if mode.timing == "deferred" else None
    if fakes is not None:  # the first call waits for Dynamo alone: the rest at the second call
        return _boxed_to_plain(tiered.DeferredGraph(gm.forward, lambda: _traced_compile(gm, fakes, dkey),
                                                    "inference graph"), carry=False)
    traced = compat.trace_inference(gm, example_inputs, decomposition_table())
    if traced is None:
        return None
    STATS["direct_inference_graphs"] += 1
    aten_gm, fakes = traced
    boxed = compile_graph(aten_gm, fakes, mode, kind="inference")
    if dkey is not None:
        graph_cache.store(dkey, (graph_cache.graph_key(aten_gm, fakes), str(_device_of(fakes, aten_gm))))
    return _boxed_to_plain(boxed)


def _traced_compile(gm, fakes, dkey):
    """An inference graph's trace to ATen and its asynchronous compile (kernels building in the background),
    at its second call (``tiered.DeferredGraph``); ``fakes``: Dynamo's example inputs as fake tensors, its
    tracing context being gone by then. A graph the direct trace does not take goes through aot_autograd,
    as when compiled at once."""
    traced = compat.trace_inference(gm, fakes, decomposition_table())
    if traced is None:
        plain = _through_aot(gm, fakes, ASYNC)

        def fn(args):
            return plain(*args)

        fn._boxed_call = True
        return fn
    STATS["direct_inference_graphs"] += 1
    aten_gm, aten_fakes = traced
    if dkey is not None:
        graph_cache.store(dkey, (graph_cache.graph_key(aten_gm, aten_fakes), str(_device_of(aten_fakes, aten_gm))))
    return compile_graph(aten_gm, aten_fakes, ASYNC, kind="inference")


def _boxed_to_plain(boxed, carry: bool = True):
    """Dynamo calls a backend's result with the arguments spread out; the compiled graph takes a list.
    ``carry``: the result keeps the compiled graph's inspection attributes (not for a graph built later)."""
    def forward(*args):
        return boxed(list(args))

    return _carry_inspection(boxed, forward) if carry else forward


compat.register_backend("mend", mend_backend)

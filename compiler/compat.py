"""The one place where mend.compiler touches private torch APIs.

Everything from ``torch._dynamo``, ``torch._functorch`` and ``torch._decomp`` that the compiler needs is
imported here, so a torch upgrade is a change to this file only. Supported: torch >= 2.8 (tested on 2.11
and 2.13). Each private name is imported inside the function that uses it: a torch without one loses
that feature only, never ``import mend.compiler.backend``.
"""

from __future__ import annotations

import contextlib
import importlib.util

import torch

from .runtime.specialize import is_dynamic

TORCH_VERSION = torch.__version__


def aot_module_simplified(gm, example_inputs, *, fw_compiler, bw_compiler, inference_compiler, decompositions,
                          eager_backward: bool = False):
    """aot_autograd with the min-cut partition. ``eager_backward``: compile the backward graph right after
    the forward one (where this torch can), not at the first backward call."""
    import torch._functorch.config as functorch_config
    from torch._functorch.aot_autograd import aot_module_simplified as _aot
    from torch._functorch.partitioners import min_cut_rematerialization_partition

    ctx = contextlib.nullcontext()
    if eager_backward and eager_backward_supported():
        ctx = functorch_config.patch(force_non_lazy_backward_lowering=True)
    with ctx:
        return _aot(
            gm,
            example_inputs,
            fw_compiler=fw_compiler,
            bw_compiler=bw_compiler,
            inference_compiler=inference_compiler,
            decompositions=decompositions,
            partition_fn=min_cut_rematerialization_partition,
            keep_inference_input_mutations=True,
        )


_STATE_CHANGES = ("_set_grad_enabled", "set_grad_enabled", "_enter_autocast", "_exit_autocast",
                  "_enter_inference_mode", "_exit_inference_mode")


def inference_eligible(gm, example_inputs) -> bool:
    """Whether Dynamo's graph can be traced for inference without aot_autograd (before tracing): a plain
    graph module holding no parameters, every input a tensor, none requiring grad (or grad mode off), no
    autocast, no grad-mode or autocast change inside the graph, static shapes."""
    from torch._dynamo.utils import GmWrapper

    if isinstance(gm, GmWrapper) or not isinstance(gm, torch.fx.GraphModule):
        return False
    if any(True for _ in gm.parameters()) or any(True for _ in gm.buffers()):
        return False  # parameters held by the graph module (aot_autograd lifts them to inputs)
    if not all(isinstance(t, torch.Tensor) for t in example_inputs):
        return False
    if torch.is_grad_enabled() and any(t.requires_grad for t in example_inputs):
        return False
    if torch._C._is_any_autocast_enabled():
        return False
    for n in gm.graph.nodes:
        if n.op == "call_module":
            return False
        if n.op == "call_function" and getattr(n.target, "__name__", "") in _STATE_CHANGES:
            return False
        if n.op == "placeholder" and is_dynamic([n.meta.get("example_value")]):
            return False
    return True


def fake_inputs(example_inputs) -> "list | None":
    """Dynamo's example inputs (real tensors) as fake tensors of its fake mode, for a trace made after
    Dynamo's compile has returned (its tracing context, where the fake mode is found, gone); or None."""
    from torch._guards import detect_fake_mode

    fake_mode = detect_fake_mode(example_inputs)
    if fake_mode is None:
        return None
    with fake_mode:
        return [fake_mode.from_tensor(t) for t in example_inputs]


def trace_inference(gm, example_inputs, decompositions):
    """The ATen graph of an inference graph in one ``make_fx`` trace under Dynamo's fake mode, and the fake
    inputs it was traced with; or None where aot_autograd's handling is needed.

    For a graph that needs no autograd, aot_autograd runs a metadata pass and then a functionalized trace;
    the graph it returns is the plain trace's whenever nothing mutates or aliases, at twice the cost. So
    this traces once and keeps the result only if it is that case: no mutating op in the trace, and no
    output that shares storage with an input or another output. Anything else (or any error while tracing)
    returns None and the caller goes through aot_autograd. ``gm`` must have passed
    :func:`inference_eligible` (the caller checks it once, before its cache lookup)."""
    from torch._guards import detect_fake_mode
    from torch.fx.experimental.proxy_tensor import make_fx
    from torch.multiprocessing.reductions import StorageWeakRef

    fake_mode = detect_fake_mode(example_inputs)
    if fake_mode is None:
        return None
    try:
        with fake_mode:
            fakes = [fake_mode.from_tensor(t) for t in example_inputs]
            if is_dynamic(fakes):
                return None
            traced = make_fx(gm, decomposition_table=decompositions, tracing_mode="real")(*fakes)
    except Exception:
        return None
    if not _functionalize_intermediates(traced):
        return None
    inputs, outputs = [], []
    for n in traced.graph.nodes:
        if n.op == "placeholder":
            inputs.append(n.meta.get("val"))
        elif n.op == "output":
            outputs = [getattr(a, "meta", {}).get("val") for a in torch.utils._pytree.tree_leaves(n.args)]
        elif n.op == "call_function":
            schema = getattr(n.target, "_schema", None)
            if schema is None and getattr(n.target, "__module__", None) != "_operator":
                return None  # a higher-order op or a Python function: aot_autograd knows what to do
            if schema is not None and schema.is_mutable:
                return None
    seen = {StorageWeakRef(t.untyped_storage()) for t in inputs if isinstance(t, torch.Tensor)}
    for v in outputs:
        if not isinstance(v, torch.Tensor):
            return None
        ref = StorageWeakRef(v.untyped_storage())
        if ref in seen:
            return None
        seen.add(ref)
    return traced, fakes


# ops whose result shares its input's storage though their schema does not say so
_UNANNOTATED_VIEWS = frozenset({"aten::_unsafe_view"})


def _is_view(node) -> bool:
    """``node``'s result shares storage with one of its inputs (a view op), or may (no schema: a getitem)."""
    schema = getattr(node.target, "_schema", None)
    if node.op != "call_function" or schema is None:
        return node.op != "placeholder"  # a getitem of a split's views, a higher-order op: assume it may
    return schema.name in _UNANNOTATED_VIEWS or any(r.alias_info is not None for r in schema.returns)


def _functionalize_intermediates(gm) -> bool:
    """In-place ops on tensors the graph computes itself (BERT's ``embeddings += position_embeddings``,
    ``x.mul_(scale)``) as their out-of-place forms, every later use of the tensor reading the new value,
    so the graph needs no functionalization by aot_autograd. False (graph untouched or not to be used)
    where that is not the same program: a mutated graph input, a tensor a view shares or that is a view
    itself, an op writing another argument, an op without an out-of-place form."""
    order = {n: i for i, n in enumerate(gm.graph.nodes)}
    changed = False
    for n in list(gm.graph.nodes):
        schema = getattr(n.target, "_schema", None) if n.op == "call_function" else None
        if schema is None or not schema.is_mutable:
            continue
        written = [i for i, a in enumerate(schema.arguments) if a.alias_info is not None and a.alias_info.is_write]
        base = n.args[0] if n.args else None
        functional = _out_of_place(n.target)
        if (written != [0] or functional is None or not isinstance(base, torch.fx.Node) or not _owns_storage(base)
                or any(_is_view(u) for u in base.users if u is not n)):
            return False
        n.target = functional
        for u in list(base.users):
            if u is not n and order[u] > order[n]:
                u.replace_input_with(base, n)
        changed = True
    if changed:
        gm.graph.lint()
        gm.recompile()
    return True


def _owns_storage(node) -> bool:
    """Nothing but ``node`` reaches its storage: computed in the graph, or a view of such a tensor that
    nothing else reads (``matmul``'s ``bmm`` -> ``_unsafe_view``)."""
    while _is_view(node):
        src = node.args[0] if node.op == "call_function" and node.args else None
        if not isinstance(src, torch.fx.Node) or len(src.users) != 1:
            return False
        node = src
    return node.op == "call_function"


def _out_of_place(op):
    """``aten.add.Tensor`` for ``aten.add_.Tensor``; None where there is none."""
    packet = getattr(op, "overloadpacket", None)
    name = getattr(packet, "__name__", "")
    if not name.endswith("_") or name.endswith("__"):
        return None
    functional = getattr(torch.ops.aten, name[:-1], None)
    return getattr(functional, op._overloadname, None) if functional is not None else None


def eager_backward_supported() -> bool:
    import torch._functorch.config as functorch_config

    return hasattr(functorch_config, "force_non_lazy_backward_lowering")


def make_boxed_func(fn):
    from torch._functorch.aot_autograd import make_boxed_func as _box

    return _box(fn)


def core_aten_decompositions() -> dict:
    """PyTorch's core-ATen decompositions of the ops that reach a compiler below autograd. Since torch 2.6
    the public ``core_aten_decompositions()`` is export's table, which adds every CompositeImplicitAutograd
    op (the dispatcher decomposes those while aot_autograd traces anyway) and costs 0.2-0.25 s to build
    on the first compile of a process; the post-autograd list it starts from is the same table for us, in
    3 ms."""
    import torch._decomp as d

    post = getattr(d, "_core_aten_decompositions_post_autograd", None)
    if post is not None:
        return dict(post())
    return dict(d.core_aten_decompositions())


def get_decompositions(ops) -> dict:
    from torch._decomp import get_decompositions as _get

    return dict(_get(ops))


def register_backend(name: str, fn) -> None:
    from torch._dynamo.backends import registry
    from torch._dynamo.backends.registry import register_backend as _reg

    if name in getattr(registry, "_COMPILER_FNS", {}):
        return
    if getattr(registry, "_BACKENDS", {}).get(name) is not None:
        # torch found mend's ``torch_dynamo_backends`` entry point and is loading this module through it:
        # it registers the function itself right after the import (registering here too is an error)
        return
    try:
        _reg(name=name)(fn)
    except Exception as exc:  # registered twice (re-import): the registry refuses duplicates
        if "duplicate" not in str(exc).lower() and "already" not in str(exc).lower():
            raise


def unsupported_error_types() -> tuple[type[BaseException], ...]:
    """Exception types Dynamo raises for a graph break under ``fullgraph=True``."""
    from torch._dynamo import exc

    types = [exc.Unsupported]
    for name in ("UserError", "UncapturedHigherOrderOpError"):
        t = getattr(exc, name, None)
        if isinstance(t, type):
            types.append(t)
    return tuple(types)


def is_fake(t) -> bool:
    from torch._subclasses.fake_tensor import FakeTensor

    return isinstance(t, FakeTensor)


def triton_available() -> bool:
    return importlib.util.find_spec("triton") is not None


def static_cuda_launcher():
    """PyTorch's C++ launcher of compiled cubins (``_load_kernel``/``_launch_kernel``), or None: it exists in
    CUDA builds of torch >= 2.7 and not on ROCm."""
    if getattr(torch.version, "hip", None):
        return None
    impl = getattr(torch._C, "_StaticCudaLauncher", None)
    if impl is None or not all(hasattr(impl, a) for a in ("_load_kernel", "_launch_kernel")):
        return None
    return impl


def raw_stream_getter():
    """``f(device_index) -> int``: the current CUDA stream's handle, without building a Stream object."""
    raw = getattr(torch._C, "_cuda_getCurrentRawStream", None)
    if raw is not None:
        return raw
    return lambda index: torch.cuda.current_stream(index).cuda_stream


def is_with_effects(target) -> bool:
    """``target`` is the ``with_effects`` higher-order op (aot_autograd's form of an effectful op's call)."""
    return target is getattr(getattr(torch.ops, "higher_order", None), "with_effects", None)


def is_effectful(op) -> bool:
    """``op`` has a registered side effect (``print``, an operator registered as an ordered effect): it must
    run on every call, in program order, and is never folded or dropped."""
    try:
        from torch._higher_order_ops.effects import _get_effect
    except ImportError:
        return False
    try:
        return _get_effect(op) is not None
    except Exception:
        return False

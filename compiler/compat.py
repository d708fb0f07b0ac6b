"""The one place where mend.compiler touches private torch APIs.

Everything from ``torch._dynamo``, ``torch._functorch`` and ``torch._decomp`` that the compiler needs is
imported here, so a torch upgrade is a change to this file only. Supported: torch >= 2.8 (tested on 2.11
and 2.13).
"""

from __future__ import annotations

import torch

TORCH_VERSION = torch.__version__


def aot_module_simplified(gm, example_inputs, *, fw_compiler, bw_compiler, inference_compiler, decompositions,
                          eager_backward: bool = False):
    """aot_autograd with the min-cut partition. ``eager_backward``: compile the backward graph right after
    the forward one (where this torch can), not at the first backward call."""
    import contextlib

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
    import importlib.util

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

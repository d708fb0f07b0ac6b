"""Code generators, chosen by device (the hook the backend uses: :func:`generator_for`).

A generator turns the kernels of a :class:`mend.compiler.ir.ScheduledGraph` into callables::

    class Generator:
        name: str
        def compile(self, kernels: list[ir.Kernel], dump) -> dict[str, tuple[callable, str]]

returning, per kernel name, ``(fn, style)``: style ``"ptr"`` means ``fn(*data_ptrs)`` (ints, inputs then
outputs in ``Kernel.inputs + Kernel.outputs`` order), style ``"tensor"`` means ``fn(*tensors)`` in the same
order. A generator raises :class:`KernelCompileError` naming the kernels it could not build; the backend
then runs those kernels through the reference interpreter (kernel-level fallback).

``cpu`` -> ``codegen/cpp/`` (C++/OpenMP); ``cuda`` -> ``codegen/triton/`` when Triton is installed (the
generator module is imported on first use; without Triton a CUDA graph falls back to eager). Both render
expressions through one emitter (``emitter.py``) and their own table; ``common.py`` coalesces loops.
"""

from __future__ import annotations

import importlib

GENERATORS = {
    "cpu": ("mend.compiler.codegen.cpp.generator", "CppGenerator"),
    "cuda": ("mend.compiler.codegen.triton.generator", "TritonGenerator"),
}


class KernelCompileError(RuntimeError):
    def __init__(self, message: str, failed: list[str]):
        super().__init__(message)
        self.failed = failed


class NoGenerator(RuntimeError):
    pass


def generator_for(device_type: str):
    spec = GENERATORS.get(device_type)
    if spec is None:
        raise NoGenerator(f"no code generator for device {device_type!r}")
    try:
        mod = importlib.import_module(spec[0])
    except ImportError as exc:
        raise NoGenerator(f"code generator for {device_type!r} unavailable: {exc}") from exc
    return getattr(mod, spec[1])()

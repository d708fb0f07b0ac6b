"""mend's bundled full-graph compiler: ``torch.compile(model, backend="mend")``.

``mend.compiler.compile(fn_or_module)`` is the convenience entry point (``fullgraph=True`` by default, so a
graph break is an error that points to ``mend check`` / ``mend fix``).
"""

from __future__ import annotations

import functools

from .runtime import tiered


class GraphBreakError(RuntimeError):
    """Raised by :func:`compile`-d code when Dynamo cannot capture one whole graph."""


_HINT = (
    "torch.compile could not capture the whole graph (fullgraph=True). "
    "Run `mend check <path>` to see the graph breaks statically, `mend run -- <script>` to record them, "
    "and `mend fix <path>` to repair the safe ones."
)


def compile(fn_or_module=None, *, fullgraph: bool = True, dynamic: bool = False, mode=None, **options):
    """``torch.compile(fn_or_module, backend="mend", fullgraph=fullgraph, dynamic=dynamic, mode=mode,
    options=options)``.

    Usable as ``mend.compiler.compile(model)`` or as a decorator ``@mend.compiler.compile``. Under
    ``fullgraph=True`` a graph break raises :class:`GraphBreakError` (with the Dynamo error as its cause).
    ``mode="reduce-overhead"`` or ``cudagraphs=True`` replays CUDA graphs on a GPU. ``async_compile=True``
    runs each graph through ATen while it compiles in the background (:func:`wait` blocks until all are
    built; see ``mend.compiler.runtime.tiered``).
    """
    if fn_or_module is None:
        return functools.partial(compile, fullgraph=fullgraph, dynamic=dynamic, mode=mode, **options)
    import torch

    from . import compat
    from .backend import mend_backend

    compiled = torch.compile(fn_or_module, backend=mend_backend, fullgraph=fullgraph, dynamic=dynamic,
                             mode=None if options else mode,
                             options=dict(options, **({"cudagraphs": True} if mode == "reduce-overhead" else {}))
                             if options else None)
    errors = compat.unsupported_error_types()

    def guard(call):
        @functools.wraps(call)
        def run(*args, **kwargs):
            try:
                return call(*args, **kwargs)
            except errors as exc:
                raise GraphBreakError(f"{_HINT}\n\nDynamo: {str(exc).strip().splitlines()[0]}") from exc

        return run

    if isinstance(fn_or_module, torch.nn.Module):
        compiled.forward = guard(compiled.forward)
        return compiled
    return guard(compiled)


def wait(timeout: "float | None" = None) -> bool:
    """Block until every graph compiled with ``async_compile`` so far is built and every matrix-product
    kernel tuning in the background has its candidates compiled (True), or ``timeout`` seconds pass (False);
    each graph switches to its compiled code, each kernel to its fastest configuration, at its next call."""
    import sys
    import time

    end = None if timeout is None else time.monotonic() + timeout
    if not tiered.wait(timeout):
        return False
    launch = sys.modules.get(__name__ + ".codegen.triton.launch")  # not imported: nothing tunes
    return launch is None or launch.wait_tuning(None if end is None else max(0.0, end - time.monotonic()))


def pending() -> int:
    """How many graphs compiled with ``async_compile`` are still building."""
    return tiered.pending()


__all__ = ["compile", "GraphBreakError", "wait", "pending"]

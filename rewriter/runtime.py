"""The small mend runtime that some repaired code calls (imports torch only when used).

Most repairs need only torch. Two need shared state across files, and live here:

* ``defer(fn, *args, **kwargs)`` (side-effects policy ``defer``): in eager, flushes anything
  pending and calls ``fn`` at once (a ``warnings.warn`` is still attributed to the caller's line);
  under ``torch.compile`` it records the call, with tensor
  arguments cloned (snapshot against later in-place updates), into a list that Dynamo replays as a
  side effect of the graph. ``flush()`` emits the recorded calls in order; ``boundary(compiled)``
  wraps a compiled function or module so that every call flushes after the graph, also when it raises.
* ``restore_exceptions(compiled)``: the same wrapper the rewriter puts at compile boundaries of
  the repaired tree (``_mend_restore_exceptions``, :mod:`mend.rewriter.helpers`), for boundaries outside it (a repaired library
  compiled by the user's script): it re-raises ``[mend:E] msg`` checks as ``E(msg)``.
"""

from __future__ import annotations

import functools
import warnings
from typing import Any

_DEFERRED: list[tuple[Any, tuple, dict]] = []


def _snapshot(value: Any) -> Any:
    import torch

    return value.clone() if isinstance(value, torch.Tensor) else value


def defer(fn: Any, *args: Any, **kwargs: Any) -> None:
    import torch

    if torch.compiler.is_compiling():
        _DEFERRED.append((fn, tuple(_snapshot(a) for a in args), {k: _snapshot(v) for k, v in kwargs.items()}))
        return
    flush()
    if fn is warnings.warn:  # attributed to the caller's line, as the call it replaces was
        args, kwargs = _one_level_up(args, kwargs)
    fn(*args, **kwargs)


def _one_level_up(args: tuple, kwargs: dict) -> tuple[tuple, dict]:
    """``warnings.warn`` arguments with ``stacklevel`` one more (``warn(message, category, stacklevel)``)."""
    if len(args) >= 3:
        return (*args[:2], args[2] + 1, *args[3:]), kwargs
    return args, {**kwargs, "stacklevel": kwargs.get("stacklevel", 1) + 1}


def flush() -> None:
    """Emit every deferred call, in order."""
    while _DEFERRED:
        fn, args, kwargs = _DEFERRED.pop(0)
        fn(*args, **kwargs)


def pending() -> int:
    return len(_DEFERRED)


def restore_exceptions(compiled: Any) -> Any:
    """Wrap a compiled function (or a compiled module, in place) to re-raise mend-moved checks."""
    from mend.rewriter import helpers

    return helpers.restore_exceptions(compiled)


def boundary(compiled: Any) -> Any:
    """``restore_exceptions`` plus a ``flush()`` of deferred output after every call."""
    import torch

    compiled = restore_exceptions(compiled)
    if isinstance(compiled, torch.nn.Module):
        base = type(compiled)
        if getattr(base, "_mend_flushing", False):
            return compiled

        def __call__(self: Any, *args: Any, **kwargs: Any) -> Any:
            try:
                return base.__call__(self, *args, **kwargs)
            finally:
                flush()

        compiled.__class__ = type(base.__name__, (base,), {"__call__": __call__, "_mend_flushing": True})
        return compiled

    @functools.wraps(compiled)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return compiled(*args, **kwargs)
        finally:
            flush()

    return wrapper


__all__ = ["boundary", "defer", "flush", "pending", "restore_exceptions"]

"""Debug switches of the compiler.

* ``MEND_COMPILER_DEBUG=DIR``: dump, per compiled graph, the ATen FX graph, the lowered IR, the fusion
  decisions, the scheduled kernels, the generated kernel source and the Python wrapper into
  ``DIR/graph_<n>_<hash>/``.
* ``MEND_DISABLE_KERNELS=k0,k3`` (names as printed in the dumps, or ``all``): run those kernels through the
  reference interpreter instead of generated code, for bisecting a miscompile.
* ``MEND_COMPILER_FALLBACK=eager``: run every graph eagerly (whole-graph fallback), for comparison.
* ``MEND_COMPILER_VERIFY=1``: check the IR between the stages (``ir/verify.py``; on by default under
  ``MEND_COMPILER_DEBUG``, ``0`` turns it off); a violation is a compiler bug and fails the graph.
* ``MEND_STRICT=1`` (or its older name ``MEND_COMPILER_STRICT=1``): raise instead of falling back, for a
  graph that cannot be compiled and for a compiled graph that fails at run time (the tests set it).
"""

from __future__ import annotations

import itertools
import logging
from pathlib import Path

from mend import settings

_counter = itertools.count()
_warned: set[str] = set()


def warn_once(msg: str) -> None:
    """Log ``msg`` as a warning on the ``mend.compiler`` logger, once per process (every fallback uses it)."""
    if msg not in _warned:
        _warned.add(msg)
        logging.getLogger("mend.compiler").warning(msg)


def strict() -> bool:
    """``MEND_STRICT=1``: a graph-level or run-time fallback raises instead (so tests see every failure)."""
    return settings.STRICT.get()


def debug_dir() -> Path | None:
    return settings.COMPILER_DEBUG.get()


def verify_enabled() -> bool:
    v = settings.COMPILER_VERIFY.get()
    return v if v is not None else debug_dir() is not None


def disabled_kernels() -> set[str]:
    return set(settings.DISABLE_KERNELS.get())


class Dump:
    """Writes debug artifacts for one graph when ``MEND_COMPILER_DEBUG`` is set; otherwise does nothing."""

    def __init__(self, tag: str):
        base = debug_dir()
        self.dir = None
        if base is not None:
            self.dir = base / f"graph_{next(_counter):03d}_{tag}"
            self.dir.mkdir(parents=True, exist_ok=True)

    def __bool__(self) -> bool:
        return self.dir is not None

    def write(self, name: str, text: str) -> None:
        if self.dir is not None:
            (self.dir / name).write_text(text if text.endswith("\n") else text + "\n")

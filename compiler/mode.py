"""How the backend compiles a graph and when its compiled form takes over: one frozen :class:`Mode`.

A ``torch.compile(..., backend="mend")`` call asks for a mode through ``mode=``/``options=`` and the
switches (``mend.settings``); :meth:`Mode.requested` reads both once, and the backend passes the result
down to every graph it compiles. What differs per graph (direct trace or aot_autograd, a graph-cache entry
found under Dynamo's key) is decided by the backend, not carried here.

* timing: ``sync`` builds before the first call; ``async`` returns at once and runs the ATen graph until
  the kernels are built (``runtime/tiered.py``); ``deferred`` is ``async`` whose inference graphs are
  traced and lowered at their second call (the first runs Dynamo's graph).
* ``cudagraphs``: replay a CUDA graph of each compiled graph after its first call (``runtime/cudagraphs.py``).
* ``eager_backward``: through aot_autograd on a GPU, compile the backward graph right after the forward.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from mend import settings

from .runtime import cudagraphs, tiered

Timing = Literal["sync", "async", "deferred"]


@dataclass(frozen=True)
class Mode:
    timing: Timing = "sync"
    cudagraphs: bool = False
    eager_backward: bool = False

    @classmethod
    def requested(cls, kwargs: dict, on_cuda: bool = False) -> Mode:
        """The mode a backend call asks for (its ``mode``/``options`` and the switches), for graphs on a
        GPU when ``on_cuda``."""
        cg = cudagraphs.requested(kwargs)
        timing: Timing = "sync"
        if tiered.requested(kwargs):
            # a CUDA graph is captured from the compiled graph: its front end cannot wait for a second call
            timing = "deferred" if settings.ASYNC_DEFER.get() and not cg else "async"
        return cls(timing, cg, on_cuda and settings.EAGER_BACKWARD.get())

    @property
    def async_compile(self) -> bool:
        """The kernels build in the background while the ATen graph runs (``async`` and ``deferred``)."""
        return self.timing != "sync"


SYNC = Mode()
ASYNC = Mode("async")

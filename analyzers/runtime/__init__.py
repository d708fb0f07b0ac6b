"""mend.analyzers.runtime: record what Dynamo really does (graph breaks, frame skips, recompiles).

Python API (importing this package does not import torch; the names below load it on first use)::

    from mend.analyzers.runtime import record, counting_backend

    with record() as rec:                    # attach the recorder to Dynamo
        out = torch.compile(model)(x)
    rec.breaks          # [BreakSite]: path, line, function, gb_type, registry_id, message, hints,
                        #   count, frame_skip, regions ...  (deduplicated by (path, line, gb_type))
    rec.recompiles      # [RecompileSite]: path, line, function, kind, guard, reason, count, limit_hit
    rec.regions         # {"path:line:function": Region(graphs, compiles, recompiles, frame_skips, ...)}
    rec.graphs          # graphs handed to the backend, all regions together
    rec.graph_break_count, rec.break_count, rec.recompile_count, rec.frame_skips
    rec.data()          # RunData, the content of the .mend/run.json data file

``record(source=[dirs], fast=False)``: files under ``source`` folders count as the user's project even
inside site-packages (breaks are attributed to the innermost project frame). ``fast=True`` swaps each
graph's backend for an eager forward while recording (same breaks and recompiles, no backend cost).

``counting_backend()`` returns a backend for ``torch.compile(fn, backend=b)`` that keeps every graph
(``b.graphs``, ``b.count``) and runs them eagerly, like ``backend="eager"``.

The data file: :mod:`mend.analyzers.runtime.data` (``load``, ``save``, ``RunData``, ``DataFileError``).
Private torch access lives in :mod:`mend.analyzers.runtime.compat` only.
"""

from __future__ import annotations

from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from collections.abc import Iterable, Iterator

    from mend.analyzers.runtime.recorder import CountingBackend, Recorder

__all__ = ["record", "counting_backend", "Recorder", "CountingBackend"]


@contextmanager
def record(source: Iterable[str] = (), root: str | None = None, fast: bool = False) -> Iterator[Recorder]:
    """Record graph breaks, recompiles and graphs while the block runs (nestable)."""
    from mend.analyzers.runtime.recorder import Recorder

    rec = Recorder(source=source, root=root, fast=fast)
    rec.start()
    try:
        yield rec
    finally:
        rec.stop()


def counting_backend() -> CountingBackend:
    """A backend that counts graphs and runs them eagerly: ``torch.compile(fn, backend=b)``."""
    from mend.analyzers.runtime.recorder import counting_backend as make

    return make()


def __getattr__(name: str) -> Any:
    if name in ("Recorder", "CountingBackend"):
        from mend.analyzers.runtime import recorder

        return getattr(recorder, name)
    raise AttributeError(name)
